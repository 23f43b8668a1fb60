import ArgumentParser
import Foundation
import TourpackCore
import TourpackKit

struct Plan: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "plan",
        abstract: "Show what a build would cost and make, before anything is spent.",
        discussion: """
            For each tour and in total: POIs, phases, chunks, requests and characters; \
            cache hits; the tier's monthly quota and what is left after the build; the \
            estimated audio duration and size per format; and the map tiles the app \
            must download. Nothing is synthesized and nothing is written. When a \
            budget (the monthly quota, cacheMaxMB, maps.maxTiles) would refuse the \
            build, the last line starts with "refused:" and gives the reason (in \
            --json, the "refused" field; null when the build would run); the plan \
            itself still exits 0. With --shards N (and --shard I or \
            JOB_COMPLETION_INDEX), only the tours a build of that shard would make.
            """
    )

    @OptionGroup var options: PipelineOptions

    @OptionGroup var sharding: ShardOptions

    @Flag(help: "Print the plan as JSON on stdout (the configuration is not printed).")
    var json = false

    func run() async throws {
        let config = try options.load()
        let tours = try TourLoader().loadAll(
            globs: config.tourGlobs, relativeTo: URL(fileURLWithPath: FileManager.default.currentDirectoryPath),
            pipelineFile: options.pipeline)
        let shard = try sharding.resolved()
        // The plans a build kept, read only: `plan` writes nothing.
        let kept = KeptPlans.load(for: config)
        let plan = try StateView.annotate(try Planner(config: config, kept: kept).plan(tours, shard: shard), config: config)
        let report = PlanReport(plan: plan, config: config)
        // The ladder's other qualities: the same chunks (no request of their
        // own), encoded again into roots of their own.
        let ladder = try config.qualityRoots().dropFirst().map { rung in
            (config: rung, plan: try Planner(config: rung, kept: kept).plan(tours, shard: shard))
        }
        if json {
            print(try report.json(ladder: ladder))
        } else {
            print(config.settledDescription())
            print()
            print(report.text())
            for (rung, other) in ladder {
                let sizes = rung.formats.map {
                    "\($0.rawValue) \(rung.bitrate(for: $0)) kbps est. \(PlanReport.bytes(other.estimatedBytes($0)))"
                }
                print(
                    "quality \(rung.quality.rawValue) into \(rung.output.path): \(sizes.joined(separator: ", ")); the same chunks, no further request"
                )
            }
        }
    }
}

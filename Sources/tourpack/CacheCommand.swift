import ArgumentParser
import Foundation
import TourpackKit

struct Cache: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Storage statistics and cleanup of a pipeline's output and state.",
        subcommands: [Stats.self, Prune.self, Clear.self]
    )

    struct Stats: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Packages, files, bytes (in total and per tour), expired and unreferenced audio, temps, synthesis-cache size.")

        @OptionGroup var options: PipelineOptions
        @Flag(help: "Print the statistics as JSON.") var json = false

        func run() async throws {
            let config = try options.load()
            let inventory = try CacheInventory.scan(Layout(root: config.output), now: Date())
            let stats = CacheStatistics(inventory: inventory, config: config, now: Date())
            if json {
                print(try CacheText.json(stats))
                return
            }
            func size(_ bytes: Int64) -> String { PlanReport.bytes(Int(bytes)) }
            var lines = [
                "cache of \(stats.output)",
                "  packages     \(stats.packages) (\(stats.expiredPackages) expired, \(stats.unreadablePackages) unreadable)",
                "  audio        \(stats.files) files, \(size(stats.bytes)) of \(size(stats.budgetBytes)) budget",
                "  unreferenced \(stats.unreferencedFiles) files, \(size(stats.unreferencedBytes))",
                "  old audio    \(stats.expiredAudioFiles) files older than \(config.budgets.audioMaxAgeDays) days",
                "  temp files   \(stats.temporaries)",
                "  synthesis    \(size(stats.synthesisCacheBytes)) in the state folder",
                "  failed       " + (stats.failedTours.map(String.init) ?? "not recorded yet (build records come with the state database)"),
            ]
            for tour in stats.tours {
                lines.append("  tour \(tour.tourId)  \(tour.files) files, \(size(tour.bytes))\(tour.tourName.map { "  \($0)" } ?? "")")
            }
            print(lines.joined(separator: "\n"))
        }
    }

    struct Prune: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Remove expired packages, old unreferenced audio, and unreferenced audio over the budget.",
            discussion: "Audio that a live package lists is never removed. Takes the build lock, so it never runs beside a build.")

        @OptionGroup var options: PipelineOptions
        @Flag(help: "Show what would be removed and remove nothing.") var dryRun = false
        @Flag(help: "Print the plan and what was freed as JSON.") var json = false

        func run() async throws {
            let config = try options.load()
            let layout = Layout(root: config.output)
            let lock = dryRun ? nil : try await BuildLock.acquire(stateFolder: config.state, wait: false)
            defer { lock?.release() }
            let plan = CachePrunePlan(inventory: try CacheInventory.scan(layout, now: Date()), budgets: config.budgets, now: Date())
            if !dryRun { try plan.apply(to: layout) }
            if json {
                print(try CacheText.json(plan))
                return
            }
            for removal in plan.removals { print("\(dryRun ? "would remove" : "removed") \(removal.path) (\(removal.reason), \(PlanReport.bytes(Int(removal.bytes))))") }
            print("\(dryRun ? "would free" : "freed") \(PlanReport.bytes(Int(plan.freedBytes))) in \(plan.removals.count) removals; "
                + "AudioCache \(PlanReport.bytes(Int(plan.bytesBefore))) → \(PlanReport.bytes(Int(plan.bytesAfter))) of \(PlanReport.bytes(Int(plan.budgetBytes))) budget")
        }
    }

    struct Clear: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Remove everything the pipeline wrote: AudioCache, OfflineTours and the state (but its lock).")

        @OptionGroup var options: PipelineOptions
        @Flag(help: "Confirm: without it, nothing is removed.") var yes = false

        func run() async throws {
            let config = try options.load()
            guard yes else {
                throw TourpackError.invalidInput("cache clear removes \(config.output.path)/AudioCache, \(config.output.path)/OfflineTours and the state in \(config.state.path); run it again with --yes")
            }
            let lock = try await BuildLock.acquire(stateFolder: config.state, wait: false)
            defer { lock.release() }
            let freed = try CacheClearing.clear(output: config.output, state: config.state)
            print("cleared \(config.output.path) and \(config.state.path): freed \(PlanReport.bytes(Int(freed)))")
        }
    }
}

enum CacheText {
    static func json(_ value: some Encodable) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }
}

import ArgumentParser
import Foundation
import TourpackKit

/// `--shards N` and `--shard I` (or `JOB_COMPLETION_INDEX`), shared by
/// `build` and `plan` so that the plan shows exactly the tours the build of
/// the same shard will make.
struct ShardOptions: ParsableArguments {
    // Unconditional, so `--shard -1` is read as a value and refused with a
    // message instead of as an unknown option.
    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            "Split the pipeline's tours into N shards by a stable hash of each tour's id, and build only one of them.",
            discussion: "The shard is --shard I, or else the JOB_COMPLETION_INDEX variable that a Kubernetes Indexed Job sets in each pod.",
            valueName: "N"))
    var shards: Int?

    @Option(parsing: .unconditional, help: ArgumentHelp("The shard to build, 0 to N-1 (needs --shards).", valueName: "I"))
    var shard: Int?

    /// Checked while parsing, so a mistake shows the command's usage and exits 2.
    func validate() throws {
        _ = try resolved()
    }

    /// The shard asked for, or nil for the whole pipeline.
    func resolved(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> Shard? {
        do {
            return try Shard.resolve(count: shards, index: shard, environment: environment)
        } catch {
            throw ValidationError(error.message)
        }
    }
}

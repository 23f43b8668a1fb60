import ArgumentParser
import TourpackKit

@main
struct Tourpack: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tourpack",
        abstract: "Build the touring app's offline audio packages.",
        version: TourpackPipeline.version,
        subcommands: [ServeTTS.self]
    )
}

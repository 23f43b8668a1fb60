import ArgumentParser
import Foundation
import TourpackCore
import TourpackKit

@main
struct Tourpack: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tourpack",
        abstract: "Build the touring app's offline audio packages.",
        discussion: """
            tourpack reads tour JSON, chunks each narration, synthesizes it over a \
            TTS HTTP endpoint, encodes AAC, MP3 or Opus, and writes the app's \
            Documents layout, within cache, expiry and monthly-character budgets. \
            It publishes the packages with a signed catalogue where a CDN can \
            serve them (publish), installs them as the app does (install), and \
            shows them in a browser (review).

            \(ExitStatus.legend)
            """,
        version: TourpackPipeline.version,
        subcommands: [
            Build.self, Plan.self, Validate.self, Review.self, Publish.self, Install.self, Installed.self, Cache.self, Quota.self,
            StateCommand.self, Keys.self, ServeTTS.self, ServeTiles.self, Web.self,
        ]
    )

    /// Runs the command and maps every failure onto the contract's exit codes:
    /// argument-parser's usage errors become 2 (its default is 64).
    static func main() async {
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch let error as DiagnosticsError {
            Console.error(error.description)
            Foundation.exit(ExitStatus.badInput)
        } catch let error as TourpackError {
            Console.error("error: \(error)")
            Foundation.exit(error.exitCode)
        } catch let exit as ExitCode {
            Foundation.exit(exit.rawValue)
        } catch {
            let code = exitCode(for: error)
            if code == .success {
                print(fullMessage(for: error))
                Foundation.exit(0)
            }
            Console.error(fullMessage(for: error))
            // argument-parser's usage failures are 64 (EX_USAGE); the contract says 2.
            Foundation.exit(code == .validationFailure ? ExitStatus.badInput : code.rawValue)
        }
    }
}

/// Where human-facing messages go: stderr, so stdout stays machine-readable.
enum Console {
    static func error(_ message: String) {
        FileHandle.standardError.write(Data((message + "\n").utf8))
    }
}

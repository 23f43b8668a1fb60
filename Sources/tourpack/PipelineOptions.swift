import ArgumentParser
import Foundation
import TourpackAudio
import TourpackCore
import TourpackKit
import TourpackState

/// The pipeline file and the flags that override it (flags beat the file,
/// which beats the defaults).
struct PipelineOptions: ParsableArguments {
    @Argument(help: "The pipeline file (pipelines/*.yaml).", completion: .file(extensions: ["yaml", "yml"]))
    var pipeline: String

    @Option(
        name: .customLong("format"), parsing: .upToNextOption,
        help: "Override the formats, repeated or comma-separated (--format aac,opus).")
    var formats: [FormatNames] = []

    @Option(help: "Override the voice preset file.")
    var voice: String?

    @Option(help: "Override the TTS endpoint base URL.")
    var endpoint: String?

    @Option(help: "Override the TTS API dialect.")
    var api: TTSAPI?

    // The numbers take their value unconditionally, so a negative one
    // (`--pitch -2`, `--pitch -0`) is a value, not an unknown option "-2";
    // the range is then checked with the settled configuration.
    @Option(parsing: .unconditional, help: "Override the requests in flight at most.")
    var concurrency: Int?

    @Option(parsing: .unconditional, help: "Override the requests per minute at most.")
    var requestsPerMinute: Int?

    @Option(help: "Override the output root (the app's Documents folder).")
    var output: String?

    @Option(help: "Override the state folder.")
    var state: String?

    @Option(parsing: .unconditional, help: "Override the voice's speaking rate (0.25–4).")
    var speakingRate: Double?

    @Option(parsing: .unconditional, help: "Override the voice's pitch (-20…20).")
    var pitch: Double?

    @Option(help: "Override the map tile source's URL template (http(s)://…/{z}/{x}/{y}.png).")
    var tilesURL: String?

    /// Flag values are checked while parsing, so a mistake shows this command's usage.
    func validate() throws {
        _ = try parsedFormats()
    }

    /// `--format` values, repeated or comma-separated; nil when none was given.
    /// An empty value (`--format ''`, `--format aac,`) is refused: it would
    /// otherwise leave no format at all, and a build of nothing that exits 0.
    private func parsedFormats() throws -> [AudioFormat]? {
        formats.isEmpty ? nil : try FormatNames.formats(formats)
    }

    func load() throws -> PipelineConfig {
        var overrides = PipelineOverrides()
        overrides.formats = try parsedFormats()
        overrides.api = api
        overrides.voiceFile = voice
        overrides.endpoint = endpoint
        overrides.concurrency = concurrency
        overrides.requestsPerMinute = requestsPerMinute
        overrides.output = output
        overrides.state = state
        overrides.speakingRate = speakingRate
        overrides.pitch = pitch
        overrides.tilesURL = tilesURL
        return try PipelineLoader.load(URL(fileURLWithPath: pipeline), overrides: overrides)
    }
}

/// The commands' clock. `TOURPACK_NOW` (ISO-8601 UTC, e.g.
/// `2026-12-01T00:00:00Z`) pins it, so a scheduled job can be replayed and a
/// test can move time (expiry, the month of the quota) without waiting.
enum CommandClock {
    static let now: @Sendable () -> Date = {
        guard let text = ProcessInfo.processInfo.environment["TOURPACK_NOW"], !text.isEmpty else { return { Date() } }
        guard let pinned = PackageManifest.parseTimestamp(text) else {
            Console.error("warning: TOURPACK_NOW=\(text) is not an ISO-8601 UTC time (2026-12-01T00:00:00Z); using the real clock")
            return { Date() }
        }
        return { pinned }
    }()
}

/// The state as `plan` and `build --dry-run` read it: only when it exists,
/// so a plan never creates a state folder.
enum StateView {
    static func existing(_ config: PipelineConfig) throws -> BuildState? {
        let account = QuotaAccount(settings: config.tts)
        return try BuildState.existing(config: config, account: account, clock: CommandClock.now)
    }

    static func annotate(_ plan: BuildPlan, config: PipelineConfig) throws -> BuildPlan {
        guard let state = try existing(config) else { return plan }
        return try state.annotate(plan, config: config, encoder: FFmpegAudioEncoder().fingerprint)
    }
}

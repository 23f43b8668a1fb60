import Foundation
import TourpackCore

#if canImport(Glibc)
import Glibc
#endif

/// What `build`, `install` and `publish` share when they show their work:
/// the choice between a bar and lines, the bar itself, and the NDJSON event
/// line. Each command's display decides what to say; this decides how it
/// reaches the screen or the reader, so the three say it the same way.
///
/// Not thread-safe: each command's display calls it under its own lock.
struct Display {
    enum Mode {
        /// A line redrawn in place on stderr; notable lines above it; the summary on stdout.
        case bar
        /// One line per event on stdout.
        case lines
        /// One JSON object per event on stdout.
        case json
    }

    let mode: Mode
    private let clock = ContinuousClock()
    private let started: ContinuousClock.Instant
    private var lastDraw: ContinuousClock.Instant?
    private var barShown = false
    private let encoder: JSONEncoder

    init(mode: Mode) {
        self.mode = mode
        started = clock.now
        encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
    }

    /// `--json` asks for events; otherwise the bar needs a terminal on stderr, and a log gets lines.
    static func mode(json: Bool) -> Mode {
        if json { return .json }
        return isatty(STDERR_FILENO) == 1 ? .bar : .lines
    }

    /// Seconds since the command started, to the millisecond.
    var elapsed: Double {
        (started.duration(to: clock.now).seconds * 1000).rounded() / 1000
    }

    // MARK: Lines

    /// A line for a person: above the bar on stderr, or on stdout in a log.
    mutating func note(_ text: String) {
        switch mode {
        case .json: return
        case .lines: Self.write(text, to: .standardOutput)
        case .bar:
            clearBar()
            Self.write(text, to: .standardError)
        }
    }

    /// The summary, last, on stdout, with the bar gone.
    mutating func summary(_ text: String) {
        clearBar()
        Self.write(text, to: .standardOutput)
    }

    // MARK: Bar

    /// Whether to redraw now: at most ten times a second, unless `force`d by a milestone.
    mutating func dueForRedraw(force: Bool) -> Bool {
        let now = clock.now
        if !force, let lastDraw, lastDraw.duration(to: now) < .milliseconds(100) { return false }
        lastDraw = now
        return true
    }

    /// Redraws the line in place: a 28-cell bar and percentage when there is a `fraction`, then `detail`.
    mutating func drawBar(fraction: Double?, _ detail: String) {
        var text = detail
        if let fraction {
            let clamped = min(1, max(0, fraction))
            let filled = Int((clamped * Double(Self.barWidth)).rounded(.down))
            let cells = String(repeating: "█", count: filled) + String(repeating: "░", count: Self.barWidth - filled)
            text = "\(cells) \(String(format: "%3d", Int(clamped * 100)))%  \(detail)"
        }
        FileHandle.standardError.write(Data(("\r\u{1B}[2K" + text).utf8))
        barShown = true
    }

    mutating func clearBar() {
        guard barShown else { return }
        FileHandle.standardError.write(Data("\r\u{1B}[2K".utf8))
        barShown = false
    }

    static let barWidth = 28

    /// `text` cut to `length` characters, the last one an ellipsis when cut.
    static func clip(_ text: String, _ length: Int) -> String {
        text.count <= length ? text : String(text.prefix(length - 1)) + "…"
    }

    // MARK: NDJSON

    /// One line on stdout: the payload's fields, plus `event`, `elapsedSeconds`
    /// and, where the command has one, the overall `progress`; keys sorted.
    func emit(_ payload: some Encodable, name: String, progress: Double? = nil) {
        let line = EventLine(
            event: name, elapsedSeconds: elapsed, progress: progress.map { ($0 * 1000).rounded() / 1000 }, payload: payload)
        guard let data = try? encoder.encode(line) else { return }
        FileHandle.standardOutput.write(data + Data("\n".utf8))
    }

    /// A failure in the display's own form: with `--json`, an `error` event
    /// (`error`: the kind, `message`, `exitCode`); otherwise the bar is cleared
    /// and the caller's top level prints the message.
    mutating func showError(_ error: any Error, exitCode: Int32, progress: Double? = nil) {
        clearBar()
        guard mode == .json else { return }
        let failure = error as? TourpackError
        emit(
            ErrorEvent(error: failure?.kind.rawValue, message: failure?.description ?? "\(error)", exitCode: exitCode), name: "error",
            progress: progress)
    }

    /// A payload of one message: `warning`, `planned`, `finished` of a publish.
    struct Message: Encodable {
        var message: String
    }

    private struct ErrorEvent: Encodable {
        /// The kind (`storageFailed`, `networkUnavailable`…), as the app names it.
        var error: String?
        var message: String
        var exitCode: Int32
    }

    private struct EventLine<Payload: Encodable>: Encodable {
        var event: String
        var elapsedSeconds: Double
        var progress: Double?
        var payload: Payload

        enum Keys: String, CodingKey { case event, elapsedSeconds, progress }

        func encode(to encoder: any Encoder) throws {
            try payload.encode(to: encoder)
            var container = encoder.container(keyedBy: Keys.self)
            try container.encode(event, forKey: .event)
            try container.encode(elapsedSeconds, forKey: .elapsedSeconds)
            try container.encodeIfPresent(progress, forKey: .progress)
        }
    }

    private enum Stream { case standardOutput, standardError }

    private static func write(_ text: String, to stream: Stream) {
        let handle = stream == .standardOutput ? FileHandle.standardOutput : FileHandle.standardError
        handle.write(Data((text + "\n").utf8))
    }
}

import Foundation
import TourpackCore
import TourpackKit

#if canImport(Glibc)
import Glibc
#endif

/// Shows a running build to whoever is watching: a progress bar on a
/// terminal, plain log lines in a log file, NDJSON events for jobs and CI.
///
/// Events arrive from the build's task one at a time; the lock only keeps the
/// bar's redraw timer and the events from interleaving.
final class BuildDisplay: @unchecked Sendable {
    enum Mode {
        /// A redrawn bar on stderr; notable lines above it; the summary on stdout.
        case bar
        /// One line per event on stdout.
        case lines
        /// One JSON object per event on stdout.
        case json
    }

    let mode: Mode
    private let lock = NSLock()
    private let clock = ContinuousClock()
    private let started: ContinuousClock.Instant
    private var progress = BuildProgress()
    private var lastDraw: ContinuousClock.Instant?
    private var barShown = false
    private let encoder: JSONEncoder

    init(mode: Mode) {
        self.mode = mode
        started = clock.now
        encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    }

    /// The bar needs a terminal on stderr; otherwise a person reads lines.
    static func mode(json: Bool) -> Mode {
        if json { return .json }
        return isatty(STDERR_FILENO) == 1 ? .bar : .lines
    }

    func show(_ event: BuildEvent) {
        lock.withLock {
            progress.record(event)
            switch mode {
            case .json: emitJSON(event)
            case .lines: if let line = line(for: event) { Self.write(line, to: .standardOutput) }
            case .bar: showOnBar(event)
            }
        }
    }

    /// A failure before or outside the build (the lock, the state folder), in
    /// the display's own form, so `--json` readers get it as an event too.
    func showError(_ error: any Error, exitCode: Int32) {
        lock.withLock {
            clearBar()
            let message = (error as? TourpackError)?.description ?? "\(error)"
            if mode == .json {
                emit(ErrorEvent(error: (error as? TourpackError)?.kind.rawValue, message: message, exitCode: exitCode), name: "error")
            }
        }
    }

    // MARK: Lines

    private var elapsed: Double {
        started.duration(to: clock.now).seconds
    }

    private func counter() -> String {
        let width = String(progress.items).count
        let settled = String(progress.itemsSettled)
        return "[\(String(repeating: " ", count: max(0, width - settled.count)))\(settled)/\(progress.items)]"
    }

    private func line(for event: BuildEvent) -> String? {
        switch event {
        case .waitingForLock(let path):
            return "waiting for the build that holds \(path)"
        case .started(let start):
            var text = start.shard.map { PlanReport.shardLine($0) + "\n" } ?? ""
            text +=
                "building \(start.tours) tour\(start.tours == 1 ? "" : "s"): \(start.items) items, \(start.chunks) chunks, "
                + "\(PlanReport.grouped(start.characters)) characters → \(start.formats.map(\.rawValue).joined(separator: ", ")) in \(start.output)"
            if start.cacheHits > 0 || start.billableCharacters < start.characters {
                text +=
                    "\ncache: \(start.cacheHits) of \(start.chunks) chunks already made; \(PlanReport.grouped(start.billableCharacters)) characters to synthesize"
            }
            if start.recoveredCommits > 0 { text += "\nfinished \(start.recoveredCommits) commit(s) a killed run left half done" }
            if start.removedTemporaries > 0 { text += "\nremoved \(start.removedTemporaries) temp file(s) a killed run left" }
            if start.tiles > 0 { text += "\nmaps: \(PlanReport.grouped(start.tiles)) tiles to pack" }
            return text
        case .itemDone(let done):
            let sizes = done.bytes.sorted { $0.key < $1.key }.map { "\($0.key) \(PlanReport.bytes(Int($0.value)))" }.joined(separator: ", ")
            let reused = done.reusedFiles == 0 ? "" : done.reusedFiles == done.bytes.count ? "  (reused)" : "  (\(done.reusedFiles) reused)"
            return
                "\(counter()) \(done.tourName) / \(done.poiName) / \(done.phase.fileLabel)  \(PlanReport.duration(done.durationSeconds))  \(sizes)\(reused)"
        case .itemFailed(let failure):
            return "\(counter()) FAILED \(failure.message)"
        case .mapsDone, .mapsProgress:
            return nil
        case .tourPackaged(let packaged) where packaged.packages.isEmpty:
            return
                "up to date \(packaged.tourName): \(packaged.reusedFiles) files reused, package\(packaged.unchangedPackages.count == 1 ? "" : "s") unchanged"
        case .tourPackaged(let packaged):
            var text =
                "packaged \(packaged.tourName): \(packaged.files) files written, \(packaged.reusedFiles) reused, "
                + "\(PlanReport.bytes(Int(packaged.bytes))) → \(packaged.packages.joined(separator: ", "))"
            if !packaged.tilePacks.isEmpty { text += " + \(packaged.tilePacks.count) tile pack\(packaged.tilePacks.count == 1 ? "" : "s")" }
            if packaged.captionFiles > 0 { text += " + \(packaged.captionFiles) caption file\(packaged.captionFiles == 1 ? "" : "s")" }
            if !packaged.superseded.isEmpty { text += " (replaced \(packaged.superseded.joined(separator: ", ")))" }
            return text
        case .tourFailed(let failure):
            return "not packaged \(failure.tourName): \(failure.reason)"
        case .finished(let summary):
            return Self.summaryText(summary)
        }
    }

    static func summaryText(_ summary: BuildSummary) -> String {
        var lines: [String] = []
        if let stopped = summary.stoppedEarly { lines.append("stopped early: \(stopped)") }
        for warning in summary.warnings { lines.append("warning: \(warning)") }
        if let shard = summary.shard {
            lines.append(shard.tours == 0 ? "\(shard), nothing to build" : "\(shard)")
        }
        let shared =
            summary.sharedCache.map {
                ", \($0.restored) chunk\($0.restored == 1 ? "" : "s") from the shared cache, \($0.shared) added to it"
                    + ($0.waited > 0 ? " (\($0.waited) waited for another worker)" : "")
            } ?? ""
        lines.append(
            "\(summary.toursBuilt) built, \(summary.toursUnchanged) up to date, \(summary.toursFailed) failed, \(summary.toursSkipped) skipped · "
                + "\(summary.files) files written (\(PlanReport.bytes(Int(summary.bytes)))), \(summary.reusedFiles) reused · "
                + "\(summary.requests) requests (\(summary.retries) retries), \(PlanReport.grouped(summary.charactersBilled)) \(summary.billingUnit) billed, "
                + "\(summary.cacheHits) chunks from cache\(shared), \(summary.encodes) encodes · "
                + "\(String(format: "%.2f", summary.wallSeconds)) s from the lock"
                + (summary.processSeconds.map { String(format: ", %.2f s with start-up, loading and planning", $0) }
                    ?? " (loading and planning the tours came before)"))
        if summary.tileRequests > 0 || summary.tilePacks > 0 {
            lines.append(
                "maps: \(summary.tilePacks) tile pack\(summary.tilePacks == 1 ? "" : "s") written · \(summary.tileRequests) tile requests: "
                    + "\(summary.tilesDownloaded) downloaded, \(summary.tilesRenewed) renewed (304), \(summary.tilesEmpty) empty")
        }
        if summary.evictedFiles > 0 {
            lines.append(
                "evicted \(summary.evictedFiles) unreferenced file(s), \(PlanReport.bytes(Int(summary.evictedBytes))), to keep within cacheMaxMB"
            )
        }
        return lines.joined(separator: "\n")
    }

    // MARK: Bar

    private func showOnBar(_ event: BuildEvent) {
        switch event {
        case .itemDone, .mapsDone, .mapsProgress:
            break
        case .finished(let summary):
            clearBar()
            Self.write(Self.summaryText(summary), to: .standardOutput)
            return
        default:
            if let line = line(for: event) {
                clearBar()
                Self.write(line, to: .standardError)
            }
        }
        let now = clock.now
        if let lastDraw, lastDraw.duration(to: now) < .milliseconds(100), !isMilestone(event) { return }
        lastDraw = now
        drawBar()
    }

    private func isMilestone(_ event: BuildEvent) -> Bool {
        if case .itemDone = event { return progress.itemsSettled == progress.items }
        return true
    }

    private func drawBar() {
        let width = 28
        let fraction = progress.fraction
        let filled = Int((fraction * Double(width)).rounded(.down))
        let bar = String(repeating: "█", count: filled) + String(repeating: "░", count: width - filled)
        let eta = progress.secondsLeft(elapsed: elapsed).map { "ETA \(PlanReport.duration($0))" } ?? "ETA –"
        let tour = progress.currentTour.map { " · \(Self.clip($0, 32))" } ?? ""
        let tiles = progress.tiles > 0 ? " · \(progress.tilesDone)/\(progress.tiles) tiles" : ""
        let text =
            "\(bar) \(String(format: "%3d", Int(fraction * 100)))%  \(progress.itemsSettled)/\(progress.items) items\(tiles)\(tour) · \(eta)"
        FileHandle.standardError.write(Data(("\r\u{1B}[2K" + text).utf8))
        barShown = true
    }

    private func clearBar() {
        guard barShown else { return }
        FileHandle.standardError.write(Data("\r\u{1B}[2K".utf8))
        barShown = false
    }

    private static func clip(_ text: String, _ length: Int) -> String {
        text.count <= length ? text : String(text.prefix(length - 1)) + "…"
    }

    // MARK: NDJSON

    private func emitJSON(_ event: BuildEvent) {
        switch event {
        case .waitingForLock(let path): emit(["lock": path], name: "waitingForLock")
        case .started(let start): emit(start, name: "started")
        case .itemDone(let done): emit(done, name: "itemDone")
        case .itemFailed(let failure): emit(failure, name: "itemFailed")
        case .mapsProgress(let maps): emit(maps, name: "mapsProgress")
        case .mapsDone(let tourID, let tiles): emit(MapsDone(tourId: tourID.value, tileCount: tiles), name: "mapsDone")
        case .tourPackaged(let packaged): emit(packaged, name: "tourPackaged")
        case .tourFailed(let failure): emit(failure, name: "tourFailed")
        case .finished(let summary): emit(summary, name: "finished")
        }
    }

    /// One line: `{"event": name, "elapsedSeconds": …, "progress": …, …payload}`, keys sorted.
    private func emit(_ payload: some Encodable, name: String) {
        let line = EventLine(
            event: name, elapsedSeconds: (elapsed * 1000).rounded() / 1000,
            progress: (progress.fraction * 1000).rounded() / 1000, payload: payload)
        guard let data = try? encoder.encode(line) else { return }
        FileHandle.standardOutput.write(data + Data("\n".utf8))
    }

    private struct MapsDone: Encodable {
        var tourId: String
        var tileCount: Int
    }

    private struct ErrorEvent: Encodable {
        /// The kind (`storageFailed`…), as install's error events name it.
        var error: String?
        var message: String
        var exitCode: Int32
    }

    private struct EventLine<Payload: Encodable>: Encodable {
        var event: String
        var elapsedSeconds: Double
        var progress: Double
        var payload: Payload

        enum Keys: String, CodingKey { case event, elapsedSeconds, progress }

        func encode(to encoder: any Encoder) throws {
            try payload.encode(to: encoder)
            var container = encoder.container(keyedBy: Keys.self)
            try container.encode(event, forKey: .event)
            try container.encode(elapsedSeconds, forKey: .elapsedSeconds)
            try container.encode(progress, forKey: .progress)
        }
    }

    private enum Stream { case standardOutput, standardError }

    private static func write(_ text: String, to stream: Stream) {
        let handle = stream == .standardOutput ? FileHandle.standardOutput : FileHandle.standardError
        handle.write(Data((text + "\n").utf8))
    }
}

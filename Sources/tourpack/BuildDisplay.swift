import Foundation
import TourpackCore
import TourpackKit

/// Shows a running build to whoever is watching: a progress bar on a
/// terminal, plain log lines in a log file, NDJSON events for jobs and CI,
/// through the `Display` that install and publish use too.
///
/// Events arrive from the build's task one at a time; the lock only keeps the
/// bar's redraw timer and the events from interleaving.
final class BuildDisplay: @unchecked Sendable {
    var mode: Display.Mode { display.mode }
    private let lock = NSLock()
    private var display: Display
    private var progress = BuildProgress()

    init(mode: Display.Mode) {
        display = Display(mode: mode)
    }

    func show(_ event: BuildEvent) {
        lock.withLock {
            progress.record(event)
            switch mode {
            case .json: emitJSON(event)
            case .lines: if let line = line(for: event) { display.note(line) }
            case .bar: showOnBar(event)
            }
        }
    }

    /// A failure before or outside the build (the lock, the state folder), in
    /// the display's own form, so `--json` readers get it as an event too.
    func showError(_ error: any Error, exitCode: Int32) {
        lock.withLock { display.showError(error, exitCode: exitCode, progress: progress.fraction) }
    }

    // MARK: Lines

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
        case .tourPackaged(let packaged) where !packaged.wroteFiles:
            return
                "up to date \(packaged.tourName): \(packaged.reusedFiles) files reused, package\(packaged.unchangedPackages.count == 1 ? "" : "s") unchanged"
        case .tourPackaged(let packaged) where packaged.packages.isEmpty:
            // Files written again under unchanged package.json files (a damaged, missing or unrecorded file): not up to date.
            var text =
                "rewrote files of \(packaged.tourName): \(packaged.files) files written (\(PlanReport.bytes(Int(packaged.bytes)))), "
                + "\(packaged.reusedFiles) reused, package\(packaged.unchangedPackages.count == 1 ? "" : "s") unchanged"
            if !packaged.tilePacks.isEmpty {
                text += ", \(packaged.tilePacks.count) tile pack\(packaged.tilePacks.count == 1 ? "" : "s") written again"
            }
            if packaged.captionFiles > 0 {
                text += ", \(packaged.captionFiles) caption file\(packaged.captionFiles == 1 ? "" : "s") written again"
            }
            return text
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
            "\(summary.toursBuilt) built, \(summary.toursRewritten > 0 ? "\(summary.toursRewritten) rewritten, " : "")"
                + "\(summary.toursUnchanged) up to date, \(summary.toursFailed) failed, \(summary.toursSkipped) skipped · "
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
            display.summary(Self.summaryText(summary))
            return
        default:
            if let line = line(for: event) { display.note(line) }
        }
        guard display.dueForRedraw(force: isMilestone(event)) else { return }
        let eta = progress.secondsLeft(elapsed: display.elapsed).map { "ETA \(PlanReport.duration($0))" } ?? "ETA –"
        let tour = progress.currentTour.map { " · \(Display.clip($0, 32))" } ?? ""
        let tiles = progress.tiles > 0 ? " · \(progress.tilesDone)/\(progress.tiles) tiles" : ""
        display.drawBar(fraction: progress.fraction, "\(progress.itemsSettled)/\(progress.items) items\(tiles)\(tour) · \(eta)")
    }

    private func isMilestone(_ event: BuildEvent) -> Bool {
        if case .itemDone = event { return progress.itemsSettled == progress.items }
        return true
    }

    // MARK: NDJSON

    /// One line per event, each with the build's `progress`.
    private func emitJSON(_ event: BuildEvent) {
        let progress = progress.fraction
        switch event {
        case .waitingForLock(let path): display.emit(["lock": path], name: "waitingForLock", progress: progress)
        case .started(let start): display.emit(start, name: "started", progress: progress)
        case .itemDone(let done): display.emit(done, name: "itemDone", progress: progress)
        case .itemFailed(let failure): display.emit(failure, name: "itemFailed", progress: progress)
        case .mapsProgress(let maps): display.emit(maps, name: "mapsProgress", progress: progress)
        case .mapsDone(let tourID, let tiles):
            display.emit(MapsDone(tourId: tourID.value, tileCount: tiles), name: "mapsDone", progress: progress)
        case .tourPackaged(let packaged): display.emit(packaged, name: "tourPackaged", progress: progress)
        case .tourFailed(let failure): display.emit(failure, name: "tourFailed", progress: progress)
        case .finished(let summary): display.emit(summary, name: "finished", progress: progress)
        }
    }

    private struct MapsDone: Encodable {
        var tourId: String
        var tileCount: Int
    }
}

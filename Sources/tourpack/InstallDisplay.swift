import Foundation
import TourpackClient
import TourpackCore
import TourpackInstall
import TourpackKit

#if canImport(Glibc)
import Glibc
#endif

/// Shows an install to whoever is watching, as `BuildDisplay` shows a
/// build: a bar on a terminal (the app's three phases, bytes and an ETA),
/// plain lines in a log, or NDJSON events carrying each download job's
/// fields (`--json`).
final class InstallDisplay: @unchecked Sendable {
    let mode: BuildDisplay.Mode
    private let lock = NSLock()
    private let clock = ContinuousClock()
    private let started: ContinuousClock.Instant
    private var jobs: [String: DownloadJob] = [:]
    private var order: [String] = []
    private var lastDraw: ContinuousClock.Instant?
    private var barShown = false
    private let encoder: JSONEncoder

    init(mode: BuildDisplay.Mode) {
        self.mode = mode
        started = clock.now
        encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
    }

    func show(_ event: InstallEvent) {
        lock.withLock {
            if case .job(let job) = event {
                if jobs[job.packageId] == nil { order.append(job.packageId) }
                let before = jobs[job.packageId]
                jobs[job.packageId] = job
                switch mode {
                case .json: emit(job, name: "job")
                case .lines: if before?.status != job.status || before?.currentStep != job.currentStep { write(line(for: job), to: .out) }
                case .bar:
                    if before?.status != job.status, job.status == .completed || job.status == .failed {
                        clearBar()
                        write(line(for: job), to: .err)
                    }
                    drawBar(force: before?.status != job.status)
                }
                return
            }
            switch mode {
            case .json: emitJSON(event)
            case .lines: if let text = line(for: event) { write(text, to: .out) }
            case .bar:
                if let text = line(for: event) {
                    clearBar()
                    write(text, to: .err)
                    drawBar(force: true)
                }
            }
        }
    }

    /// The summary: stdout as text, or the `finished` event.
    func finish(_ outcome: Installer.Outcome) {
        lock.withLock {
            clearBar()
            if mode == .json {
                var summary = outcome
                summary.jobs = []
                emit(summary, name: "finished")
                return
            }
            var parts = ["\(outcome.installed.count) installed", "\(outcome.updated.count) updated"]
            if !outcome.refreshed.isEmpty { parts.append("\(outcome.refreshed.count) renewed (package.json only)") }
            parts.append("\(outcome.upToDate.count) up to date")
            var text =
                parts.joined(separator: ", ") + " · \(outcome.downloadedFiles) file(s) downloaded ("
                + PlanReport.bytes(Int(outcome.downloadedBytes)) + ")"
            if outcome.removedFiles > 0 { text += " · \(outcome.removedFiles) file(s) no longer listed removed" }
            if !outcome.superseded.isEmpty { text += " · replaced \(outcome.superseded.joined(separator: ", "))" }
            text += " · \(String(format: "%.2f", elapsed)) s"
            write(text, to: .out)
        }
    }

    /// A failure, in the display's own form (an `error` event with `--json`).
    func showError(_ error: any Error, exitCode: Int32) {
        lock.withLock {
            clearBar()
            guard mode == .json else { return }
            let failure = error as? TourpackError
            emit(
                ErrorEvent(error: failure?.kind.rawValue, errorMessage: failure?.description ?? "\(error)", exitCode: exitCode),
                name: "error")
        }
    }

    // MARK: Lines

    private var elapsed: Double { started.duration(to: clock.now).seconds }

    private func line(for job: DownloadJob) -> String {
        let what = "\(job.tourName) (\(job.packageId))"
        switch job.status {
        case .queued: return "queued \(what): \(PlanReport.bytes(Int(job.totalBytes))) to download"
        case .downloading:
            return job.currentStep == .bundling ? "installing \(what)" : "downloading \(what): \(job.currentStep?.rawValue ?? "audio")"
        case .paused: return "paused \(what): \(job.errorMessage ?? "")"
        case .completed: return "installed \(what): \(PlanReport.bytes(Int(job.downloadedBytes))) downloaded"
        case .failed: return "FAILED \(what): \(job.errorMessage ?? "")"
        case .cancelled: return "cancelled \(what)"
        }
    }

    private func line(for event: InstallEvent) -> String? {
        switch event {
        case .catalog(let catalog):
            let how = catalog.notModified ? "unchanged since the last read (304)" : "read"
            let trust =
                catalog.verifiedBy.map { "signature by \($0) verified" } ?? "signature NOT checked (--insecure-unsigned)"
            return
                "catalogue generation \(catalog.generation) of \(catalog.site) \(how): \(catalog.tours) tour(s), \(catalog.packages) package(s); \(trust)"
        case .upToDate(let packageId, let tourName): return "up to date \(tourName) (\(packageId))"
        case .retrying(_, let file, let seconds, let reason):
            return mode == .lines ? "retrying \(file) in \(String(format: "%.1f", seconds)) s: \(reason)" : nil
        case .warning(let message): return "warning: \(message)"
        case .job: return nil
        }
    }

    // MARK: Bar

    /// The phases' weights over every job, by bytes; the ETA from the byte rate so far.
    private func drawBar(force: Bool) {
        let now = clock.now
        if !force, let lastDraw, lastDraw.duration(to: now) < .milliseconds(100) { return }
        lastDraw = now
        let all = order.compactMap { jobs[$0] }
        guard !all.isEmpty else { return }
        let total = all.reduce(Int64(0)) { $0 + $1.totalBytes }
        let done = all.reduce(Int64(0)) { $0 + $1.downloadedBytes }
        let weight = { (job: DownloadJob) in Double(max(job.totalBytes, 1)) }
        let fraction = all.reduce(0.0) { $0 + $1.progress * weight($1) } / all.reduce(0.0) { $0 + weight($1) }
        let width = 28
        let filled = Int((min(1, fraction) * Double(width)).rounded(.down))
        let bar = String(repeating: "█", count: filled) + String(repeating: "░", count: width - filled)
        let seconds = elapsed
        let eta =
            done > 0 && total > done && seconds > 0.5
            ? "ETA \(PlanReport.duration(Double(total - done) / (Double(done) / seconds)))" : "ETA –"
        let current = all.first { $0.status == .downloading || $0.status == .paused }
        let step = current.map { " · \($0.currentStep?.rawValue ?? "audio") · \(Self.clip($0.tourName, 28))" } ?? ""
        let paused = current?.status == .paused ? " (retrying)" : ""
        let text =
            "\(bar) \(String(format: "%3d", Int(fraction * 100)))%  \(PlanReport.bytes(Int(done)))/\(PlanReport.bytes(Int(total)))\(step)\(paused) · \(eta)"
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

    private func emitJSON(_ event: InstallEvent) {
        switch event {
        case .catalog(let catalog): emit(catalog, name: "catalog")
        case .upToDate(let packageId, let tourName): emit(["packageId": packageId, "tourName": tourName], name: "upToDate")
        case .retrying(let packageId, let file, let seconds, let reason):
            emit(Retrying(packageId: packageId, file: file, seconds: (seconds * 1000).rounded() / 1000, reason: reason), name: "retrying")
        case .warning(let message): emit(["message": message], name: "warning")
        case .job(let job): emit(job, name: "job")
        }
    }

    private func emit(_ payload: some Encodable, name: String) {
        let line = EventLine(event: name, elapsedSeconds: (elapsed * 1000).rounded() / 1000, payload: payload)
        guard let data = try? encoder.encode(line) else { return }
        FileHandle.standardOutput.write(data + Data("\n".utf8))
    }

    private struct Retrying: Encodable {
        var packageId: String
        var file: String
        var seconds: Double
        var reason: String
    }

    private struct ErrorEvent: Encodable {
        var error: String?
        var errorMessage: String
        var exitCode: Int32
    }

    private struct EventLine<Payload: Encodable>: Encodable {
        var event: String
        var elapsedSeconds: Double
        var payload: Payload

        enum Keys: String, CodingKey { case event, elapsedSeconds }

        func encode(to encoder: any Encoder) throws {
            try payload.encode(to: encoder)
            var container = encoder.container(keyedBy: Keys.self)
            try container.encode(event, forKey: .event)
            try container.encode(elapsedSeconds, forKey: .elapsedSeconds)
        }
    }

    private enum Stream { case out, err }

    private func write(_ text: String, to stream: Stream) {
        (stream == .out ? FileHandle.standardOutput : FileHandle.standardError).write(Data((text + "\n").utf8))
    }
}

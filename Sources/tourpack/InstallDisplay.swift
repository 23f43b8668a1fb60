import Foundation
import TourpackClient
import TourpackCore
import TourpackInstall
import TourpackKit

/// Shows an install to whoever is watching, through the `Display` build and
/// publish use: a bar on a terminal (the app's three phases, bytes and an
/// ETA), plain lines in a log, or NDJSON events carrying each download job's
/// fields (`--json`).
final class InstallDisplay: @unchecked Sendable {
    var mode: Display.Mode { display.mode }
    private let lock = NSLock()
    private var display: Display
    private var jobs: [String: DownloadJob] = [:]
    private var order: [String] = []

    init(mode: Display.Mode) {
        display = Display(mode: mode)
    }

    func show(_ event: InstallEvent) {
        lock.withLock {
            if case .job(let job) = event {
                if jobs[job.packageId] == nil { order.append(job.packageId) }
                let before = jobs[job.packageId]
                jobs[job.packageId] = job
                switch mode {
                case .json: display.emit(JobEvent(job), name: "job")
                case .lines: if before?.status != job.status || before?.currentStep != job.currentStep { display.note(line(for: job)) }
                case .bar:
                    if before?.status != job.status, job.status == .completed || job.status == .failed { display.note(line(for: job)) }
                    drawBar(force: before?.status != job.status)
                }
                return
            }
            switch mode {
            case .json: emitJSON(event)
            case .lines: if let text = line(for: event) { display.note(text) }
            case .bar:
                if let text = line(for: event) {
                    display.note(text)
                    drawBar(force: true)
                }
            }
        }
    }

    /// The summary: stdout as text, or the `finished` event.
    func finish(_ outcome: Installer.Outcome) {
        lock.withLock {
            if mode == .json {
                display.emit(Finished(outcome), name: "finished")
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
            text += " · \(String(format: "%.2f", display.elapsed)) s"
            display.summary(text)
        }
    }

    /// A failure, in the display's own form (an `error` event with `--json`:
    /// `error`, `message`, `exitCode`, as build's).
    func showError(_ error: any Error, exitCode: Int32) {
        lock.withLock { display.showError(error, exitCode: exitCode) }
    }

    // MARK: Lines

    private func line(for job: DownloadJob) -> String {
        let what = "\(job.tourName) (\(job.packageId))"
        switch job.status {
        case .queued: return "queued \(what): \(PlanReport.bytes(Int(job.totalBytes))) to download"
        case .downloading where job.errorMessage != nil: return "retrying \(what): \(job.errorMessage ?? "")"
        case .downloading:
            return job.currentStep == .bundling ? "installing \(what)" : "downloading \(what): \(job.currentStep?.rawValue ?? "audio")"
        case .paused: return "paused \(what)"
        case .waiting: return "waiting \(what)"
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
        let all = order.compactMap { jobs[$0] }
        guard !all.isEmpty, display.dueForRedraw(force: force) else { return }
        let total = all.reduce(Int64(0)) { $0 + $1.totalBytes }
        let done = all.reduce(Int64(0)) { $0 + $1.downloadedBytes }
        let weight = { (job: DownloadJob) in Double(max(job.totalBytes, 1)) }
        let fraction = all.reduce(0.0) { $0 + $1.progress * weight($1) } / all.reduce(0.0) { $0 + weight($1) }
        let seconds = display.elapsed
        let eta =
            done > 0 && total > done && seconds > 0.5
            ? "ETA \(PlanReport.duration(Double(total - done) / (Double(done) / seconds)))" : "ETA –"
        let current = all.first { $0.status == .downloading }
        let step = current.map { " · \($0.currentStep?.rawValue ?? "audio") · \(Display.clip($0.tourName, 28))" } ?? ""
        let paused = current?.errorMessage != nil ? " (retrying)" : ""
        display.drawBar(fraction: fraction, "\(PlanReport.bytes(Int(done)))/\(PlanReport.bytes(Int(total)))\(step)\(paused) · \(eta)")
    }

    // MARK: NDJSON

    private func emitJSON(_ event: InstallEvent) {
        switch event {
        case .catalog(let catalog): display.emit(catalog, name: "catalog")
        case .upToDate(let packageId, let tourName): display.emit(["packageId": packageId, "tourName": tourName], name: "upToDate")
        case .retrying(let packageId, let file, let seconds, let reason):
            display.emit(
                Retrying(packageId: packageId, file: file, seconds: (seconds * 1000).rounded() / 1000, reason: reason), name: "retrying")
        case .warning(let message): display.emit(Display.Message(message: message), name: "warning")
        case .job(let job): display.emit(JobEvent(job), name: "job")
        }
    }

    /// The `finished` event: what the install did (its jobs were each an event already).
    struct Finished: Encodable {
        var catalog: CatalogSummary
        var installed, updated, refreshed, upToDate, superseded: [String]
        var downloadedFiles: Int
        var downloadedBytes: Int64
        var removedFiles: Int
        var jobs: [JobEvent] = []

        init(_ outcome: Installer.Outcome) {
            catalog = outcome.catalog
            installed = outcome.installed
            updated = outcome.updated
            refreshed = outcome.refreshed
            upToDate = outcome.upToDate
            superseded = outcome.superseded
            downloadedFiles = outcome.downloadedFiles
            downloadedBytes = outcome.downloadedBytes
            removedFiles = outcome.removedFiles
        }
    }

    /// A job as `--json` prints it: every field, `null` included, so a
    /// reader finds each one in every event; the tour id lowercase, as the
    /// catalogue writes it.
    struct JobEvent: Encodable {
        var job: DownloadJob

        init(_ job: DownloadJob) { self.job = job }

        enum Keys: String, CodingKey {
            case packageId, tourId, tourName, status, progress, currentStep, totalBytes, downloadedBytes, errorMessage
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Keys.self)
            try container.encode(job.packageId, forKey: .packageId)
            try container.encode(job.tourId.uuidString.lowercased(), forKey: .tourId)
            try container.encode(job.tourName, forKey: .tourName)
            try container.encode(job.status, forKey: .status)
            try container.encode((job.progress * 1000).rounded() / 1000, forKey: .progress)
            try container.encode(job.currentStep, forKey: .currentStep)
            try container.encode(job.totalBytes, forKey: .totalBytes)
            try container.encode(job.downloadedBytes, forKey: .downloadedBytes)
            try container.encode(job.errorMessage, forKey: .errorMessage)
        }
    }

    private struct Retrying: Encodable {
        var packageId: String
        var file: String
        var seconds: Double
        var reason: String
    }
}

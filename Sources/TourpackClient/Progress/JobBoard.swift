import Foundation
import TourpackPackage

/// The jobs of one install, updated from the download tasks and reported
/// as `InstallEvent.job`: at every change of status, step or playable
/// narrations, and otherwise at most every quarter second or (`percentSteps`)
/// percent of progress, so `--json` stays readable on a fast link. The
/// app's library reports by time alone: a small package on a fast link is
/// then a handful of updates, not one per file.
final class JobBoard: @unchecked Sendable {
    private let lock = NSLock()
    private var jobs: [String: DownloadJob] = [:]
    private var order: [String] = []
    /// What each file (`packageId/sha256`) held at its last report.
    private var fileBytes: [String: Int64] = [:]
    private var lastReported: [String: (at: ContinuousClock.Instant, progress: Double)] = [:]
    /// When each job's first byte arrived, and how many it held then: its rate since.
    private var firstBytes: [String: (at: ContinuousClock.Instant, bytes: Int64)] = [:]
    private let report: @Sendable (InstallEvent) -> Void
    private let percentSteps: Bool

    init(percentSteps: Bool = true, report: @escaping @Sendable (InstallEvent) -> Void) {
        self.percentSteps = percentSteps
        self.report = report
    }

    /// The narrations each file plays, by SHA-256 and job: a first download's audio.
    private var narrations: [String: [(packageId: String, narration: NarrationID)]] = [:]

    /// - Parameter narrations: the narrations a verified file makes
    ///   playable, by its SHA-256 (a first download's audio; none for an update).
    func add(_ job: DownloadJob, narrations: [String: [NarrationID]] = [:]) {
        let added = lock.withLock {
            jobs[job.packageId] = job
            order.append(job.packageId)
            for (sha256, named) in narrations {
                self.narrations[sha256, default: []] += named.map { (job.packageId, $0) }
            }
            return job
        }
        report(.job(added))
    }

    /// The file with this SHA-256 arrived and matched it: the narrations it plays are playable.
    func verified(_ sha256: String) {
        let concerned = lock.withLock { narrations[sha256] ?? [] }
        for packageId in Set(concerned.map(\.packageId)) {
            let playable = concerned.filter { $0.packageId == packageId }.map(\.narration)
            update(packageId, force: true) { job in
                for narration in playable where !job.playable.contains(narration) { job.playable.append(narration) }
            }
        }
    }

    var all: [DownloadJob] { lock.withLock { order.compactMap { jobs[$0] } } }

    /// A file of `packageId` now holds `bytes`. The last bytes of a file
    /// that makes narrations playable are reported with its verdict
    /// (`verified`, which follows at once).
    func received(_ packageId: String, file: PackageFile, bytes: Int64) {
        let key = "\(packageId)/\(file.sha256)"
        let quiet = bytes == file.sizeBytes && lock.withLock { narrations[file.sha256]?.contains { $0.packageId == packageId } ?? false }
        update(packageId, force: false, quiet: quiet) { job in
            let delta = bytes - (self.fileBytes[key] ?? 0)
            self.fileBytes[key] = bytes
            job.received(delta, map: file.isTilePack)
            self.estimate(&job)
        }
    }

    func move(_ packageId: String, to status: DownloadJob.Status, step: DownloadJob.Step? = nil, message: String? = nil) {
        update(packageId, force: true) { $0.move(to: status, step: step, message: message) }
    }

    /// Every job not yet completed or failed ends as `status`, with `message`.
    func settleOthers(as status: DownloadJob.Status, message: String) {
        for id in lock.withLock({ order }) {
            let open = lock.withLock { jobs[id].map { $0.status != .completed && $0.status != .failed } ?? false }
            if open { move(id, to: status, message: message) }
        }
    }

    /// `estimatedSecondsRemaining` from the rate since the job's first byte (called under the lock).
    private func estimate(_ job: inout DownloadJob) {
        let now = ContinuousClock.now
        guard let first = firstBytes[job.packageId] else {
            if job.downloadedBytes > 0 { firstBytes[job.packageId] = (now, job.downloadedBytes) }
            return
        }
        let seconds = first.at.duration(to: now).seconds
        let rate = seconds > 0.2 ? Double(job.downloadedBytes - first.bytes) / seconds : 0
        let left = job.totalBytes - job.downloadedBytes
        job.estimatedSecondsRemaining = left <= 0 ? nil : rate > 0 ? Double(left) / rate : nil
    }

    private func update(_ packageId: String, force: Bool, quiet: Bool = false, _ change: (inout DownloadJob) -> Void) {
        let due: DownloadJob? = lock.withLock {
            guard var job = jobs[packageId] else { return nil }
            let before = (job.status, job.currentStep)
            change(&job)
            jobs[packageId] = job
            let now = ContinuousClock.now
            let last = lastReported[packageId]
            let changed = before.0 != job.status || before.1 != job.currentStep
            let due: Bool
            if force || changed {
                due = true
            } else if quiet {
                due = false
            } else if let last {
                due = (percentSteps && job.progress - last.progress >= 0.01) || last.at.duration(to: now) >= .milliseconds(250)
            } else {
                due = true
            }
            guard due else { return nil }
            lastReported[packageId] = (now, job.progress)
            return job
        }
        if let due { report(.job(due)) }
    }
}

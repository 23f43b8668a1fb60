package import Foundation

/// One build as the state database remembers it.
package struct BuildRecord: Sendable, Hashable, Codable {
    /// queued → running → completed, failed or cancelled.
    package enum Status: String, Sendable, Hashable, Codable, CaseIterable {
        /// Waiting for the output root's lock.
        case queued
        case running
        /// Every selected tour was packaged or was already up to date.
        case completed
        /// Refused by a budget, a tour failed, or the process died.
        case failed
        /// Stopped by SIGINT or SIGTERM.
        case cancelled
    }

    package var id: Int64
    package var pipeline: String
    package var output: String
    package var status: Status
    package var queuedAt: Date
    package var startedAt: Date?
    package var finishedAt: Date?
    package var toursBuilt: Int
    package var toursFailed: Int
    package var requests: Int
    /// Characters billed: the same figure the summary and the ledger hold.
    package var characters: Int
    package var error: String?
}

/// The build records: a lifecycle per build, like the app's download jobs
/// (queued → running → completed / failed / cancelled, with timestamps and
/// the error), and each tour's outcome, for `cache stats`.
///
/// A build killed with SIGKILL cannot finish its record; `reconcile` marks a
/// queued or running record whose process is gone as failed, "interrupted".
package struct BuildRecords: Sendable {
    package let store: any BuildRecordStore
    package var owner: ProcessOwner = .current
    package var clock: @Sendable () -> Date

    package init(store: any BuildRecordStore, clock: @escaping @Sendable () -> Date = { Date() }) {
        self.store = store
        self.clock = clock
    }

    /// The records in a SQLite state database.
    package init(database: StateDatabase, clock: @escaping @Sendable () -> Date = { Date() }) {
        self.init(store: database.buildRecords, clock: clock)
    }

    private var now: Double { clock().timeIntervalSince1970 }

    /// A new record, queued. Returns its id.
    package func queue(pipeline: URL, output: URL) throws -> Int64 {
        try store.queue(pipeline: pipeline.path, output: output.path, owner: owner.description, at: now)
    }

    /// The lock is held: the build runs.
    package func start(_ id: Int64) throws {
        try store.start(id, at: now)
    }

    /// One tour's outcome: `packaged`, `unchanged` or `failed`.
    package func recordTour(_ id: Int64, tourId: String, outcome: String, message: String? = nil) throws {
        try store.recordTour(id, tourId: tourId, outcome: outcome, message: message)
    }

    /// The build is over.
    package func finish(_ id: Int64, status: BuildRecord.Status, totals: BuildTotals, error: String?) throws {
        try store.finish(id, status: status, at: now, totals: totals, error: error)
    }

    /// Marks the records of builds whose process is gone as failed; returns how many.
    @discardableResult
    package func reconcile() throws -> Int {
        try store.reconcile(at: now) { ownerText in
            guard let owner = ProcessOwner(ownerText), !owner.mightBeAlive else { return nil }
            return "interrupted: process \(owner.pid) on \(owner.host) ended before the build finished"
        }
    }

    /// Forgets the records of `output` (`cache clear`).
    package func forgetAll(output: URL) throws {
        try store.forgetAll(output: output.path)
    }

    /// The most recent records, newest first.
    package func recent(limit: Int = 20, output: URL? = nil) throws -> [BuildRecord] {
        try store.recent(limit: limit, output: output?.path)
    }

    /// Builds of `output` per status.
    package func counts(output: URL) throws -> [BuildRecord.Status: Int] {
        try store.counts(output: output.path)
    }

    /// Tours of `output` whose latest outcome is a failure (their last
    /// package, if any, is older than their tour file), with the message.
    package func failedTours(output: URL) throws -> [(tourId: String, message: String?)] {
        try store.failedTours(output: output.path)
    }
}

public import Foundation

/// One build as the state database remembers it.
public struct BuildRecord: Sendable, Hashable, Codable {
    /// queued → running → completed, failed or cancelled.
    public enum Status: String, Sendable, Hashable, Codable, CaseIterable {
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

    public var id: Int64
    public var pipeline: String
    public var output: String
    public var status: Status
    public var queuedAt: Date
    public var startedAt: Date?
    public var finishedAt: Date?
    public var toursBuilt: Int
    public var toursFailed: Int
    public var requests: Int
    /// Characters billed: the same figure the summary and the ledger hold.
    public var characters: Int
    public var error: String?
}

/// The build records: a lifecycle per build, like the app's download jobs
/// (queued → running → completed / failed / cancelled, with timestamps and
/// the error), and each tour's outcome, for `cache stats`.
///
/// A build killed with SIGKILL cannot finish its record; `reconcile` marks a
/// queued or running record whose process is gone as failed, "interrupted".
public struct BuildRecords: Sendable {
    public let store: any BuildRecordStore
    public var owner: ProcessOwner = .current
    public var clock: @Sendable () -> Date

    public init(store: any BuildRecordStore, clock: @escaping @Sendable () -> Date = { Date() }) {
        self.store = store
        self.clock = clock
    }

    /// The records in a SQLite state database.
    public init(database: StateDatabase, clock: @escaping @Sendable () -> Date = { Date() }) {
        self.init(store: database.buildRecords, clock: clock)
    }

    private var now: Double { clock().timeIntervalSince1970 }

    /// A new record, queued. Returns its id.
    public func queue(pipeline: URL, output: URL) throws -> Int64 {
        try store.queue(pipeline: pipeline.path, output: output.path, owner: owner.description, at: now)
    }

    /// The lock is held: the build runs.
    public func start(_ id: Int64) throws {
        try store.start(id, at: now)
    }

    /// One tour's outcome: `packaged`, `unchanged` or `failed`.
    public func recordTour(_ id: Int64, tourId: String, outcome: String, message: String? = nil) throws {
        try store.recordTour(id, tourId: tourId, outcome: outcome, message: message)
    }

    /// The build is over.
    public func finish(_ id: Int64, status: BuildRecord.Status, totals: BuildTotals, error: String?) throws {
        try store.finish(id, status: status, at: now, totals: totals, error: error)
    }

    /// Marks the records of builds whose process is gone as failed; returns how many.
    @discardableResult
    public func reconcile() throws -> Int {
        try store.reconcile(at: now) { ownerText in
            guard let owner = ProcessOwner(ownerText), !owner.mightBeAlive else { return nil }
            return "interrupted: process \(owner.pid) on \(owner.host) ended before the build finished"
        }
    }

    /// Forgets the records of `output` (`cache clear`).
    public func forgetAll(output: URL) throws {
        try store.forgetAll(output: output.path)
    }

    /// The most recent records, newest first.
    public func recent(limit: Int = 20, output: URL? = nil) throws -> [BuildRecord] {
        try store.recent(limit: limit, output: output?.path)
    }

    /// Builds of `output` per status.
    public func counts(output: URL) throws -> [BuildRecord.Status: Int] {
        try store.counts(output: output.path)
    }

    /// Tours of `output` whose latest outcome is a failure (their last
    /// package, if any, is older than their tour file), with the message.
    public func failedTours(output: URL) throws -> [(tourId: String, message: String?)] {
        try store.failedTours(output: output.path)
    }
}

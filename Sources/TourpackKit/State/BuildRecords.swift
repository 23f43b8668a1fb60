public import Foundation
import GRDB

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
    public let database: StateDatabase
    public var owner: ProcessOwner = .current
    public var clock: @Sendable () -> Date

    public init(database: StateDatabase, clock: @escaping @Sendable () -> Date = { Date() }) {
        self.database = database
        self.clock = clock
    }

    private var now: Double { clock().timeIntervalSince1970 }

    /// A new record, queued. Returns its id.
    public func queue(pipeline: URL, output: URL) throws -> Int64 {
        let now = self.now
        return try database.write { db in
            try db.execute(
                sql: "INSERT INTO build (pipeline, output, status, owner, queuedAt) VALUES (?, ?, 'queued', ?, ?)",
                arguments: [pipeline.path, output.path, owner.description, now])
            return db.lastInsertedRowID
        }
    }

    /// The lock is held: the build runs.
    public func start(_ id: Int64) throws {
        let now = self.now
        try database.write { db in
            try db.execute(sql: "UPDATE build SET status = 'running', startedAt = ? WHERE id = ?", arguments: [now, id])
        }
    }

    /// One tour's outcome: `packaged`, `unchanged` or `failed`.
    public func recordTour(_ id: Int64, tourId: String, outcome: String, message: String? = nil) throws {
        try database.write { db in
            try db.execute(
                sql: "INSERT OR REPLACE INTO buildTour (buildId, tourId, outcome, message) VALUES (?, ?, ?, ?)",
                arguments: [id, tourId, outcome, message])
        }
    }

    /// The build is over.
    public func finish(_ id: Int64, status: BuildRecord.Status, summary: BuildSummary?, error: String?) throws {
        let now = self.now
        try database.write { db in
            try db.execute(
                sql: """
                    UPDATE build SET status = ?, finishedAt = ?, toursBuilt = ?, toursFailed = ?, requests = ?, characters = ?,
                        error = ?, startedAt = COALESCE(startedAt, ?) WHERE id = ?
                    """,
                arguments: [
                    status.rawValue, now, summary?.toursBuilt ?? 0, summary?.toursFailed ?? 0, summary?.requests ?? 0,
                    summary?.charactersBilled ?? 0, error, now, id,
                ])
        }
    }

    /// Marks the records of builds whose process is gone as failed; returns how many.
    @discardableResult
    public func reconcile() throws -> Int {
        let now = self.now
        return try database.write { db in
            let rows = try Row.fetchAll(db, sql: "SELECT id, owner FROM build WHERE status IN ('queued', 'running')")
            var marked = 0
            for row in rows {
                let ownerText: String = row["owner"]
                guard let owner = ProcessOwner(ownerText), !owner.mightBeAlive else { continue }
                try db.execute(
                    sql: "UPDATE build SET status = 'failed', finishedAt = ?, error = ? WHERE id = ?",
                    arguments: [now, "interrupted: process \(owner.pid) on \(owner.host) ended before the build finished", row["id"] as Int64])
                marked += 1
            }
            return marked
        }
    }

    /// Forgets the records of `output` (`cache clear`).
    public func forgetAll(output: URL) throws {
        try database.write { db in
            try db.execute(sql: "DELETE FROM buildTour WHERE buildId IN (SELECT id FROM build WHERE output = ?)", arguments: [output.path])
            try db.execute(sql: "DELETE FROM build WHERE output = ? AND status NOT IN ('queued', 'running')", arguments: [output.path])
        }
    }

    /// The most recent records, newest first.
    public func recent(limit: Int = 20, output: URL? = nil) throws -> [BuildRecord] {
        try database.read { db in
            let rows = try Row.fetchAll(
                db, sql: "SELECT * FROM build \(output == nil ? "" : "WHERE output = ?") ORDER BY id DESC LIMIT ?",
                arguments: output.map { [$0.path, limit] as StatementArguments } ?? [limit])
            return rows.map(Self.record)
        }
    }

    /// Builds of `output` per status.
    public func counts(output: URL) throws -> [BuildRecord.Status: Int] {
        try database.read { db in
            var counts: [BuildRecord.Status: Int] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT status, COUNT(*) AS n FROM build WHERE output = ? GROUP BY status", arguments: [output.path]) {
                if let status = BuildRecord.Status(rawValue: row["status"]) { counts[status] = row["n"] }
            }
            return counts
        }
    }

    /// Tours of `output` whose latest outcome is a failure (their last
    /// package, if any, is older than their tour file), with the message.
    public func failedTours(output: URL) throws -> [(tourId: String, message: String?)] {
        try database.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT t.tourId, t.outcome, t.message FROM buildTour t JOIN build b ON b.id = t.buildId
                    WHERE b.output = ? AND t.buildId = (
                        SELECT MAX(t2.buildId) FROM buildTour t2 JOIN build b2 ON b2.id = t2.buildId
                        WHERE t2.tourId = t.tourId AND b2.output = b.output)
                    ORDER BY t.tourId
                    """,
                arguments: [output.path]
            ).filter { ($0["outcome"] as String) == "failed" }.map { ($0["tourId"], $0["message"]) }
        }
    }

    private static func record(_ row: Row) -> BuildRecord {
        func date(_ column: String) -> Date? { (row[column] as Double?).map(Date.init(timeIntervalSince1970:)) }
        return BuildRecord(
            id: row["id"], pipeline: row["pipeline"], output: row["output"],
            status: BuildRecord.Status(rawValue: row["status"]) ?? .failed,
            queuedAt: date("queuedAt") ?? Date(timeIntervalSince1970: 0), startedAt: date("startedAt"), finishedAt: date("finishedAt"),
            toursBuilt: row["toursBuilt"], toursFailed: row["toursFailed"], requests: row["requests"], characters: row["characters"],
            error: row["error"])
    }
}

import Foundation
import GRDB

/// The SQLite backend: the five stores over `StateDatabase`, one
/// transaction per call. Writes are IMMEDIATE transactions (GRDB's
/// default), so a read-check-write such as a reservation is atomic against
/// every other process on the same file.
extension StateDatabase: StateBackend {
    package var location: StateLocation { .sqlite(path: url.path) }
    package var ledger: any LedgerStore { SQLiteLedgerStore(database: self) }
    package var synthesisIndex: any SynthesisIndex { SQLiteSynthesisIndex(database: self) }
    package var outputIndex: any OutputIndex { SQLiteOutputIndex(database: self) }
    package var buildRecords: any BuildRecordStore { SQLiteBuildRecordStore(database: self) }
    package var synthesisClaims: any SynthesisClaimStore { SQLiteSynthesisClaimStore(database: self) }

    /// One machine: the output root's flock already keeps its publishers apart.
    package func publishing<T>(tour: String, into output: String, _ body: () throws -> T) throws -> T {
        try body()
    }
}

struct SQLiteSynthesisClaimStore: SynthesisClaimStore {
    let database: StateDatabase
    var location: StateLocation { database.location }

    func claim(_ key: String, owner: String, at time: Double, replacing holder: ChunkClaim?) throws -> ClaimOutcome {
        try database.write { db in
            let row = try Row.fetchOne(db, sql: "SELECT owner, heartbeatAt FROM synthesisClaim WHERE key = ?", arguments: [key])
            let current = row.map { ChunkClaim(owner: $0["owner"], heartbeatAt: $0["heartbeatAt"]) }
            guard current == nil || current == holder else { return .held(current) }
            try db.execute(
                sql: "INSERT OR REPLACE INTO synthesisClaim (key, owner, heartbeatAt) VALUES (?, ?, ?)", arguments: [key, owner, time])
            return .won
        }
    }

    func heartbeat(owner: String, at time: Double) throws {
        try database.write { db in
            try db.execute(sql: "UPDATE synthesisClaim SET heartbeatAt = ? WHERE owner = ?", arguments: [time, owner])
        }
    }

    func release(_ key: String, owner: String) throws {
        try database.write { db in
            try db.execute(sql: "DELETE FROM synthesisClaim WHERE key = ? AND owner = ?", arguments: [key, owner])
        }
    }
}

struct SQLiteLedgerStore: LedgerStore {
    let database: StateDatabase
    var location: StateLocation { database.location }

    /// Reads the month's settled and reserved characters and inserts the
    /// reservation only if the sum stays within the limit; no other process
    /// can write in between.
    func reserve(_ characters: Int, in slot: QuotaSlot, limit: Int?, owner: String, at time: Double) throws -> ReservationOutcome {
        try database.write { db in
            let usage = try Self.usage(db, slot)
            if let limit, usage.used + usage.reserved + characters > limit {
                return .refused(used: usage.used, reserved: usage.reserved)
            }
            try db.execute(
                sql: "INSERT INTO quotaReservation (account, month, tier, characters, owner, createdAt) VALUES (?, ?, ?, ?, ?, ?)",
                arguments: [slot.account, slot.month, slot.tier, characters, owner, time])
            return .granted(id: db.lastInsertedRowID)
        }
    }

    func markSent(_ id: Int64, at time: Double) throws {
        try database.write { db in
            try db.execute(sql: "UPDATE quotaReservation SET sentAt = ? WHERE id = ? AND sentAt IS NULL", arguments: [time, id])
        }
    }

    func raise(_ id: Int64, to characters: Int) throws {
        try database.write { db in
            try db.execute(
                sql: "UPDATE quotaReservation SET characters = ? WHERE id = ? AND characters < ?", arguments: [characters, id, characters])
        }
    }

    func settle(_ settlement: LedgerSettlement) throws {
        try database.write { db in try Self.settle(db, settlement) }
    }

    /// The statements of a settlement, inside another write transaction (the synthesis index keeps the chunk in the same one).
    static func settle(_ db: Database, _ settlement: LedgerSettlement) throws {
        try db.execute(sql: "DELETE FROM quotaReservation WHERE id = ?", arguments: [settlement.id])
        try addUsed(db, settlement.slot, settlement.characters)
    }

    private static func addUsed(_ db: Database, _ slot: QuotaSlot, _ characters: Int) throws {
        try db.execute(
            sql: """
                INSERT INTO quotaUsage (account, month, tier, used) VALUES (?, ?, ?, ?)
                ON CONFLICT (account, month, tier) DO UPDATE SET used = used + excluded.used
                """,
            arguments: [slot.account, slot.month, slot.tier, characters])
    }

    func release(_ id: Int64) throws {
        try database.write { db in
            try db.execute(sql: "DELETE FROM quotaReservation WHERE id = ?", arguments: [id])
        }
    }

    func reconcile(closing: (OpenReservation) -> Bool) throws -> QuotaLedger.Reconciliation {
        try database.write { db in
            let rows = try Row.fetchAll(
                db, sql: "SELECT id, account, month, tier, characters, owner, createdAt, sentAt FROM quotaReservation")
            var result = QuotaLedger.Reconciliation()
            for row in rows {
                let open = OpenReservation(
                    id: row["id"], characters: row["characters"], owner: row["owner"], createdAt: row["createdAt"],
                    sent: (row["sentAt"] as Double?) != nil)
                guard closing(open) else { continue }
                try db.execute(sql: "DELETE FROM quotaReservation WHERE id = ?", arguments: [open.id])
                if open.sent {
                    try Self.addUsed(db, QuotaSlot(account: row["account"], month: row["month"], tier: row["tier"]), open.characters)
                    result.settled += 1
                    result.settledCharacters += open.characters
                } else {
                    result.released += 1
                    result.releasedCharacters += open.characters
                }
            }
            return result
        }
    }

    func usage(in slot: QuotaSlot) throws -> (used: Int, reserved: Int) {
        try database.read { db in try Self.usage(db, slot) }
    }

    static func usage(_ db: Database, _ slot: QuotaSlot) throws -> (used: Int, reserved: Int) {
        let used =
            try Int.fetchOne(
                db, sql: "SELECT used FROM quotaUsage WHERE account = ? AND month = ? AND tier = ?",
                arguments: [slot.account, slot.month, slot.tier]) ?? 0
        let reserved =
            try Int.fetchOne(
                db, sql: "SELECT COALESCE(SUM(characters), 0) FROM quotaReservation WHERE account = ? AND month = ? AND tier = ?",
                arguments: [slot.account, slot.month, slot.tier]) ?? 0
        return (used, reserved)
    }
}

struct SQLiteSynthesisIndex: SynthesisIndex {
    let database: StateDatabase
    var location: StateLocation { database.location }

    func freshKeys(among keys: [String], createdSince cutoff: Double) throws -> Set<String> {
        var found: Set<String> = []
        try database.read { db in
            try inBatches(keys) { batch, marks in
                found.formUnion(
                    try String.fetchAll(
                        db, sql: "SELECT key FROM synthesisChunk WHERE createdAt >= ? AND key IN (\(marks))",
                        arguments: StatementArguments([cutoff] + batch)))
            }
        }
        return found
    }

    func entry(_ key: String) throws -> SynthesisEntry? {
        try database.read { db in
            // Asked once per chunk of a build: the statement is prepared once per connection.
            let statement = try db.cachedStatement(sql: "SELECT \(Self.columns) FROM synthesisChunk WHERE key = ?")
            return try Row.fetchOne(statement, arguments: [key]).map(Self.entry)
        }
    }

    func entries(_ keys: [String]) throws -> [String: SynthesisEntry] {
        var found: [String: SynthesisEntry] = [:]
        try database.read { db in
            try inBatches(keys) { batch, marks in
                // A cursor's rows are read from the statement in place, not copied first.
                let rows = try Row.fetchCursor(
                    db, sql: "SELECT \(Self.columns) FROM synthesisChunk WHERE key IN (\(marks))", arguments: StatementArguments(batch))
                while let row = try rows.next() {
                    let entry = Self.entry(row)
                    found[entry.key] = entry
                }
            }
        }
        return found
    }

    /// The columns `entry(_:)` reads, in its order: read by position, as
    /// GRDB looks a name up by lowercasing it.
    private static let columns = """
        key, characters, sampleRate, samples, fileBytes, createdAt, lastUsedAt, audibleStart, audibleEnd, loudness, fileSHA256,
        sentenceTimes
        """

    /// A row of `columns`.
    private static func entry(_ row: Row) -> SynthesisEntry {
        SynthesisEntry(
            key: row[0], characters: row[1], sampleRate: row[2], samples: row[3], fileBytes: row[4], createdAt: row[5], lastUsedAt: row[6],
            audibleStart: row[7], audibleEnd: row[8], loudness: row[9], fileSHA256: row[10], sentenceTimes: row[11])
    }

    func touch(_ key: String, at time: Double, audibleStart: Int, audibleEnd: Int, loudness: Data?) throws {
        try database.write { db in
            try db.cachedStatement(
                sql: "UPDATE synthesisChunk SET lastUsedAt = ?, audibleStart = ?, audibleEnd = ?, loudness = ? WHERE key = ?"
            ).execute(arguments: [time, audibleStart, audibleEnd, loudness, key])
        }
    }

    func touch(_ keys: [String], at time: Double) throws {
        try touch([(time: time, keys: keys)])
    }

    func touch(_ batches: [(time: Double, keys: [String])]) throws {
        guard batches.contains(where: { !$0.keys.isEmpty }) else { return }
        try database.write { db in
            let statement = try db.cachedStatement(sql: "UPDATE synthesisChunk SET lastUsedAt = ? WHERE key = ?")
            for (time, keys) in batches {
                for key in keys { try statement.execute(arguments: [time, key]) }
            }
        }
    }

    func keep(_ entry: SynthesisEntry, settling settlement: LedgerSettlement?) throws {
        try database.write { db in
            try db.execute(
                sql: """
                    INSERT OR REPLACE INTO synthesisChunk
                        (key, characters, sampleRate, samples, fileBytes, createdAt, lastUsedAt, audibleStart, audibleEnd, loudness,
                        fileSHA256, sentenceTimes)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    entry.key, entry.characters, entry.sampleRate, entry.samples, entry.fileBytes, entry.createdAt, entry.lastUsedAt,
                    entry.audibleStart, entry.audibleEnd, entry.loudness, entry.fileSHA256, entry.sentenceTimes,
                ])
            if let settlement { try SQLiteLedgerStore.settle(db, settlement) }
        }
    }

    func totals() throws -> (entries: Int, bytes: Int64) {
        try database.read { db in
            let row = try Row.fetchOne(db, sql: "SELECT COUNT(*) AS n, COALESCE(SUM(fileBytes), 0) AS bytes FROM synthesisChunk")
            return (row?["n"] ?? 0, row?["bytes"] ?? 0)
        }
    }

    func byLastUse() throws -> [(key: String, bytes: Int64, createdAt: Double)] {
        try database.read { db in
            try Row.fetchAll(db, sql: "SELECT key, fileBytes, createdAt FROM synthesisChunk ORDER BY lastUsedAt, key").map { row in
                (row["key"], row["fileBytes"], row["createdAt"])
            }
        }
    }

    func allKeys() throws -> Set<String> {
        Set(try database.read { db in try String.fetchAll(db, sql: "SELECT key FROM synthesisChunk") })
    }

    func forget(_ key: String) throws {
        try database.write { db in try db.execute(sql: "DELETE FROM synthesisChunk WHERE key = ?", arguments: [key]) }
    }

    func forgetAll() throws {
        try database.write { db in try db.execute(sql: "DELETE FROM synthesisChunk") }
    }
}

struct SQLiteOutputIndex: OutputIndex {
    let database: StateDatabase
    var location: StateLocation { database.location }

    /// The columns `entry(_:)` reads, in its order: read by position, as
    /// GRDB looks a name up by lowercasing it, on every column of every row.
    private static let columns = """
        path, inputKey, format, codec, sampleRateHz, channels, bitrateKbps, durationSeconds, sizeBytes, sha256, createdAt, lastUsedAt,
        integratedLUFS, truePeakDBTP, gainDB, limiterReductionDB, fileSignature,
        captionsKey, captionsVTT, captionsSHA256, captionsCues, captionsTiming, captionsFileSignature, root
        """

    func entries(path: String) throws -> [OutputEntry] {
        try database.read { db in
            // The primary key leads with the path: every root's row of it is one index range.
            try Row.fetchAll(db.cachedStatement(sql: "SELECT \(Self.columns) FROM outputFile WHERE path = ?"), arguments: [path]).map {
                try Self.entry($0)
            }
        }
    }

    func entries(paths: [String]) throws -> [String: [OutputEntry]] {
        var found: [String: [OutputEntry]] = [:]
        try database.read { db in
            try inBatches(paths) { batch, marks in
                // A cursor's rows are read from the statement in place, not copied first.
                let rows = try Row.fetchCursor(
                    db, sql: "SELECT \(Self.columns) FROM outputFile WHERE path IN (\(marks))", arguments: StatementArguments(batch))
                while let row = try rows.next() {
                    let entry = try Self.entry(row)
                    found[entry.path, default: []].append(entry)
                }
            }
        }
        return found
    }

    /// A row of `columns`.
    private static func entry(_ row: Row) throws -> OutputEntry {
        var captions: StoredCaptions?
        if let key: String = row[17], let sha256: String = row[19], let cues: Int = row[20], let timing: String = row[21],
            let bytes = try row.withUnsafeData(atIndex: 18, { $0.map(Array.init) })
        {
            captions = StoredCaptions(key: key, bytes: bytes, sha256: sha256, cues: cues, timing: timing)
        }
        return OutputEntry(
            root: row[23], path: row[0], inputKey: row[1], format: row[2], codec: row[3], sampleRateHz: row[4], channels: row[5],
            bitrateKbps: row[6], durationSeconds: row[7], sizeBytes: row[8], sha256: row[9], createdAt: row[10], lastUsedAt: row[11],
            integratedLUFS: row[12], truePeakDBTP: row[13], gainDB: row[14], limiterReductionDB: row[15], fileSignature: row[16],
            captions: captions, captionsFileSignature: row[22])
    }

    func record(_ entries: [OutputEntry]) throws {
        try database.write { db in
            for e in entries {
                try db.execute(
                    sql: """
                        INSERT OR REPLACE INTO outputFile (root, path, inputKey, format, codec, sampleRateHz, channels, bitrateKbps,
                            durationSeconds, sizeBytes, sha256, createdAt, lastUsedAt,
                            integratedLUFS, truePeakDBTP, gainDB, limiterReductionDB, fileSignature,
                            captionsKey, captionsVTT, captionsSHA256, captionsCues, captionsTiming, captionsFileSignature)
                        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                        """,
                    arguments: [
                        e.root, e.path, e.inputKey, e.format, e.codec, e.sampleRateHz, e.channels, e.bitrateKbps,
                        e.durationSeconds, e.sizeBytes, e.sha256, e.createdAt, e.lastUsedAt,
                        e.integratedLUFS, e.truePeakDBTP, e.gainDB, e.limiterReductionDB, e.fileSignature,
                        e.captions?.key, e.captions.map { Data($0.bytes) }, e.captions?.sha256, e.captions?.cues, e.captions?.timing,
                        e.captionsFileSignature,
                    ])
            }
        }
    }

    func touch(
        root: String, _ paths: [String], at time: Double, signatures: [String: String], captions: [String: StoredCaptions],
        captionSignatures: [String: String]
    ) throws {
        try database.write { db in
            let statement = try db.cachedStatement(sql: "UPDATE outputFile SET lastUsedAt = ? WHERE path = ? AND root = ?")
            for path in paths { try statement.execute(arguments: [time, path, root]) }
            let signing = try db.cachedStatement(sql: "UPDATE outputFile SET fileSignature = ? WHERE path = ? AND root = ?")
            for (path, signature) in signatures { try signing.execute(arguments: [signature, path, root]) }
            if !captionSignatures.isEmpty {
                let signing = try db.cachedStatement(sql: "UPDATE outputFile SET captionsFileSignature = ? WHERE path = ? AND root = ?")
                for (path, signature) in captionSignatures { try signing.execute(arguments: [signature, path, root]) }
            }
            guard !captions.isEmpty else { return }
            let captioning = try db.cachedStatement(
                sql: """
                    UPDATE outputFile SET captionsKey = ?, captionsVTT = ?, captionsSHA256 = ?, captionsCues = ?, captionsTiming = ?,
                        captionsFileSignature = NULL
                    WHERE path = ? AND root = ?
                    """)
            for (path, made) in captions {
                try captioning.execute(arguments: [made.key, Data(made.bytes), made.sha256, made.cues, made.timing, path, root])
            }
        }
    }

    func forget(root: String, _ paths: [String]) throws {
        try database.write { db in
            for path in paths { try db.execute(sql: "DELETE FROM outputFile WHERE path = ? AND root = ?", arguments: [path, root]) }
        }
    }

    func lastUsed(root: String) throws -> [(path: String, lastUsedAt: Double)] {
        try database.read { db in
            try Row.fetchAll(db, sql: "SELECT path, lastUsedAt FROM outputFile WHERE root = ?", arguments: [root]).map { row in
                (row["path"], row["lastUsedAt"])
            }
        }
    }

    func forgetAll(root: String) throws {
        try database.write { db in try db.execute(sql: "DELETE FROM outputFile WHERE root = ?", arguments: [root]) }
    }
}

struct SQLiteBuildRecordStore: BuildRecordStore {
    let database: StateDatabase
    var location: StateLocation { database.location }

    func queue(pipeline: String, output: String, owner: String, at time: Double) throws -> Int64 {
        try database.write { db in
            try db.execute(
                sql: "INSERT INTO build (pipeline, output, status, owner, queuedAt) VALUES (?, ?, 'queued', ?, ?)",
                arguments: [pipeline, output, owner, time])
            return db.lastInsertedRowID
        }
    }

    func start(_ id: Int64, at time: Double) throws {
        try database.write { db in
            try db.execute(sql: "UPDATE build SET status = 'running', startedAt = ? WHERE id = ?", arguments: [time, id])
        }
    }

    func recordTour(_ id: Int64, tourId: String, outcome: String, message: String?) throws {
        try database.write { db in
            try db.execute(
                sql: "INSERT OR REPLACE INTO buildTour (buildId, tourId, outcome, message) VALUES (?, ?, ?, ?)",
                arguments: [id, tourId, outcome, message])
        }
    }

    func finish(_ id: Int64, status: BuildRecord.Status, at time: Double, totals: BuildTotals, error: String?) throws {
        try database.write { db in
            try db.execute(
                sql: """
                    UPDATE build SET status = ?, finishedAt = ?, toursBuilt = ?, toursFailed = ?, requests = ?, characters = ?,
                        error = ?, startedAt = COALESCE(startedAt, ?) WHERE id = ?
                    """,
                arguments: [
                    status.rawValue, time, totals.toursBuilt, totals.toursFailed, totals.requests, totals.characters, error, time, id,
                ])
        }
    }

    func reconcile(at time: Double, interrupted: (String) -> String?) throws -> Int {
        try database.write { db in
            let rows = try Row.fetchAll(db, sql: "SELECT id, owner FROM build WHERE status IN ('queued', 'running')")
            var marked = 0
            for row in rows {
                guard let message = interrupted(row["owner"]) else { continue }
                try db.execute(
                    sql: "UPDATE build SET status = 'failed', finishedAt = ?, error = ? WHERE id = ?",
                    arguments: [time, message, row["id"] as Int64])
                marked += 1
            }
            return marked
        }
    }

    func forgetAll(output: String) throws {
        try database.write { db in
            try db.execute(sql: "DELETE FROM buildTour WHERE buildId IN (SELECT id FROM build WHERE output = ?)", arguments: [output])
            try db.execute(sql: "DELETE FROM build WHERE output = ? AND status NOT IN ('queued', 'running')", arguments: [output])
        }
    }

    func recent(limit: Int, output: String?) throws -> [BuildRecord] {
        try database.read { db in
            let rows = try Row.fetchAll(
                db, sql: "SELECT * FROM build \(output == nil ? "" : "WHERE output = ?") ORDER BY id DESC LIMIT ?",
                arguments: output.map { [$0, limit] as StatementArguments } ?? [limit])
            return rows.map { row in
                func date(_ column: String) -> Date? { (row[column] as Double?).map(Date.init(timeIntervalSince1970:)) }
                return BuildRecord(
                    id: row["id"], pipeline: row["pipeline"], output: row["output"],
                    status: BuildRecord.Status(rawValue: row["status"]) ?? .failed,
                    queuedAt: date("queuedAt") ?? Date(timeIntervalSince1970: 0), startedAt: date("startedAt"),
                    finishedAt: date("finishedAt"),
                    toursBuilt: row["toursBuilt"], toursFailed: row["toursFailed"], requests: row["requests"],
                    characters: row["characters"],
                    error: row["error"])
            }
        }
    }

    func counts(output: String) throws -> [BuildRecord.Status: Int] {
        try database.read { db in
            var counts: [BuildRecord.Status: Int] = [:]
            for row in try Row.fetchAll(
                db, sql: "SELECT status, COUNT(*) AS n FROM build WHERE output = ? GROUP BY status", arguments: [output])
            {
                if let status = BuildRecord.Status(rawValue: row["status"]) { counts[status] = row["n"] }
            }
            return counts
        }
    }

    func failedTours(output: String) throws -> [(tourId: String, message: String?)] {
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
                arguments: [output]
            ).filter { ($0["outcome"] as String) == "failed" }.map { ($0["tourId"], $0["message"]) }
        }
    }
}

/// Calls `body` with `values` a batch at a time, and the batch's `?,?,…` for
/// an `IN (…)` list: SQLite takes at most 999 variables a statement in old
/// builds, so a batch holds 500.
private func inBatches(_ values: [String], _ body: (_ batch: [String], _ marks: String) throws -> Void) rethrows {
    for start in stride(from: 0, to: values.count, by: 500) {
        let batch = Array(values[start..<min(values.count, start + 500)])
        try body(batch, Array(repeating: "?", count: batch.count).joined(separator: ","))
    }
}

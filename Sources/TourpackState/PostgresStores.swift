import Foundation
import PostgresNIO
import TourpackCore

/// What every PostgreSQL store shares: the connections, and errors that name
/// the server and what failed (`state: postgresql://…: reserve 120
/// characters: …`), never a password or a query's values.
struct PostgresStore: Sendable {
    let connections: PostgresConnections
    var location: StateLocation { connections.location }

    func run<T>(_ what: String, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as TourpackError {
            throw error
        } catch {
            throw location.failure("\(what): \(PostgresConnections.reason(error))", cause: error)
        }
    }

    /// One statement, on a connection of its own, outside any transaction.
    @discardableResult
    func query(_ what: String, _ query: PostgresQuery) throws -> PostgresQueryResult {
        try run(what) { try connections.withConnection { try $0.query(query) } }
    }

    func transaction<T>(_ what: String, _ body: (PostgresSession) throws -> T) throws -> T {
        try run(what) { try connections.transaction(body) }
    }
}

/// The ledger in PostgreSQL. `quota_usage.reserved` holds the sum of each
/// slot's open reservations, changed by the same statement that opens or
/// closes one, so that a reservation is a single conditional UPDATE:
///
///     UPDATE quota_usage SET reserved = reserved + n
///     WHERE <slot> AND used + reserved + n <= limit
///
/// PostgreSQL locks the row for the UPDATE; a second worker's UPDATE of the
/// same slot waits, then checks its condition again on the row as the first
/// left it (READ COMMITTED's rule for a row changed meanwhile). So N workers
/// on N machines never pass the limit together, whatever their timing, and
/// the row is locked for one statement, not for a transaction's round trips.
struct PostgresLedgerStore: LedgerStore {
    let store: PostgresStore
    var location: StateLocation { store.location }

    init(connections: PostgresConnections) {
        store = PostgresStore(connections: connections)
    }

    func reserve(_ characters: Int, in slot: QuotaSlot, limit: Int?, owner: String, at time: Double) throws -> ReservationOutcome {
        try store.run("reserve \(characters) characters") {
            try store.connections.withConnection { session in
                // The usual case, one statement: the slot's row exists and the month can take it.
                let granted = try session.query(
                    """
                    WITH granted AS (
                        UPDATE quota_usage SET reserved = reserved + \(characters)
                        WHERE account = \(slot.account) AND month = \(slot.month) AND tier = \(slot.tier)
                            AND (\(limit)::BIGINT IS NULL OR used + reserved + \(characters) <= \(limit)::BIGINT)
                        RETURNING account, month, tier
                    )
                    INSERT INTO quota_reservation (account, month, tier, characters, owner, created_at)
                    SELECT account, month, tier, \(characters), \(owner), \(time) FROM granted
                    RETURNING id
                    """)
                if let row = granted.first { return .granted(id: try row.decode(Int64.self)) }
                // The slot's first reservation, or a full month: decided under the
                // row's lock, so the refusal's numbers are the ones that refused.
                return try session.transaction {
                    try session.execute(
                        """
                        INSERT INTO quota_usage (account, month, tier) VALUES (\(slot.account), \(slot.month), \(slot.tier))
                        ON CONFLICT DO NOTHING
                        """)
                    let row = try session.query(
                        """
                        SELECT used, reserved FROM quota_usage
                        WHERE account = \(slot.account) AND month = \(slot.month) AND tier = \(slot.tier) FOR UPDATE
                        """
                    ).first
                    let (used, reserved) = try row?.decode((Int, Int).self) ?? (0, 0)
                    if let limit, used + reserved + characters > limit { return .refused(used: used, reserved: reserved) }
                    try session.execute(
                        """
                        UPDATE quota_usage SET reserved = reserved + \(characters)
                        WHERE account = \(slot.account) AND month = \(slot.month) AND tier = \(slot.tier)
                        """)
                    let id = try session.query(
                        """
                        INSERT INTO quota_reservation (account, month, tier, characters, owner, created_at)
                        VALUES (\(slot.account), \(slot.month), \(slot.tier), \(characters), \(owner), \(time))
                        RETURNING id
                        """
                    ).first?.decode(Int64.self)
                    guard let id else { throw TourpackError.internalInvariant("an INSERT … RETURNING id returned no row") }
                    return .granted(id: id)
                }
            }
        }
    }

    func markSent(_ id: Int64, at time: Double) throws {
        try store.query(
            "mark reservation \(id) sent", "UPDATE quota_reservation SET sent_at = \(time) WHERE id = \(id) AND sent_at IS NULL")
    }

    /// One statement: the reservation, locked, grows to `characters`, and
    /// its slot's `reserved` by as much, so the sum stays the sum.
    func raise(_ id: Int64, to characters: Int) throws {
        try store.query(
            "raise reservation \(id) to \(characters) characters",
            """
            WITH old AS (
                SELECT id, account, month, tier, characters FROM quota_reservation WHERE id = \(id) AND characters < \(characters) FOR UPDATE
            ), raised AS (
                UPDATE quota_reservation r SET characters = \(characters) FROM old WHERE r.id = old.id
                RETURNING old.account, old.month, old.tier, \(characters) - old.characters AS more
            )
            UPDATE quota_usage u SET reserved = u.reserved + raised.more
            FROM raised WHERE u.account = raised.account AND u.month = raised.month AND u.tier = raised.tier
            """)
    }

    func settle(_ settlement: LedgerSettlement) throws {
        try store.run("settle reservation \(settlement.id)") {
            try store.connections.withConnection { try Self.settle($0, settlement) }
        }
    }

    /// One statement: the reservation, if still open, leaves `reserved`, and what was billed joins `used`.
    static func settle(_ session: PostgresSession, _ settlement: LedgerSettlement) throws {
        let slot = settlement.slot
        try session.execute(
            """
            WITH gone AS (DELETE FROM quota_reservation WHERE id = \(settlement.id) RETURNING characters)
            INSERT INTO quota_usage (account, month, tier, used) VALUES (\(slot.account), \(slot.month), \(slot.tier), \(settlement.characters))
            ON CONFLICT (account, month, tier) DO UPDATE SET
                used = quota_usage.used + EXCLUDED.used,
                reserved = quota_usage.reserved - COALESCE((SELECT characters FROM gone), 0)
            """)
    }

    func release(_ id: Int64) throws {
        try store.query("release reservation \(id)", Self.close(id))
    }

    /// Closes one reservation if it is still open: out of `reserved`, and
    /// into `used` when it was sent. Returns its characters and whether it
    /// was sent, as the DELETE found it; no row when another process closed it first.
    private static func close(_ id: Int64) -> PostgresQuery {
        """
        WITH gone AS (
            DELETE FROM quota_reservation WHERE id = \(id)
            RETURNING account, month, tier, characters, sent_at IS NOT NULL AS sent
        )
        UPDATE quota_usage u SET
            reserved = u.reserved - gone.characters,
            used = u.used + CASE WHEN gone.sent THEN gone.characters ELSE 0 END
        FROM gone WHERE u.account = gone.account AND u.month = gone.month AND u.tier = gone.tier
        RETURNING gone.characters, gone.sent
        """
    }

    func reconcile(closing: (OpenReservation) -> Bool) throws -> QuotaLedger.Reconciliation {
        let open = try store.query(
            "read the open reservations", "SELECT id, characters, owner, created_at, sent_at IS NOT NULL FROM quota_reservation"
        ).map { row in
            let (id, characters, owner, createdAt, sent) = try row.decode((Int64, Int, String, Double, Bool).self)
            return OpenReservation(id: id, characters: characters, owner: owner, createdAt: createdAt, sent: sent)
        }
        let chosen = open.filter(closing)
        guard !chosen.isEmpty else { return QuotaLedger.Reconciliation() }
        return try store.transaction("close \(chosen.count) stale reservations") { session in
            var result = QuotaLedger.Reconciliation()
            for reservation in chosen {
                // Another worker reconciling at once may have closed it: then no row, and it is not counted twice.
                guard let row = try session.query(Self.close(reservation.id)).first else { continue }
                let (characters, sent) = try row.decode((Int, Bool).self)
                if sent {
                    result.settled += 1
                    result.settledCharacters += characters
                } else {
                    result.released += 1
                    result.releasedCharacters += characters
                }
            }
            return result
        }
    }

    func usage(in slot: QuotaSlot) throws -> (used: Int, reserved: Int) {
        let row = try store.query(
            "read the quota of \(slot.tier) in \(slot.month)",
            """
            SELECT used, reserved FROM quota_usage WHERE account = \(slot.account) AND month = \(slot.month) AND tier = \(slot.tier)
            """
        ).first
        return try row?.decode((Int, Int).self) ?? (0, 0)
    }

    /// Slots whose `reserved` is not the sum of their open reservations: none, ever. For tests.
    func mismatchedSlots() throws -> Int {
        try store.query(
            "check the reserved sums",
            """
            SELECT COUNT(*)::BIGINT FROM quota_usage u
            WHERE u.reserved <> COALESCE((SELECT SUM(r.characters) FROM quota_reservation r
                WHERE r.account = u.account AND r.month = u.month AND r.tier = u.tier), 0)
            """
        ).first?.decode(Int.self) ?? 0
    }
}

struct PostgresSynthesisIndex: SynthesisIndex {
    let store: PostgresStore
    var location: StateLocation { store.location }

    init(connections: PostgresConnections) {
        store = PostgresStore(connections: connections)
    }

    func freshKeys(among keys: [String], createdSince cutoff: Double) throws -> Set<String> {
        guard !keys.isEmpty else { return [] }
        return Set(
            try store.query(
                "look up \(keys.count) chunks", "SELECT key FROM synthesis_chunk WHERE created_at >= \(cutoff) AND key = ANY(\(keys))"
            ).map { try $0.decode(String.self) })
    }

    func entry(_ key: String) throws -> SynthesisEntry? {
        try store.query(
            "look up chunk \(key.prefix(16))",
            """
            SELECT characters, sample_rate, samples, file_bytes, created_at, last_used_at, audible_start, audible_end, loudness,
                file_sha256, sentence_times
            FROM synthesis_chunk WHERE key = \(key)
            """
        ).first.map { row in
            let (characters, rate, samples, bytes, created, used, start, end, loudness, digest, times) =
                try row.decode((Int, Int, Int, Int64, Double, Double, Int?, Int?, Data?, String?, String?).self)
            return SynthesisEntry(
                key: key, characters: characters, sampleRate: rate, samples: samples, fileBytes: bytes, createdAt: created,
                lastUsedAt: used,
                audibleStart: start, audibleEnd: end, loudness: loudness, fileSHA256: digest, sentenceTimes: times)
        }
    }

    func touch(_ key: String, at time: Double, audibleStart: Int, audibleEnd: Int, loudness: Data?) throws {
        try store.query(
            "mark chunk \(key.prefix(16)) used",
            """
            UPDATE synthesis_chunk SET last_used_at = \(time), audible_start = \(audibleStart), audible_end = \(audibleEnd),
                loudness = \(loudness)
            WHERE key = \(key)
            """)
    }

    func keep(_ entry: SynthesisEntry, settling settlement: LedgerSettlement?) throws {
        try store.transaction("keep chunk \(entry.key.prefix(16))") { session in
            try session.execute(
                """
                INSERT INTO synthesis_chunk
                    (key, characters, sample_rate, samples, file_bytes, created_at, last_used_at, audible_start, audible_end, loudness,
                    file_sha256, sentence_times)
                VALUES (\(entry.key), \(entry.characters), \(entry.sampleRate), \(entry.samples), \(entry.fileBytes), \(entry.createdAt),
                    \(entry.lastUsedAt), \(entry.audibleStart), \(entry.audibleEnd), \(entry.loudness), \(entry.fileSHA256),
                    \(entry.sentenceTimes))
                ON CONFLICT (key) DO UPDATE SET
                    characters = EXCLUDED.characters, sample_rate = EXCLUDED.sample_rate, samples = EXCLUDED.samples,
                    file_bytes = EXCLUDED.file_bytes, created_at = EXCLUDED.created_at, last_used_at = EXCLUDED.last_used_at,
                    audible_start = EXCLUDED.audible_start, audible_end = EXCLUDED.audible_end, loudness = EXCLUDED.loudness,
                    file_sha256 = EXCLUDED.file_sha256, sentence_times = EXCLUDED.sentence_times
                """)
            if let settlement { try PostgresLedgerStore.settle(session, settlement) }
        }
    }

    func totals() throws -> (entries: Int, bytes: Int64) {
        try store.query("count the chunks", "SELECT COUNT(*)::BIGINT, COALESCE(SUM(file_bytes), 0)::BIGINT FROM synthesis_chunk")
            .first?.decode((Int, Int64).self) ?? (0, 0)
    }

    func byLastUse() throws -> [(key: String, bytes: Int64, createdAt: Double)] {
        try store.query(
            "list the chunks", "SELECT key, file_bytes, created_at FROM synthesis_chunk ORDER BY last_used_at, key COLLATE \"C\""
        ).map { row in
            let (key, bytes, created) = try row.decode((String, Int64, Double).self)
            return (key, bytes, created)
        }
    }

    func allKeys() throws -> Set<String> {
        Set(try store.query("list the chunks", "SELECT key FROM synthesis_chunk").map { try $0.decode(String.self) })
    }

    func forget(_ key: String) throws {
        try store.query("forget chunk \(key.prefix(16))", "DELETE FROM synthesis_chunk WHERE key = \(key)")
    }

    func forgetAll() throws {
        try store.query("forget every chunk", "DELETE FROM synthesis_chunk")
    }
}

struct PostgresOutputIndex: OutputIndex {
    let store: PostgresStore
    var location: StateLocation { store.location }

    init(connections: PostgresConnections) {
        store = PostgresStore(connections: connections)
    }

    /// The columns `entry(_:)` decodes, in its order.
    private static let columns = """
        root, path, input_key, format, codec, sample_rate_hz, channels, bitrate_kbps, duration_seconds, size_bytes, sha256, created_at,
        last_used_at, integrated_lufs, true_peak_dbtp, gain_db, limiter_reduction_db, file_signature,
        captions_key, captions_vtt, captions_sha256, captions_cues, captions_timing, captions_file_signature
        """

    func entries(path: String) throws -> [OutputEntry] {
        try store.query("look up \(path)", "SELECT \(unescaped: Self.columns) FROM output_file WHERE path = \(path)").map(Self.entry)
    }

    func entries(paths: [String]) throws -> [String: [OutputEntry]] {
        guard !paths.isEmpty else { return [:] }
        var found: [String: [OutputEntry]] = [:]
        for row in try store.query(
            "look up \(paths.count) files", "SELECT \(unescaped: Self.columns) FROM output_file WHERE path = ANY(\(paths))")
        {
            let entry = try Self.entry(row)
            found[entry.path, default: []].append(entry)
        }
        return found
    }

    /// A row of `columns`.
    private static func entry(_ row: PostgresRow) throws -> OutputEntry {
        let (
            root, path, key, format, codec, rate, channels, bitrate, duration, size, sha256, created, used, lufs, peak, gain, limiter,
            signature, captionsKey, vtt, captionsSHA256, cues, timing, captionsSignature
        ) = try row.decode(
            (
                String, String, String, String, String, Int, Int, Int, Double, Int64, String, Double, Double, Double?, Double?, Double?,
                Double?, String?, String?, Data?, String?, Int?, String?, String?
            )
            .self)
        var captions: StoredCaptions?
        if let captionsKey, let vtt, let captionsSHA256, let cues, let timing {
            captions = StoredCaptions(key: captionsKey, bytes: Array(vtt), sha256: captionsSHA256, cues: cues, timing: timing)
        }
        return OutputEntry(
            root: root, path: path, inputKey: key, format: format, codec: codec, sampleRateHz: rate, channels: channels,
            bitrateKbps: bitrate, durationSeconds: duration, sizeBytes: size, sha256: sha256, createdAt: created, lastUsedAt: used,
            integratedLUFS: lufs, truePeakDBTP: peak, gainDB: gain, limiterReductionDB: limiter, fileSignature: signature,
            captions: captions, captionsFileSignature: captionsSignature)
    }

    func record(_ entries: [OutputEntry]) throws {
        guard !entries.isEmpty else { return }
        try store.transaction("record \(entries.count) files") { session in
            for e in entries {
                try session.execute(
                    """
                    INSERT INTO output_file (root, path, input_key, format, codec, sample_rate_hz, channels, bitrate_kbps,
                        duration_seconds, size_bytes, sha256, created_at, last_used_at,
                        integrated_lufs, true_peak_dbtp, gain_db, limiter_reduction_db, file_signature,
                        captions_key, captions_vtt, captions_sha256, captions_cues, captions_timing, captions_file_signature)
                    VALUES (\(e.root), \(e.path), \(e.inputKey), \(e.format), \(e.codec), \(e.sampleRateHz), \(e.channels), \(e.bitrateKbps),
                        \(e.durationSeconds), \(e.sizeBytes), \(e.sha256), \(e.createdAt), \(e.lastUsedAt),
                        \(e.integratedLUFS), \(e.truePeakDBTP), \(e.gainDB), \(e.limiterReductionDB), \(e.fileSignature),
                        \(e.captions?.key), \(e.captions.map { Data($0.bytes) }), \(e.captions?.sha256), \(e.captions?.cues),
                        \(e.captions?.timing), \(e.captionsFileSignature))
                    ON CONFLICT (path, root) DO UPDATE SET
                        input_key = EXCLUDED.input_key, format = EXCLUDED.format, codec = EXCLUDED.codec,
                        sample_rate_hz = EXCLUDED.sample_rate_hz, channels = EXCLUDED.channels, bitrate_kbps = EXCLUDED.bitrate_kbps,
                        duration_seconds = EXCLUDED.duration_seconds, size_bytes = EXCLUDED.size_bytes, sha256 = EXCLUDED.sha256,
                        created_at = EXCLUDED.created_at, last_used_at = EXCLUDED.last_used_at,
                        integrated_lufs = EXCLUDED.integrated_lufs, true_peak_dbtp = EXCLUDED.true_peak_dbtp, gain_db = EXCLUDED.gain_db,
                        limiter_reduction_db = EXCLUDED.limiter_reduction_db, file_signature = EXCLUDED.file_signature,
                        captions_key = EXCLUDED.captions_key, captions_vtt = EXCLUDED.captions_vtt,
                        captions_sha256 = EXCLUDED.captions_sha256, captions_cues = EXCLUDED.captions_cues,
                        captions_timing = EXCLUDED.captions_timing, captions_file_signature = EXCLUDED.captions_file_signature
                    """)
            }
        }
    }

    func touch(
        root: String, _ paths: [String], at time: Double, signatures: [String: String], captions: [String: StoredCaptions],
        captionSignatures: [String: String]
    ) throws {
        guard !paths.isEmpty || !signatures.isEmpty || !captions.isEmpty || !captionSignatures.isEmpty else { return }
        let (signed, signs) = (Array(signatures.keys), Array(signatures.values))
        let (captionsSigned, captionSigns) = (Array(captionSignatures.keys), Array(captionSignatures.values))
        try store.transaction("mark \(paths.count) files used") { session in
            try session.execute("UPDATE output_file SET last_used_at = \(time) WHERE root = \(root) AND path = ANY(\(paths))")
            if !signed.isEmpty {
                // One statement for all of them: the first rebuild after a cold build signs every file.
                try session.execute(
                    """
                    UPDATE output_file SET file_signature = given.signature
                    FROM unnest(\(signed)::text[], \(signs)::text[]) AS given(path, signature)
                    WHERE output_file.root = \(root) AND output_file.path = given.path
                    """)
            }
            if !captionsSigned.isEmpty {
                try session.execute(
                    """
                    UPDATE output_file SET captions_file_signature = given.signature
                    FROM unnest(\(captionsSigned)::text[], \(captionSigns)::text[]) AS given(path, signature)
                    WHERE output_file.root = \(root) AND output_file.path = given.path
                    """)
            }
            guard !captions.isEmpty else { return }
            // One statement too: the first rebuild after an upgrade keeps the captions of every file.
            let made = Array(captions)
            try session.execute(
                """
                UPDATE output_file SET captions_key = given.key, captions_vtt = given.vtt, captions_sha256 = given.sha256,
                    captions_cues = given.cues, captions_timing = given.timing, captions_file_signature = NULL
                FROM unnest(\(made.map(\.key))::text[], \(made.map(\.value.key))::text[],
                    \(made.map { ByteBuffer(bytes: $0.value.bytes) })::bytea[], \(made.map(\.value.sha256))::text[],
                    \(made.map(\.value.cues))::bigint[], \(made.map(\.value.timing))::text[])
                    AS given(path, key, vtt, sha256, cues, timing)
                WHERE output_file.root = \(root) AND output_file.path = given.path
                """)
        }
    }

    func forget(root: String, _ paths: [String]) throws {
        guard !paths.isEmpty else { return }
        try store.query("forget \(paths.count) files", "DELETE FROM output_file WHERE root = \(root) AND path = ANY(\(paths))")
    }

    func lastUsed(root: String) throws -> [(path: String, lastUsedAt: Double)] {
        try store.query("list the files under \(root)", "SELECT path, last_used_at FROM output_file WHERE root = \(root)")
            .map { row in
                let (path, used) = try row.decode((String, Double).self)
                return (path, used)
            }
    }

    func forgetAll(root: String) throws {
        try store.query("forget the files under \(root)", "DELETE FROM output_file WHERE root = \(root)")
    }
}

struct PostgresBuildRecordStore: BuildRecordStore {
    let store: PostgresStore
    var location: StateLocation { store.location }

    init(connections: PostgresConnections) {
        store = PostgresStore(connections: connections)
    }

    func queue(pipeline: String, output: String, owner: String, at time: Double) throws -> Int64 {
        let row = try store.query(
            "record a queued build",
            """
            INSERT INTO build (pipeline, output, status, owner, queued_at) VALUES (\(pipeline), \(output), 'queued', \(owner), \(time))
            RETURNING id
            """
        ).first
        guard let id = try row?.decode(Int64.self) else {
            throw location.failure("record a queued build: the INSERT returned no id")
        }
        return id
    }

    func start(_ id: Int64, at time: Double) throws {
        try store.query("start build \(id)", "UPDATE build SET status = 'running', started_at = \(time) WHERE id = \(id)")
    }

    func recordTour(_ id: Int64, tourId: String, outcome: String, message: String?) throws {
        try store.query(
            "record tour \(tourId) of build \(id)",
            """
            INSERT INTO build_tour (build_id, tour_id, outcome, message) VALUES (\(id), \(tourId), \(outcome), \(message))
            ON CONFLICT (build_id, tour_id) DO UPDATE SET outcome = EXCLUDED.outcome, message = EXCLUDED.message
            """)
    }

    func finish(_ id: Int64, status: BuildRecord.Status, at time: Double, totals: BuildTotals, error: String?) throws {
        try store.query(
            "finish build \(id)",
            """
            UPDATE build SET status = \(status.rawValue), finished_at = \(time), tours_built = \(totals.toursBuilt),
                tours_failed = \(totals.toursFailed), requests = \(totals.requests), characters = \(totals.characters),
                error = \(error), started_at = COALESCE(started_at, \(time))
            WHERE id = \(id)
            """)
    }

    func reconcile(at time: Double, interrupted: (String) -> String?) throws -> Int {
        let unfinished = try store.query("read the unfinished builds", "SELECT id, owner FROM build WHERE status IN ('queued', 'running')")
            .map { try $0.decode((Int64, String).self) }
        let gone = unfinished.compactMap { build in interrupted(build.1).map { (id: build.0, message: $0) } }
        guard !gone.isEmpty else { return 0 }
        return try store.transaction("mark \(gone.count) builds interrupted") { session in
            var marked = 0
            for build in gone {
                // Still unfinished: a build that finished meanwhile keeps its own record.
                let result = try session.query(
                    """
                    UPDATE build SET status = 'failed', finished_at = \(time), error = \(build.message)
                    WHERE id = \(build.id) AND status IN ('queued', 'running')
                    """)
                marked += result.metadata.rows ?? 0
            }
            return marked
        }
    }

    func forgetAll(output: String) throws {
        try store.transaction("forget the builds of \(output)") { session in
            try session.execute("DELETE FROM build_tour WHERE build_id IN (SELECT id FROM build WHERE output = \(output))")
            try session.execute("DELETE FROM build WHERE output = \(output) AND status NOT IN ('queued', 'running')")
        }
    }

    func recent(limit: Int, output: String?) throws -> [BuildRecord] {
        let columns =
            "id, pipeline, output, status, queued_at, started_at, finished_at, tours_built, tours_failed, requests, characters, error"
        let query: PostgresQuery =
            output.map { output in
                "SELECT \(unescaped: columns) FROM build WHERE output = \(output) ORDER BY id DESC LIMIT \(limit)"
            } ?? "SELECT \(unescaped: columns) FROM build ORDER BY id DESC LIMIT \(limit)"
        return try store.query("read the recent builds", query).map { row in
            let (id, pipeline, output, status, queued, started, finished, built, failed, requests, characters, error) =
                try row.decode((Int64, String, String, String, Double, Double?, Double?, Int, Int, Int, Int, String?).self)
            return BuildRecord(
                id: id, pipeline: pipeline, output: output, status: BuildRecord.Status(rawValue: status) ?? .failed,
                queuedAt: Date(timeIntervalSince1970: queued), startedAt: started.map(Date.init(timeIntervalSince1970:)),
                finishedAt: finished.map(Date.init(timeIntervalSince1970:)), toursBuilt: built, toursFailed: failed, requests: requests,
                characters: characters, error: error)
        }
    }

    func counts(output: String) throws -> [BuildRecord.Status: Int] {
        var counts: [BuildRecord.Status: Int] = [:]
        for row in try store.query(
            "count the builds of \(output)", "SELECT status, COUNT(*)::BIGINT FROM build WHERE output = \(output) GROUP BY status")
        {
            let (status, n) = try row.decode((String, Int).self)
            if let status = BuildRecord.Status(rawValue: status) { counts[status] = n }
        }
        return counts
    }

    func failedTours(output: String) throws -> [(tourId: String, message: String?)] {
        try store.query(
            "read the failed tours of \(output)",
            """
            SELECT t.tour_id, t.outcome, t.message FROM build_tour t JOIN build b ON b.id = t.build_id
            WHERE b.output = \(output) AND t.build_id = (
                SELECT MAX(t2.build_id) FROM build_tour t2 JOIN build b2 ON b2.id = t2.build_id
                WHERE t2.tour_id = t.tour_id AND b2.output = b.output)
            ORDER BY t.tour_id COLLATE "C"
            """
        ).compactMap { row in
            let (tourId, outcome, message) = try row.decode((String, String, String?).self)
            return outcome == "failed" ? (tourId, message) : nil
        }
    }
}

/// The chunk claims in PostgreSQL: each call one statement (a claim two),
/// so a claim is decided under the row's lock, never by a read then a write.
struct PostgresSynthesisClaimStore: SynthesisClaimStore {
    let store: PostgresStore
    var location: StateLocation { store.location }

    init(connections: PostgresConnections) {
        store = PostgresStore(connections: connections)
    }

    func claim(_ key: String, owner: String, at time: Double, replacing holder: ChunkClaim?) throws -> ClaimOutcome {
        try store.run("claim chunk \(key.prefix(16))") {
            try store.connections.withConnection { session in
                // A free key is inserted; a held one is taken over only when it
                // is still exactly the stale claim the caller judged.
                let won = try session.query(
                    """
                    INSERT INTO synthesis_claim (key, owner, heartbeat_at) VALUES (\(key), \(owner), \(time))
                    ON CONFLICT (key) DO UPDATE SET owner = EXCLUDED.owner, heartbeat_at = EXCLUDED.heartbeat_at
                    WHERE synthesis_claim.owner = \(holder?.owner) AND synthesis_claim.heartbeat_at = \(holder?.heartbeatAt)
                    RETURNING key
                    """)
                if won.first != nil { return .won }
                let row = try session.query("SELECT owner, heartbeat_at FROM synthesis_claim WHERE key = \(key)").first
                return .held(
                    try row.map { row in
                        let (owner, beat) = try row.decode((String, Double).self)
                        return ChunkClaim(owner: owner, heartbeatAt: beat)
                    })
            }
        }
    }

    func heartbeat(owner: String, at time: Double) throws {
        try store.query("refresh the chunk claims", "UPDATE synthesis_claim SET heartbeat_at = \(time) WHERE owner = \(owner)")
    }

    func release(_ key: String, owner: String) throws {
        try store.query("release chunk \(key.prefix(16))", "DELETE FROM synthesis_claim WHERE key = \(key) AND owner = \(owner)")
    }
}

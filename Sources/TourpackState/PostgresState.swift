import Crypto
import Foundation
import PostgresNIO
package import TourpackCore

/// The state in PostgreSQL (`state.postgres`), shared by workers on many
/// machines: the quota ledger, the synthesis- and output-cache indexes and
/// the build records, in the same shape as the SQLite tables.
///
/// The schema is versioned in `schema_migrations`. Opening checks it: a
/// current schema costs one query; otherwise the missing migrations are
/// applied in order, in one transaction that first takes a transaction-level
/// advisory lock, so workers that start together take turns and the second
/// finds the work done. A schema newer than this tourpack knows is refused,
/// never guessed at. `tourpack state migrate` runs the same step on purpose.
///
/// Times are seconds since 1970 (UTC) from the build's injected clock, as in
/// SQLite, so the rules about ages read the same on both backends.
package struct PostgresState: StateBackend {
    package let location: StateLocation
    let connections: PostgresConnections
    /// The migrations this open applied, oldest first; empty when the schema was current.
    package let appliedNow: [String]

    /// Connects (one connection now, more as callers need them) and
    /// migrates. Errors name the server (`state: postgresql://…: …`), never the password.
    package init(url: String, password: Secret?) throws {
        try self.init(connections: PostgresConnections(url: PostgresURL(url), password: password))
    }

    private init(connections: PostgresConnections) throws {
        self.connections = connections
        location = connections.location
        appliedNow = try Self.migrate(connections)
    }

    /// The state when its schema exists; nil (and nothing created) when no
    /// worker has migrated this database yet. For `plan` and `build --dry-run`.
    package static func existing(url: String, password: Secret?) throws -> PostgresState? {
        let connections = try PostgresConnections(url: PostgresURL(url), password: password)
        guard try version(connections) != nil else { return nil }
        return try PostgresState(connections: connections)
    }

    package var ledger: any LedgerStore { PostgresLedgerStore(connections: connections) }
    package var synthesisIndex: any SynthesisIndex { PostgresSynthesisIndex(connections: connections) }
    package var outputIndex: any OutputIndex { PostgresOutputIndex(connections: connections) }
    package var buildRecords: any BuildRecordStore { PostgresBuildRecordStore(connections: connections) }
    package var synthesisClaims: any SynthesisClaimStore { PostgresSynthesisClaimStore(connections: connections) }

    /// Holds a session-level advisory lock on (`output`, `tour`) while `body`
    /// runs, on a connection kept for it: other workers publishing the same
    /// tour into the same root wait their turn. Should this process die, the
    /// server drops the lock with its connection.
    package func publishing<T>(tour: String, into output: String, _ body: () throws -> T) throws -> T {
        let key = Self.publishLock(tour: tour, output: output)
        let store = PostgresStore(connections: connections)
        // The body's own error comes out as it was thrown; only the lock's are the state's.
        let outcome = try store.run("lock tour \(tour) for publishing") {
            try connections.withConnection { session in
                try session.execute("SELECT pg_advisory_lock(\(key))")
                let outcome = Result { try body() }
                try session.execute("SELECT pg_advisory_unlock(\(key))")
                return outcome
            }
        }
        return try outcome.get()
    }

    /// The advisory lock of one tour in one output root: the first 8 bytes
    /// of a SHA-256, so every worker, whatever its build, names it alike.
    static func publishLock(tour: String, output: String) -> Int64 {
        let digest = SHA256.hash(data: Data("tourpack publish\n\(output)\n\(tour)".utf8))
        return digest.prefix(8).reduce(Int64(0)) { $0 << 8 | Int64($1) }
    }

    package func appliedMigrations() throws -> [String] {
        try PostgresStore(connections: connections).run("read the applied migrations") {
            try connections.withConnection { session in
                try session.query("SELECT name FROM schema_migrations ORDER BY version").map { try $0.decode(String.self) }
            }
        }
    }

    // MARK: Migrations

    struct Migration: Sendable {
        var version: Int
        /// As SQLite names the same change (`MigrationName`).
        var name: String
        /// What `schema_migrations` recorded before both backends named
        /// their changes alike; renamed in place on the next migration.
        /// Nil for the changes made since.
        var formerName: String?
        var statements: [String]
    }

    /// Every schema change, in order. Never edit a migration that has
    /// shipped: add the next one, and mirror what SQLite's migrator gains,
    /// under the same name.
    static let migrations: [Migration] = [
        Migration(
            version: 1, name: MigrationName.cachesLedgerAndBuildRecords, formerName: "v1 caches, ledger and build records",
            statements: [
                """
                CREATE TABLE synthesis_chunk (
                    key TEXT PRIMARY KEY,
                    characters BIGINT NOT NULL,
                    sample_rate BIGINT NOT NULL,
                    samples BIGINT NOT NULL,
                    file_bytes BIGINT NOT NULL,
                    created_at DOUBLE PRECISION NOT NULL,
                    last_used_at DOUBLE PRECISION NOT NULL,
                    audible_start BIGINT,
                    audible_end BIGINT
                )
                """,
                "CREATE INDEX synthesis_chunk_by_last_use ON synthesis_chunk (last_used_at, key)",
                """
                CREATE TABLE output_file (
                    path TEXT PRIMARY KEY,
                    input_key TEXT NOT NULL,
                    format TEXT NOT NULL,
                    codec TEXT NOT NULL,
                    sample_rate_hz BIGINT NOT NULL,
                    channels BIGINT NOT NULL,
                    bitrate_kbps BIGINT NOT NULL,
                    duration_seconds DOUBLE PRECISION NOT NULL,
                    size_bytes BIGINT NOT NULL,
                    sha256 TEXT NOT NULL,
                    created_at DOUBLE PRECISION NOT NULL,
                    last_used_at DOUBLE PRECISION NOT NULL
                )
                """,
                """
                CREATE TABLE build (
                    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                    pipeline TEXT NOT NULL,
                    output TEXT NOT NULL,
                    status TEXT NOT NULL CHECK (status IN ('queued', 'running', 'completed', 'failed', 'cancelled')),
                    owner TEXT NOT NULL,
                    queued_at DOUBLE PRECISION NOT NULL,
                    started_at DOUBLE PRECISION,
                    finished_at DOUBLE PRECISION,
                    tours_built BIGINT NOT NULL DEFAULT 0,
                    tours_failed BIGINT NOT NULL DEFAULT 0,
                    requests BIGINT NOT NULL DEFAULT 0,
                    characters BIGINT NOT NULL DEFAULT 0,
                    error TEXT
                )
                """,
                "CREATE INDEX build_by_output ON build (output, id)",
                """
                CREATE TABLE build_tour (
                    build_id BIGINT NOT NULL REFERENCES build (id) ON DELETE CASCADE,
                    tour_id TEXT NOT NULL,
                    outcome TEXT NOT NULL CHECK (outcome IN ('packaged', 'unchanged', 'failed')),
                    message TEXT,
                    PRIMARY KEY (build_id, tour_id)
                )
                """,
                "CREATE INDEX build_tour_by_tour ON build_tour (tour_id, build_id)",
                // `reserved` is the sum of the slot's open reservations, kept in
                // the same statements that open and close them: a reservation is
                // then one conditional UPDATE of this row (see PostgresLedgerStore).
                """
                CREATE TABLE quota_usage (
                    account TEXT NOT NULL,
                    month TEXT NOT NULL,
                    tier TEXT NOT NULL,
                    used BIGINT NOT NULL DEFAULT 0 CHECK (used >= 0),
                    reserved BIGINT NOT NULL DEFAULT 0 CHECK (reserved >= 0),
                    PRIMARY KEY (account, month, tier)
                )
                """,
                """
                CREATE TABLE quota_reservation (
                    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                    account TEXT NOT NULL,
                    month TEXT NOT NULL,
                    tier TEXT NOT NULL,
                    characters BIGINT NOT NULL CHECK (characters >= 0),
                    owner TEXT NOT NULL,
                    created_at DOUBLE PRECISION NOT NULL,
                    sent_at DOUBLE PRECISION,
                    FOREIGN KEY (account, month, tier) REFERENCES quota_usage (account, month, tier)
                )
                """,
                "CREATE INDEX quota_reservation_by_slot ON quota_reservation (account, month, tier)",
            ]),
        // Each chunk's gating blocks and true peak (`LoudnessProfile.encoded`;
        // NULL, not measured yet), and each output file's measured loudness
        // and how it was levelled.
        Migration(
            version: 2, name: MigrationName.loudness, formerName: "v2 loudness",
            statements: [
                "ALTER TABLE synthesis_chunk ADD COLUMN loudness BYTEA",
                """
                ALTER TABLE output_file
                    ADD COLUMN integrated_lufs DOUBLE PRECISION,
                    ADD COLUMN true_peak_dbtp DOUBLE PRECISION,
                    ADD COLUMN gain_db DOUBLE PRECISION,
                    ADD COLUMN limiter_reduction_db DOUBLE PRECISION
                """,
            ]),
        // Who is speaking which chunk now (`ChunkClaims`).
        Migration(
            version: 3, name: MigrationName.synthesisClaims, formerName: "v3 synthesis claims",
            statements: [
                """
                CREATE TABLE synthesis_claim (
                    key TEXT PRIMARY KEY,
                    owner TEXT NOT NULL,
                    heartbeat_at DOUBLE PRECISION NOT NULL
                )
                """,
                "CREATE INDEX synthesis_claim_by_owner ON synthesis_claim (owner)",
            ]),
        // The SHA-256 of each chunk's FLAC file (NULL: an entry from before).
        Migration(
            version: 4, name: MigrationName.chunkDigests, formerName: "v4 chunk digests",
            statements: ["ALTER TABLE synthesis_chunk ADD COLUMN file_sha256 TEXT"]),
        // When each sentence of a chunk starts, for captions (NULL: none reported).
        Migration(
            version: 5, name: MigrationName.sentenceTimes, formerName: "v5 sentence times",
            statements: ["ALTER TABLE synthesis_chunk ADD COLUMN sentence_times TEXT"]),
        // What `lstat` said of each output file when its SHA-256 was last found right (NULL: hash it).
        Migration(
            version: 6, name: MigrationName.fileSignatures, formerName: nil,
            statements: ["ALTER TABLE output_file ADD COLUMN file_signature TEXT"]),
        // Each output file's narration's captions, as made with it (NULL: make them again).
        Migration(
            version: 7, name: MigrationName.outputCaptions, formerName: nil,
            statements: [
                """
                ALTER TABLE output_file
                    ADD COLUMN captions_key TEXT,
                    ADD COLUMN captions_vtt BYTEA,
                    ADD COLUMN captions_sha256 TEXT,
                    ADD COLUMN captions_cues INTEGER,
                    ADD COLUMN captions_timing TEXT,
                    ADD COLUMN captions_file_signature TEXT
                """
            ]),
        // Each output file's row keyed by its root and its path under that
        // root, so a root moved or mounted elsewhere keeps its rows
        // (`OutputCache`). A row an older tourpack keyed by its absolute
        // path is split at its AudioCache folder, as SQLite's migration
        // splits it (`OutputCache.splitRecordedPath`); one that does not
        // split is dropped: no build asks for it.
        Migration(
            version: 8, name: MigrationName.outputRoots, formerName: nil,
            statements: [
                "ALTER TABLE output_file ADD COLUMN root TEXT",
                "ALTER TABLE output_file DROP CONSTRAINT output_file_pkey",
                "DELETE FROM output_file WHERE path !~ '^.+/AudioCache/[^/]+/[^/]+$'",
                """
                UPDATE output_file SET root = substring(path FROM '^(.+)/AudioCache/[^/]+/[^/]+$'),
                    path = substring(path FROM '/(AudioCache/[^/]+/[^/]+)$')
                """,
                "ALTER TABLE output_file ALTER COLUMN root SET NOT NULL",
                "ALTER TABLE output_file ADD PRIMARY KEY (path, root)",
            ]),
    ]

    /// The advisory lock migrations take turns on: "tourpack" in ASCII.
    static let migrationLock: Int64 = 0x746F_7572_7061_636B

    /// The schema's version, and whether any migration is still recorded
    /// under its former name; nil when there is no schema yet.
    static func schema(_ connections: PostgresConnections) throws -> (version: Int, formerNames: Bool)? {
        let formerNames = migrations.compactMap(\.formerName)
        return try PostgresStore(connections: connections).run("read the schema version") {
            try connections.withConnection { session in
                guard try session.query("SELECT to_regclass('schema_migrations') IS NOT NULL").first?.decode(Bool.self) == true else {
                    return nil
                }
                let row = try session.query(
                    "SELECT COALESCE(MAX(version), 0)::BIGINT, COUNT(*) FILTER (WHERE name = ANY(\(formerNames)))::BIGINT FROM schema_migrations"
                ).first
                return try row.map { row in
                    let (version, former) = try row.decode((Int, Int).self)
                    return (version, former > 0)
                }
            }
        }
    }

    /// The schema's version, or nil when it has none yet.
    static func version(_ connections: PostgresConnections) throws -> Int? {
        try schema(connections)?.version
    }

    /// Applies what is missing; returns the names applied.
    static func migrate(_ connections: PostgresConnections) throws -> [String] {
        let known = migrations.count
        let location = connections.location
        func refuseNewer(_ version: Int) -> TourpackError {
            location.failure(
                "the schema is at version \(version), newer than this tourpack knows (version \(known)); "
                    + "use a newer tourpack, or another database")
        }
        // Every worker opens the state: a current schema must cost no lock.
        if let schema = try schema(connections) {
            if schema.version == known && !schema.formerNames { return [] }
            if schema.version > known { throw refuseNewer(schema.version) }
        }
        return try PostgresStore(connections: connections).run("migrate the schema") {
            try connections.transaction { session in
                // First, before even looking: two workers migrating a new database
                // at once would both create the table or apply v1.
                try session.execute("SELECT pg_advisory_xact_lock(\(migrationLock))")
                try session.execute(
                    """
                    CREATE TABLE IF NOT EXISTS schema_migrations (
                        version BIGINT PRIMARY KEY,
                        name TEXT NOT NULL,
                        applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
                    )
                    """)
                let applied = Set(try session.query("SELECT version FROM schema_migrations").map { try $0.decode(Int.self) })
                if let newest = applied.max(), newest > known { throw refuseNewer(newest) }
                // Recorded before both backends named their changes alike: renamed in place, once.
                for migration in migrations where applied.contains(migration.version) {
                    guard let formerName = migration.formerName else { continue }
                    try session.execute(
                        "UPDATE schema_migrations SET name = \(migration.name) WHERE version = \(migration.version) AND name = \(formerName)"
                    )
                }
                var names: [String] = []
                for migration in migrations where !applied.contains(migration.version) {
                    for statement in migration.statements {
                        try session.execute(PostgresQuery(unsafeSQL: statement))
                    }
                    try session.execute("INSERT INTO schema_migrations (version, name) VALUES (\(migration.version), \(migration.name))")
                    names.append(migration.name)
                }
                return names
            }
        }
    }
}

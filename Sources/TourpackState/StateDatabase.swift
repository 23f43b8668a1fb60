package import Foundation
import GRDB
import TourpackCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The build state in SQLite, `<state>/state.sqlite`: the synthesis and
/// output cache indexes, the monthly quota ledger and the build records.
///
/// One file is shared by every job whose pipeline names the same state
/// folder, so two builds running at once (on different output roots) see
/// one ledger. It is opened as a GRDB `DatabasePool`, which puts SQLite in
/// WAL mode: readers never wait for the writer, and writes are serialized by
/// SQLite's own lock across processes. Every write is an `IMMEDIATE`
/// transaction (GRDB's default), so a read-check-write such as a quota
/// reservation is atomic against another process doing the same. A busy
/// database is waited for, up to `busyTimeoutSeconds`.
///
/// `synchronous = NORMAL`: in WAL mode a commit survives the process being
/// killed at any instant (the ledger's promise); only a power cut can lose
/// the last commits, as it can lose the files written just before it.
///
/// The schema is versioned: `migrator` applies each named migration once, in
/// order, and a database from a newer tourpack is refused rather than guessed at.
package struct StateDatabase: Sendable {
    package static let fileName = "state.sqlite"
    package static let busyTimeoutSeconds: TimeInterval = 30

    /// The database file.
    package let url: URL
    let pool: DatabasePool
    /// The migrations this open applied, oldest first; empty when the schema was current.
    package let appliedNow: [String]

    /// Opens (creating if needed) the database in `folder` and migrates it.
    package init(folder: URL) throws {
        try AtomicFile.createFolder(folder)
        url = folder.appendingPathComponent(Self.fileName)
        var configuration = Configuration()
        configuration.busyMode = .timeout(Self.busyTimeoutSeconds)
        configuration.label = "tourpack.state"
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
        }
        let path = url.path
        do {
            // Opening switches a new database to WAL, and the migrator reads
            // what is applied, then applies the rest: two processes opening a
            // new database at once would collide on both (SQLITE_BUSY, or v1
            // applied twice). A file lock makes them take turns; it is held
            // for milliseconds, and only while opening.
            let openingLock = try FileLock(url.deletingLastPathComponent().appendingPathComponent(Self.fileName + ".open-lock"))
            defer { openingLock.unlock() }
            pool = try DatabasePool(path: path, configuration: configuration)
            let migrator = Self.migrator
            let applied = try pool.read { db in try migrator.appliedIdentifiers(db) }
            // The usual open: every migration this tourpack knows is applied,
            // and no other (none under a former name, none of a newer
            // tourpack's), so there is nothing to rename, refuse or apply,
            // and the migrator's reads and its write barrier are spared.
            if applied == Set(migrator.migrations) {
                appliedNow = []
            } else {
                appliedNow = try Self.migrate(pool, applied: applied, with: migrator, path: path)
            }
        } catch let error as TourpackError {
            throw error
        } catch {
            throw Self.failure(error, path: path)
        }
    }

    /// Brings a schema that is not current up to date: renames the
    /// migrations recorded under former names, refuses one a newer tourpack
    /// migrated, and applies the missing ones; returns those, oldest first.
    /// `applied`: what the database recorded when it was opened.
    private static func migrate(_ pool: DatabasePool, applied: Set<String>, with migrator: DatabaseMigrator, path: String) throws
        -> [String]
    {
        try renameFormerMigrations(in: pool, applied: applied)
        if try pool.read({ db in try migrator.hasBeenSuperseded(db) }) {
            throw TourpackError.stateFailed(
                path: path, message: "the schema is newer than this tourpack knows; use a newer tourpack or another state folder")
        }
        let before = try pool.read { db in try migrator.appliedIdentifiers(db) }
        try migrator.migrate(pool)
        return migrator.migrations.filter { !before.contains($0) }
    }

    /// An SQLite error as a `TourpackError`: a full disk (`SQLITE_FULL`) is
    /// `storageFailed` naming the database with ENOSPC, like any other write
    /// that found no room; the rest are `stateFailed`.
    static func failure(_ error: any Error, path: String) -> TourpackError {
        // SQLITE_FULL, or a disk I/O error on a disk with no room left (growing the WAL's shared memory).
        if let database = error as? DatabaseError,
            database.resultCode == .SQLITE_FULL
                || (database.resultCode == .SQLITE_IOERR && fileSystemIsFull(at: (path as NSString).deletingLastPathComponent))
        {
            return TourpackError(
                .storageFailed, "", context: .init(path: path, operation: "write the state database", errno: ENOSPC), cause: database)
        }
        return TourpackError.stateFailed(path: path, message: "\(error)")
    }

    /// Runs `body` in one write transaction; SQLite errors become `stateFailed`
    /// (`storageFailed` when the disk is full).
    func write<T>(_ body: (Database) throws -> T) throws -> T {
        do {
            return try pool.write(body)
        } catch let error as TourpackError {
            throw error
        } catch {
            throw Self.failure(error, path: url.path)
        }
    }

    /// Runs `body` on a consistent snapshot.
    func read<T>(_ body: (Database) throws -> T) throws -> T {
        do {
            return try pool.read(body)
        } catch let error as TourpackError {
            throw error
        } catch {
            throw Self.failure(error, path: url.path)
        }
    }

    /// Applied migrations, oldest first (for tests and `cache stats`).
    package func appliedMigrations() throws -> [String] {
        try read { db in try Self.migrator.appliedMigrations(db) }
    }

    /// What each migration was called before both backends named their
    /// changes alike (`MigrationName`): a database from then records these.
    static let formerNames: [(former: String, name: String)] = [
        ("v1 caches, ledger and build records", MigrationName.cachesLedgerAndBuildRecords),
        ("v2 indexes for build records", MigrationName.buildRecordIndexes),
        ("v3 map tile cache and tile packs", MigrationName.mapTiles),
        ("v4 chunk shapes", MigrationName.chunkShapes),
        ("v5 sent reservations", MigrationName.sentReservations),
        ("v6 loudness", MigrationName.loudness),
        ("v7 synthesis claims", MigrationName.synthesisClaims),
    ]

    /// Renames the migrations a database records under their former names,
    /// in place, one UPDATE each, before the migrator looks: otherwise it
    /// would take them for a newer tourpack's. A database with none costs
    /// no write; renaming twice changes nothing. `applied`: what it records.
    private static func renameFormerMigrations(in pool: DatabasePool, applied: Set<String>) throws {
        let renames = formerNames.filter { applied.contains($0.former) }
        guard !renames.isEmpty else { return }
        try pool.write { db in
            for (former, name) in renames {
                try db.execute(sql: "UPDATE grdb_migrations SET identifier = ? WHERE identifier = ?", arguments: [name, former])
            }
        }
    }

    /// Every schema change, in order, named as PostgreSQL names it
    /// (`MigrationName`). Never edit a migration that has shipped: add the next one.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration(MigrationName.cachesLedgerAndBuildRecords) { db in
            // Times are seconds since 1970 (UTC), from the build's injected clock.
            try db.execute(
                sql: """
                    CREATE TABLE synthesisChunk (
                        key TEXT PRIMARY KEY NOT NULL,
                        characters INTEGER NOT NULL,
                        sampleRate INTEGER NOT NULL,
                        samples INTEGER NOT NULL,
                        fileBytes INTEGER NOT NULL,
                        createdAt DOUBLE NOT NULL,
                        lastUsedAt DOUBLE NOT NULL
                    );
                    CREATE INDEX synthesisChunkByLastUse ON synthesisChunk(lastUsedAt);

                    CREATE TABLE outputFile (
                        path TEXT PRIMARY KEY NOT NULL,
                        inputKey TEXT NOT NULL,
                        format TEXT NOT NULL,
                        codec TEXT NOT NULL,
                        sampleRateHz INTEGER NOT NULL,
                        channels INTEGER NOT NULL,
                        bitrateKbps INTEGER NOT NULL,
                        durationSeconds DOUBLE NOT NULL,
                        sizeBytes INTEGER NOT NULL,
                        sha256 TEXT NOT NULL,
                        createdAt DOUBLE NOT NULL,
                        lastUsedAt DOUBLE NOT NULL
                    );

                    CREATE TABLE build (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        pipeline TEXT NOT NULL,
                        output TEXT NOT NULL,
                        status TEXT NOT NULL CHECK (status IN ('queued', 'running', 'completed', 'failed', 'cancelled')),
                        owner TEXT NOT NULL,
                        queuedAt DOUBLE NOT NULL,
                        startedAt DOUBLE,
                        finishedAt DOUBLE,
                        toursBuilt INTEGER NOT NULL DEFAULT 0,
                        toursFailed INTEGER NOT NULL DEFAULT 0,
                        requests INTEGER NOT NULL DEFAULT 0,
                        characters INTEGER NOT NULL DEFAULT 0,
                        error TEXT
                    );
                    CREATE TABLE buildTour (
                        buildId INTEGER NOT NULL REFERENCES build(id) ON DELETE CASCADE,
                        tourId TEXT NOT NULL,
                        outcome TEXT NOT NULL CHECK (outcome IN ('packaged', 'unchanged', 'failed')),
                        message TEXT,
                        PRIMARY KEY (buildId, tourId)
                    );

                    CREATE TABLE quotaUsage (
                        account TEXT NOT NULL,
                        month TEXT NOT NULL,
                        tier TEXT NOT NULL,
                        used INTEGER NOT NULL DEFAULT 0,
                        PRIMARY KEY (account, month, tier)
                    );
                    CREATE TABLE quotaReservation (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        account TEXT NOT NULL,
                        month TEXT NOT NULL,
                        tier TEXT NOT NULL,
                        characters INTEGER NOT NULL CHECK (characters >= 0),
                        owner TEXT NOT NULL,
                        createdAt DOUBLE NOT NULL
                    );
                    CREATE INDEX quotaReservationByAccount ON quotaReservation(account, month, tier);
                    """)
        }
        migrator.registerMigration(MigrationName.buildRecordIndexes) { db in
            // `cache stats` finds each tour's latest outcome per output root;
            // a nightly job adds a record per tour every night.
            try db.execute(
                sql: """
                    CREATE INDEX buildTourByTour ON buildTour(tourId, buildId);
                    CREATE INDEX buildByOutput ON build(output, id);
                    """)
        }
        migrator.registerMigration(MigrationName.mapTiles) { db in
            // One row per tile of a source: its bytes (a content-addressed
            // file under <state>/tiles, NULL sha256 for a tile the source has
            // no data for), the validators for a conditional request, and
            // until when it is fresh. `source` is `TileSource.cacheName`: never a key.
            try db.execute(
                sql: """
                    CREATE TABLE mapTile (
                        source TEXT NOT NULL,
                        z INTEGER NOT NULL,
                        x INTEGER NOT NULL,
                        y INTEGER NOT NULL,
                        sha256 TEXT,
                        bytes INTEGER NOT NULL DEFAULT 0,
                        etag TEXT,
                        lastModified TEXT,
                        fetchedAt DOUBLE NOT NULL,
                        freshUntil DOUBLE NOT NULL,
                        lastUsedAt DOUBLE NOT NULL,
                        PRIMARY KEY (source, z, x, y)
                    ) WITHOUT ROWID;
                    CREATE INDEX mapTileByLastUse ON mapTile(lastUsedAt);
                    CREATE INDEX mapTileBySha256 ON mapTile(sha256);

                    CREATE TABLE tilePack (
                        path TEXT PRIMARY KEY NOT NULL,
                        inputKey TEXT NOT NULL,
                        sizeBytes INTEGER NOT NULL,
                        sha256 TEXT NOT NULL,
                        storedTiles INTEGER NOT NULL,
                        emptyTiles INTEGER NOT NULL,
                        createdAt DOUBLE NOT NULL
                    );
                    """)
        }
        migrator.registerMigration(MigrationName.chunkShapes) { db in
            // Where each chunk's speech starts and ends (`ChunkShape`), so a
            // join plans its seams without decoding a chunk twice. NULL: not
            // measured yet (an entry from before); -1, -1: only silence.
            try db.execute(
                sql: """
                    ALTER TABLE synthesisChunk ADD COLUMN audibleStart INTEGER;
                    ALTER TABLE synthesisChunk ADD COLUMN audibleEnd INTEGER;
                    """)
        }
        migrator.registerMigration(MigrationName.sentReservations) { db in
            // reserved → sent → settled: when a reservation's request went out.
            // A dead owner's unsent reservations are released, its sent ones settled.
            try db.execute(sql: "ALTER TABLE quotaReservation ADD COLUMN sentAt DOUBLE")
        }
        migrator.registerMigration(MigrationName.loudness) { db in
            // Each chunk's gating blocks and true peak (`LoudnessProfile.encoded`;
            // NULL: not measured yet), and each output file's measured loudness
            // and how it was levelled, as package.json lists them.
            try db.execute(
                sql: """
                    ALTER TABLE synthesisChunk ADD COLUMN loudness BLOB;
                    ALTER TABLE outputFile ADD COLUMN integratedLUFS DOUBLE;
                    ALTER TABLE outputFile ADD COLUMN truePeakDBTP DOUBLE;
                    ALTER TABLE outputFile ADD COLUMN gainDB DOUBLE;
                    ALTER TABLE outputFile ADD COLUMN limiterReductionDB DOUBLE;
                    """)
        }
        migrator.registerMigration(MigrationName.synthesisClaims) { db in
            // Who is speaking which chunk now (`ChunkClaims`): jobs sharing
            // this state pay for a chunk once.
            try db.execute(
                sql: """
                    CREATE TABLE synthesisClaim (
                        key TEXT PRIMARY KEY,
                        owner TEXT NOT NULL,
                        heartbeatAt DOUBLE NOT NULL
                    );
                    CREATE INDEX synthesisClaimByOwner ON synthesisClaim (owner);
                    """)
        }
        migrator.registerMigration(MigrationName.chunkDigests) { db in
            // The SHA-256 of each chunk's FLAC file, checked whenever it is
            // read (`FLACFile.Expectation`). NULL: an entry from before,
            // recorded from its file the first time it is looked up.
            try db.execute(sql: "ALTER TABLE synthesisChunk ADD COLUMN fileSHA256 TEXT")
        }
        migrator.registerMigration(MigrationName.sentenceTimes) { db in
            // When each sentence of a chunk starts, as the voice reported it,
            // for captions (`SentenceTimes`). NULL: none reported.
            try db.execute(sql: "ALTER TABLE synthesisChunk ADD COLUMN sentenceTimes TEXT")
        }
        migrator.registerMigration(MigrationName.fileSignatures) { db in
            // What `lstat` said of each output file when its SHA-256 was last
            // found right (`FileSignature`). NULL: hash it at the next build.
            try db.execute(sql: "ALTER TABLE outputFile ADD COLUMN fileSignature TEXT")
        }
        migrator.registerMigration(MigrationName.outputCaptions) { db in
            // Each output file's narration's captions, as made with it
            // (`StoredCaptions`). NULL: made again at the next build with captions.
            try db.execute(
                sql: """
                    ALTER TABLE outputFile ADD COLUMN captionsKey TEXT;
                    ALTER TABLE outputFile ADD COLUMN captionsVTT BLOB;
                    ALTER TABLE outputFile ADD COLUMN captionsSHA256 TEXT;
                    ALTER TABLE outputFile ADD COLUMN captionsCues INTEGER;
                    ALTER TABLE outputFile ADD COLUMN captionsTiming TEXT;
                    ALTER TABLE outputFile ADD COLUMN captionsFileSignature TEXT;
                    """)
        }
        migrator.registerMigration(MigrationName.packageSignatures) { db in
            // Each package.json a build found exactly as the store writes it,
            // with what `lstat` said of it then (`ManifestSignatures`). On
            // this machine only, like the tile packs.
            try db.execute(sql: "CREATE TABLE packageFile (path TEXT PRIMARY KEY NOT NULL, signature TEXT NOT NULL)")
        }
        migrator.registerMigration(MigrationName.outputRoots) { db in
            // Each output file's row keyed by its root and its path under
            // that root, so a root moved or mounted elsewhere keeps its rows
            // (`OutputCache`). SQLite cannot change a primary key: the table
            // is made again, and each row an older tourpack keyed by its
            // absolute path is split at its AudioCache folder
            // (`OutputCache.splitRecordedPath`); one that does not split is
            // dropped: no build asks for it.
            try db.execute(
                sql: """
                    CREATE TABLE outputFileByRoot (
                        path TEXT NOT NULL,
                        root TEXT NOT NULL,
                        inputKey TEXT NOT NULL,
                        format TEXT NOT NULL,
                        codec TEXT NOT NULL,
                        sampleRateHz INTEGER NOT NULL,
                        channels INTEGER NOT NULL,
                        bitrateKbps INTEGER NOT NULL,
                        durationSeconds DOUBLE NOT NULL,
                        sizeBytes INTEGER NOT NULL,
                        sha256 TEXT NOT NULL,
                        createdAt DOUBLE NOT NULL,
                        lastUsedAt DOUBLE NOT NULL,
                        integratedLUFS DOUBLE,
                        truePeakDBTP DOUBLE,
                        gainDB DOUBLE,
                        limiterReductionDB DOUBLE,
                        fileSignature TEXT,
                        captionsKey TEXT,
                        captionsVTT BLOB,
                        captionsSHA256 TEXT,
                        captionsCues INTEGER,
                        captionsTiming TEXT,
                        captionsFileSignature TEXT,
                        PRIMARY KEY (path, root)
                    )
                    """)
            let columns = """
                inputKey, format, codec, sampleRateHz, channels, bitrateKbps, durationSeconds, sizeBytes, sha256, createdAt, lastUsedAt,
                integratedLUFS, truePeakDBTP, gainDB, limiterReductionDB, fileSignature,
                captionsKey, captionsVTT, captionsSHA256, captionsCues, captionsTiming, captionsFileSignature
                """
            let copy = try db.makeStatement(
                sql: "INSERT INTO outputFileByRoot (root, path, \(columns)) SELECT ?, ?, \(columns) FROM outputFile WHERE path = ?")
            for recorded in try String.fetchAll(db, sql: "SELECT path FROM outputFile") {
                guard let (root, path) = OutputCache.splitRecordedPath(recorded) else { continue }
                try copy.execute(arguments: [root, path, recorded])
            }
            try db.execute(sql: "DROP TABLE outputFile; ALTER TABLE outputFileByRoot RENAME TO outputFile;")
        }
        migrator.registerMigration(MigrationName.packageRoots) { db in
            // Each package.json's signature keyed by its root and its path
            // under that root (`ManifestSignatures`), as the output files'
            // are, so a root moved or mounted elsewhere keeps them. A row an
            // older tourpack keyed by its absolute path is split at its
            // OfflineTours folder; one that does not split is dropped.
            try db.execute(
                sql: """
                    CREATE TABLE packageFileByRoot (
                        root TEXT NOT NULL,
                        path TEXT NOT NULL,
                        signature TEXT NOT NULL,
                        PRIMARY KEY (path, root)
                    )
                    """)
            let copy = try db.makeStatement(sql: "INSERT INTO packageFileByRoot (root, path, signature) VALUES (?, ?, ?)")
            for row in try Row.fetchAll(db, sql: "SELECT path, signature FROM packageFile") {
                let recorded: String = row["path"]
                guard let (root, path) = OutputCache.splitRecordedPath(recorded, under: Layout.offlineToursFolder) else { continue }
                try copy.execute(arguments: [root, path, row["signature"] as String])
            }
            try db.execute(sql: "DROP TABLE packageFile; ALTER TABLE packageFileByRoot RENAME TO packageFile;")
        }
        return migrator
    }
}

/// An exclusive `flock` on a file, for the short moments (schema migration,
/// fetching one map tile) when processes sharing a state folder must take
/// turns. Held by its own open file description, so it also excludes other
/// tasks of this process; the kernel drops it if the process dies.
package final class FileLock: @unchecked Sendable {
    private var descriptor: Int32

    /// Waits for the lock.
    convenience init(_ url: URL) throws {
        try self.init(url, wait: true)
    }

    /// The lock when it is free now; nil when another holder has it.
    static func attempt(_ url: URL) throws -> FileLock? {
        do { return try FileLock(url, wait: false) } catch let error as TourpackError {
            if error.kind == .storageFailed, error.context.operation == "flock", error.context.errno == EWOULDBLOCK { return nil }
            throw error
        }
    }

    private init(_ url: URL, wait: Bool) throws {
        descriptor = open(url.path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw TourpackError.storageFailed(path: url.path, errno: errno, operation: "open lock") }
        while flock(descriptor, wait ? LOCK_EX : LOCK_EX | LOCK_NB) != 0 {
            let code = errno
            guard code == EINTR else {
                _ = close(descriptor)
                // A class whose init throws once every property is set is
                // still deinitialized: without this, `deinit` would close
                // the number again, by then perhaps another thread's file
                // (seen as EBADF on a chunk's spool while tile stripes were busy).
                descriptor = -1
                throw TourpackError.storageFailed(path: url.path, errno: code, operation: "flock")
            }
        }
    }

    package func unlock() {
        guard descriptor >= 0 else { return }
        _ = flock(descriptor, LOCK_UN)
        _ = close(descriptor)
        descriptor = -1
    }

    deinit { unlock() }
}

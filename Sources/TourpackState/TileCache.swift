import Crypto
package import Foundation
import GRDB
package import TourpackCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Every map tile a build has fetched, so that a tile is downloaded once
/// across tours, rebuilds and concurrent builds sharing the state folder.
///
/// - The index (`mapTile` in the state database) keeps, per source and
///   z/x/y, the tile's SHA-256 (nil when the source has no data there), the
///   server's `ETag` and `Last-Modified`, and until when it is fresh.
/// - The bytes are content-addressed files, `<state>/tiles/<ab>/<sha256>`:
///   the many identical tiles of a glacier or a lake are kept once.
/// - A fresh tile costs nothing; a stale one is asked for again with its
///   validators, and a 304 renews it without a download.
/// - `evict` keeps the files within `budgets.tileCacheMaxMB`, least recently
///   used first, as the synthesis cache does.
///
/// All of it blocks (SQLite and file I/O); call it from a thread pool.
package struct TileCache: Sendable {
    /// What the cache knows of one tile.
    package struct Entry: Sendable, Hashable {
        /// nil: the source has no data here (404 or 204).
        package var sha256: String?
        package var bytes: Int
        package var etag: String?
        package var lastModified: String?
        package var freshUntil: Double
    }

    package let database: StateDatabase
    package let folder: URL
    package let clock: @Sendable () -> Date
    static let lockStripes = 64

    package init(database: StateDatabase, folder: URL, clock: @escaping @Sendable () -> Date) {
        self.database = database
        self.folder = folder
        self.clock = clock
    }

    /// The file holding the bytes whose SHA-256 is `sha256`.
    package func blobURL(_ sha256: String) -> URL {
        folder.appendingPathComponent(String(sha256.prefix(2)), isDirectory: true).appendingPathComponent(sha256)
    }

    package func isFresh(_ entry: Entry) -> Bool {
        entry.freshUntil > clock().timeIntervalSince1970
    }

    /// What the index holds for `tiles` of `source`; tiles it has never seen are absent.
    package func entries(source: String, tiles: [TileID]) throws -> [TileID: Entry] {
        var found: [TileID: Entry] = [:]
        found.reserveCapacity(tiles.count)
        try database.read { db in
            let statement = try db.cachedStatement(
                sql: "SELECT sha256, bytes, etag, lastModified, freshUntil FROM mapTile WHERE source = ? AND z = ? AND x = ? AND y = ?")
            for tile in tiles {
                guard let row = try Row.fetchOne(statement, arguments: [source, tile.z, tile.x, tile.y]) else { continue }
                found[tile] = Entry(
                    sha256: row["sha256"], bytes: row["bytes"], etag: row["etag"], lastModified: row["lastModified"],
                    freshUntil: row["freshUntil"])
            }
        }
        return found
    }

    package func entry(source: String, tile: TileID) throws -> Entry? {
        try entries(source: source, tiles: [tile])[tile]
    }

    /// Keeps a downloaded tile (or, with nil data, the fact that there is none).
    @discardableResult
    package func store(
        source: String, tile: TileID, data: [UInt8]?, etag: String?, lastModified: String?, freshUntil: Double
    ) throws -> Entry {
        var sha256: String?
        if let data {
            let hex = SHA256.hash(data: data).lowercaseHex
            let url = blobURL(hex)
            if !FileManager.default.fileExists(atPath: url.path) {
                try AtomicFile.createFolder(url.deletingLastPathComponent())
                let temp = try AtomicFile.temporaryURL(for: url, in: nil)
                do {
                    try AtomicFile.fill(temp, with: data)
                    try AtomicFile.move(temp, to: url)
                } catch {
                    AtomicFile.discard(temp: temp)
                    throw error
                }
            }
            sha256 = hex
        }
        let now = clock().timeIntervalSince1970
        let entry = Entry(sha256: sha256, bytes: data?.count ?? 0, etag: etag, lastModified: lastModified, freshUntil: freshUntil)
        try database.write { db in
            try db.execute(
                sql: """
                    INSERT OR REPLACE INTO mapTile (source, z, x, y, sha256, bytes, etag, lastModified, fetchedAt, freshUntil, lastUsedAt)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [source, tile.z, tile.x, tile.y, sha256, entry.bytes, etag, lastModified, now, freshUntil, now])
        }
        return entry
    }

    /// A 304: the tile is unchanged; it is fresh again until `freshUntil`.
    @discardableResult
    package func renew(source: String, tile: TileID, etag: String?, lastModified: String?, freshUntil: Double) throws -> Entry? {
        let now = clock().timeIntervalSince1970
        try database.write { db in
            try db.execute(
                sql: """
                    UPDATE mapTile SET freshUntil = ?, lastUsedAt = ?, etag = COALESCE(?, etag), lastModified = COALESCE(?, lastModified)
                    WHERE source = ? AND z = ? AND x = ? AND y = ?
                    """,
                arguments: [freshUntil, now, etag, lastModified, source, tile.z, tile.x, tile.y])
        }
        return try entry(source: source, tile: tile)
    }

    /// Marks tiles as used now (they went into a pack), for the LRU.
    package func touch(source: String, tiles: [TileID]) throws {
        let now = clock().timeIntervalSince1970
        for start in stride(from: 0, to: tiles.count, by: 5_000) {
            try database.write { db in
                let statement = try db.cachedStatement(
                    sql: "UPDATE mapTile SET lastUsedAt = ? WHERE source = ? AND z = ? AND x = ? AND y = ?")
                for tile in tiles[start..<min(tiles.count, start + 5_000)] {
                    try statement.execute(arguments: [now, source, tile.z, tile.x, tile.y])
                }
            }
        }
    }

    /// The bytes of a kept tile; nil when its file is gone or no longer
    /// matches: the file is named by the SHA-256 of its bytes, and that is
    /// checked on every read, as a content-addressed store does (a file
    /// replaced, swapped or garbled is a miss, never another tile's bytes).
    package func read(_ sha256: String) -> [UInt8]? {
        guard let data = FileManager.default.contents(atPath: blobURL(sha256).path) else { return nil }
        guard SHA256.hash(data: data).lowercaseHex == sha256 else { return nil }
        return Array(data)
    }

    /// Whether the file for `sha256` is there, holds exactly those bytes and
    /// starts as a `format` tile does. A file that does not is removed, so
    /// that the tile is fetched again (a miss), and false is returned.
    package func verify(_ sha256: String, format: TileFormat) -> Bool {
        let url = blobURL(sha256)
        guard let data = FileManager.default.contents(atPath: url.path) else { return false }
        if SHA256.hash(data: data).lowercaseHex == sha256, format.matches(data) { return true }
        try? FileManager.default.removeItem(at: url)
        return false
    }

    /// Tiles indexed and the bytes of their distinct files.
    package func totals() throws -> (entries: Int, bytes: Int64) {
        try database.read { db in
            let entries = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM mapTile") ?? 0
            let bytes =
                try Int64.fetchOne(
                    db, sql: "SELECT COALESCE(SUM(bytes), 0) FROM (SELECT DISTINCT sha256, bytes FROM mapTile WHERE sha256 IS NOT NULL)")
                ?? 0
            return (entries, bytes)
        }
    }

    /// Forgets the least recently used tiles until the distinct files fit in
    /// `maxBytes`, then removes the files no entry names. Returns what was removed.
    @discardableResult
    package func evict(toFit maxBytes: Int64) throws -> (files: Int, bytes: Int64) {
        var total = try totals().bytes
        guard total > maxBytes else { return try removeOrphans() }
        // Walk the index oldest use first; a file is gone once its last entry is.
        let rows: [(source: String, z: Int, x: Int, y: Int, sha256: String?, bytes: Int64)] = try database.read { db in
            try Row.fetchAll(db, sql: "SELECT source, z, x, y, sha256, bytes FROM mapTile ORDER BY lastUsedAt, source, z, x, y").map {
                ($0["source"], $0["z"], $0["x"], $0["y"], $0["sha256"], $0["bytes"])
            }
        }
        var references: [String: Int] = [:]
        for row in rows { if let sha = row.sha256 { references[sha, default: 0] += 1 } }
        var victims: [(String, Int, Int, Int)] = []
        for row in rows where total > maxBytes {
            victims.append((row.source, row.z, row.x, row.y))
            guard let sha = row.sha256 else { continue }
            references[sha, default: 1] -= 1
            if references[sha] == 0 { total -= row.bytes }
        }
        for start in stride(from: 0, to: victims.count, by: 5_000) {
            try database.write { db in
                let statement = try db.cachedStatement(sql: "DELETE FROM mapTile WHERE source = ? AND z = ? AND x = ? AND y = ?")
                for victim in victims[start..<min(victims.count, start + 5_000)] {
                    try statement.execute(arguments: [victim.0, victim.1, victim.2, victim.3])
                }
            }
        }
        return try removeOrphans(graceSeconds: 0)
    }

    /// Files no entry names. By default only those an hour old go, so a file
    /// another job has just written and is about to index is left alone.
    func removeOrphans(graceSeconds: Double = 3_600) throws -> (files: Int, bytes: Int64) {
        let known = Set(
            try database.read { db in try String.fetchAll(db, sql: "SELECT DISTINCT sha256 FROM mapTile WHERE sha256 IS NOT NULL") })
        return OrphanSweep.run(folder: folder, known: known, graceSeconds: graceSeconds)
    }

    /// Forgets every tile (`cache clear`, which removes the folder itself).
    package func forgetAll() throws {
        try database.write { db in
            try db.execute(sql: "DELETE FROM mapTile")
            try db.execute(sql: "DELETE FROM tilePack")
        }
    }

    /// Takes the lock that lets one process at a time fetch the tiles that
    /// hash to one of 64 stripes; nil when another holds it (a build, or
    /// another task of this one).
    package func tryLock(source: String, tile: TileID) throws -> FileLock? {
        let digest = SHA256.hash(data: Data("\(source)|\(tile)".utf8))
        let stripe = Int(digest.first(where: { _ in true }) ?? 0) % Self.lockStripes
        let locks = folder.appendingPathComponent("locks", isDirectory: true)
        try AtomicFile.createFolder(locks)
        return try FileLock.attempt(locks.appendingPathComponent("\(stripe).lock"))
    }
}

/// What a package's tile pack was made from, so a rebuild whose tiles did not
/// change keeps the file it has, byte for byte (`tilePack`, by root-relative path).
package struct TilePackRecords: Sendable {
    package struct Record: Sendable, Hashable {
        package var inputKey: String
        package var sizeBytes: Int64
        package var sha256: String
        package var storedTiles: Int
        package var emptyTiles: Int

        package init(inputKey: String, sizeBytes: Int64, sha256: String, storedTiles: Int, emptyTiles: Int) {
            self.inputKey = inputKey
            self.sizeBytes = sizeBytes
            self.sha256 = sha256
            self.storedTiles = storedTiles
            self.emptyTiles = emptyTiles
        }
    }

    package let database: StateDatabase
    package let clock: @Sendable () -> Date

    package init(database: StateDatabase, clock: @escaping @Sendable () -> Date) {
        self.database = database
        self.clock = clock
    }

    package func record(for path: String) throws -> Record? {
        try database.read { db in
            try Row.fetchOne(
                db, sql: "SELECT inputKey, sizeBytes, sha256, storedTiles, emptyTiles FROM tilePack WHERE path = ?", arguments: [path]
            ).map {
                Record(
                    inputKey: $0["inputKey"], sizeBytes: $0["sizeBytes"], sha256: $0["sha256"], storedTiles: $0["storedTiles"],
                    emptyTiles: $0["emptyTiles"])
            }
        }
    }

    package func save(_ record: Record, for path: String) throws {
        let now = clock().timeIntervalSince1970
        try database.write { db in
            try db.execute(
                sql:
                    "INSERT OR REPLACE INTO tilePack (path, inputKey, sizeBytes, sha256, storedTiles, emptyTiles, createdAt) VALUES (?, ?, ?, ?, ?, ?, ?)",
                arguments: [path, record.inputKey, record.sizeBytes, record.sha256, record.storedTiles, record.emptyTiles, now])
        }
    }
}

public import Foundation
import GRDB

/// Every chunk the endpoint has spoken, kept losslessly so that nothing is
/// paid for twice: a FLAC file per chunk in `<state>/synthesis/`, indexed by
/// its `SynthesisKey` in the state database.
///
/// So adding a format, changing a bit rate or editing one sentence of a long
/// narration costs characters only for the chunks whose text changed.
///
/// - An entry older than `audioMaxAgeDays` (by when it was synthesized) is
///   not reused; the chunk is spoken again.
/// - A file that is missing or does not decode is a miss, and its entry is
///   dropped: the cache is never trusted over the endpoint.
/// - `evict` keeps the files within `synthesisCacheMaxMB`, least recently
///   used first. Another job may lose a file it was about to read to
///   eviction; that is a miss too.
/// - Files are written to a temp and renamed, without fsync: a file lost to
///   a power cut is a miss, not a wrong answer.
///
/// All of it blocks (SQLite and file I/O); call it from a thread pool.
public struct SynthesisCache: Sendable {
    public let database: StateDatabase
    public let folder: URL
    public let maxAgeSeconds: TimeInterval
    public let clock: @Sendable () -> Date

    public init(database: StateDatabase, folder: URL, maxAgeDays: Int, clock: @escaping @Sendable () -> Date) {
        self.database = database
        self.folder = folder
        self.maxAgeSeconds = Double(maxAgeDays) * 86_400
        self.clock = clock
    }

    func fileURL(for key: SynthesisKey) -> URL {
        folder.appendingPathComponent(String(key.hex.prefix(2)), isDirectory: true).appendingPathComponent("\(key.hex).flac")
    }

    private var cutoff: Double { clock().timeIntervalSince1970 - maxAgeSeconds }

    /// The keys among `keys` that a build would take from the cache: a fresh
    /// entry whose file is there. For plans; reads no audio.
    public func freshKeys(among keys: some Sequence<SynthesisKey>) throws -> Set<SynthesisKey> {
        let wanted = Array(Set(keys))
        let cutoff = self.cutoff
        var found: Set<SynthesisKey> = []
        try database.read { db in
            for start in stride(from: 0, to: wanted.count, by: 500) {
                let batch = wanted[start..<min(wanted.count, start + 500)]
                let marks = Array(repeating: "?", count: batch.count).joined(separator: ",")
                let rows = try String.fetchAll(
                    db, sql: "SELECT key FROM synthesisChunk WHERE createdAt >= ? AND key IN (\(marks))",
                    arguments: StatementArguments([cutoff] + batch.map(\.hex)))
                found.formUnion(rows.map(SynthesisKey.init(hex:)))
            }
        }
        return found.filter { FileManager.default.fileExists(atPath: fileURL(for: $0).path) }
    }

    /// The chunk's entry when it is fresh and its file is there; nil
    /// otherwise (a missing file also drops the entry). A hit becomes the
    /// most recently used entry. Reads no audio, unless the entry predates
    /// chunk shapes or loudness: then its file is decoded once to measure it.
    public func lookup(_ key: SynthesisKey) throws -> CachedChunk? {
        let cutoff = self.cutoff
        let row = try database.read { db in
            try Row.fetchOne(
                db, sql: "SELECT createdAt, samples, sampleRate, audibleStart, audibleEnd, loudness FROM synthesisChunk WHERE key = ?",
                arguments: [key.hex])
        }
        guard let row, (row["createdAt"] as Double) >= cutoff else { return nil }
        let url = fileURL(for: key)
        guard FileManager.default.fileExists(atPath: url.path) else {
            try forget(key)
            return nil
        }
        let samples: Int = row["samples"]
        let rate: Int = row["sampleRate"]
        let shape: ChunkShape
        if let start = row["audibleStart"] as Int?, let end = row["audibleEnd"] as Int?,
           let loudness = (row["loudness"] as Data?).flatMap(LoudnessProfile.init(encoded:)) {
            shape = ChunkShape(samples: samples, audible: start >= 0 && end > start ? start..<end : nil, loudness: loudness)
        } else {
            guard let measured = ChunkMeter.measure(url, rate: rate), measured.samples == samples else {
                try forget(key)
                return nil
            }
            shape = measured
        }
        let now = clock().timeIntervalSince1970
        let audible = shape.audible
        try database.write { db in
            try db.execute(
                sql: "UPDATE synthesisChunk SET lastUsedAt = ?, audibleStart = ?, audibleEnd = ?, loudness = ? WHERE key = ?",
                arguments: [now, audible?.lowerBound ?? -1, audible?.upperBound ?? -1, shape.loudness?.encoded, key.hex])
        }
        return CachedChunk(key: key, url: url, shape: shape, sampleRate: rate)
    }

    /// The chunk's audio when a fresh entry decodes; nil otherwise. A hit
    /// becomes the most recently used entry. For tools and tests: the build
    /// streams the file instead.
    public func load(_ key: SynthesisKey) throws -> PCMAudio? {
        guard let entry = try lookup(key) else { return nil }
        guard let pcm = try? FLACFile.read(entry.url), pcm.samples.count == entry.shape.samples, pcm.sampleRate == entry.sampleRate else {
            try forget(key)
            return nil
        }
        return pcm
    }

    /// Keeps `pcm` as the audio of `key`, replacing any older entry.
    public func store(_ pcm: PCMAudio, for key: SynthesisKey, characters: Int) throws {
        let temp = try temporaryURL(for: key)
        do {
            try FLACFile.write(pcm, to: temp)
        } catch {
            AtomicFile.discard(temp: temp)
            throw error
        }
        _ = try adopt(temp, for: key, shape: ShapeMeter.shape(of: pcm.samples), sampleRate: pcm.sampleRate, characters: characters, alongWith: nil)
    }

    /// A fresh temp beside the file `key` would be kept in: where a
    /// synthesizer writes the chunk, so keeping it is one rename.
    func temporaryURL(for key: SynthesisKey) throws -> URL {
        let url = fileURL(for: key)
        try AtomicFile.createFolder(url.deletingLastPathComponent())
        return try AtomicFile.temporaryURL(for: url, in: nil)
    }

    /// Keeps the FLAC file at `temp` (from `temporaryURL(for:)`) as the
    /// audio of `key`, replacing any older entry, with `extra` statements in
    /// the transaction that records the entry: the ledger's settlement, so
    /// the chunk is paid for exactly when it is kept, and a crash between
    /// the two cannot make it paid twice. A shape without loudness is
    /// measured from the file first.
    func adopt(
        _ temp: URL, for key: SynthesisKey, shape: ChunkShape, sampleRate: Int, characters: Int, alongWith extra: ((Database) throws -> Void)?
    ) throws -> CachedChunk {
        var shape = shape
        if shape.loudness == nil {
            shape.loudness = ChunkMeter.measure(temp, rate: sampleRate)?.loudness
        }
        let url = fileURL(for: key)
        try AtomicFile.move(temp, to: url)
        let bytes = Self.fileSize(url)
        let now = clock().timeIntervalSince1970
        try database.write { db in
            try db.execute(
                sql: """
                    INSERT OR REPLACE INTO synthesisChunk
                        (key, characters, sampleRate, samples, fileBytes, createdAt, lastUsedAt, audibleStart, audibleEnd, loudness)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    key.hex, characters, sampleRate, shape.samples, bytes, now, now,
                    shape.audible?.lowerBound ?? -1, shape.audible?.upperBound ?? -1, shape.loudness?.encoded,
                ])
            try extra?(db)
        }
        return CachedChunk(key: key, url: url, shape: shape, sampleRate: sampleRate)
    }

    /// Entries and the bytes of their files.
    public func totals() throws -> (entries: Int, bytes: Int64) {
        try database.read { db in
            let row = try Row.fetchOne(db, sql: "SELECT COUNT(*) AS n, COALESCE(SUM(fileBytes), 0) AS bytes FROM synthesisChunk")
            return (row?["n"] ?? 0, row?["bytes"] ?? 0)
        }
    }

    /// Drops entries too old to be reused, then the least recently used
    /// until the files fit in `maxBytes`. Returns what was removed.
    @discardableResult
    public func evict(toFit maxBytes: Int64) throws -> (files: Int, bytes: Int64) {
        let cutoff = self.cutoff
        let victims: [(key: String, bytes: Int64)] = try database.read { db in
            var total: Int64 = try Int64.fetchOne(db, sql: "SELECT COALESCE(SUM(fileBytes), 0) FROM synthesisChunk") ?? 0
            var chosen: [(String, Int64)] = []
            let rows = try Row.fetchAll(db, sql: "SELECT key, fileBytes, createdAt FROM synthesisChunk ORDER BY lastUsedAt, key")
            for row in rows {
                let bytes: Int64 = row["fileBytes"]
                let created: Double = row["createdAt"]
                guard created < cutoff || total > maxBytes else { continue }
                chosen.append((row["key"], bytes))
                total -= bytes
            }
            return chosen
        }
        for victim in victims { try forget(SynthesisKey(hex: victim.key)) }
        let orphans = try removeOrphans()
        return (victims.count + orphans.files, victims.reduce(0) { $0 + $1.bytes } + orphans.bytes)
    }

    /// Files with no entry: a crash between the rename and the insert, or a
    /// `cache clear` beside another root's build. Only those an hour old are
    /// removed, so a file another job is about to record is left alone.
    func removeOrphans() throws -> (files: Int, bytes: Int64) {
        let known = Set(try database.read { db in try String.fetchAll(db, sql: "SELECT key FROM synthesisChunk") })
        return OrphanSweep.run(folder: folder, known: known, suffix: ".flac", graceSeconds: 3_600)
    }

    /// Forgets every entry (`cache clear`, which removes the folder itself).
    public func forgetAll() throws {
        try database.write { db in try db.execute(sql: "DELETE FROM synthesisChunk") }
    }

    /// Removes an entry and its file; a file already gone is fine.
    func forget(_ key: SynthesisKey) throws {
        try database.write { db in try db.execute(sql: "DELETE FROM synthesisChunk WHERE key = ?", arguments: [key.hex]) }
        _ = try? AtomicFile.remove(fileURL(for: key))
    }

    static func fileSize(_ url: URL) -> Int64 {
        ((try? FileManager.default.attributesOfItem(atPath: url.path))?[.size] as? NSNumber)?.int64Value ?? 0
    }
}

/// A chunk's entry in the synthesis cache: its FLAC file and its shape.
public struct CachedChunk: Sendable, Hashable {
    public var key: SynthesisKey
    public var url: URL
    public var shape: ChunkShape
    public var sampleRate: Int
}

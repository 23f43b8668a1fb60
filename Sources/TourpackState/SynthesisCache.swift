package import Foundation
package import TourpackAudio
import TourpackCore

/// Every chunk the endpoint has spoken, kept losslessly so that nothing is
/// paid for twice: a FLAC file per chunk in `<state>/synthesis/`, indexed by
/// its `SynthesisKey` in the state's backend (`SynthesisIndex`: the local
/// SQLite database, or PostgreSQL when the state is shared).
///
/// So adding a format, changing a bit rate or editing one sentence of a long
/// narration costs characters only for the chunks whose text changed.
///
/// - An entry older than `audioMaxAgeDays` (by when it was synthesized) is
///   not reused; the chunk is spoken again.
/// - A file that is missing or does not decode is a miss, and its entry is
///   dropped: the cache is never trusted over the endpoint.
/// - Each entry records its file's size and SHA-256; every read checks the
///   file against them (`FLACFile.Expectation`), so a file swapped with
///   another chunk's, or rewritten, is a miss too, as is anything at a
///   chunk's path that is not a regular file (a symlink, a device, a FIFO).
///   An entry from before digests were kept gets its digest from its file
///   at its next lookup.
/// - `evict` keeps the files within `synthesisCacheMaxMB`, least recently
///   used first. Another job may lose a file it was about to read to
///   eviction; that is a miss too.
/// - Files are written to a temp and renamed, without fsync: a file lost to
///   a power cut is a miss, not a wrong answer.
/// - Sentence times that break `ChunkShape.timesFit(rate:)` (not numbers,
///   negative, out of order, or past the chunk's end) are repaired on read:
///   the row's times are cleared, so the chunk's captions are estimated,
///   and its audio is still a hit. The same holds for the shared index.
///
/// All of it blocks (the index and file I/O); call it from a thread pool.
package struct SynthesisCache: Sendable {
    package private(set) var index: any SynthesisIndex
    package let folder: URL
    package let maxAgeSeconds: TimeInterval
    package let clock: @Sendable () -> Date
    /// Whether a hit must carry its loudness (a build with a target): an
    /// entry without it is measured from its file, once. Off, entries are
    /// taken as they are.
    package var measuresLoudness = true
    /// Whether the index is shared by machines whose files are their own
    /// (PostgreSQL): a row whose file is not on this disk is then another
    /// worker's chunk, held in the fleet's bucket, and a local miss only,
    /// never a row to drop.
    package var indexIsShared = false
    /// Whether the fleet's bucket (`state.objects`) holds the files the
    /// shared index lists: a plan then counts a fresh row as a hit even
    /// when the file is not on this disk, since a build restores it
    /// without a request.
    package var bucketHoldsFiles = false
    /// When set (a build), a hit whose row already holds its shape and
    /// loudness records its last use here, and `flushTouches` writes them
    /// all in one transaction, instead of a write per hit.
    package var deferredTouches: DeferredTouches?

    package init(index: any SynthesisIndex, folder: URL, maxAgeDays: Int, clock: @escaping @Sendable () -> Date) {
        self.index = index
        self.folder = folder
        self.maxAgeSeconds = Double(maxAgeDays) * 86_400
        self.clock = clock
    }

    /// The cache indexed in a SQLite state database.
    package init(database: StateDatabase, folder: URL, maxAgeDays: Int, clock: @escaping @Sendable () -> Date) {
        self.init(index: database.synthesisIndex, folder: folder, maxAgeDays: maxAgeDays, clock: clock)
    }

    /// This cache, with the rows of `keys` read in one query: `lookup`
    /// answers those keys from memory, without a query per chunk. A key
    /// kept or forgotten afterwards is read from the index again. A shared
    /// index is read as before: other workers write it while a build runs.
    package func preloading(_ keys: some Sequence<SynthesisKey>) throws -> SynthesisCache {
        guard !indexIsShared else { return self }
        let wanted = Array(Set(keys.map(\.hex)))
        var cache = self
        cache.index = PreloadedSynthesisIndex(index, rows: try index.entries(wanted), keys: Set(wanted))
        return cache
    }

    package func fileURL(for key: SynthesisKey) -> URL {
        folder.appendingPathComponent(String(key.hex.prefix(2)), isDirectory: true).appendingPathComponent(
            "\(key.hex).flac", isDirectory: false)
    }

    private var cutoff: Double { clock().timeIntervalSince1970 - maxAgeSeconds }

    /// The keys among `keys` that a build would take from the cache: a fresh
    /// entry whose file is there, or in the fleet's bucket. For plans; reads no audio.
    package func freshKeys(among keys: some Sequence<SynthesisKey>) throws -> Set<SynthesisKey> {
        let wanted = Array(Set(keys))
        let found = Set(try index.freshKeys(among: wanted.map(\.hex), createdSince: cutoff).map(SynthesisKey.init(hex:)))
        // A worker's first build in a new pod has no file yet: the quota
        // check must not refuse it for chunks the fleet has paid for. (A
        // share that failed makes this an underestimate; each reservation
        // is still checked against the month.)
        if indexIsShared, bucketHoldsFiles { return found }
        return found.filter { FileManager.default.fileExists(atPath: fileURL(for: $0).path) }
    }

    /// The chunk's entry when it is fresh and its file is there; nil
    /// otherwise (a missing file also drops the entry). A hit becomes the
    /// most recently used entry. Reads no audio, unless the entry predates
    /// chunk shapes or loudness: then its file is decoded once to measure it.
    package func lookup(_ key: SynthesisKey) throws -> CachedChunk? {
        let cutoff = self.cutoff
        guard let found = try index.entry(key.hex), found.createdAt >= cutoff else { return nil }
        let url = fileURL(for: key)
        guard let size = Self.regularFileSize(url) else {
            // Missing, or not a regular file (never read: /dev/zero has no end).
            try dropLocally(key)
            return nil
        }
        var entry = found
        if entry.fileSHA256 == nil || entry.fileBytes != size {
            guard entry.fileSHA256 == nil, let digest = try? FileDigest.sha256(of: url), digest.size == size else {
                try dropLocally(key)
                return nil
            }
            // An entry from before digests: its file, as it is now, is the one it vouches for from here on.
            entry.fileSHA256 = digest.hex
            entry.fileBytes = digest.size
            try index.keep(entry, settling: nil)
        }
        let samples = entry.samples
        let rate = entry.sampleRate
        var shape: ChunkShape
        let loudness = entry.loudness.flatMap(LoudnessProfile.init(encoded:))
        if let start = entry.audibleStart, let end = entry.audibleEnd, loudness != nil || !measuresLoudness {
            shape = ChunkShape(samples: samples, audible: start >= 0 && end > start ? start..<end : nil, loudness: loudness)
        } else {
            guard let measured = ChunkMeter.measure(url, rate: rate, measuresLoudness: measuresLoudness), measured.samples == samples else {
                try forget(key)
                return nil
            }
            shape = measured
        }
        if let stored = entry.sentenceTimes {
            let times = SentenceTimes.decode(stored)
            if let times, ChunkShape.timesFit(times, samples: samples, rate: rate) {
                shape.sentenceTimes = times
            } else {
                // Impossible times (an older version kept a provider's 1e15 s, say): repaired
                // here, for every later build and every worker sharing the index. The
                // captions of this chunk are estimated; its audio is kept.
                entry.sentenceTimes = nil
                try index.keep(entry, settling: nil)
            }
        }
        let now = clock().timeIntervalSince1970
        let audible = shape.audible
        let (audibleStart, audibleEnd, encodedLoudness) = (audible?.lowerBound ?? -1, audible?.upperBound ?? -1, shape.loudness?.encoded)
        if let deferredTouches, found.audibleStart == audibleStart, found.audibleEnd == audibleEnd, found.loudness == encodedLoudness {
            deferredTouches.add(key.hex, at: now)
        } else {
            try index.touch(key.hex, at: now, audibleStart: audibleStart, audibleEnd: audibleEnd, loudness: encodedLoudness)
        }
        return CachedChunk(
            key: key, url: url, shape: shape, sampleRate: rate,
            expectation: entry.fileSHA256.map { FLACFile.Expectation(sha256: $0, bytes: entry.fileBytes) })
    }

    /// Writes the last uses `deferredTouches` holds, each at its time, in
    /// one transaction (SQLite); the build calls it before it evicts.
    package func flushTouches() throws {
        guard let deferredTouches else { return }
        try index.touch(deferredTouches.take())
    }

    /// The size of the regular file at `url`; nil when there is none (a
    /// symlink is not followed).
    static func regularFileSize(_ url: URL) -> Int64? {
        var info = stat()
        guard lstat(url.path, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return nil }
        return Int64(info.st_size)
    }

    /// The chunk's audio when a fresh entry decodes; nil otherwise. A hit
    /// becomes the most recently used entry. For tools and tests: the build
    /// streams the file instead.
    package func load(_ key: SynthesisKey) throws -> PCMAudio? {
        guard let entry = try lookup(key) else { return nil }
        guard let pcm = try? FLACFile.read(entry.url, expecting: entry.expectation), pcm.samples.count == entry.shape.samples,
            pcm.sampleRate == entry.sampleRate
        else {
            try forget(key)
            return nil
        }
        return pcm
    }

    /// Keeps `pcm` as the audio of `key`, replacing any older entry.
    package func store(_ pcm: PCMAudio, for key: SynthesisKey, characters: Int) throws {
        let temp = try temporaryURL(for: key)
        do {
            try FLACFile.write(pcm, to: temp)
        } catch {
            AtomicFile.discard(temp: temp)
            throw error
        }
        _ = try adopt(
            temp, for: key, shape: ShapeMeter.shape(of: pcm.samples), sampleRate: pcm.sampleRate, characters: characters, alongWith: nil)
    }

    /// A fresh temp beside the file `key` would be kept in: where a
    /// synthesizer writes the chunk, so keeping it is one rename.
    package func temporaryURL(for key: SynthesisKey) throws -> URL {
        let url = fileURL(for: key)
        try AtomicFile.createFolder(url.deletingLastPathComponent())
        return try AtomicFile.temporaryURL(for: url, in: nil)
    }

    /// Keeps the FLAC file at `temp` (from `temporaryURL(for:)`) as the
    /// audio of `key`, replacing any older entry, with the ledger's
    /// settlement in the transaction that records the entry, so the chunk
    /// is paid for exactly when it is kept, and a crash between the two
    /// cannot make it paid twice. A shape without loudness is measured from
    /// the file first.
    package func adopt(
        _ temp: URL, for key: SynthesisKey, shape: ChunkShape, sampleRate: Int, characters: Int, alongWith settlement: LedgerSettlement?
    ) throws -> CachedChunk {
        var shape = shape
        if shape.loudness == nil, measuresLoudness {
            shape.loudness = ChunkMeter.measure(temp, rate: sampleRate)?.loudness
        }
        let url = fileURL(for: key)
        let digest = try FileDigest.sha256(of: temp)
        try AtomicFile.move(temp, to: url)
        let bytes = digest.size
        let now = clock().timeIntervalSince1970
        // Times that do not fit the audio are never kept.
        shape = shape.withFittingTimes(rate: sampleRate)
        try index.keep(
            SynthesisEntry(
                key: key.hex, characters: characters, sampleRate: sampleRate, samples: shape.samples, fileBytes: bytes, createdAt: now,
                lastUsedAt: now, audibleStart: shape.audible?.lowerBound ?? -1, audibleEnd: shape.audible?.upperBound ?? -1,
                loudness: shape.loudness?.encoded, fileSHA256: digest.hex, sentenceTimes: shape.sentenceTimes.map(SentenceTimes.encode)),
            settling: settlement)
        return CachedChunk(
            key: key, url: url, shape: shape, sampleRate: sampleRate, expectation: FLACFile.Expectation(sha256: digest.hex, bytes: bytes))
    }

    /// Entries and the bytes of their files.
    package func totals() throws -> (entries: Int, bytes: Int64) {
        try index.totals()
    }

    /// Drops entries too old to be reused, then the least recently used
    /// until the files fit in `maxBytes`. Returns what was removed.
    @discardableResult
    package func evict(toFit maxBytes: Int64) throws -> (files: Int, bytes: Int64) {
        let cutoff = self.cutoff
        let rows = try index.byLastUse()
        var total = rows.reduce(Int64(0)) { $0 + $1.bytes }
        var victims: [(key: String, bytes: Int64)] = []
        for row in rows {
            guard row.createdAt < cutoff || total > maxBytes else { continue }
            victims.append((row.key, row.bytes))
            total -= row.bytes
        }
        for victim in victims { try forget(SynthesisKey(hex: victim.key)) }
        let orphans = try removeOrphans()
        return (victims.count + orphans.files, victims.reduce(0) { $0 + $1.bytes } + orphans.bytes)
    }

    /// Files with no entry: a crash between the rename and the insert, or a
    /// `cache clear` beside another root's build. Only those an hour old are
    /// removed, so a file another job is about to record is left alone.
    func removeOrphans() throws -> (files: Int, bytes: Int64) {
        let known = try index.allKeys()
        return OrphanSweep.run(folder: folder, known: known, suffix: ".flac", graceSeconds: 3_600)
    }

    /// Forgets every entry (`cache clear`, which removes the folder itself).
    package func forgetAll() throws {
        try index.forgetAll()
    }

    /// A miss on this disk: the entry and whatever is at its path go, but
    /// a shared index keeps its row (the fleet's bucket has the file).
    private func dropLocally(_ key: SynthesisKey) throws {
        if indexIsShared {
            _ = try? AtomicFile.remove(fileURL(for: key))
        } else {
            try forget(key)
        }
    }

    /// Removes an entry and its file; a file already gone is fine.
    package func forget(_ key: SynthesisKey) throws {
        try index.forget(key.hex)
        _ = try? AtomicFile.remove(fileURL(for: key))
    }
}

/// A chunk's entry in the synthesis cache: its FLAC file and its shape.
package struct CachedChunk: Sendable, Hashable {
    package var key: SynthesisKey
    package var url: URL
    package var shape: ChunkShape
    package var sampleRate: Int
    /// What the file must be when it is read: its size and SHA-256, as the entry records them.
    package var expectation: FLACFile.Expectation? = nil
}

/// A chunk's sentence times as the synthesis cache keeps them: seconds to
/// the microsecond, comma-separated (`0.012,2.480125`).
package enum SentenceTimes {
    package static func encode(_ times: [Double]) -> String {
        times.map { String(format: "%.6f", $0) }.joined(separator: ",")
    }

    /// Nil for text that is not a list of finite, non-negative numbers.
    package static func decode(_ text: String) -> [Double]? {
        guard !text.isEmpty else { return [] }
        var times: [Double] = []
        for part in text.split(separator: ",", omittingEmptySubsequences: false) {
            guard let value = Double(part), value.isFinite, value >= 0 else { return nil }
            times.append(value)
        }
        return times
    }
}

/// Hits' last uses, kept in memory until `SynthesisCache.flushTouches`.
package final class DeferredTouches: @unchecked Sendable {
    private let lock = NSLock()
    private var times: [String: Double] = [:]

    package init() {}

    func add(_ key: String, at time: Double) {
        lock.withLock { times[key] = max(times[key] ?? time, time) }
    }

    /// The keys by time, sorted, and forgets them.
    func take() -> [(time: Double, keys: [String])] {
        let taken = lock.withLock {
            defer { times = [:] }
            return times
        }
        return Dictionary(grouping: taken, by: \.value).map { (time: $0.key, keys: $0.value.map(\.key).sorted()) }.sorted {
            $0.time < $1.time
        }
    }
}

/// An index whose rows for some keys were read at once (`SynthesisCache.preloading`):
/// those found are answered from memory until the key is kept, touched with a new shape, or forgotten.
struct PreloadedSynthesisIndex: SynthesisIndex {
    let base: any SynthesisIndex
    private let preloaded: PreloadedRows<SynthesisEntry>
    var location: StateLocation { base.location }

    init(_ base: any SynthesisIndex, rows: [String: SynthesisEntry], keys: Set<String>) {
        self.base = base
        // A key that had no row is asked again: another build on this state
        // may have kept it since (after waiting on its claim, say).
        preloaded = PreloadedRows(rows: rows, keys: keys, absenceIsAnswer: false)
    }

    func freshKeys(among keys: [String], createdSince cutoff: Double) throws -> Set<String> {
        try base.freshKeys(among: keys, createdSince: cutoff)
    }

    func entry(_ key: String) throws -> SynthesisEntry? {
        try preloaded.row(key) { try base.entry($0) }
    }

    func entries(_ keys: [String]) throws -> [String: SynthesisEntry] {
        try preloaded.rows(keys) { try base.entries($0) }
    }

    func touch(_ key: String, at time: Double, audibleStart: Int, audibleEnd: Int, loudness: Data?) throws {
        preloaded.drop([key])
        try base.touch(key, at: time, audibleStart: audibleStart, audibleEnd: audibleEnd, loudness: loudness)
    }

    func touch(_ keys: [String], at time: Double) throws {
        try base.touch(keys, at: time)
    }

    func touch(_ batches: [(time: Double, keys: [String])]) throws {
        try base.touch(batches)
    }

    func keep(_ entry: SynthesisEntry, settling: LedgerSettlement?) throws {
        preloaded.drop([entry.key])
        try base.keep(entry, settling: settling)
    }

    func totals() throws -> (entries: Int, bytes: Int64) { try base.totals() }

    func byLastUse() throws -> [(key: String, bytes: Int64, createdAt: Double)] { try base.byLastUse() }

    func allKeys() throws -> Set<String> { try base.allKeys() }

    func forget(_ key: String) throws {
        preloaded.drop([key])
        try base.forget(key)
    }

    func forgetAll() throws {
        preloaded.dropAll { _ in true }
        try base.forgetAll()
    }
}

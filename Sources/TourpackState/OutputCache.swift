import Crypto
package import Foundation
package import TourpackAudio
package import TourpackCore

/// What each AudioCache file was made from, so a build can keep a file
/// instead of making it again: one row per file with its `OutputKey`, its
/// measurements as package.json lists them, and its size and SHA-256.
///
/// A row names its file by its output root and its path under that root
/// (`AudioCache/<tour>/<file>`), split where the layout puts the
/// AudioCache folder (`place(of:)`). A root asks for its own rows first.
/// When it has none for a file (the root was moved, copied or mounted
/// elsewhere since, or another root sharing the state made the file), the
/// rows other roots keep under the same relative path stand in: one is
/// taken when its key is the one asked for and the file found here has its
/// size and SHA-256, or its very signature (the same file, moved). Such a
/// row is adopted when the build touches the file: copied to this root, and
/// removed from a root that no longer exists, so `mv` of a project moves
/// its rows and a copy copies them.
///
/// A file is reused only when its key is unchanged, it is younger than
/// `audioMaxAgeDays`, and the file on disk still has the recorded size and
/// SHA-256: a tampered or truncated file is made again, never trusted. A
/// file whose SHA-256 a build found right is not hashed again while `lstat`
/// says of it what it said then (`FileSignature`): any write to it since
/// would have changed its change time. Rows
/// are written only after a tour's files are committed, so a row never
/// describes a file that is not at its path (a crash in between leaves a file
/// without a row, which is simply made again).
///
/// The rows live in the state's backend (`OutputIndex`).
///
/// All of it blocks; call it from a thread pool.
package struct OutputCache: Sendable {
    package let index: any OutputIndex
    package let maxAgeSeconds: TimeInterval
    package let clock: @Sendable () -> Date
    /// Signatures of files found right by `reusable`, written by `touch`.
    private let signatures: PendingSignatures
    /// Signatures of caption files found right by `captionFile`, by their audio file's path, written by `touch`.
    private let captionSignatures: PendingSignatures
    /// Rows of other roots that `reusable` took for files of this one, written under this root by `touch`.
    private let adoptions: PendingAdoptions

    package init(index: any OutputIndex, maxAgeDays: Int, clock: @escaping @Sendable () -> Date) {
        self.index = index
        self.maxAgeSeconds = Double(maxAgeDays) * 86_400
        self.clock = clock
        self.signatures = PendingSignatures()
        self.captionSignatures = PendingSignatures()
        self.adoptions = PendingAdoptions()
    }

    /// The cache indexed in a SQLite state database.
    package init(database: StateDatabase, maxAgeDays: Int, clock: @escaping @Sendable () -> Date) {
        self.init(index: database.outputIndex, maxAgeDays: maxAgeDays, clock: clock)
    }

    /// This cache, with the rows of `urls` read in one query: `reusable`
    /// answers those paths from memory, without a query per file. A path
    /// recorded or forgotten afterwards is read from the index again.
    package func preloading(_ urls: [URL]) throws -> OutputCache {
        let paths = urls.map { Self.place(of: $0.path).path }
        let rows = try index.entries(paths: paths)
        return OutputCache(
            index: PreloadedOutputIndex(index, rows: rows, paths: Set(paths)), maxAgeSeconds: maxAgeSeconds, clock: clock,
            signatures: signatures, captionSignatures: captionSignatures, adoptions: adoptions)
    }

    private init(
        index: any OutputIndex, maxAgeSeconds: TimeInterval, clock: @escaping @Sendable () -> Date, signatures: PendingSignatures,
        captionSignatures: PendingSignatures, adoptions: PendingAdoptions
    ) {
        self.index = index
        self.maxAgeSeconds = maxAgeSeconds
        self.clock = clock
        self.signatures = signatures
        self.captionSignatures = captionSignatures
        self.adoptions = adoptions
    }

    /// Where the rows place the file at the absolute `path`: its output root
    /// and its path under that root, split before its last three
    /// components, which the layout fixes as `AudioCache/<tour>/<file>`
    /// (`splitRecordedPath`). A path of another shape (none a build writes)
    /// is its own place, under no root.
    static func place(of path: String) -> (root: String, path: String) {
        splitRecordedPath(path) ?? (root: "", path: path)
    }

    /// `<root>/AudioCache/<tour>/<file>` as its root and
    /// `AudioCache/<tour>/<file>` (or under `top`, as `OfflineTours` for a
    /// package.json); nil for a path of any other shape. Also
    /// how the migration to root-relative rows splits the absolute paths an
    /// older tourpack recorded (PostgreSQL's does the same in SQL).
    static func splitRecordedPath(_ path: String, under top: String = Layout.audioCacheFolder) -> (root: String, path: String)? {
        // Asked of every file of a build: the last three slashes are found
        // from the end, with nothing allocated until the split is known.
        let bytes = path.utf8
        guard let file = bytes.lastIndex(of: UInt8(ascii: "/")), let tour = bytes[..<file].lastIndex(of: UInt8(ascii: "/")),
            let folder = bytes[..<tour].lastIndex(of: UInt8(ascii: "/")), folder > bytes.startIndex,
            bytes.index(after: file) < bytes.endIndex, bytes.index(after: tour) < file,
            bytes[bytes.index(after: folder)..<tour].elementsEqual(top.utf8)
        else { return nil }
        return (String(path[..<folder]), String(path[bytes.index(after: folder)...]))
    }

    /// The row of the file at `url` under its own root, or the row of
    /// another root `reusable` took for it and `touch` has yet to adopt.
    func entry(_ url: URL) throws -> OutputEntry? {
        let place = Self.place(of: url.path)
        return try index.entries(path: place.path).first { $0.root == place.root } ?? adoptions.pending(url.path)
    }

    /// How hard `reusable` looks at the file.
    package enum Check: Sendable {
        /// Size only: for plans, which must be quick and read no audio.
        case size
        /// Size and SHA-256: for builds.
        case sizeAndHash
    }

    /// The file's measurements when the file at `url` can stand for `key`.
    package func reusable(_ url: URL, key: OutputKey, check: Check) throws -> EncodedAudio? {
        try reusable(url, key: key, check: check, captionKey: nil)?.audio
    }

    /// A file that can stand for its key, with what its row keeps of its captions.
    package struct ReusedFile: Sendable, Hashable {
        package var audio: EncodedAudio
        /// The captions kept with the file, when made under the caption key asked for.
        package var captions: StoredCaptions?
        /// With `captions`: the signature of the package's caption file as a
        /// build last found it right (`captionFile`), nil when none has.
        package var captionFileSignature: String?
    }

    /// The same, with the captions kept with the file when they were made
    /// under `captionKey`: one row read for both.
    package func reusable(_ url: URL, key: OutputKey, check: Check, captionKey: CaptionKey?) throws -> ReusedFile? {
        let path = url.path
        let place = Self.place(of: path)
        let rows = try index.entries(path: place.path)
        // This root's own row alone when it has one; else other roots' rows
        // made under this key, the most recently used first.
        let candidates =
            rows.first { $0.root == place.root }.map { [$0] }
            ?? rows.filter { $0.inputKey == key.hex }.sorted { ($0.lastUsedAt, $0.root) > ($1.lastUsedAt, $1.root) }
        guard !candidates.isEmpty else { return nil }
        let cutoff = clock().timeIntervalSince1970 - maxAgeSeconds
        // Taken once, when a row asks: a file with no row is not looked at.
        var looked = false
        var signature: FileSignature?
        var hashed = false
        var digest: String?
        for entry in candidates {
            guard entry.inputKey == key.hex, entry.createdAt >= cutoff, let audio = Self.audio(of: entry) else { continue }
            if !looked { (looked, signature) = (true, FileSignature(path: path)) }
            guard let signature else { return nil }
            guard signature.size == audio.sizeBytes else { continue }
            let adopted = entry.root != place.root
            // A plan looks at sizes only, and adopts nothing: the build hashes what it takes from another root.
            if adopted, case .size = check { return ReusedFile(audio: audio, captions: nil, captionFileSignature: nil) }
            if case .sizeAndHash = check, entry.fileSignature != signature.text {
                if !hashed { (hashed, digest) = (true, Self.sha256Hex(of: path)) }
                guard digest == audio.sha256 else { continue }
                if signature.isSettled() { signatures.note(signature.text, for: path) }
            }
            if adopted { adoptions.note(entry, for: path) }
            guard let captionKey, let captions = entry.captions, captions.key == captionKey.hex else {
                return ReusedFile(audio: audio, captions: nil, captionFileSignature: nil)
            }
            return ReusedFile(audio: audio, captions: captions, captionFileSignature: entry.captionsFileSignature)
        }
        return nil
    }

    /// A row's measurements; nil for a row recorded before loudness was
    /// measured, whose file is made again so package.json can say it.
    private static func audio(of entry: OutputEntry) -> EncodedAudio? {
        guard let format = AudioFormat(rawValue: entry.format), let gain = entry.gainDB else { return nil }
        return EncodedAudio(
            format: format, codec: entry.codec, sampleRateHz: entry.sampleRateHz, channels: entry.channels,
            bitrateKbps: entry.bitrateKbps, durationSeconds: entry.durationSeconds, sizeBytes: entry.sizeBytes, sha256: entry.sha256,
            loudness: AudioLoudness(
                integratedLUFS: entry.integratedLUFS, truePeakDBTP: entry.truePeakDBTP, gainDB: gain,
                limiterReductionDB: entry.limiterReductionDB ?? 0))
    }

    /// The lowercase hex SHA-256 of the file at `path` (`FileDigest`'s
    /// figure), read with `read(2)` through one 64 KiB buffer: a warm
    /// build checks thousands of small files, and a buffer per read cost
    /// more than the hash. Nil when the file cannot be read.
    static func sha256Hex(of path: String) -> String? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        let capacity = 1 << 16
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 16)
        defer { buffer.deallocate() }
        var hasher = SHA256()
        while true {
            let count = read(descriptor, buffer, capacity)
            if count == 0 { break }
            if count < 0 {
                if errno == EINTR { continue }
                return nil
            }
            hasher.update(bufferPointer: UnsafeRawBufferPointer(start: buffer, count: count))
        }
        return hasher.finalize().lowercaseHex
    }

    /// The captions kept with the file at `url` when they were made under
    /// `key`; nil when none were, or under another key. Asked only of a
    /// file `reusable` vouched for: they follow that file's audio.
    package func captions(_ url: URL, key: CaptionKey) throws -> StoredCaptions? {
        guard let kept = try entry(url)?.captions, kept.key == key.hex else { return nil }
        return kept
    }

    /// Whether the regular file at `path` (a package's caption file) holds
    /// exactly the bytes of `captions`, kept in the row of the audio file
    /// `audio`. Read and compared unless `lstat` says of it what it said
    /// when a build last found these bytes there (`FileSignature`, as for
    /// audio files); a file found right whose change time has settled is
    /// signed, and the signature is written by `touch(_:)` with `audio`'s
    /// last use. With no `audio` (captions just made, not kept in a row
    /// yet) the file is always read.
    package func captionFile(atPath path: String, holds captions: StoredCaptions, keptWith audio: URL?) -> Bool {
        let kept = audio.flatMap { try? entry($0) }?.captionsFileSignature
        return captionFile(atPath: path, status: FileStatus(path: path), holds: captions, signed: kept, keptWith: audio)
    }

    /// The same, for a file whose folder was just listed: `status` is what
    /// the listing found there (nil: nothing), and `kept` the signature the
    /// audio file's row keeps (`ReusedFile.captionFileSignature`). `path`
    /// is made only when the file must be read.
    package func captionFile(
        atPath path: @autoclosure () -> String, status: FileStatus?, holds captions: StoredCaptions, signed kept: String?,
        keptWith audio: URL?
    ) -> Bool {
        guard let status, let signature = FileSignature(status), signature.size == captions.bytes.count else { return false }
        if audio != nil, let kept, Self.signature(kept, is: signature, of: captions) { return true }
        guard Self.file(path(), holdsExactly: captions.bytes) else { return false }
        // The bytes' digest is part of what is kept: a signature says nothing of other captions.
        if let audio, signature.isSettled() { captionSignatures.note("\(captions.sha256) \(signature.text)", for: audio.path) }
        return true
    }

    /// Whether `kept` is `<captions' SHA-256> <signature>`, compared byte
    /// for byte without building that text.
    private static func signature(_ kept: String, is signature: FileSignature, of captions: StoredCaptions) -> Bool {
        var (kept, digest, text) = (kept, captions.sha256, signature.text)
        guard kept.utf8.count == digest.utf8.count + 1 + text.utf8.count else { return false }
        return kept.withUTF8 { kept in
            digest.withUTF8 { digest in
                text.withUTF8 { text in
                    UnsafeBufferPointer(rebasing: kept[..<digest.count]).elementsEqual(digest) && kept[digest.count] == 0x20
                        && UnsafeBufferPointer(rebasing: kept[(digest.count + 1)...]).elementsEqual(text)
                }
            }
        }
    }

    /// Whether the regular file at `path` (a symlink is not followed) holds
    /// exactly `bytes`: read with `read(2)` into one buffer, one byte more
    /// than expected so a longer file is told apart.
    static func file(_ path: String, holdsExactly bytes: [UInt8]) -> Bool {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var buffer = [UInt8](repeating: 0, count: bytes.count + 1)
        var total = 0
        while total < buffer.count {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress! + total, $0.count - total) }
            if count == 0 { break }
            if count < 0 {
                if errno == EINTR { continue }
                return false
            }
            total += count
        }
        return total == bytes.count && buffer[0..<total].elementsEqual(bytes)
    }

    /// Records files just committed at their final paths, each with the
    /// captions made with it (nil with `captions: off`).
    package func record(_ files: [(url: URL, key: OutputKey, audio: EncodedAudio, captions: StoredCaptions?)]) throws {
        guard !files.isEmpty else { return }
        let now = clock().timeIntervalSince1970
        try index.record(
            files.map { file in
                let a = file.audio
                let place = Self.place(of: file.url.path)
                return OutputEntry(
                    root: place.root, path: place.path, inputKey: file.key.hex, format: a.format.rawValue, codec: a.codec,
                    sampleRateHz: a.sampleRateHz, channels: a.channels, bitrateKbps: a.bitrateKbps, durationSeconds: a.durationSeconds,
                    sizeBytes: a.sizeBytes, sha256: a.sha256, createdAt: now, lastUsedAt: now, integratedLUFS: a.loudness?.integratedLUFS,
                    truePeakDBTP: a.loudness?.truePeakDBTP, gainDB: a.loudness?.gainDB, limiterReductionDB: a.loudness?.limiterReductionDB,
                    captions: file.captions)
            })
    }

    /// Marks reused files as just used, for the LRU order, and records the
    /// signatures `reusable` and `captionFile` took of them and their
    /// caption files, and `captions` made again for them (by file). A file
    /// `reusable` found through another root's row gets that row under its
    /// own root first; the other root's row goes when that root no longer
    /// exists (it was moved).
    package func touch(_ urls: [URL], captions: [URL: StoredCaptions] = [:]) throws {
        guard !urls.isEmpty else { return }
        let now = clock().timeIntervalSince1970
        let made = Dictionary(captions.map { ($0.key.path, $0.value) }) { first, _ in first }
        for (root, files) in Self.byRoot(urls) {
            let paths = files.map(\.absolute)
            let adopted = adoptions.take(paths)
            if !adopted.isEmpty {
                var moved: [String: [String]] = [:]
                try index.record(
                    files.compactMap { file in
                        guard var row = adopted[file.absolute] else { return nil }
                        if !FileManager.default.fileExists(atPath: row.root) { moved[row.root, default: []].append(row.path) }
                        row.root = root
                        row.lastUsedAt = now
                        return row
                    })
                for (gone, relative) in moved.sorted(by: { $0.key < $1.key }) { try index.forget(root: gone, relative) }
            }
            func relative(_ byPath: [String: String]) -> [String: String] {
                Dictionary(byPath.map { (Self.place(of: $0.key).path, $0.value) }) { first, _ in first }
            }
            try index.touch(
                root: root, files.map(\.relative), at: now, signatures: relative(signatures.take(paths)),
                captions: Dictionary(files.compactMap { file in made[file.absolute].map { (file.relative, $0) } }) { first, _ in first },
                captionSignatures: relative(captionSignatures.take(paths)))
        }
    }

    /// Forgets files that were removed.
    package func forget(_ urls: [URL]) throws {
        for (root, files) in Self.byRoot(urls) { try index.forget(root: root, files.map(\.relative)) }
    }

    /// `urls` by their root (`place(of:)`), each with its absolute and its relative path, in a stable order.
    private static func byRoot(_ urls: [URL]) -> [(root: String, files: [(absolute: String, relative: String)])] {
        var groups: [String: [(absolute: String, relative: String)]] = [:]
        for url in urls {
            let place = place(of: url.path)
            groups[place.root, default: []].append((url.path, place.path))
        }
        return groups.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }

    /// The root `url` names, as rows name it.
    private static func rootName(_ url: URL) -> String { url.standardizedFileURL.path }

    /// When each recorded file under `root` was last made or reused, by root-relative path.
    package func lastUsed(relativeTo root: URL) throws -> [String: Date] {
        var result: [String: Date] = [:]
        for row in try index.lastUsed(root: Self.rootName(root)) {
            result[row.path] = Date(timeIntervalSince1970: row.lastUsedAt)
        }
        return result
    }

    /// Forgets every file under `root` (`cache clear`).
    package func forgetAll(under root: URL) throws {
        try index.forgetAll(root: Self.rootName(root))
    }
}

/// Rows of an index read at once for some keys, answered from memory
/// until a key is written or forgotten. Shared by the threads of a build.
final class PreloadedRows<Entry: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var rows: [String: Entry]
    private var keys: Set<String>
    /// Whether a key preloaded with no row is answered "none" from memory;
    /// when false it is read again, as when another build may write it meanwhile.
    private let absenceIsAnswer: Bool

    init(rows: [String: Entry], keys: Set<String>, absenceIsAnswer: Bool) {
        self.rows = rows
        self.keys = keys
        self.absenceIsAnswer = absenceIsAnswer
    }

    /// The preloaded answer (a row, or none): nil when the key was not preloaded, has changed since, or is to be read again.
    private func answer(_ key: String) -> Entry?? {
        lock.withLock {
            guard keys.contains(key) else { return nil }
            let row = rows[key]
            return row != nil || absenceIsAnswer ? .some(row) : nil
        }
    }

    /// `key`'s row from memory, or from `read` when memory has no answer.
    func row(_ key: String, orRead read: (String) throws -> Entry?) rethrows -> Entry? {
        if let answer = answer(key) { return answer }
        return try read(key)
    }

    /// `keys`' rows: those memory answers, and the rest from one `read` of them.
    func rows(_ keys: [String], orRead read: ([String]) throws -> [String: Entry]) rethrows -> [String: Entry] {
        var found: [String: Entry] = [:]
        var asked: [String] = []
        for key in keys {
            switch answer(key) {
            case .some(.some(let row)): found[key] = row
            case .some(.none): break
            case .none: asked.append(key)
            }
        }
        return found.merging(try read(asked)) { _, read in read }
    }

    func drop(_ changed: some Sequence<String>) {
        lock.withLock {
            for key in changed {
                keys.remove(key)
                rows[key] = nil
            }
        }
    }

    func dropAll(where isChanged: (String) -> Bool) {
        lock.withLock {
            keys = keys.filter { !isChanged($0) }
            rows = rows.filter { !isChanged($0.key) }
        }
    }
}

/// An index whose rows for some relative paths were read at once
/// (`OutputCache.preloading`): those are answered from memory until the
/// path is written or forgotten.
struct PreloadedOutputIndex: OutputIndex {
    let base: any OutputIndex
    private let preloaded: PreloadedRows<[OutputEntry]>
    var location: StateLocation { base.location }

    init(_ base: any OutputIndex, rows: [String: [OutputEntry]], paths: Set<String>) {
        self.base = base
        // Only this build writes the output root (its lock): a path with no
        // row has none. Another root's build may add one meanwhile, which
        // this build would only have adopted.
        preloaded = PreloadedRows(rows: rows, keys: paths, absenceIsAnswer: true)
    }

    func entries(path: String) throws -> [OutputEntry] {
        try preloaded.row(path) { try base.entries(path: $0).nilIfEmpty } ?? []
    }

    func entries(paths: [String]) throws -> [String: [OutputEntry]] {
        try preloaded.rows(paths) { try base.entries(paths: $0) }
    }

    func record(_ entries: [OutputEntry]) throws {
        preloaded.drop(entries.map(\.path))
        try base.record(entries)
    }

    func touch(
        root: String, _ paths: [String], at time: Double, signatures: [String: String], captions: [String: StoredCaptions],
        captionSignatures: [String: String]
    ) throws {
        preloaded.drop(signatures.keys)
        preloaded.drop(captions.keys)
        preloaded.drop(captionSignatures.keys)
        try base.touch(
            root: root, paths, at: time, signatures: signatures, captions: captions, captionSignatures: captionSignatures)
    }

    func forget(root: String, _ paths: [String]) throws {
        preloaded.drop(paths)
        try base.forget(root: root, paths)
    }

    func lastUsed(root: String) throws -> [(path: String, lastUsedAt: Double)] {
        try base.lastUsed(root: root)
    }

    func forgetAll(root: String) throws {
        preloaded.dropAll { _ in true }
        try base.forgetAll(root: root)
    }
}

extension Array {
    /// Nil for an empty array, so a lookup that found no row reads as none.
    fileprivate var nilIfEmpty: Self? { isEmpty ? nil : self }
}

/// What `lstat` says of a file that any write to it changes: its device and
/// inode, its size, and its modification and change times to the
/// nanosecond. Nothing but the kernel sets a change time, so a file with the
/// signature it had when its SHA-256 was found right still has those bytes
/// (git's index and rsync's quick check trust the same), unless it was
/// written within the same tick of the kernel's clock as that signature's
/// change time: a signature is kept only once its change time is
/// `settleSeconds` old (git's "racy" files), and a file on a disk that
/// flips bits without a write is `tourpack validate`'s to find.
struct FileSignature: Sendable, Hashable {
    var size: Int64
    var changedAt: Double
    var text: String

    /// How old a change time must be, against this machine's clock, before
    /// its signature is kept: far above the kernel's tick and a network file
    /// system's clock skew.
    static let settleSeconds = 2.0

    /// The signature of the regular file at `path`, not following a final
    /// symbolic link; nil when there is none.
    init?(path: String) {
        guard let status = FileStatus(path: path) else { return nil }
        self.init(status)
    }

    /// The signature of a regular file listed with `status`; nil for anything else.
    init?(_ status: FileStatus) {
        guard status.kind == .file else { return nil }
        size = status.size
        changedAt = Double(status.changedSeconds) + Double(status.changedNanoseconds) / 1e9
        // `device:inode:size:mtime:ctime`, each time as `seconds.nanoseconds`
        // (nanoseconds not padded), written digit by digit: thousands are
        // taken by every warm rebuild.
        var bytes: [UInt8] = []
        bytes.reserveCapacity(96)
        Self.append(status.device, to: &bytes)
        bytes.append(0x3A)
        Self.append(status.inode, to: &bytes)
        bytes.append(0x3A)
        Self.append(Int64(status.size), to: &bytes)
        bytes.append(0x3A)
        Self.append(Int64(status.modifiedSeconds), to: &bytes)
        bytes.append(0x2E)
        Self.append(Int64(status.modifiedNanoseconds), to: &bytes)
        bytes.append(0x3A)
        Self.append(Int64(status.changedSeconds), to: &bytes)
        bytes.append(0x2E)
        Self.append(Int64(status.changedNanoseconds), to: &bytes)
        text = String(decoding: bytes, as: UTF8.self)
    }

    /// `value` in decimal, as `String(value)` writes it.
    private static func append(_ value: UInt64, to bytes: inout [UInt8]) {
        if value >= 10 { append(value / 10, to: &bytes) }
        bytes.append(0x30 + UInt8(value % 10))
    }

    private static func append(_ value: Int64, to bytes: inout [UInt8]) {
        if value < 0 { bytes.append(0x2D) }
        append(value.magnitude, to: &bytes)
    }

    /// Whether the file last changed at least `settleSeconds` ago.
    func isSettled(now: Double = Date().timeIntervalSince1970) -> Bool {
        now - changedAt >= Self.settleSeconds
    }
}

/// Signatures `OutputCache.reusable` took of files it found right, until
/// `OutputCache.touch` records them with their last use. Shared by the
/// threads of a build.
final class PendingSignatures: @unchecked Sendable {
    private let lock = NSLock()
    private var byPath: [String: String] = [:]

    func note(_ signature: String, for path: String) {
        lock.withLock { byPath[path] = signature }
    }

    /// The signatures of `paths` noted so far, forgotten here.
    func take(_ paths: [String]) -> [String: String] {
        lock.withLock {
            guard !byPath.isEmpty else { return [:] }
            var taken: [String: String] = [:]
            for path in paths { taken[path] = byPath.removeValue(forKey: path) }
            return taken
        }
    }
}

/// Rows of other roots that `OutputCache.reusable` took for files of this
/// one, by the file's absolute path, until `OutputCache.touch` adopts them.
/// Shared by the threads of a build.
final class PendingAdoptions: @unchecked Sendable {
    private let lock = NSLock()
    private var byPath: [String: OutputEntry] = [:]

    func note(_ entry: OutputEntry, for path: String) {
        lock.withLock { byPath[path] = entry }
    }

    /// The row noted for `path`, left in place.
    func pending(_ path: String) -> OutputEntry? {
        lock.withLock { byPath[path] }
    }

    /// The rows noted for `paths`, forgotten here.
    func take(_ paths: [String]) -> [String: OutputEntry] {
        lock.withLock {
            guard !byPath.isEmpty else { return [:] }
            var taken: [String: OutputEntry] = [:]
            for path in paths { taken[path] = byPath.removeValue(forKey: path) }
            return taken
        }
    }
}

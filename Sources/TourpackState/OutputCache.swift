public import Foundation
public import TourpackAudio
import TourpackCore

/// What each AudioCache file was made from, so a build can keep a file
/// instead of making it again: one row per file (by absolute path) with its
/// `OutputKey`, its measurements as package.json lists them, and its size
/// and SHA-256.
///
/// A file is reused only when its key is unchanged, it is younger than
/// `audioMaxAgeDays`, and the file on disk still has the recorded size and
/// SHA-256: a tampered or truncated file is made again, never trusted. Rows
/// are written only after a tour's files are committed, so a row never
/// describes a file that is not at its path (a crash in between leaves a file
/// without a row, which is simply made again).
///
/// The rows live in the state's backend (`OutputIndex`).
///
/// All of it blocks; call it from a thread pool.
public struct OutputCache: Sendable {
    public let index: any OutputIndex
    public let maxAgeSeconds: TimeInterval
    public let clock: @Sendable () -> Date

    public init(index: any OutputIndex, maxAgeDays: Int, clock: @escaping @Sendable () -> Date) {
        self.index = index
        self.maxAgeSeconds = Double(maxAgeDays) * 86_400
        self.clock = clock
    }

    /// The cache indexed in a SQLite state database.
    public init(database: StateDatabase, maxAgeDays: Int, clock: @escaping @Sendable () -> Date) {
        self.init(index: database.outputIndex, maxAgeDays: maxAgeDays, clock: clock)
    }

    /// How hard `reusable` looks at the file.
    public enum Check: Sendable {
        /// Size only: for plans, which must be quick and read no audio.
        case size
        /// Size and SHA-256: for builds.
        case sizeAndHash
    }

    /// The file's measurements when the file at `url` can stand for `key`.
    public func reusable(_ url: URL, key: OutputKey, check: Check) throws -> EncodedAudio? {
        let cutoff = clock().timeIntervalSince1970 - maxAgeSeconds
        guard let entry = try index.entry(path: url.path), entry.inputKey == key.hex, entry.createdAt >= cutoff,
            let format = AudioFormat(rawValue: entry.format)
        else { return nil }
        let audio = EncodedAudio(
            format: format, codec: entry.codec, sampleRateHz: entry.sampleRateHz, channels: entry.channels,
            bitrateKbps: entry.bitrateKbps, durationSeconds: entry.durationSeconds, sizeBytes: entry.sizeBytes,
            sha256: entry.sha256,
            loudness: entry.gainDB.map { gain in
                AudioLoudness(
                    integratedLUFS: entry.integratedLUFS, truePeakDBTP: entry.truePeakDBTP, gainDB: gain,
                    limiterReductionDB: entry.limiterReductionDB ?? 0)
            })
        // A file recorded before loudness was measured is made again, so package.json can say it.
        guard audio.loudness != nil else { return nil }
        guard SynthesisCache.fileSize(url) == audio.sizeBytes else { return nil }
        if case .sizeAndHash = check {
            guard let digest = try? FileDigest.sha256(of: url), digest.hex == audio.sha256 else { return nil }
        }
        return audio
    }

    /// Records files just committed at their final paths.
    public func record(_ files: [(url: URL, key: OutputKey, audio: EncodedAudio)]) throws {
        guard !files.isEmpty else { return }
        let now = clock().timeIntervalSince1970
        try index.record(
            files.map { file in
                let a = file.audio
                return OutputEntry(
                    path: file.url.path, inputKey: file.key.hex, format: a.format.rawValue, codec: a.codec, sampleRateHz: a.sampleRateHz,
                    channels: a.channels, bitrateKbps: a.bitrateKbps, durationSeconds: a.durationSeconds, sizeBytes: a.sizeBytes,
                    sha256: a.sha256, createdAt: now, lastUsedAt: now, integratedLUFS: a.loudness?.integratedLUFS,
                    truePeakDBTP: a.loudness?.truePeakDBTP, gainDB: a.loudness?.gainDB, limiterReductionDB: a.loudness?.limiterReductionDB)
            })
    }

    /// Marks reused files as just used, for the LRU order.
    public func touch(_ urls: [URL]) throws {
        guard !urls.isEmpty else { return }
        try index.touch(urls.map(\.path), at: clock().timeIntervalSince1970)
    }

    /// Forgets files that were removed.
    public func forget(_ urls: [URL]) throws {
        guard !urls.isEmpty else { return }
        try index.forget(urls.map(\.path))
    }

    /// When each recorded file under `root` was last made or reused, by root-relative path.
    public func lastUsed(relativeTo root: URL) throws -> [String: Date] {
        let prefix = root.standardizedFileURL.path + "/"
        var result: [String: Date] = [:]
        for row in try index.lastUsed(under: prefix) {
            result[String(row.path.dropFirst(prefix.count))] = Date(timeIntervalSince1970: row.lastUsedAt)
        }
        return result
    }

    /// Forgets every file under `root` (`cache clear`).
    public func forgetAll(under root: URL) throws {
        try index.forgetAll(under: root.standardizedFileURL.path + "/")
    }
}

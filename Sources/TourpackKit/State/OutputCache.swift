public import Foundation
import GRDB

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
/// All of it blocks; call it from a thread pool.
public struct OutputCache: Sendable {
    public let database: StateDatabase
    public let maxAgeSeconds: TimeInterval
    public let clock: @Sendable () -> Date

    public init(database: StateDatabase, maxAgeDays: Int, clock: @escaping @Sendable () -> Date) {
        self.database = database
        self.maxAgeSeconds = Double(maxAgeDays) * 86_400
        self.clock = clock
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
        let row = try database.read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM outputFile WHERE path = ?", arguments: [url.path])
        }
        guard let row, (row["inputKey"] as String) == key.hex, (row["createdAt"] as Double) >= cutoff,
              let format = AudioFormat(rawValue: row["format"])
        else { return nil }
        let audio = EncodedAudio(
            format: format, codec: row["codec"], sampleRateHz: row["sampleRateHz"], channels: row["channels"],
            bitrateKbps: row["bitrateKbps"], durationSeconds: row["durationSeconds"], sizeBytes: row["sizeBytes"],
            sha256: row["sha256"],
            loudness: (row["gainDB"] as Double?).map { gain in
                AudioLoudness(
                    integratedLUFS: row["integratedLUFS"], truePeakDBTP: row["truePeakDBTP"], gainDB: gain,
                    limiterReductionDB: row["limiterReductionDB"] ?? 0)
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
        try database.write { db in
            for file in files {
                let a = file.audio
                try db.execute(
                    sql: """
                        INSERT OR REPLACE INTO outputFile (path, inputKey, format, codec, sampleRateHz, channels, bitrateKbps,
                            durationSeconds, sizeBytes, sha256, createdAt, lastUsedAt,
                            integratedLUFS, truePeakDBTP, gainDB, limiterReductionDB)
                        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                        """,
                    arguments: [
                        file.url.path, file.key.hex, a.format.rawValue, a.codec, a.sampleRateHz, a.channels, a.bitrateKbps,
                        a.durationSeconds, a.sizeBytes, a.sha256, now, now,
                        a.loudness?.integratedLUFS, a.loudness?.truePeakDBTP, a.loudness?.gainDB, a.loudness?.limiterReductionDB,
                    ])
            }
        }
    }

    /// Marks reused files as just used, for the LRU order.
    public func touch(_ urls: [URL]) throws {
        guard !urls.isEmpty else { return }
        let now = clock().timeIntervalSince1970
        try database.write { db in
            for url in urls {
                try db.execute(sql: "UPDATE outputFile SET lastUsedAt = ? WHERE path = ?", arguments: [now, url.path])
            }
        }
    }

    /// Forgets files that were removed.
    public func forget(_ urls: [URL]) throws {
        guard !urls.isEmpty else { return }
        try database.write { db in
            for url in urls { try db.execute(sql: "DELETE FROM outputFile WHERE path = ?", arguments: [url.path]) }
        }
    }

    /// When each recorded file under `root` was last made or reused, by root-relative path.
    public func lastUsed(relativeTo root: URL) throws -> [String: Date] {
        let prefix = root.standardizedFileURL.path + "/"
        return try database.read { db in
            var result: [String: Date] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT path, lastUsedAt FROM outputFile") {
                let path: String = row["path"]
                if path.hasPrefix(prefix) { result[String(path.dropFirst(prefix.count))] = Date(timeIntervalSince1970: row["lastUsedAt"]) }
            }
            return result
        }
    }

    /// Forgets every file under `root` (`cache clear`).
    public func forgetAll(under root: URL) throws {
        let prefix = root.standardizedFileURL.path + "/"
        try database.write { db in
            let paths = try String.fetchAll(db, sql: "SELECT path FROM outputFile").filter { $0.hasPrefix(prefix) }
            for path in paths { try db.execute(sql: "DELETE FROM outputFile WHERE path = ?", arguments: [path]) }
        }
    }
}

package import Foundation
package import TourpackCore

/// Tags written into each file: ID3v2 for MP3, iTunes tags for M4A, OpusTags for Opus.
package struct AudioMetadata: Sendable, Hashable {
    /// The POI name and the phase, e.g. `Kaiser-Franz-Josefs-Höhe – Detailed`.
    package var title: String
    /// The tour name.
    package var album: String
    /// BCP-47 language, e.g. `en-US`.
    package var language: String

    package init(title: String, album: String, language: String) {
        self.title = title
        self.album = album
        self.language = language
    }
}

/// What the encoder made, measured from the file it wrote.
package struct EncodedAudio: Sendable, Hashable {
    package var format: AudioFormat
    package var codec: String
    package var sampleRateHz: Int
    package var channels: Int
    package var bitrateKbps: Int
    package var durationSeconds: Double
    package var sizeBytes: Int64
    /// Lowercase hex SHA-256 of the file's bytes.
    package var sha256: String
    /// Measured on the file as written, and how it was levelled; nil when not measured.
    package var loudness: AudioLoudness?

    package init(
        format: AudioFormat, codec: String, sampleRateHz: Int, channels: Int, bitrateKbps: Int, durationSeconds: Double, sizeBytes: Int64,
        sha256: String,
        loudness: AudioLoudness? = nil
    ) {
        self.format = format
        self.codec = codec
        self.sampleRateHz = sampleRateHz
        self.channels = channels
        self.bitrateKbps = bitrateKbps
        self.durationSeconds = durationSeconds
        self.sizeBytes = sizeBytes
        self.sha256 = sha256
        self.loudness = loudness
    }
}

/// One file an encode session writes: its format, the sample and bit rates
/// it is encoded at, and the temporary URL it goes to.
package struct EncodeTarget: Sendable, Hashable {
    package var format: AudioFormat
    package var sampleRateHz: Int
    /// The nominal rate the encoder aims at: the contract's, or a quality ladder's.
    package var bitrateKbps: Int
    package var url: URL

    package init(format: AudioFormat, sampleRateHz: Int, bitrateKbps: Int? = nil, url: URL) {
        self.format = format
        self.sampleRateHz = sampleRateHz
        self.bitrateKbps = bitrateKbps ?? format.bitrateKbps
        self.url = url
    }
}

/// The encode stage: one stream of joined PCM in, one finished file per
/// target out, every format fed from the same blocks.
///
/// The encoder writes to the targets' temporary URLs only; the store stage
/// fsyncs and renames them to their final paths. The default is
/// `FFmpegAudioEncoder`.
package protocol AudioEncoding: Sendable {
    /// Opens one file per target for PCM at `inputRate`.
    func open(_ targets: [EncodeTarget], inputRate: Int, metadata: AudioMetadata) throws -> any AudioEncodeSession
    /// Names the encoder's settings and library versions. It is part of each
    /// output file's cache key, so a change to either makes the files again.
    var fingerprint: String { get }
}

/// The files of one phase while its PCM streams in. Blocking: run it on a
/// thread pool, one caller at a time (it may move between threads).
package protocol AudioEncodeSession: AnyObject {
    /// Encodes the next samples into every file.
    func write(_ samples: UnsafeBufferPointer<Int16>) throws
    /// Flushes and closes every file, and measures what was written.
    /// Throws `PCMJoiner.JoinError.empty` when no sample was written.
    func finish() throws -> [AudioFormat: EncodedAudio]
    /// Removes every file; for a session that will not be finished.
    func discard()
    /// Samples written so far, at the input's rate.
    var samplesWritten: Int { get }
}

extension AudioEncoding {
    package var fingerprint: String { String(describing: Self.self) }
}

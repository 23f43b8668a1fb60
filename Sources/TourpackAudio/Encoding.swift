public import Foundation
public import TourpackCore

/// Tags written into each file: ID3v2 for MP3, iTunes tags for M4A, OpusTags for Opus.
public struct AudioMetadata: Sendable, Hashable {
    /// The POI name and the phase, e.g. `Kaiser-Franz-Josefs-Höhe – Detailed`.
    public var title: String
    /// The tour name.
    public var album: String
    /// BCP-47 language, e.g. `en-US`.
    public var language: String

    public init(title: String, album: String, language: String) {
        self.title = title
        self.album = album
        self.language = language
    }
}

/// What the encoder made, measured from the file it wrote.
public struct EncodedAudio: Sendable, Hashable {
    public var format: AudioFormat
    public var codec: String
    public var sampleRateHz: Int
    public var channels: Int
    public var bitrateKbps: Int
    public var durationSeconds: Double
    public var sizeBytes: Int64
    /// Lowercase hex SHA-256 of the file's bytes.
    public var sha256: String
    /// Measured on the file as written, and how it was levelled; nil when not measured.
    public var loudness: AudioLoudness?

    public init(
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
public struct EncodeTarget: Sendable, Hashable {
    public var format: AudioFormat
    public var sampleRateHz: Int
    /// The nominal rate the encoder aims at: the contract's, or a quality ladder's.
    public var bitrateKbps: Int
    public var url: URL

    public init(format: AudioFormat, sampleRateHz: Int, bitrateKbps: Int? = nil, url: URL) {
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
public protocol AudioEncoding: Sendable {
    /// Opens one file per target for PCM at `inputRate`.
    func open(_ targets: [EncodeTarget], inputRate: Int, metadata: AudioMetadata) throws -> any AudioEncodeSession
    /// Names the encoder's settings and library versions. It is part of each
    /// output file's cache key, so a change to either makes the files again.
    var fingerprint: String { get }
}

/// The files of one phase while its PCM streams in. Blocking: run it on a
/// thread pool, one caller at a time (it may move between threads).
public protocol AudioEncodeSession: AnyObject {
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
    public var fingerprint: String { String(describing: Self.self) }
}

public import Foundation

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

    public init(format: AudioFormat, codec: String, sampleRateHz: Int, channels: Int, bitrateKbps: Int, durationSeconds: Double, sizeBytes: Int64, sha256: String) {
        self.format = format
        self.codec = codec
        self.sampleRateHz = sampleRateHz
        self.channels = channels
        self.bitrateKbps = bitrateKbps
        self.durationSeconds = durationSeconds
        self.sizeBytes = sizeBytes
        self.sha256 = sha256
    }
}

/// The encode stage: joined PCM in, one finished file out.
///
/// The encoder writes to `temporaryURL` only; the store stage fsyncs and
/// renames it to its final path. The default is `FFmpegAudioEncoder`.
public protocol AudioEncoding: Sendable {
    func encode(_ pcm: PCMAudio, as format: AudioFormat, metadata: AudioMetadata, to temporaryURL: URL) throws -> EncodedAudio
    /// Names the encoder's settings and library versions. It is part of each
    /// output file's cache key, so a change to either makes the files again.
    var fingerprint: String { get }
}

extension AudioEncoding {
    public var fingerprint: String { String(describing: Self.self) }
}

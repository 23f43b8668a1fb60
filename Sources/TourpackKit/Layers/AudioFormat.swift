/// The three output formats of SPEC.md's table. Every property here is part
/// of the app contract: extension, codec, bitrate and sample rate.
public enum AudioFormat: String, Sendable, Hashable, CaseIterable, Codable, Comparable {
    case aac
    case mp3
    case opus

    public var fileExtension: String {
        switch self {
        case .aac: return "m4a"
        case .mp3: return "mp3"
        case .opus: return "opus"
        }
    }

    /// The codec name as FFmpeg and ffprobe report it.
    public var codecName: String {
        switch self {
        case .aac: return "aac"
        case .mp3: return "mp3"
        case .opus: return "opus"
        }
    }

    public var bitrateKbps: Int {
        switch self {
        case .aac: return 128
        case .mp3: return 192
        case .opus: return 96
        }
    }

    public var sampleRateHz: Int {
        switch self {
        case .aac, .mp3: return 44_100
        case .opus: return 48_000
        }
    }

    public var channels: Int { 1 }

    public static func < (lhs: AudioFormat, rhs: AudioFormat) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }
}

/// The three output formats of the contract's table. Every property here is part
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

    /// The rates this format may be encoded at. AAC takes the MPEG-4
    /// rates (up to 48 kHz), Opus its five, and MP3 only MPEG-1's, because
    /// MPEG-2 Layer III stops at 160 kbps and the contract says 192.
    public var sampleRates: [Int] {
        switch self {
        case .aac: return [8_000, 11_025, 12_000, 16_000, 22_050, 24_000, 32_000, 44_100, 48_000]
        case .mp3: return [32_000, 44_100, 48_000]
        case .opus: return [8_000, 12_000, 16_000, 24_000, 48_000]
        }
    }

    /// The rate a file is encoded at when the pipeline names none (the contract's
    /// table): AAC and Opus at the endpoint's rate, since speech from a TTS
    /// endpoint holds nothing above half of it and upsampling would only
    /// double the encoder's work; MP3 at 44.1 kHz. A rate the format cannot
    /// take becomes the lowest it can that is higher (22 kHz → 24 kHz for
    /// Opus), so nothing the endpoint sent is lost.
    public func defaultSampleRate(endpointRate: Int) -> Int {
        switch self {
        case .mp3: return 44_100
        case .aac, .opus: return sampleRates.first { $0 >= endpointRate } ?? sampleRates.last!
        }
    }

    public var channels: Int { 1 }

    public static func < (lhs: AudioFormat, rhs: AudioFormat) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }
}

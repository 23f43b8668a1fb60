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

extension AudioFormat {
    /// MPEG-1 Layer III's bit rates (ISO/IEC 11172-3), the only ones an MP3
    /// at 32, 44.1 or 48 kHz can carry.
    public static let mp3Bitrates = [32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320]

    /// Opus's range (RFC 6716: 6 to 510 kbit/s).
    public static let opusBitrates = 6...510

    /// Why this format cannot be encoded at `kbps` at `sampleRateHz`, or nil
    /// when it can:
    /// - MP3: one of MPEG-1 Layer III's fourteen rates;
    /// - AAC-LC: 8 kbps up to the decoder buffer's limit of 6,144 bits per
    ///   1,024-sample frame of one channel, which is 6 × the sample rate
    ///   (144 kbps at 24 kHz, 288 kbps at 48 kHz);
    /// - Opus: 6 to 510 kbps.
    public func bitrateProblem(_ kbps: Int, sampleRateHz: Int) -> String? {
        switch self {
        case .mp3:
            guard Self.mp3Bitrates.contains(kbps) else {
                return "mp3 cannot be \(kbps) kbps; MPEG-1 Layer III takes \(Self.mp3Bitrates.map(String.init).joined(separator: ", "))"
            }
        case .aac:
            let most = 6 * sampleRateHz / 1000
            guard (8...most).contains(kbps) else {
                return
                    "aac at \(sampleRateHz) Hz takes 8 to \(most) kbps (AAC-LC carries at most 6,144 bits per frame of one channel), not \(kbps)"
            }
        case .opus:
            guard Self.opusBitrates.contains(kbps) else {
                return "opus takes \(Self.opusBitrates.lowerBound) to \(Self.opusBitrates.upperBound) kbps, not \(kbps)"
            }
        }
        return nil
    }
}

/// The quality a package is offered under, as the app's download screen
/// names its options. A format at the contract's rate is `high` unless the
/// pipeline says otherwise.
public enum AudioQuality: String, Sendable, Hashable, CaseIterable, Codable, Comparable {
    case high
    case medium
    case low

    public static func < (lhs: AudioQuality, rhs: AudioQuality) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }
}

/// One entry of the pipeline's `formats`: a format, the bit rate it is
/// encoded at, and the quality its packages are offered under. `aac` alone
/// is AAC at the contract's 128 kbps, `high`; `{format: opus,
/// bitrateKbps: 32, quality: low}` is a rung of a quality ladder.
public struct AudioVariant: Sendable, Hashable, CustomStringConvertible {
    public var format: AudioFormat
    public var bitrateKbps: Int
    public var quality: AudioQuality

    public init(_ format: AudioFormat, bitrateKbps: Int? = nil, quality: AudioQuality = .high) {
        self.format = format
        self.bitrateKbps = bitrateKbps ?? format.bitrateKbps
        self.quality = quality
    }

    /// Whether this is the format at the contract's rate: its packages keep
    /// the package ID they always had.
    public var isContractRate: Bool { bitrateKbps == format.bitrateKbps }

    public var description: String { "\(format.rawValue) \(bitrateKbps) kbps (\(quality.rawValue))" }
}

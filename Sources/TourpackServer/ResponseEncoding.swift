import Foundation
import NIOPosix
import TourpackAudio

/// An audio encoding a client can ask serve-tts for, by Google's
/// `audioConfig.audioEncoding` or OpenAI's `response_format`, and how it is
/// made from the voice's PCM: by hand for the uncompressed ones, with
/// TourpackAudio's in-process FFmpeg encoder (`ClipEncoder`) for the rest.
/// Never the ffmpeg command line.
///
///     Google      OpenAI  what comes back
///     LINEAR16    wav     WAV (44-byte header, format code 1) + s16le
///     PCM         pcm     s16le, no header
///     MP3         mp3     MPEG Layer III, CBR (Google 32 kbps, OpenAI 64 kbps)
///     OGG_OPUS    opus    Ogg Opus (RFC 7845), 32 kbps
///     MULAW       —       WAV, format code 7: 8-bit G.711 µ-law
///     ALAW        —       WAV, format code 6: 8-bit G.711 A-law
///     M4A         —       AAC-LC in MP4 (moov first), 64 kbps
///     —           aac     AAC-LC in ADTS frames, 64 kbps
///     —           flac    native FLAC
enum ResponseEncoding: Sendable, Hashable {
    case wav
    case pcm
    case mp3(kbps: Int)
    case oggOpus
    case mulawWAV
    case alawWAV
    case aacMP4
    case aacADTS
    case flac

    /// Google's `AudioEncoding` names this server speaks, in the enum's order.
    static let googleNames = ["LINEAR16", "MP3", "OGG_OPUS", "MULAW", "ALAW", "PCM", "M4A"]
    /// OpenAI's `response_format` values.
    static let openAINames = ["mp3", "opus", "aac", "flac", "wav", "pcm"]

    /// Google's `audioEncoding`; nil for `AUDIO_ENCODING_UNSPECIFIED` (or
    /// absent) and anything Google does not offer.
    init?(google name: String) {
        switch name {
        case "LINEAR16": self = .wav
        case "PCM": self = .pcm
        case "MP3": self = .mp3(kbps: 32)  // Google documents its MP3 as 32 kbps
        case "OGG_OPUS": self = .oggOpus
        case "MULAW": self = .mulawWAV
        case "ALAW": self = .alawWAV
        case "M4A": self = .aacMP4
        default: return nil
        }
    }

    /// OpenAI's `response_format`; nil for anything OpenAI does not offer.
    init?(openAI name: String) {
        switch name {
        case "mp3": self = .mp3(kbps: 64)
        case "opus": self = .oggOpus
        case "aac": self = .aacADTS
        case "flac": self = .flac
        case "wav": self = .wav
        case "pcm": self = .pcm
        default: return nil
        }
    }

    /// How FFmpeg makes it; nil for the encodings written by hand.
    var recipe: ClipRecipe? {
        switch self {
        case .wav, .pcm: nil
        // libmp3lame with a bit rate and no quality setting is CBR; the Xing/Info header carries the delay.
        case .mp3(let kbps): ClipRecipe(encoder: "libmp3lame", muxer: "mp3", bitRate: kbps * 1000, muxerOptions: ["write_xing": "1"])
        case .oggOpus: ClipRecipe(encoder: "libopus", muxer: "ogg", bitRate: 32_000, codecOptions: ["application": "voip"])
        // bitexact keeps the header to RIFF, fmt, fact and data (no LIST/ISFT naming the muxer).
        case .mulawWAV: ClipRecipe(encoder: "pcm_mulaw", muxer: "wav", muxerOptions: ["fflags": "+bitexact"])
        case .alawWAV: ClipRecipe(encoder: "pcm_alaw", muxer: "wav", muxerOptions: ["fflags": "+bitexact"])
        case .aacMP4: ClipRecipe(encoder: "aac", muxer: "ipod", bitRate: 64_000, muxerOptions: ["movflags": "+faststart"])
        case .aacADTS: ClipRecipe(encoder: "aac", muxer: "adts", bitRate: 64_000)
        case .flac: ClipRecipe(encoder: "flac", muxer: "flac")
        }
    }

    /// The sample rates this encoding can carry, as its encoder lists them;
    /// nil when any rate in Google's 8000...48000 will do.
    var sampleRates: [Int]? {
        recipe.flatMap { ClipEncoder.sampleRates(of: $0.encoder) }
    }

    /// The Content-Type of an OpenAI answer, as OpenAI labels each format.
    var contentType: String {
        switch self {
        case .wav, .mulawWAV, .alawWAV: "audio/wav"
        case .pcm: "audio/pcm"
        case .mp3: "audio/mpeg"
        case .oggOpus: "audio/opus"
        case .aacADTS: "audio/aac"
        case .aacMP4: "audio/mp4"
        case .flac: "audio/flac"
        }
    }

    /// The file's bytes. Blocking FFmpeg work: call `encode(_:)`, which runs it on a thread pool.
    func encodeBlocking(_ pcm: PCMAudio) throws -> [UInt8] {
        switch self {
        case .wav: return WAV.encode(pcm)
        case .pcm: return pcm.samples.withUnsafeBytes { Array($0) }
        default:
            guard let recipe else { preconditionFailure("every compressed encoding has a recipe") }
            return Array(try ClipEncoder.encode(pcm, as: recipe))
        }
    }

    /// The file's bytes, made off the cooperative pool and the event loops.
    func encode(_ pcm: PCMAudio) async throws -> [UInt8] {
        switch self {
        case .wav, .pcm: return try encodeBlocking(pcm)  // a copy, no C work
        default: return try await ServerThreads.pool.runIfActive { try encodeBlocking(pcm) }
        }
    }
}

import Crypto
import Foundation
package import TourpackAudio
package import TourpackCore

/// The content address of one synthesized chunk: a SHA-256 of the text sent
/// (and whether it is SSML) and everything about the voice that changes the
/// sound: provider, name, languageCode, speakingRate, pitch and the LINEAR16
/// sample rate, and Polly's engine, ElevenLabs' model and voice settings. Not the tier or the endpoint: the same voice speaks the same
/// words alike wherever it is reached, and the tier is only its price.
package struct SynthesisKey: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// 64 lowercase hex digits.
    package let hex: String

    package init(chunk: Chunk, voice: VoicePreset, sampleRateHz: Int) {
        // One field per line, each field's length first, so no two inputs
        // can run together into the same bytes.
        var fields = [
            "tourpack synthesis v1", voice.provider, voice.name, voice.languageCode, voice.speakingRate.compactText,
            voice.pitch.compactText, String(sampleRateHz), chunk.isSSML ? "ssml" : "text", chunk.text,
        ]
        // What else changes the sound, for the providers that have it: Polly's
        // engine, ElevenLabs' model and voice settings. Absent for the other
        // voices, whose keys stay what they were.
        if voice.provider == "polly" || voice.engine != nil { fields.append("engine=\(voice.pollyEngine)") }
        if let model = voice.modelId { fields.append("model=\(model)") }
        if let settings = voice.voiceSettings {
            let parts = [settings.stability, settings.similarityBoost, settings.style].map { $0?.compactText ?? "-" }
            fields.append("settings=\(parts.joined(separator: ","))," + (settings.useSpeakerBoost.map { "\($0)" } ?? "-"))
        }
        hex = CacheDigest.of(fields)
    }

    /// A key made before, from its hex digits (a kept plan's).
    package init(hex: String) { self.hex = hex }

    package var description: String { hex }
    package static func < (lhs: Self, rhs: Self) -> Bool { lhs.hex < rhs.hex }
}

/// The key of one AudioCache file's inputs: the chunk keys in order, the
/// format, the encoder's fingerprint (settings and library versions), the
/// sample rate and bit rate it encodes at, the pause between chunks, the loudness target (and
/// the leveler's revision), and the tags written into the file. When it is unchanged, the file a build made before is what it
/// would make again.
package struct OutputKey: Sendable, Hashable, CustomStringConvertible {
    package let hex: String

    package init(
        chunks: [SynthesisKey], format: AudioFormat, encoder: String, sampleRateHz: Int, bitrateKbps: Int? = nil, pauseMilliseconds: Int,
        loudness: LoudnessTarget?, metadata: AudioMetadata
    ) {
        // A ladder's rate is named; the contract's rate is not, so the keys
        // of files made before the ladder existed still match.
        let rate = bitrateKbps.flatMap { $0 == format.bitrateKbps ? nil : " bitrate \($0)" } ?? ""
        let fields =
            [
                "tourpack output v1", format.rawValue, "\(encoder) rate \(sampleRateHz)\(rate)", String(pauseMilliseconds),
                loudness?.fingerprint ?? "loudness off",
                metadata.title, metadata.album, metadata.language,
            ] + chunks.map(\.hex)
        hex = CacheDigest.of(fields)
    }

    init(hex: String) { self.hex = hex }

    package var description: String { hex }
}

/// The key of one narration's captions besides the audio they follow:
/// the narration as written (the cues' text), its chunks' keys in order
/// (what was spoken, by which voice, at which rate, and so each chunk's
/// shape), and the join (pause, fades, quiet kept at seams), which places
/// every chunk in the file. With the same audio file and the same key, a
/// build would make the same WebVTT bytes again.
///
/// `revision` names the way captions are laid out, timed and written
/// (`CaptionScript`, `CaptionTimer`, `WebVTT`): a change to any of them
/// that changes a byte of a caption file must change it, or files made
/// before would be kept.
package struct CaptionKey: Sendable, Hashable, CustomStringConvertible {
    package static let revision = "tourpack captions v1"

    package let hex: String

    package init(narration: Narration, chunks: [SynthesisKey], joiner: PCMJoiner) {
        let fields =
            [
                Self.revision, narration.isSSML ? "ssml" : "text", narration.text,
                "pause \(joiner.pauseMilliseconds) fade \(joiner.fadeMilliseconds) quiet \(joiner.keepQuietMilliseconds)",
            ] + chunks.map(\.hex)
        hex = CacheDigest.of(fields)
    }

    package var description: String { hex }
}

enum CacheDigest {
    /// SHA-256 of each field as `<UTF-8 length>:<field>\n`, in order. The
    /// fields are framed into one buffer and hashed at once: the same
    /// digest as hashing them piece by piece, without a buffer per piece.
    static func of(_ fields: [String]) -> String {
        var framed: [UInt8] = []
        framed.reserveCapacity(fields.reduce(0) { $0 + $1.utf8.count + 8 })
        for field in fields {
            framed.append(contentsOf: String(field.utf8.count).utf8)
            framed.append(UInt8(ascii: ":"))
            framed.append(contentsOf: field.utf8)
            framed.append(UInt8(ascii: "\n"))
        }
        return SHA256.hash(data: framed).lowercaseHex
    }
}

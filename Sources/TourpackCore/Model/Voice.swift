/// Pricing tiers; each has its own monthly character quota. `local` (the
/// embedded espeak-ng voice) costs nothing and is unlimited.
public enum PricingTier: String, Sendable, Hashable, CaseIterable, Codable {
    case standard
    case wavenet
    case neural2
    case studio
    case chirp3HD = "chirp3-hd"
    case local
}

/// A voice preset (`voices/*.yaml`), resolved and range-checked.
public struct VoicePreset: Sendable, Hashable, Codable {
    /// Who provides the voice: `google`, `openai` or `local`.
    public var provider: String
    public var languageCode: String
    public var name: String
    public var tier: PricingTier
    /// 0.25 to 4.0; 1.0 is normal speed.
    public var speakingRate: Double
    /// -20 to +20 semitones.
    public var pitch: Double

    public init(provider: String, languageCode: String, name: String, tier: PricingTier, speakingRate: Double = 1.0, pitch: Double = 0) {
        self.provider = provider
        self.languageCode = languageCode
        self.name = name
        self.tier = tier
        self.speakingRate = speakingRate
        self.pitch = pitch
    }
}

/// The HTTP dialect of the TTS endpoint.
public enum TTSAPI: String, Sendable, Hashable, CaseIterable, Codable {
    /// Google Cloud TTS v1: `POST {endpoint}/v1/text:synthesize`, key in `x-goog-api-key`.
    case google
    /// OpenAI-compatible: `POST {endpoint}/v1/audio/speech`, key as `Authorization: Bearer`.
    case openai

    /// The most one request may carry, as the chunker measures it.
    public var requestLimit: ChunkLimit {
        switch self {
        case .google: return .utf8BytesAfterEscaping(5000)
        case .openai: return .characters(4096)
        }
    }
}

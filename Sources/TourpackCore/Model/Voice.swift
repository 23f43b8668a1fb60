/// ElevenLabs' `voice_settings`, as a voice preset gives them; nil fields
/// are left to the voice's stored settings.
package struct VoiceSettings: Sendable, Hashable, Codable {
    /// 0...1.
    package var stability: Double?
    /// 0...1.
    package var similarityBoost: Double?
    /// 0...1.
    package var style: Double?
    package var useSpeakerBoost: Bool?

    package init(stability: Double? = nil, similarityBoost: Double? = nil, style: Double? = nil, useSpeakerBoost: Bool? = nil) {
        self.stability = stability
        self.similarityBoost = similarityBoost
        self.style = style
        self.useSpeakerBoost = useSpeakerBoost
    }
}

/// A voice preset (`voices/*.yaml`), resolved and range-checked.
package struct VoicePreset: Sendable, Hashable, Codable {
    /// Who provides the voice: `google`, `openai`, `polly`, `azure`, `elevenlabs`, `piper` or `local`.
    package var provider: String
    package var languageCode: String
    /// The provider's voice: Google's or Azure's voice name, Polly's `VoiceId`, ElevenLabs' voice ID.
    package var name: String
    package var tier: PricingTier
    /// 0.25 to 4.0; 1.0 is normal speed.
    package var speakingRate: Double
    /// -20 to +20 semitones.
    package var pitch: Double
    /// Polly's `Engine` (standard, neural, long-form, generative); nil: the tier's.
    package var engine: String?
    /// ElevenLabs' `model_id`; nil: `eleven_multilingual_v2`.
    package var modelId: String?
    /// ElevenLabs' `voice_settings`.
    package var voiceSettings: VoiceSettings?

    package init(
        provider: String, languageCode: String, name: String, tier: PricingTier, speakingRate: Double = 1.0, pitch: Double = 0,
        engine: String? = nil, modelId: String? = nil, voiceSettings: VoiceSettings? = nil
    ) {
        self.provider = provider
        self.languageCode = languageCode
        self.name = name
        self.tier = tier
        self.speakingRate = speakingRate
        self.pitch = pitch
        self.engine = engine
        self.modelId = modelId
        self.voiceSettings = voiceSettings
    }

    /// The Polly engine this voice speaks with: `engine`, else the tier when it names one.
    package var pollyEngine: String {
        if let engine { return engine }
        switch tier {
        case .neural, .longForm, .generative: return tier.rawValue
        default: return "standard"
        }
    }

    /// The ElevenLabs model this voice speaks with.
    package var elevenLabsModel: String { modelId ?? ElevenLabsModel.defaultID }
}

/// What tourpack knows of ElevenLabs' models: each one's character limit
/// per request and its credit class.
package enum ElevenLabsModel {
    package static let defaultID = "eleven_multilingual_v2"

    /// Characters one request may carry, per model (ElevenLabs' models page).
    package static let characterLimits: [String: Int] = [
        "eleven_v3": 5000,
        "eleven_multilingual_v2": 10_000,
        "eleven_flash_v2_5": 40_000,
        "eleven_turbo_v2_5": 40_000,
        "eleven_flash_v2": 30_000,
        "eleven_turbo_v2": 30_000,
        "eleven_multilingual_v1": 10_000,
        "eleven_monolingual_v1": 10_000,
    ]

    /// Flash and Turbo cost half a credit a character; the others one.
    package static func tier(of model: String) -> PricingTier {
        model.contains("flash") || model.contains("turbo") ? .halfCredit : .fullCredit
    }
}

/// The Polly engines, the values of `Engine`.
package enum PollyEngine {
    package static let all = ["standard", "neural", "long-form", "generative"]
}

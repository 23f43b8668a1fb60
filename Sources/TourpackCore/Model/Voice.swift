/// ElevenLabs' `voice_settings`, as a voice preset gives them; nil fields
/// are left to the voice's stored settings.
public struct VoiceSettings: Sendable, Hashable, Codable {
    /// 0...1.
    public var stability: Double?
    /// 0...1.
    public var similarityBoost: Double?
    /// 0...1.
    public var style: Double?
    public var useSpeakerBoost: Bool?

    public init(stability: Double? = nil, similarityBoost: Double? = nil, style: Double? = nil, useSpeakerBoost: Bool? = nil) {
        self.stability = stability
        self.similarityBoost = similarityBoost
        self.style = style
        self.useSpeakerBoost = useSpeakerBoost
    }
}

/// A voice preset (`voices/*.yaml`), resolved and range-checked.
public struct VoicePreset: Sendable, Hashable, Codable {
    /// Who provides the voice: `google`, `openai`, `polly`, `azure`, `elevenlabs`, `piper` or `local`.
    public var provider: String
    public var languageCode: String
    /// The provider's voice: Google's or Azure's voice name, Polly's `VoiceId`, ElevenLabs' voice ID.
    public var name: String
    public var tier: PricingTier
    /// 0.25 to 4.0; 1.0 is normal speed.
    public var speakingRate: Double
    /// -20 to +20 semitones.
    public var pitch: Double
    /// Polly's `Engine` (standard, neural, long-form, generative); nil: the tier's.
    public var engine: String?
    /// ElevenLabs' `model_id`; nil: `eleven_multilingual_v2`.
    public var modelId: String?
    /// ElevenLabs' `voice_settings`.
    public var voiceSettings: VoiceSettings?

    public init(
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
    public var pollyEngine: String {
        if let engine { return engine }
        switch tier {
        case .neural, .longForm, .generative: return tier.rawValue
        default: return "standard"
        }
    }

    /// The ElevenLabs model this voice speaks with.
    public var elevenLabsModel: String { modelId ?? ElevenLabsModel.defaultID }
}

/// What tourpack knows of ElevenLabs' models: each one's character limit
/// per request and its credit class.
public enum ElevenLabsModel {
    public static let defaultID = "eleven_multilingual_v2"

    /// Characters one request may carry, per model (ElevenLabs' models page).
    public static let characterLimits: [String: Int] = [
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
    public static func tier(of model: String) -> PricingTier {
        model.contains("flash") || model.contains("turbo") ? .halfCredit : .fullCredit
    }
}

/// The Polly engines, the values of `Engine`.
public enum PollyEngine {
    public static let all = ["standard", "neural", "long-form", "generative"]
}

/// The HTTP dialect of the TTS endpoint.
public enum TTSAPI: String, Sendable, Hashable, CaseIterable, Codable {
    /// Google Cloud TTS v1: `POST {endpoint}/v1/text:synthesize`, key in `x-goog-api-key`.
    case google
    /// OpenAI-compatible: `POST {endpoint}/v1/audio/speech`, key as `Authorization: Bearer`.
    case openai
    /// Amazon Polly `SynthesizeSpeech`: `POST {endpoint}/v1/speech`, signed with SigV4 (service `polly`).
    case polly
    /// Azure Speech: `POST {endpoint}/cognitiveservices/v1`, SSML body, key in `Ocp-Apim-Subscription-Key`.
    case azure
    /// ElevenLabs: `POST {endpoint}/v1/text-to-speech/{voice_id}`, key in `xi-api-key`.
    case elevenlabs
    /// Piper's HTTP server (`python3 -m piper.http_server`): `POST {endpoint}/synthesize`,
    /// JSON `{text, length_scale}`, a WAV back; no key, no SSML, no pitch.
    case piper

    /// The most one request may carry with the default model, as the chunker measures it.
    public var requestLimit: ChunkLimit { requestLimit(for: nil) }

    /// The most one request may carry, counted as the provider counts:
    /// Google 5,000 UTF-8 bytes; OpenAI 4,096 characters; Polly 3,000
    /// billed characters (SSML tags not counted); Azure 5,000 characters
    /// (far inside its 10-minute audio cap and 64 KB body); ElevenLabs the
    /// model's character limit.
    public func requestLimit(for voice: VoicePreset?) -> ChunkLimit {
        switch self {
        case .google: return .utf8BytesAfterEscaping(5000)
        case .openai: return .characters(4096)
        case .polly: return .billedCharacters(3000)
        case .azure: return .characters(5000)
        case .elevenlabs:
            let model = voice?.elevenLabsModel ?? ElevenLabsModel.defaultID
            return .characters(ElevenLabsModel.characterLimits[model] ?? 5000)
        case .piper: return .characters(Self.piperSentenceLimit)
        }
    }

    /// The most one Piper request carries. Piper is sent one sentence a
    /// request (`sendsSentencePerRequest`), so this only cuts a sentence
    /// too long to speak well in one breath: Piper runs each sentence as one
    /// ONNX inference, its memory and latency growing with the phonemes,
    /// and its voices were trained on utterances of a few seconds to about
    /// 15 s. 400 characters is about 25 s of speech at 14 characters a
    /// second, so a sentence is cut (at a clause, then a space) only where
    /// a reader would breathe anyway.
    public static let piperSentenceLimit = 400

    /// Whether every sentence goes in a request of its own. Piper reports no
    /// times, so each sentence is its own chunk: the join places each
    /// chunk's first audible sample exactly, so every caption starts where
    /// its sentence's speech starts, and a sentence edited asks again for
    /// that sentence alone. A `<break/>` in the narration cuts the chunk
    /// too, and becomes the join's pause.
    public var sendsSentencePerRequest: Bool { self == .piper }

    /// Whether the provider can say when each sentence starts (Google's
    /// timepoints, ElevenLabs' alignment, Polly's speech marks): captions
    /// are then on unless the pipeline says `captions: off`. OpenAI-style
    /// and Azure REST endpoints report none; `captions: webvtt` still
    /// gives them captions, with estimated times.
    public var reportsSentenceTimes: Bool {
        switch self {
        case .google, .polly, .elevenlabs: return true
        // One sentence a request: each start is the chunk's own, placed by the join.
        case .piper: return true
        case .openai, .azure: return false
        }
    }

    /// The tiers this provider bills in, for config checks and messages.
    public var tiers: [PricingTier] {
        switch self {
        case .google: return [.standard, .wavenet, .neural2, .studio, .chirp3HD, .local]
        case .openai: return [.standard, .wavenet, .neural2, .studio, .chirp3HD, .local]
        case .polly: return [.standard, .neural, .longForm, .generative, .local]
        case .azure: return [.neural, .local]
        case .elevenlabs: return [.fullCredit, .halfCredit, .local]
        // Piper runs on our own machine: counted, never refused, nothing to pay.
        case .piper: return [.local]
        }
    }
}

/// What tourpack knows of one text-to-speech provider: its limits, how it
/// bills, what markup and lexicons it reads, how it is signed in to, which
/// voice fields it takes, and whether it times sentences.
///
/// Each provider is one type in one file (TourpackSpeech's
/// `Providers/`), which also holds its wire dialect, and all of
/// them are registered in one list, `SpeechProviders.all`. Nothing else in
/// the house switches on a provider's name: it asks `TTSAPI.provider`.
/// The defaults below are the common case; a provider states only where it
/// differs.
package protocol SpeechProvider: Sendable {
    /// The name the pipeline's `tts.api` gives it, such as `google`.
    var id: String { get }
    /// How messages name it, such as `Polly`.
    var name: String { get }

    // MARK: Limits

    /// The most one request may carry, counted as the provider counts;
    /// `voice` nil: with the default model.
    func requestLimit(for voice: VoicePreset?) -> ChunkLimit
    /// Whether every sentence goes in a request of its own (the chunker cuts at each).
    var sendsSentencePerRequest: Bool { get }
    /// What timing one sentence adds to a request, in the limit's unit
    /// (Google's `<mark>`); the chunker keeps it free when captions are on.
    var sentenceMarkCost: Int { get }
    /// The raw PCM rates the provider offers, lowest first; nil when it
    /// takes any rate asked (or answers at its own, which is resampled).
    var offeredSampleRates: [Int]? { get }

    // MARK: Timings

    /// Whether it can say when each sentence starts: captions are then on
    /// unless the pipeline says `captions: off`.
    var reportsSentenceTimes: Bool { get }

    // MARK: Billing

    /// The tiers it bills in, `local` included, for config checks and messages.
    var tiers: [PricingTier] { get }
    /// "characters" or "credits", for messages and reports.
    func billingUnit(for tier: PricingTier) -> String
    /// Billed requests a chunk takes (Polly's speech marks are a second one).
    func requestsPerChunk(timings: Bool) -> Int
    /// What one request with this chunk costs, in `billingUnit(for:)`.
    func requestUnits(for chunk: Chunk, billing: BillingRule) -> Int

    // MARK: SSML and lexicons

    /// Whether a lexeme's phoneme can be sent as SSML `<phoneme>` (the local
    /// voice aside); otherwise only aliases are spoken.
    var readsPhonemes: Bool { get }
    /// Who cannot take phonemes, for the message that refuses a lexeme with none but a phoneme.
    func phonemeRefusal(for voice: VoicePreset) -> String
    /// What a chunk's SSML holds that the provider cannot honour, each as a
    /// sentence for the error; empty when it reads it all.
    func unsupportedMarkup(inSSML text: String) -> [String]

    // MARK: Credentials

    var credentials: SpeechCredentials { get }

    // MARK: Voices

    /// Whether the voice's pitch can be changed; otherwise it must be 0.
    var takesPitch: Bool { get }
    /// The fields of a voice preset that belong to this provider alone and
    /// that `voice` sets, each with how a message names it ("an engine").
    func ownFields(of voice: VoicePreset) -> [(field: String, phrase: String)]
    /// Whether the values of its own fields in a preset are ones it knows
    /// (Polly's `engine`, ElevenLabs' `modelId`), whatever the pipeline the
    /// preset is loaded for: asked of every provider as a preset loads.
    func checkOwnFields(of voice: VoicePreset, displayName: String, into diagnostics: inout DiagnosticCollector)
    /// The provider's own checks of a preset it will speak with, beyond the
    /// tier, pitch and fields checked for every provider.
    func checkVoice(_ voice: VoicePreset, displayName: String, into diagnostics: inout DiagnosticCollector)
}

/// How a provider's requests prove who sends them.
package enum SpeechCredentials: Sendable, Hashable {
    /// A key from `tts.apiKeyEnv`, in the header the dialect names (or none).
    case apiKey
    /// An AWS key pair (`tts.accessKeyEnv`, `tts.secretKeyEnv`) in a region,
    /// signing each request with SigV4 for `service`.
    case sigV4(service: String)
}

extension SpeechProvider {
    package var sendsSentencePerRequest: Bool { false }
    package var sentenceMarkCost: Int { 0 }
    package var offeredSampleRates: [Int]? { nil }
    package func billingUnit(for tier: PricingTier) -> String { "characters" }
    package func requestsPerChunk(timings: Bool) -> Int { 1 }
    package var readsPhonemes: Bool { false }
    package func phonemeRefusal(for voice: VoicePreset) -> String { "the local voice (\(voice.name))" }
    package func unsupportedMarkup(inSSML text: String) -> [String] { [] }
    package var credentials: SpeechCredentials { .apiKey }
    package var takesPitch: Bool { true }
    package func ownFields(of voice: VoicePreset) -> [(field: String, phrase: String)] { [] }
    package func checkOwnFields(of voice: VoicePreset, displayName: String, into diagnostics: inout DiagnosticCollector) {}
    package func checkVoice(_ voice: VoicePreset, displayName: String, into diagnostics: inout DiagnosticCollector) {}
}

/// The provider a pipeline speaks to (`tts.api`): its name, and the
/// descriptor that knows its facts. The providers, and the parsing of a
/// name, are TourpackSpeech's (`SpeechProviders`); two values are equal when
/// they name the same provider.
package struct TTSAPI: Sendable, Hashable, CustomStringConvertible {
    package let provider: any SpeechProvider

    package init(_ provider: any SpeechProvider) { self.provider = provider }

    /// The provider's name in `tts.api`.
    package var rawValue: String { provider.id }
    package var description: String { rawValue }

    package static func == (lhs: TTSAPI, rhs: TTSAPI) -> Bool { lhs.rawValue == rhs.rawValue }
    package func hash(into hasher: inout Hasher) { hasher.combine(rawValue) }

    /// The most one request may carry with the default model, as the chunker measures it.
    package var requestLimit: ChunkLimit { provider.requestLimit(for: nil) }

    /// The most one request may carry with `voice`, counted as the provider counts.
    package func requestLimit(for voice: VoicePreset?) -> ChunkLimit { provider.requestLimit(for: voice) }

    /// Whether every sentence goes in a request of its own (Piper, which
    /// reports no times: the join places each chunk's start exactly).
    package var sendsSentencePerRequest: Bool { provider.sendsSentencePerRequest }

    /// Whether the provider can say when each sentence starts.
    package var reportsSentenceTimes: Bool { provider.reportsSentenceTimes }

    /// The tiers this provider bills in, for config checks and messages.
    package var tiers: [PricingTier] { provider.tiers }
}

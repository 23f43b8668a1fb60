/// One chunk to speak, with the voice to speak it in.
public struct SynthesisRequest: Sendable, Hashable {
    public var chunk: Chunk
    public var voice: VoicePreset
    /// The LINEAR16 sample rate asked of the endpoint.
    public var sampleRateHz: Int
    /// Names the item (tour, POI, phase) for error messages.
    public var itemLabel: String

    public init(chunk: Chunk, voice: VoicePreset, sampleRateHz: Int, itemLabel: String) {
        self.chunk = chunk
        self.voice = voice
        self.sampleRateHz = sampleRateHz
        self.itemLabel = itemLabel
    }
}

/// The synthesize stage: text in, PCM out.
///
/// The default is `HTTPSpeechSynthesizer` over libcurl; a test can put any
/// other implementation here. Errors are `TourpackError`s.
public protocol SpeechSynthesizer: Sendable {
    func synthesize(_ request: SynthesisRequest) async throws -> PCMAudio
    /// Requests, retries and characters so far, for the build's summary.
    var stats: SynthesisStats { get }
}

extension SpeechSynthesizer {
    /// A synthesizer that counts nothing reports zeros.
    public var stats: SynthesisStats { SynthesisStats() }
}

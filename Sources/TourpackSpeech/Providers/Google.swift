import Foundation
package import TourpackCore
import TourpackHTTP

extension TTSAPI {
    /// Google Cloud TTS v1: `POST {endpoint}/v1/text:synthesize`, key in `x-goog-api-key`.
    package static let google = TTSAPI(GoogleProvider())
}

/// Google Cloud Text-to-Speech: 5,000 UTF-8 bytes a request, SSML read
/// (phonemes included), billed in characters per voice tier, sentences
/// timed by `<mark>` timepoints.
struct GoogleProvider: HTTPSpeechProvider {
    var id: String { "google" }
    var name: String { "Google" }

    /// The most one request may carry: 5,000 bytes of UTF-8, as sent.
    static let requestBytes = 5000

    /// What one `<mark name="sNNN"/>` costs a request, rounded up (the
    /// dialect names marks by the sentence's number in the chunk).
    static let markBytes = 24

    func requestLimit(for voice: VoicePreset?) -> ChunkLimit { .utf8BytesAfterEscaping(Self.requestBytes) }
    var sentenceMarkCost: Int { Self.markBytes }
    var reportsSentenceTimes: Bool { true }
    var tiers: [PricingTier] { [.standard, .wavenet, .neural2, .studio, .chirp3HD, .local] }
    var readsPhonemes: Bool { true }

    /// Characters of the input as sent (Unicode scalars). With timings, a
    /// plain chunk is sent as SSML to carry its marks, which are free:
    /// `<speak>`, the text escaped (so holding no tag) and `</speak>`,
    /// counted without building them.
    func requestUnits(for chunk: Chunk, billing: BillingRule) -> Int {
        guard billing.timings, !chunk.isSSML else { return chunk.characters }
        return "<speak></speak>".unicodeScalars.count + SSML.escapedScalarCount(chunk.text.unicodeScalars)
    }

    func dialect(for settings: TTSSettings) -> any TTSDialect { GoogleDialect() }
}

/// Google Cloud Text-to-Speech v1: `POST /v1/text:synthesize`, LINEAR16
/// (a WAV file) base64-encoded in `audioContent`.
///
/// With sentence boundaries (captions), the chunk goes to v1beta1 as SSML
/// with a `<mark name="sK"/>` at each sentence start and
/// `"enableTimePointing": ["SSML_MARK"]`; the answer's `timepoints` time
/// them. Without, the request is exactly v1's.
///
/// Reference: https://cloud.google.com/text-to-speech/docs/reference/rest/v1beta1/text/synthesize
struct GoogleDialect: TTSDialect {
    func path(for request: SynthesisRequest) -> String {
        Self.markedInput(for: request) == nil ? "/v1/text:synthesize" : "/v1beta1/text:synthesize"
    }

    /// The marked SSML when this request asks for timings and they fit; nil: today's v1 request.
    static func markedInput(for request: SynthesisRequest) -> String? {
        request.sentenceBoundaries.flatMap { SentenceTimings.googleMarkedSSML(request.chunk, boundaries: $0) }
    }

    /// What is actually sent: with marks (free) when the request carries them.
    func billedUnits(for request: SynthesisRequest) -> Int? {
        Self.markedInput(for: request).map(BillingRule.googleCharacters) ?? request.chunk.characters
    }

    func headers(apiKey: APIKey?) -> [(name: String, value: String)] {
        var headers = [(name: "Content-Type", value: "application/json; charset=utf-8")]
        if let apiKey { headers.append((name: "x-goog-api-key", value: apiKey.value)) }
        return headers
    }

    struct Body: Encodable {
        struct Input: Encodable { var text: String?; var ssml: String? }
        struct Voice: Encodable { var languageCode: String; var name: String? }
        struct AudioConfig: Encodable {
            var audioEncoding = "LINEAR16"
            var speakingRate: Double
            var pitch: Double
            var sampleRateHertz: Int
        }
        var input: Input
        var voice: Voice
        var audioConfig: AudioConfig
        /// v1beta1 only, with marks: `["SSML_MARK"]`.
        var enableTimePointing: [String]?
    }

    func body(for request: SynthesisRequest, settings: TTSSettings) throws -> [UInt8] {
        let chunk = request.chunk
        let marked = Self.markedInput(for: request)
        let input: Body.Input
        if let marked {
            input = .init(ssml: marked)
        } else {
            input = chunk.isSSML ? .init(ssml: chunk.text) : .init(text: chunk.text)
        }
        let body = Body(
            input: input,
            voice: .init(languageCode: request.voice.languageCode, name: request.voice.name.isEmpty ? nil : request.voice.name),
            audioConfig: .init(speakingRate: request.voice.speakingRate, pitch: request.voice.pitch, sampleRateHertz: request.sampleRateHz),
            enableTimePointing: marked == nil ? nil : ["SSML_MARK"])
        return Array(try JSONEncoder().encode(body))
    }

    func answerDecoder(for request: SynthesisRequest, settings: TTSSettings) -> any AnswerDecoder {
        GoogleAnswerDecoder(marks: Self.markedInput(for: request) == nil ? nil : (request.sentenceBoundaries?.count ?? 0) + 1)
    }
}

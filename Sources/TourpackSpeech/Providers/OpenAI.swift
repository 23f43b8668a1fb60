import Foundation
package import TourpackCore
import TourpackHTTP

extension TTSAPI {
    /// OpenAI-compatible: `POST {endpoint}/v1/audio/speech`, key as `Authorization: Bearer`.
    package static let openai = TTSAPI(OpenAIProvider())
}

/// An OpenAI-compatible speech endpoint: 4,096 characters a request, no
/// SSML (markup is dropped, lexicons give aliases), billed in characters,
/// no sentence times (captions are estimated).
struct OpenAIProvider: HTTPSpeechProvider {
    var id: String { "openai" }
    var name: String { "OpenAI" }

    func requestLimit(for voice: VoicePreset?) -> ChunkLimit { .characters(4096) }
    var reportsSentenceTimes: Bool { false }
    /// Google's tier names, which an OpenAI-compatible server may bill by.
    var tiers: [PricingTier] { [.standard, .wavenet, .neural2, .studio, .chirp3HD, .local] }
    func requestUnits(for chunk: Chunk, billing: BillingRule) -> Int { chunk.characters }
    func phonemeRefusal(for voice: VoicePreset) -> String { "the OpenAI-style endpoint" }

    func dialect(for settings: TTSSettings) -> any TTSDialect { OpenAIDialect() }
}

/// OpenAI-compatible `POST /v1/audio/speech`, asking for a WAV body.
struct OpenAIDialect: TTSDialect {
    func path(for request: SynthesisRequest) -> String { "/v1/audio/speech" }
    static let defaultModel = "tts-1"

    func headers(apiKey: APIKey?) -> [(name: String, value: String)] {
        var headers = [(name: "Content-Type", value: "application/json")]
        if let apiKey { headers.append((name: "Authorization", value: "Bearer \(apiKey.value)")) }
        return headers
    }

    struct Body: Encodable {
        var model: String
        var input: String
        var voice: String
        var responseFormat = "wav"
        var speed: Double

        enum CodingKeys: String, CodingKey {
            case model, input, voice, speed
            case responseFormat = "response_format"
        }
    }

    func body(for request: SynthesisRequest, settings: TTSSettings) throws -> [UInt8] {
        // This API takes no SSML: the words, without the markup.
        let text = request.chunk.plainText
        let body = Body(
            model: settings.model ?? Self.defaultModel, input: text, voice: request.voice.name, speed: request.voice.speakingRate)
        return Array(try JSONEncoder().encode(body))
    }

    func answerDecoder(for request: SynthesisRequest, settings: TTSSettings) -> any AnswerDecoder { WAVStreamDecoder() }
}

import Foundation
import TourpackCore
import TourpackHTTP

/// How one TTS API spells a request and its answers. `HTTPSpeechSynthesizer`
/// does the transport, retries and limits; a dialect only knows the wire format.
protocol TTSDialect: Sendable {
    /// Appended to the endpoint's base URL.
    var path: String { get }
    /// Content type plus the key, in the one header this API reads it from.
    func headers(apiKey: APIKey?) -> [(name: String, value: String)]
    func body(for request: SynthesisRequest, settings: TTSSettings) throws -> [UInt8]
    /// Decodes a 2xx body as it is read; a throw of `UndecodableBody` is
    /// retryable (truncated or garbled).
    func answerDecoder() -> any AnswerDecoder
}

/// A 2xx body that holds no usable audio: worth another try.
struct UndecodableBody: Error, Sendable {
    var reason: String
}

/// Google Cloud Text-to-Speech v1: `POST /v1/text:synthesize`, LINEAR16
/// (a WAV file) base64-encoded in `audioContent`.
struct GoogleDialect: TTSDialect {
    var path: String { "/v1/text:synthesize" }

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
    }

    func body(for request: SynthesisRequest, settings: TTSSettings) throws -> [UInt8] {
        let chunk = request.chunk
        let body = Body(
            input: chunk.isSSML ? .init(ssml: chunk.text) : .init(text: chunk.text),
            voice: .init(languageCode: request.voice.languageCode, name: request.voice.name.isEmpty ? nil : request.voice.name),
            audioConfig: .init(speakingRate: request.voice.speakingRate, pitch: request.voice.pitch, sampleRateHertz: request.sampleRateHz))
        return Array(try JSONEncoder().encode(body))
    }

    func answerDecoder() -> any AnswerDecoder { GoogleAnswerDecoder() }
}

/// OpenAI-compatible `POST /v1/audio/speech`, asking for a WAV body.
struct OpenAIDialect: TTSDialect {
    var path: String { "/v1/audio/speech" }
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
        let text = request.chunk.isSSML ? Self.plainText(fromSSML: request.chunk.text) : request.chunk.text
        let body = Body(
            model: settings.model ?? Self.defaultModel, input: text, voice: request.voice.name, speed: request.voice.speakingRate)
        return Array(try JSONEncoder().encode(body))
    }

    func answerDecoder() -> any AnswerDecoder { WAVStreamDecoder() }

    /// This API takes no SSML: keep the words, drop the markup.
    static func plainText(fromSSML ssml: String) -> String {
        var text = ""
        var inTag = false
        for character in ssml {
            if character == "<" {
                inTag = true; text.append(" ")
            } else if character == ">" {
                inTag = false
            } else if !inTag {
                text.append(character)
            }
        }
        let entities = ["&lt;": "<", "&gt;": ">", "&quot;": "\"", "&apos;": "'", "&amp;": "&"]
        for (entity, replacement) in entities { text = text.replacingOccurrences(of: entity, with: replacement) }
        return text.split(whereSeparator: \.isWhitespace).joined(separator: " ")
    }
}

/// Reads the server's message out of an error body, in either API's shape:
/// Google `{"error":{"code","message","status"}}`, OpenAI `{"error":{"message","type"}}`.
enum TTSErrorBody {
    /// - Parameter scrub: takes the key out of a body that is not JSON
    ///   before it is cut short, so a cut never leaves part of a key.
    static func message(from body: [UInt8], scrub: (String) -> String = { $0 }) -> String {
        if let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any] {
            if let error = object["error"] as? [String: Any], let message = error["message"] as? String {
                let kind = (error["status"] as? String) ?? (error["type"] as? String)
                return kind.map { "\(message) (\($0))" } ?? message
            }
            if let message = (object["error"] as? String) ?? (object["message"] as? String) { return message }
        }
        let text = String(scrub(String(decoding: body.prefix(4096), as: UTF8.self)).prefix(300))
            .filter { !$0.isNewline && ($0.isLetter || $0.isNumber || $0.isPunctuation || $0.isSymbol || $0 == " ") }
        return text.isEmpty ? "(no message)" : text
    }

    /// Google says "longer than the limit"; OpenAI-style servers say the input is too long.
    static func isInputTooLong(status: Int, message: String) -> Bool {
        guard status == 400 || status == 413 else { return false }
        let lowered = message.lowercased()
        return lowered.contains("longer than the limit") || lowered.contains("too long") || lowered.contains("maximum length")
    }
}

import Foundation
import TourpackCore
import TourpackHTTP

/// How one TTS API spells a request and its answers. `HTTPSpeechSynthesizer`
/// does the transport, retries, limits and billing; a dialect only knows
/// the wire format: the URL, the headers, the body, how to read a 2xx body
/// and how to read an error.
///
/// A dialect whose provider returns sentence timings with the audio
/// (Google's timepoints, ElevenLabs' `with-timestamps`) reads them in its
/// `AnswerDecoder` beside the samples; one that asks for them in a second
/// request (Polly's speech marks) is also a `TimingFollowUp`. The samples'
/// path does not change.
protocol TTSDialect: Sendable {
    /// Appended to the endpoint's base URL: the path, and any query (never a secret).
    func path(for request: SynthesisRequest) -> String
    /// Content type plus the key, in the one header this API reads it from.
    /// Polly's key pair never passes here: libcurl signs with it.
    func headers(apiKey: APIKey?) -> [(name: String, value: String)]
    func body(for request: SynthesisRequest, settings: TTSSettings) throws -> [UInt8]
    /// Decodes a 2xx body as it is read; a throw of `UndecodableBody` is
    /// retryable (truncated or garbled).
    func answerDecoder(for request: SynthesisRequest, settings: TTSSettings) -> any AnswerDecoder
    /// Whether a 2xx answer's content type is audio this dialect asked for;
    /// a proxy's error page under a 200 is not.
    func accepts(contentType: String?) -> Bool
    /// The same, for one request: a timed request may answer JSON.
    func accepts(contentType: String?, for request: SynthesisRequest) -> Bool
    /// What an error answer means for the retry policy, with the server's message.
    func classify(status: Int, headers: [String: String], body: [UInt8], scrub: (String) -> String) -> ErrorAnswer
}

/// A dialect whose timings come from a second request once the audio came
/// back (Polly's speech marks). The client sends it with the same retries
/// and counts it as billed; when it fails for good the audio is kept and
/// the chunk has no timings.
protocol TimingFollowUp: TTSDialect {
    /// The second request's body; nil when the request asks for no timings.
    func timingBody(for request: SynthesisRequest, settings: TTSSettings) throws -> [UInt8]?
    func acceptsTiming(contentType: String?) -> Bool
    /// The sentence starts read from the second answer; nil when it does not
    /// place them all. Throws `MalformedSpeechMarks` when the answer is
    /// damaged, so the client asks again.
    func sentenceTimes(fromTimingAnswer body: [UInt8], for request: SynthesisRequest) throws(MalformedSpeechMarks) -> [Double]?
}

/// An error answer, as the retry policy sees it.
enum ErrorAnswer: Equatable {
    /// Throttled or a passing server fault: try again (after `Retry-After`).
    case retry(String)
    /// The input is over the provider's limit: split the chunk and try once more.
    case tooLong(String)
    /// The key or signature was refused: fail at once, naming the variable.
    case auth(String)
    /// Anything else: fail this item with the server's message.
    case final(String)
}

extension TTSDialect {
    func accepts(contentType: String?) -> Bool { true }
    func accepts(contentType: String?, for request: SynthesisRequest) -> Bool { accepts(contentType: contentType) }

    /// Google's and OpenAI's way: 429 and 5xx retry, a 400 "longer than the limit" splits.
    func classify(status: Int, headers: [String: String], body: [UInt8], scrub: (String) -> String) -> ErrorAnswer {
        let message = TTSErrorBody.message(from: body, scrub: scrub)
        switch status {
        case 429, 500, 502, 503, 504: return .retry(message)
        case 401, 403: return .auth(message)
        default:
            return TTSErrorBody.isInputTooLong(status: status, message: message) ? .tooLong(message) : .final(message)
        }
    }
}

/// A 2xx body that holds no usable audio: worth another try.
package struct UndecodableBody: Error, Sendable {
    var reason: String
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
        let text = request.chunk.isSSML ? Self.plainText(fromSSML: request.chunk.text) : request.chunk.text
        let body = Body(
            model: settings.model ?? Self.defaultModel, input: text, voice: request.voice.name, speed: request.voice.speakingRate)
        return Array(try JSONEncoder().encode(body))
    }

    func answerDecoder(for request: SynthesisRequest, settings: TTSSettings) -> any AnswerDecoder { WAVStreamDecoder() }

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

/// Reads the server's message out of an error body, in any dialect's shape:
/// Google `{"error":{"code","message","status"}}`, OpenAI `{"error":{"message","type"}}`,
/// Azure `{"error":{"code","message"}}`, Polly `{"message"}` (its kind is in
/// a header), ElevenLabs `{"detail":{"status","message"}}` or FastAPI's
/// `{"detail":[{"loc","msg"}]}`.
enum TTSErrorBody {
    /// - Parameter scrub: takes the key out of a body that is not JSON
    ///   before it is cut short, so a cut never leaves part of a key.
    static func message(from body: [UInt8], scrub: (String) -> String = { $0 }) -> String {
        if let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any] {
            if let error = object["error"] as? [String: Any], let message = error["message"] as? String {
                let kind = (error["status"] as? String) ?? (error["type"] as? String) ?? (error["code"] as? String)
                return kind.map { "\(message) (\($0))" } ?? message
            }
            if let detail = object["detail"] as? [String: Any], let message = detail["message"] as? String {
                return (detail["status"] as? String).map { "\(message) (\($0))" } ?? message
            }
            if let details = object["detail"] as? [[String: Any]] {
                let parts = details.compactMap { item -> String? in
                    guard let message = item["msg"] as? String else { return nil }
                    let location = (item["loc"] as? [Any])?.map { "\($0)" }.joined(separator: ".")
                    return location.map { "\($0): \(message)" } ?? message
                }
                if !parts.isEmpty { return parts.joined(separator: "; ") }
            }
            if let message = (object["message"] as? String) ?? (object["Message"] as? String) {
                let kind = (object["__type"] as? String).map { $0.split(separator: "#").last.map(String.init) ?? $0 }
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
            || lowered.contains("max_character_limit_exceeded")
    }
}

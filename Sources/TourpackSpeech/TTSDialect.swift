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
    /// What the request costs as this dialect sends it, when that differs
    /// from `BillingRule.requestUnits` (Google's free marks); nil: the rule's.
    func billedUnits(for request: SynthesisRequest) -> Int?
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
    func billedUnits(for request: SynthesisRequest) -> Int? { nil }
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

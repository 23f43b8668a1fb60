import Foundation
import HTTPTypes
import Hummingbird

/// Error answers in each API's shape.
enum ErrorBody {
    /// Names the injected fault on a response, for the access log (never set without faults).
    static let faultHeader = HTTPField.Name("x-tourpack-fault")!

    static func google(_ status: Int, _ message: String) -> Response {
        let statusName =
            switch status {
            case 400: "INVALID_ARGUMENT"
            case 403: "PERMISSION_DENIED"
            case 404: "NOT_FOUND"
            case 429: "RESOURCE_EXHAUSTED"
            case 503: "UNAVAILABLE"
            case 504: "DEADLINE_EXCEEDED"
            default: "INTERNAL"
            }
        let object: [String: Any] = ["error": ["code": status, "message": message, "status": statusName]]
        return json(
            .init(code: status), (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])).map(Array.init) ?? [])
    }

    /// `param` names the request field at fault, as OpenAI does for a bad value.
    static func openAI(_ status: Int, _ message: String, param: String? = nil) -> Response {
        let type = status == 429 ? "rate_limit_exceeded" : status >= 500 ? "server_error" : "invalid_request_error"
        let object: [String: Any] = [
            "error": ["message": message, "type": type, "param": param.map { $0 as Any } ?? NSNull(), "code": NSNull()]
        ]
        return json(
            .init(code: status), (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])).map(Array.init) ?? [])
    }

    /// A 5xx in the dialect's own shape.
    static func serverError(_ dialect: SynthesisRoutes.Dialect, _ status: Int, _ message: String) -> Response {
        switch dialect {
        case .google: return google(status, message.prefix(1).uppercased() + message.dropFirst() + ".")
        case .openai: return openAI(status, message)
        case .polly: return polly(status, status == 503 ? "ServiceUnavailableException" : "ServiceFailureException", message)
        case .azure: return azure(status, message)
        case .elevenlabs: return elevenLabs(status, status == 503 ? "service_unavailable" : "internal_error", message)
        }
    }

    /// Each provider's throttling answer: Polly's is a 400 `ThrottlingException`.
    static func throttled(_ dialect: SynthesisRoutes.Dialect) -> Response {
        switch dialect {
        case .google: return google(429, "Quota exceeded (injected).")
        case .openai: return openAI(429, "Rate limit reached (injected).")
        case .polly: return polly(400, "ThrottlingException", "Rate exceeded")
        case .azure: return azure(429, "Too many requests. (injected)")
        case .elevenlabs:
            return elevenLabs(
                429, "too_many_concurrent_requests",
                "Too many concurrent requests. Your current subscription is associated with a maximum of 2 concurrent requests.")
        }
    }

    /// Polly's REST-JSON error: the kind in `x-amzn-ErrorType`, the message in the body.
    static func polly(_ status: Int, _ kind: String, _ message: String) -> Response {
        var response = json(
            .init(code: status),
            (try? JSONSerialization.data(withJSONObject: ["message": message], options: [.sortedKeys])).map(Array.init) ?? [])
        response.headers[HTTPField.Name("x-amzn-ErrorType")!] = "\(kind):http://internal.amazon.com/coral/com.amazonaws.polly.v1/"
        response.headers[HTTPField.Name("x-amzn-RequestId")!] = UUID().uuidString.lowercased()
        return response
    }

    /// Azure Speech's error: `{"error":{"code","message"}}`.
    static func azure(_ status: Int, _ message: String) -> Response {
        let object: [String: Any] = ["error": ["code": String(status), "message": message]]
        return json(
            .init(code: status), (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])).map(Array.init) ?? [])
    }

    /// ElevenLabs' error: `{"detail":{"status","message"}}`.
    static func elevenLabs(_ status: Int, _ code: String, _ message: String) -> Response {
        let object: [String: Any] = ["detail": ["status": code, "message": message]]
        return json(
            .init(code: status), (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])).map(Array.init) ?? [])
    }

    /// FastAPI's validation error, as ElevenLabs sends for a malformed body (422).
    static func elevenLabsValidation(_ location: [String], _ message: String) -> Response {
        let object: [String: Any] = ["detail": [["loc": location, "msg": message, "type": "value_error"]]]
        return json(.init(code: 422), (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])).map(Array.init) ?? [])
    }

    static func json(_ status: HTTPResponse.Status, _ bytes: [UInt8]) -> Response {
        Response(
            status: status, headers: [.contentType: "application/json; charset=utf-8"], body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    static func tagged(_ response: Response, _ fault: Fault?) -> Response {
        var response = response
        if let fault { response.headers[faultHeader] = fault.rawValue }
        return response
    }
}

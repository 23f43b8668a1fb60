package import Foundation
import TourpackCore

/// One HTTP request as the transport sends it: a POST with a body (TTS), a
/// GET (map tiles), or a PUT, GET, HEAD or DELETE of an object (the shared
/// synthesis cache in S3-compatible storage).
///
/// Header values may hold the API key, so `description` lists header names
/// only: this value can be logged or printed without leaking anything.
package struct HTTPRequestSpec: Sendable, CustomStringConvertible {
    package enum Method: String, Sendable { case get = "GET", post = "POST", put = "PUT", head = "HEAD", delete = "DELETE" }

    var method: Method = .post
    var url: String
    var headers: [(name: String, value: String)]
    var body: [UInt8]
    /// The whole exchange, connect included.
    var totalTimeoutSeconds: Double
    var connectTimeoutSeconds: Double
    /// Abort when fewer than `minimumBytesPerSecond` bytes a second arrive,
    /// on average, over this long (`CURLOPT_LOW_SPEED_TIME`): a stalled or trickling server.
    var stallTimeoutSeconds: Double
    /// The rate floor over `stallTimeoutSeconds` (`CURLOPT_LOW_SPEED_LIMIT`); 1 by default: only a stall.
    package var minimumBytesPerSecond = 1
    /// Bodies larger than this are refused (64 MB by default).
    var maxResponseBytes: Int = HTTPRequestSpec.defaultMaxResponseBytes
    /// When set, a 2xx body is written to this file as it arrives instead
    /// of being held in memory (a chunk's audio); other bodies stay in memory.
    var spool: URL?
    /// A resumed download (`Range: bytes=N-`): a `206 Partial Content` body
    /// is appended to what `spool` already holds, while any other 2xx (a
    /// server that ignored the range, or an `If-Range` that no longer
    /// matched) replaces it from byte 0, as it always does.
    package var spoolAppendsPartialContent = false
    /// When set, the spool file never passes this many bytes (what it held
    /// before a 206 included): a longer body is `responseTooLarge`. A
    /// download's bound is the size its signed manifest names.
    package var spoolLimit: Int64?
    /// Called once with the final status and headers (names lowercased) as
    /// soon as they are in, before the body: a body cut short then still
    /// leaves its caller the `ETag` or `Last-Modified` it needs to resume
    /// with `If-Range`. A reason returned refuses the answer: the transfer
    /// stops before any body byte and fails as `refused` with that reason
    /// (a resumed download's wrong `Content-Range`). Runs on the transport's
    /// thread; keep it short.
    package var onResponseHead: (@Sendable (_ status: Int, _ headers: [String: String]) -> String?)?
    /// When set, libcurl signs the request with AWS Signature Version 4
    /// (`CURLOPT_AWS_SIGV4`); nil leaves the request exactly as before.
    package var signing: AWSSigning?
    /// `CURLOPT_CONNECT_TO` entries (`HOST:PORT:CONNECT-HOST:CONNECT-PORT`):
    /// the exchange goes to another address while the URL, and so the
    /// `Host` header and the signature, keep the name. The SigV4 test vectors
    /// sign for `example.amazonaws.com` and are captured on loopback this way.
    var connectTo: [String] = []

    package init(
        method: Method = .post, url: String, headers: [(name: String, value: String)], body: [UInt8], totalTimeoutSeconds: Double,
        connectTimeoutSeconds: Double, stallTimeoutSeconds: Double, maxResponseBytes: Int = HTTPRequestSpec.defaultMaxResponseBytes,
        spool: URL? = nil, signing: AWSSigning? = nil, connectTo: [String] = []
    ) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.totalTimeoutSeconds = totalTimeoutSeconds
        self.connectTimeoutSeconds = connectTimeoutSeconds
        self.stallTimeoutSeconds = stallTimeoutSeconds
        self.maxResponseBytes = maxResponseBytes
        self.spool = spool
        self.signing = signing
        self.connectTo = connectTo
    }

    package static let defaultMaxResponseBytes = 64 * 1024 * 1024

    package var description: String {
        "\(method.rawValue) \(Secret.redacting(url: url)) headers=[\(headers.map(\.name).joined(separator: ","))] body=\(body.count)B"
    }
}

/// What libcurl needs to sign a request with SigV4: the provider string
/// (`aws:amz:<region>:<service>`) and the key pair.
///
/// The secret never prints, dumps or reflects itself; `scrub` removes both
/// halves from any text that came from elsewhere (a server's message).
package struct AWSSigning: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    let region: String
    let service: String
    let accessKey: String
    let secretKey: String

    package init(region: String, service: String, accessKey: String, secretKey: String) {
        self.region = region
        self.service = service
        self.accessKey = accessKey
        self.secretKey = secretKey
    }

    /// `CURLOPT_AWS_SIGV4`'s argument.
    var provider: String { "aws:amz:\(region):\(service)" }

    package var description: String { "AWSSigning(\(provider), <redacted>)" }
    package var debugDescription: String { description }
    package var customMirror: Mirror { Mirror(self, children: []) }

    /// `text` with the access key and the secret replaced, in case a server echoes either.
    package func scrub(_ text: String) -> String {
        Redaction.scrub(text, secrets: [secretKey, accessKey])
    }
}

/// What came back: the final status, headers (names lowercased) and body.
package struct HTTPResponse: Sendable {
    package var status: Int
    package var headers: [String: String]
    /// The body, unless it went to the request's spool file.
    package var body: [UInt8]
    /// The body's length, wherever it went.
    package var bodyBytes: Int
    /// The body is in the request's spool file.
    package var spooled = false
    /// New connections this exchange opened (0 when one was reused).
    package var newConnections: Int
}

/// Why an exchange produced no HTTP response.
package enum TransportFailure: Error, Sendable, Equatable {
    /// Connect, total or stall timeout.
    case timedOut(String)
    /// Refused, reset, DNS, TLS, or a body cut short: worth another try.
    case connection(String)
    /// The body passed the 64 MB cap. `status` is the status line's code when
    /// it had arrived: the server answered, and libcurl stopped reading the
    /// body, so a 2xx here was billed all the same.
    case responseTooLarge(limit: Int, status: Int?)
    /// The request could not be set up (bad URL, unsupported protocol).
    case unusable(String)
    /// The status line came back, then the body was cut short (a reset, a
    /// timeout, a truncated chunked body): the server answered, so a 2xx
    /// here is billed, and the request is worth another try.
    case cutShort(status: Int, reason: String)
    /// The caller's `onResponseHead` refused the answer's head (a resumed
    /// download's wrong `Content-Range`): no body byte was kept, and the
    /// request is worth another try.
    case refused(status: Int, reason: String)
    /// The caller gave up after the status line came back: a 2xx is billed.
    case cancelledAfterAnswer(status: Int)
    /// The 2xx body could not be written to the spool file (a full disk):
    /// the answer was billed, but this machine cannot keep it.
    case spoolFailed(path: String, reason: String, status: Int?)
    case cancelled

    /// The status the server had answered with before the exchange failed, if it had.
    package var answeredStatus: Int? {
        switch self {
        case .cutShort(let status, _), .cancelledAfterAnswer(let status), .refused(let status, _): return status
        case .responseTooLarge(_, let status), .spoolFailed(_, _, let status): return status
        case .timedOut, .connection, .unusable, .cancelled: return nil
        }
    }

    package var isRetryable: Bool {
        switch self {
        case .timedOut, .connection, .cutShort, .refused: return true
        case .responseTooLarge, .unusable, .spoolFailed, .cancelled, .cancelledAfterAnswer: return false
        }
    }

    package var reason: String {
        switch self {
        case .timedOut(let m): return "timed out: \(m)"
        case .connection(let m): return m
        case .responseTooLarge(let limit, _):
            return limit >= 1024 * 1024 ? "response larger than \(limit / (1024 * 1024)) MB" : "response larger than \(limit) bytes"
        case .unusable(let m): return m
        case .spoolFailed(let path, let reason, _): return "cannot write the answer to \(path): \(reason)"
        case .cutShort(_, let reason): return "the answer was cut short: \(reason)"
        case .refused(_, let reason): return reason
        case .cancelled, .cancelledAfterAnswer: return "cancelled"
        }
    }
}

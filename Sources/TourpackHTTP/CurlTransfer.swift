import CCurl
import CCurlShims
import Foundation
import TourpackCore

/// Process-wide libcurl setup. `curl_global_init` is not thread-safe and
/// must run once before the first handle; a `static let` gives exactly that.
enum CurlRuntime {
    static let isReady: Bool = curl_global_init(Int(CURL_GLOBAL_ALL)) == CURLE_OK
}

/// Owns one libcurl easy handle and frees it in `deinit`.
final class CurlEasy {
    /// The `CURL *`. Only the transfer that owns this object touches it.
    let handle: UnsafeMutableRawPointer

    init() throws(TransportFailure) {
        guard CurlRuntime.isReady else { throw .unusable("curl_global_init failed") }
        guard let handle = curl_easy_init() else { throw .unusable("curl_easy_init failed") }
        self.handle = handle
    }

    deinit { curl_easy_cleanup(handle) }

    func set(_ option: CURLoption, _ value: Int) throws(TransportFailure) {
        try check(tp_curl_easy_setopt_long(handle, option, value), option)
    }

    /// libcurl copies string options (all but POSTFIELDS), so a temporary C string is enough.
    func set(_ option: CURLoption, _ value: String) throws(TransportFailure) {
        let code = value.withCString { tp_curl_easy_setopt_ptr(handle, option, $0) }
        try check(code, option)
    }

    func set(_ option: CURLoption, pointer: UnsafeRawPointer?) throws(TransportFailure) {
        try check(tp_curl_easy_setopt_ptr(handle, option, pointer), option)
    }

    func set(_ option: CURLoption, offset: Int64) throws(TransportFailure) {
        try check(tp_curl_easy_setopt_off_t(handle, option, curl_off_t(offset)), option)
    }

    func info(_ info: CURLINFO) -> Int {
        var value = 0
        return tp_curl_easy_getinfo_long(handle, info, &value) == CURLE_OK ? value : 0
    }

    private func check(_ code: CURLcode, _ option: CURLoption) throws(TransportFailure) {
        guard code == CURLE_OK else {
            throw .unusable("curl option \(option.rawValue): \(String(cString: curl_easy_strerror(code)))")
        }
    }
}

/// One exchange in flight: the easy handle configured for it, the header
/// list and error buffer libcurl points into, and the response as it arrives.
///
/// Owns the `curl_slist` and the error buffer and frees both in `deinit`.
/// Created by a task, then touched only by the `CurlMulti` thread (the
/// multi's lock hands it over), hence `@unchecked Sendable`.
final class CurlTransfer: @unchecked Sendable {
    let easy: CurlEasy
    private var headerList: UnsafeMutablePointer<curl_slist>?
    /// `CURLOPT_CONNECT_TO`'s list, when the request has one.
    private var connectList: UnsafeMutablePointer<curl_slist>?
    private let errorBuffer: UnsafeMutablePointer<CChar>
    private let maxResponseBytes: Int
    private var body: [UInt8] = []
    private var bodyBytes = 0
    private var headers: [String: String] = [:]
    private var overflowed = false
    /// Where a 2xx body goes instead of memory (`HTTPRequestSpec.spool`).
    private let spool: URL?
    private let spoolAppendsPartialContent: Bool
    private let spoolLimit: Int64?
    /// The spool file's length: what it held when opened, plus what was written since.
    private var spoolLength: Int64 = 0
    private var onResponseHead: (@Sendable (Int, [String: String]) -> String?)?
    /// Why `onResponseHead` refused the answer, when it did.
    private var refusal: String?
    private var spoolDescriptor: Int32 = -1
    private var spoolDecided = false
    private var spoolError: Int32 = 0
    /// Resumed exactly once, by the multi thread.
    var continuation: CheckedContinuation<Result<HTTPResponse, TransportFailure>, Never>?
    /// Set under the multi's lock by a cancelled task.
    var cancelRequested = false

    init(_ request: HTTPRequestSpec) throws(TransportFailure) {
        easy = try CurlEasy()
        maxResponseBytes = request.maxResponseBytes
        spool = request.spool
        spoolAppendsPartialContent = request.spoolAppendsPartialContent
        spoolLimit = request.spoolLimit
        onResponseHead = request.onResponseHead
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE))
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
        try configure(request)
    }

    deinit {
        if spoolDescriptor >= 0 { close(spoolDescriptor) }
        curl_slist_free_all(headerList)
        curl_slist_free_all(connectList)
        errorBuffer.deallocate()
    }

    private func configure(_ request: HTTPRequestSpec) throws(TransportFailure) {
        try easy.set(CURLOPT_URL, request.url)
        // Only plain HTTP(S), and never follow a redirect: a Location header
        // must not carry the key's header to another host.
        try easy.set(CURLOPT_PROTOCOLS_STR, "http,https")
        try easy.set(CURLOPT_FOLLOWLOCATION, 0)
        // No SIGALRM for DNS timeouts and no SIGPIPE: threads and signals don't mix.
        try easy.set(CURLOPT_NOSIGNAL, 1)
        try easy.set(CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_2TLS)
        try easy.set(CURLOPT_TIMEOUT_MS, Self.milliseconds(request.totalTimeoutSeconds))
        try easy.set(CURLOPT_CONNECTTIMEOUT_MS, Self.milliseconds(min(request.connectTimeoutSeconds, request.totalTimeoutSeconds)))
        try easy.set(CURLOPT_LOW_SPEED_LIMIT, max(1, request.minimumBytesPerSecond))
        try easy.set(CURLOPT_LOW_SPEED_TIME, max(1, Int(request.stallTimeoutSeconds.rounded(.up))))
        try easy.set(CURLOPT_MAXFILESIZE_LARGE, offset: Int64(request.maxResponseBytes))
        try easy.set(CURLOPT_ACCEPT_ENCODING, "")  // whatever libcurl can decode; base64 JSON compresses well
        switch request.method {
        case .get:
            try easy.set(CURLOPT_HTTPGET, 1)
        case .post:
            try attachBody(request.body)
        case .put:
            // A body from memory, sent as POST fields under another verb:
            // libcurl's SigV4 hashes POST fields for the payload, where a
            // read callback's body would go unhashed.
            try attachBody(request.body)
            try easy.set(CURLOPT_CUSTOMREQUEST, "PUT")
        case .head:
            try easy.set(CURLOPT_NOBODY, 1)
        case .delete:
            try easy.set(CURLOPT_HTTPGET, 1)
            try easy.set(CURLOPT_CUSTOMREQUEST, "DELETE")
        }
        if let signing = request.signing {
            // Separate user and password options: a colon in either cannot split them wrongly.
            try easy.set(CURLOPT_AWS_SIGV4, signing.provider)
            try easy.set(CURLOPT_USERNAME, signing.accessKey)
            try easy.set(CURLOPT_PASSWORD, signing.secretKey)
        }
        for entry in request.connectTo {
            guard let appended = curl_slist_append(connectList, entry) else { throw .unusable("curl_slist_append failed") }
            connectList = appended
        }
        if connectList != nil { try easy.set(CURLOPT_CONNECT_TO, pointer: UnsafeRawPointer(connectList)) }
        // "Expect:" off: waiting for 100-continue costs a round trip per request.
        // Not on a signed request: libcurl 7.88 signs that removal entry as an
        // empty `expect` header it never sends. libcurl asks for 100-continue
        // only above 1 MB of POST fields, where a PUT's 412 comes back before the body.
        let removals = request.signing == nil ? ["Expect:"] : []
        for line in request.headers.map({ "\($0.name): \($0.value)" }) + removals {
            guard let appended = curl_slist_append(headerList, line) else { throw .unusable("curl_slist_append failed") }
            headerList = appended
        }
        try easy.set(CURLOPT_HTTPHEADER, pointer: UnsafeRawPointer(headerList))
        try easy.set(CURLOPT_ERRORBUFFER, pointer: UnsafeRawPointer(errorBuffer))
        let me = UnsafeRawPointer(Unmanaged.passUnretained(self).toOpaque())
        guard tp_curl_easy_setopt_write_function(easy.handle, curlReceiveBody) == CURLE_OK,
            tp_curl_easy_setopt_header_function(easy.handle, curlReceiveHeader) == CURLE_OK
        else { throw .unusable("could not install curl callbacks") }
        try easy.set(CURLOPT_WRITEDATA, pointer: me)
        try easy.set(CURLOPT_HEADERDATA, pointer: me)
    }

    private func attachBody(_ body: [UInt8]) throws(TransportFailure) {
        try easy.set(CURLOPT_POST, 1)
        try easy.set(CURLOPT_POSTFIELDSIZE_LARGE, offset: Int64(body.count))
        // An empty array may have no address, and NULL POST fields make
        // libcurl read the body from stdin: point it at an empty string.
        let copied =
            body.isEmpty
            ? "".withCString { tp_curl_easy_setopt_ptr(easy.handle, CURLOPT_COPYPOSTFIELDS, $0) }
            : body.withUnsafeBytes { tp_curl_easy_setopt_ptr(easy.handle, CURLOPT_COPYPOSTFIELDS, $0.baseAddress) }
        guard copied == CURLE_OK else { throw .unusable("could not attach the request body") }
    }

    private static func milliseconds(_ seconds: Double) -> Int { max(1, Int((seconds * 1000).rounded(.up))) }

    fileprivate func receiveBody(_ bytes: UnsafeRawBufferPointer) -> Int {
        guard bodyBytes + bytes.count <= maxResponseBytes else {
            overflowed = true
            return 0  // libcurl aborts with CURLE_WRITE_ERROR
        }
        bodyBytes += bytes.count
        if let spool, !spoolDecided {
            // The status line is in by the first body byte: only audio goes
            // to disk; an error's body stays in memory for its message.
            spoolDecided = true
            let status = easy.info(CURLINFO_RESPONSE_CODE)
            if (200..<300).contains(status) {
                // A 206 to a resumed download continues the file; any other 2xx starts it over.
                let start = status == 206 && spoolAppendsPartialContent ? O_APPEND : O_TRUNC
                spoolDescriptor = open(spool.path, O_WRONLY | O_CREAT | start | O_NOFOLLOW | O_CLOEXEC, 0o644)
                if spoolDescriptor < 0 {
                    spoolError = errno
                    return 0
                }
                spoolLength = start == O_APPEND ? Int64(max(0, lseek(spoolDescriptor, 0, SEEK_END))) : 0
            }
        }
        guard spoolDescriptor >= 0 else {
            body.append(contentsOf: bytes)
            return bytes.count
        }
        if let spoolLimit, spoolLength + Int64(bytes.count) > spoolLimit {
            overflowed = true
            return 0
        }
        spoolLength += Int64(bytes.count)
        var offset = 0
        while offset < bytes.count {
            let written = write(spoolDescriptor, bytes.baseAddress! + offset, bytes.count - offset)
            if written < 0 {
                if errno == EINTR { continue }
                spoolError = errno
                return 0
            }
            offset += written
        }
        return bytes.count
    }

    fileprivate func receiveHeader(_ bytes: UnsafeRawBufferPointer) -> Int {
        let line = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        if line.hasPrefix("HTTP/") {
            headers = [:]  // a new response (after 100 Continue): start over
        } else if line.isEmpty {
            // The end of a head: tell the caller once it is the final one (not a 1xx).
            let status = easy.info(CURLINFO_RESPONSE_CODE)
            if status >= 200, let onResponseHead {
                self.onResponseHead = nil
                if let reason = onResponseHead(status, headers) {
                    refusal = reason
                    return 0  // libcurl aborts with CURLE_WRITE_ERROR before the body
                }
            }
        } else if let colon = line.firstIndex(of: ":") {
            let name = line[..<colon].lowercased()
            headers[name] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return bytes.count
    }

    /// The outcome of a transfer abandoned by its caller: still billed when
    /// the status line had come back.
    func cancelledOutcome() -> Result<HTTPResponse, TransportFailure> {
        if spoolDescriptor >= 0 {
            close(spoolDescriptor)
            spoolDescriptor = -1
        }
        let answered = easy.info(CURLINFO_RESPONSE_CODE)
        return .failure(answered > 0 ? .cancelledAfterAnswer(status: answered) : .cancelled)
    }

    /// The outcome once libcurl reports the transfer done with `code`.
    func outcome(_ code: CURLcode) -> Result<HTTPResponse, TransportFailure> {
        if spoolDescriptor >= 0 {
            close(spoolDescriptor)
            spoolDescriptor = -1
        }
        if code == CURLE_OK {
            return .success(
                HTTPResponse(
                    status: easy.info(CURLINFO_RESPONSE_CODE), headers: headers, body: body, bodyBytes: bodyBytes,
                    spooled: spool != nil && spoolDecided && spoolError == 0 && (200..<300).contains(easy.info(CURLINFO_RESPONSE_CODE)),
                    newConnections: easy.info(CURLINFO_NUM_CONNECTS)))
        }
        if code == CURLE_WRITE_ERROR, spoolError != 0, let spool {
            let status = easy.info(CURLINFO_RESPONSE_CODE)
            return .failure(.spoolFailed(path: spool.path, reason: errnoDescription(spoolError), status: status > 0 ? status : nil))
        }
        let answered = easy.info(CURLINFO_RESPONSE_CODE)
        if let refusal { return .failure(.refused(status: answered, reason: refusal)) }
        let detail = errorBuffer.pointee != 0 ? String(cString: errorBuffer) : String(cString: curl_easy_strerror(code))
        switch code {
        case CURLE_OPERATION_TIMEDOUT where answered > 0, CURLE_PARTIAL_FILE where answered > 0, CURLE_RECV_ERROR where answered > 0,
            CURLE_GOT_NOTHING where answered > 0, CURLE_HTTP2 where answered > 0, CURLE_HTTP2_STREAM where answered > 0,
            CURLE_BAD_CONTENT_ENCODING where answered > 0:
            return .failure(.cutShort(status: answered, reason: detail))
        case CURLE_OPERATION_TIMEDOUT:
            return .failure(.timedOut(detail))
        case CURLE_FILESIZE_EXCEEDED,
            CURLE_WRITE_ERROR where overflowed:
            // Aborted after the status line (by Content-Length, or by the
            // body passing the cap): the easy handle still knows the status.
            let status = easy.info(CURLINFO_RESPONSE_CODE)
            return .failure(.responseTooLarge(limit: maxResponseBytes, status: status > 0 ? status : nil))
        case CURLE_URL_MALFORMAT, CURLE_UNSUPPORTED_PROTOCOL, CURLE_NOT_BUILT_IN, CURLE_BAD_FUNCTION_ARGUMENT:
            return .failure(.unusable(detail))
        default:
            return .failure(answered > 0 ? .cutShort(status: answered, reason: detail) : .connection(detail))
        }
    }
}

private func curlReceiveBody(_ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ user: UnsafeMutableRawPointer?) -> Int {
    guard let user else { return 0 }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(user).takeUnretainedValue()
    return transfer.receiveBody(UnsafeRawBufferPointer(start: data, count: size * count))
}

private func curlReceiveHeader(_ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ user: UnsafeMutableRawPointer?) -> Int {
    guard let user else { return 0 }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(user).takeUnretainedValue()
    return transfer.receiveHeader(UnsafeRawBufferPointer(start: data, count: size * count))
}

public import Foundation

#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

/// A published site folder (what `tourpack publish --site FOLDER` writes:
/// `catalog.json` and its signature, `packages/…`, `blobs/sha256/…`,
/// `roots/…`) served inside the test process, through a `URLProtocol`:
/// an app's tests of its offline screens need no server, no port and no
/// network, and run the library's real URLSession code.
///
/// ```swift
/// let site = InProcessSite(folder: publishedSite)  // keep it for the test's length
/// let library = OfflineLibrary(
///     documents: documents, site: site.url, trust: trust,
///     network: ManualNetworkMonitor(.wifi), configuration: site.configuration)
/// _ = try await library.refreshCatalog()           // GET /catalog.json: 200
/// _ = try await library.refreshCatalog()           // If-None-Match: 304
/// #expect(site.requests.map(\.status) == [200, 304])
/// site.fail(path: "blobs/", status: 404)           // every blob: the download ends `.failed`
/// site.isReachable = false                         // the phone in a tunnel:
/// // refreshCatalog() throws `networkUnavailable`; `catalog` keeps the last one
/// ```
///
/// A request reaches it only through a session made with `configuration`
/// (the library copies the configuration and keeps its `protocolClasses`).
/// With the site unreachable the library tries each request
/// `DownloadPolicy.maximumAttempts` times, with backoff, before it throws
/// `networkUnavailable`: a test gives it 1 or 2 tries, or sets its
/// `ManualNetworkMonitor` to `.unsatisfied` to throw at once. On Linux,
/// swift-corelibs-foundation delivers the head, the pieces and the end to
/// the session's delegate as Darwin does, but ignores the delegate's
/// `ResponseDisposition` (for every protocol, HTTP's own included).
///
/// It answers as a CDN does (and as the tests' loopback `SiteServer`):
/// - `ETag` and `Last-Modified` on every file; the ETag is the file's
///   size, modification time and file number, so it changes whenever the
///   publisher replaces the file, and reading it costs no pass over the bytes.
/// - `If-None-Match` naming the ETag (or, without one, `If-Modified-Since`
///   not older than the file) is a 304.
/// - `Range: bytes=N-` (or `N-M`) is a 206 with its `Content-Range`,
///   unless `If-Range` names another version: then the whole file, 200.
///   A range starting past the end is a 416.
/// - A missing file is a 404 with a short text body; `HEAD` is answered
///   without a body; any other method is a 405.
/// - A body goes out in pieces of 64 KiB read from the file as it is sent,
///   so a file of any size costs one piece of memory here.
///
/// Each instance has a host of its own (`site-<uuid>.tourpack.test`), so
/// two sites in one process, or two tests running side by side, never mix.
/// The protocol holds the site weakly: once it is gone, its host answers
/// `URLError(.cannotFindHost)`. Any host under `tourpack.test` is answered
/// here and never looked up on the network.
public final class InProcessSite: @unchecked Sendable {
    /// One request as the site saw it.
    public struct Request: Sendable, Hashable {
        /// As sent: the library sends `GET`; `HEAD` is answered too, anything else 405.
        public var method: String
        /// The path asked for, percent-decoded, from the site's root: `/catalog.json`.
        public var path: String
        /// The request's headers, names lowercased (`range`, `if-range`, `if-none-match`).
        public var headers: [String: String]
        /// The status answered; nil when the request failed with no answer (`isReachable` false).
        public var status: Int?
        /// Body bytes handed to URLSession: less than the file when the
        /// client went away, or the answer was cut (`cut(path:afterBytes:)`).
        public var bytesSent: Int64
    }

    /// The folder served: the root of the published site.
    public let folder: URL
    /// The site's base URL, as `OfflineLibrary(site:)` takes it.
    public let url: URL

    private let lock = NSLock()
    private var reachable = true
    private var log: [(id: Int, request: Request)] = []
    private var nextId = 0
    private var faults: [(path: String, fault: Fault)] = []

    /// What a path is made to do instead of answering with its file.
    enum Fault: Sendable, Equatable {
        case status(Int)
        /// The answer's head and this many body bytes, then the connection is lost.
        case cut(afterBytes: Int64)
    }

    /// - Parameter folder: a published site's root, as `tourpack publish --site` writes it.
    ///   It is read at each request, so a test may publish into it again between requests.
    public init(folder: URL) {
        self.folder = folder.standardizedFileURL
        let host = "site-\(UUID().uuidString.lowercased()).\(Self.domain)"
        url = URL(string: "https://\(host)")!
        InProcessSites.shared.add(self, host: host)
    }

    deinit {
        if let host = url.host { InProcessSites.shared.remove(host: host) }
    }

    /// The domain whose hosts are answered in process.
    static let domain = "tourpack.test"

    /// A new ephemeral configuration whose `protocolClasses` put the
    /// in-process protocol first: hand it to `OfflineLibrary(…, configuration:)`,
    /// or to a `URLSession` of the test's own.
    public var configuration: URLSessionConfiguration {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.protocolClasses = [InProcessSiteProtocol.self] + (configuration.protocolClasses ?? [])
        return configuration
    }

    /// Whether the site can be reached. False: every request fails, with
    /// no answer, as on a phone with no signal: `URLError(.notConnectedToInternet)`.
    public var isReachable: Bool {
        get { lock.withLock { reachable } }
        set { lock.withLock { reachable = newValue } }
    }

    /// Every request since the site was made or the log was last reset, in the order they came.
    public var requests: [Request] { lock.withLock { log.map(\.request) } }

    /// Forgets the requests so far.
    public func resetLog() { lock.withLock { log.removeAll() } }

    /// Makes `path` answer `status` (a 404, a 503…) with a short text body,
    /// in place of its file, until `restore(path:)`. A path ending in `/` is
    /// a folder: `fail(path: "blobs/", status: 404)` fails every blob.
    /// With or without a leading `/`.
    public func fail(path: String, status: Int) { set(.status(status), path: path) }

    /// Makes `path` (or, ending in `/`, every path under it) send its
    /// head and `afterBytes` body bytes, then lose the connection
    /// (`URLError(.networkConnectionLost)`), every time it is asked: a
    /// download that resumes with `Range` goes `afterBytes` further each try.
    public func cut(path: String, afterBytes: Int64) { set(.cut(afterBytes: max(0, afterBytes)), path: path) }

    /// Serves `path` from its file again (the one given to `fail` or `cut`).
    public func restore(path: String) {
        let key = Self.key(path)
        lock.withLock { faults.removeAll { $0.path == key } }
    }

    /// Serves every path from its file again.
    public func restoreAll() { lock.withLock { faults.removeAll() } }

    private func set(_ fault: Fault, path: String) {
        let key = Self.key(path)
        lock.withLock {
            faults.removeAll { $0.path == key }
            faults.append((key, fault))
        }
    }

    /// `/blobs/` and `blobs/` are one key: the path from the root, with its leading `/`.
    private static func key(_ path: String) -> String { path.hasPrefix("/") ? path : "/" + path }

    // MARK: Answers (called by the protocol)

    /// What the site does with a request: fail it, or answer with a head and a body.
    enum Answer {
        case failure(URLError.Code)
        case answer(HTTPURLResponse, body: Body, cutAfter: Int64?)
    }

    /// A body to send: bytes in memory (an error's text), or a span of a file.
    enum Body {
        case none
        case text(Data)
        case file(URL, offset: Int64, length: Int64)

        var length: Int64 {
            switch self {
            case .none: return 0
            case .text(let data): return Int64(data.count)
            case .file(_, _, let length): return length
            }
        }
    }

    /// Decides the answer to `request` and logs it; the returned id is the log entry's, for `sent(_:to:)`.
    func answer(_ request: URLRequest) -> (answer: Answer, logId: Int) {
        let method = (request.httpMethod ?? "GET").uppercased()
        let path = request.url.map { $0.path.isEmpty ? "/" : $0.path } ?? "/"
        var headers: [String: String] = [:]
        for (name, value) in request.allHTTPHeaderFields ?? [:] { headers[name.lowercased()] = value }
        let (reachable, fault) = lock.withLock {
            (self.reachable, faults.last { $0.path == path || ($0.path.hasSuffix("/") && path.hasPrefix($0.path)) }?.fault)
        }
        let answer: Answer
        if !reachable {
            answer = .failure(.notConnectedToInternet)
        } else if case .status(let status) = fault {
            answer = text(status, "injected \(status) for \(path)", request: request)
        } else {
            var decided = serve(path: path, method: method, headers: headers, request: request)
            if case .cut(let after) = fault, case .answer(let response, let body, _) = decided {
                decided = .answer(response, body: body, cutAfter: after)
            }
            answer = decided
        }
        let status: Int? = if case .answer(let response, _, _) = answer { response.statusCode } else { nil }
        let id = lock.withLock {
            nextId += 1
            log.append((nextId, Request(method: method, path: path, headers: headers, status: status, bytesSent: 0)))
            return nextId
        }
        return (answer, id)
    }

    /// Counts `bytes` more body bytes sent for the request logged as `id`.
    func sent(_ bytes: Int, to id: Int) {
        lock.withLock {
            guard let index = log.lastIndex(where: { $0.id == id }) else { return }
            log[index].request.bytesSent += Int64(bytes)
        }
    }

    private func serve(path: String, method: String, headers: [String: String], request: URLRequest) -> Answer {
        guard method == "GET" || method == "HEAD" else {
            return text(405, "\(method) is not served here", request: request, extra: ["Allow": "GET, HEAD"])
        }
        guard let file = SiteFile(folder: folder, path: path) else {
            return text(404, "not found: \(path)", request: request)
        }
        var fields = [
            "ETag": file.etag, "Last-Modified": file.lastModified, "Accept-Ranges": "bytes",
            "Content-Type": path.hasSuffix(".json") ? "application/json" : "application/octet-stream",
        ]
        if let match = headers["if-none-match"] {
            if Self.names(file.etag, in: match) { return head(304, fields, request: request) }
        } else if let since = headers["if-modified-since"].flatMap(HTTPDate.parse), file.modified <= since {
            return head(304, fields, request: request)
        }
        var (status, offset, length) = (200, Int64(0), file.size)
        if let range = headers["range"].flatMap({ ByteRange(header: $0, size: file.size) }),
            headers["if-range"].map({ $0 == file.etag || $0 == file.lastModified }) ?? true
        {
            guard range.start < file.size else {
                fields["Content-Range"] = "bytes */\(file.size)"
                return text(416, "range not satisfiable: \(headers["range"] ?? "")", request: request, extra: fields)
            }
            (status, offset, length) = (206, range.start, range.end - range.start + 1)
            fields["Content-Range"] = "bytes \(range.start)-\(range.end)/\(file.size)"
        }
        fields["Content-Length"] = "\(length)"
        let body: Body = method == "HEAD" || length == 0 ? .none : .file(file.url, offset: offset, length: length)
        return .answer(Self.response(status, fields, request: request), body: body, cutAfter: nil)
    }

    /// Whether an `If-None-Match` list names `etag` (or is `*`).
    private static func names(_ etag: String, in list: String) -> Bool {
        list.split(separator: ",").contains {
            let tag = $0.trimmingCharacters(in: .whitespaces)
            return tag == "*" || tag == etag || tag == "W/" + etag
        }
    }

    private func head(_ status: Int, _ fields: [String: String], request: URLRequest) -> Answer {
        .answer(Self.response(status, fields, request: request), body: .none, cutAfter: nil)
    }

    private func text(_ status: Int, _ message: String, request: URLRequest, extra: [String: String] = [:]) -> Answer {
        let body = Data(message.utf8)
        var fields = extra
        fields["Content-Type"] = "text/plain; charset=utf-8"
        fields["Content-Length"] = "\(body.count)"
        let sent: Body = request.httpMethod?.uppercased() == "HEAD" ? .none : .text(body)
        return .answer(Self.response(status, fields, request: request), body: sent, cutAfter: nil)
    }

    private static func response(_ status: Int, _ fields: [String: String], request: URLRequest) -> HTTPURLResponse {
        HTTPURLResponse(
            url: request.url ?? URL(string: "https://\(domain)")!, statusCode: status, httpVersion: "HTTP/1.1", headerFields: fields)!
    }
}

/// A regular file of the site, and its validators.
private struct SiteFile {
    let url: URL
    let size: Int64
    let modified: Date
    let etag: String
    var lastModified: String { HTTPDate.format(modified) }

    /// Nil for a path that leaves the folder, names no regular file, or cannot be read.
    init?(folder: URL, path: String) {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
        guard !parts.isEmpty, !parts.contains(where: { $0.isEmpty || $0 == "." || $0 == ".." }) else { return nil }
        url = parts.reduce(folder) { $0.appendingPathComponent(String($1)) }
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: url.path),
            attributes[.type] as? FileAttributeType == .typeRegular,
            let size = (attributes[.size] as? NSNumber)?.int64Value,
            let modified = attributes[.modificationDate] as? Date,
            FileManager.default.isReadableFile(atPath: url.path)
        else { return nil }
        self.size = size
        self.modified = modified
        // Size, modification time (to the nanosecond the file system keeps) and file
        // number: a publisher's atomic replace gives a new file number even within one tick.
        let nanoseconds = Int64((modified.timeIntervalSince1970 * 1e9).rounded())
        let number = (attributes[.systemFileNumber] as? NSNumber)?.uint64Value ?? 0
        etag = "\"\(String(size, radix: 16))-\(String(nanoseconds, radix: 16))-\(String(number, radix: 16))\""
    }
}

/// `bytes=N-` or `bytes=N-M`, the one form the library sends (and `SiteServer` takes).
private struct ByteRange {
    let start: Int64
    let end: Int64

    /// Nil for another form (a suffix, several ranges, another unit): the whole file is sent.
    init?(header: String, size: Int64) {
        guard header.hasPrefix("bytes=") else { return nil }
        let parts = header.dropFirst(6).split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 2, let start = Int64(parts[0].trimmingCharacters(in: .whitespaces)), start >= 0 else { return nil }
        let last = parts[1].trimmingCharacters(in: .whitespaces)
        if last.isEmpty {
            end = size - 1
        } else {
            guard let asked = Int64(last), asked >= start else { return nil }
            end = min(size - 1, asked)
        }
        self.start = start
    }
}

/// HTTP dates (RFC 9110's IMF-fixdate): `Last-Modified`, `If-Modified-Since`.
private enum HTTPDate {
    private static func formatter() -> DateFormatter {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter
    }

    static func format(_ date: Date) -> String { formatter().string(from: date) }

    /// The date, to the second; a modification time is compared with it floored.
    static func parse(_ text: String) -> Date? {
        formatter().date(from: text).map { $0.addingTimeInterval(0.999_999) }
    }
}

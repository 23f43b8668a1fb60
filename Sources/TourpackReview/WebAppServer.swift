package import Foundation
import HTTPTypes
import Hummingbird
package import Logging
package import NIOPosix
import TourpackCore
import UnixSignals

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `tourpack web`: the web client's demo app and a published site from one
/// loopback origin, so the page's service worker, `fetch` and IndexedDB
/// all belong to it.
///
///     /, index.html, app.js, sw.js, style.css   the built demo app (clients/web/build.sh)
///     config.json                               the site's address and the trust anchor the page checks it with
///     probe                                     a few bytes, never cached: the page's connectivity probe
///     site/<key>                                the site: a folder (ETag, If-None-Match, Range with If-Range)
///                                               or a URL the requests are passed on to
///     debug/stats                               every site request (path, Range, If-Range, status, bytes), for tests
///
/// The same host check and path rules as `review`: only requests naming
/// this server, no `.`/`..` in any spelling, nothing outside the folders.
package struct WebAppServer: Sendable {
    /// Where the site's objects come from.
    package enum Site: Sendable {
        case folder(URL)
        case url(URL)
    }

    package struct Configuration: Sendable {
        package var host = "127.0.0.1"
        package var port = 0
        package var logger = Logger(label: "tourpack.web", factory: { StreamLogHandler.standardError(label: $0) })

        package init(host: String = "127.0.0.1", port: Int = 0) {
            self.host = host
            self.port = port
        }
    }

    /// One site request, as `debug/stats` lists it.
    package struct SiteRequest: Sendable, Codable, Equatable {
        package var path: String
        package var range: String?
        package var ifRange: String?
        package var ifNoneMatch: String?
        package var status: Int
        /// The body bytes answered (planned for a stream).
        package var bytes: Int
    }

    package let app: URL
    package let site: Site
    /// config.json's bytes: `{"site": "site/", "publicKey": …}` or `"rootJSON"`.
    package let config: [UInt8]
    package let configuration: Configuration
    private let requests = LockedCounts<[SiteRequest]>([])
    private let pool: NIOThreadPool

    /// The most site requests `debug/stats` keeps.
    static let keptRequests = 20_000

    package init(app: URL, site: Site, config: [UInt8], configuration: Configuration, pool: NIOThreadPool = .singleton) {
        self.app = app
        self.site = site
        self.config = config
        self.configuration = configuration
        self.pool = pool
    }

    /// File work before the server starts (the app's files, the key, the
    /// site's catalogue), on the thread pool: never on the cooperative pool.
    package static func onThePool<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await NIOThreadPool.singleton.runIfActive(work)
    }

    /// The built demo app: `given` (`--app`, `TOURPACK_WEB_APP`), else
    /// `build/web/app` under the working folder or under any folder above
    /// the executable (the checkout it was built in); nil when none holds
    /// `index.html`, `app.js` and `sw.js`.
    package static func findApp(given: String?, executable: URL) -> URL? {
        func complete(_ folder: URL) -> Bool {
            ["index.html", "app.js", "sw.js"].allSatisfy { FileManager.default.fileExists(atPath: folder.appendingPathComponent($0).path) }
        }
        if let given { return URL(fileURLWithPath: given).standardizedFileURL }
        var candidates = [URL(fileURLWithPath: "build/web/app").standardizedFileURL]
        var folder = executable.resolvingSymlinksInPath().deletingLastPathComponent()
        for _ in 0..<6 {
            candidates.append(folder.appendingPathComponent("build/web/app"))
            folder = folder.deletingLastPathComponent()
        }
        return candidates.first(where: complete)
    }

    /// Serves until SIGINT or SIGTERM; `onReady` learns the port.
    package func runUntilSignalled(onReady: @escaping @Sendable (Int) async -> Void) async throws {
        let application = Application(
            responder: CallbackResponder<BasicRequestContext> { request, context in try await respond(request, logger: context.logger) },
            configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "tourpack-web"),
            onServerRunning: { channel in await onReady(channel.localAddress?.port ?? configuration.port) },
            logger: configuration.logger)
        try await application.runService(gracefulShutdownSignals: [.sigterm, .sigint])
    }

    private static let appFiles: [String: String] = [
        "index.html": "text/html; charset=utf-8", "app.js": "text/javascript; charset=utf-8", "sw.js": "text/javascript; charset=utf-8",
        "style.css": "text/css; charset=utf-8",
    ]

    func respond(_ request: Request, logger: Logger) async throws -> Response {
        let response = try await answer(request)
        logger.info(
            "request",
            metadata: ["method": "\(request.method.rawValue)", "path": "\(request.uri.path)", "status": "\(response.status.code)"])
        return response
    }

    private func answer(_ request: Request) async throws -> Response {
        switch ReviewHostCheck(bound: configuration.host).verdict(request.head.authority) {
        case .allowed: break
        case .missing: return ReviewServer.text(.badRequest, "refused: the request names no Host")
        case .misdirected:
            return ReviewServer.text(.misdirectedRequest, "refused: this server answers only its own address, localhost and loopback")
        }
        guard request.method == .get || request.method == .head else {
            return ReviewServer.text(.methodNotAllowed, "GET and HEAD only", headers: [.allow: "GET, HEAD"])
        }
        guard let segments = ReviewSite.segments(ofPath: request.uri.path) else {
            return ReviewServer.text(.badRequest, "refused: the path must not hold '.', '..' or empty segments, in any encoding")
        }
        let head = request.method == .head
        switch segments.first {
        case nil:
            return try await appFile("index.html", request: request, head: head)
        case "config.json" where segments.count == 1:
            var response = ReviewServer.bytes(config, type: "application/json", head: head)
            response.headers[.cacheControl] = "no-cache"
            return response
        case "probe" where segments.count == 1:
            var response = ReviewServer.bytes(Array("ok\n".utf8), type: "text/plain; charset=utf-8", head: head)
            response.headers[.cacheControl] = "no-store"
            return response
        case "debug" where segments == ["debug", "stats"]:
            let data = try JSONEncoder().encode(["requests": requests.snapshot])
            return ReviewServer.bytes(Array(data), type: "application/json", head: head)
        case "site" where segments.count > 1:
            let key = segments.dropFirst().joined(separator: "/")
            let response = try await siteObject(key, request: request, head: head)
            record(key, request: request, response: response)
            return response
        case let name? where segments.count == 1 && Self.appFiles[name] != nil:
            return try await appFile(name, request: request, head: head)
        default:
            return ReviewServer.text(.notFound, "not found")
        }
    }

    private func record(_ key: String, request: Request, response: Response) {
        let bytes = response.headers[.contentLength].flatMap { Int($0) } ?? 0
        let entry = SiteRequest(
            path: key, range: request.headers[.range], ifRange: request.headers[.ifRange], ifNoneMatch: request.headers[.ifNoneMatch],
            status: Int(response.status.code), bytes: bytes)
        requests.update { list in
            list.append(entry)
            if list.count > Self.keptRequests { list.removeFirst(list.count - Self.keptRequests) }
        }
    }

    private func appFile(_ name: String, request: Request, head: Bool) async throws -> Response {
        let url = app.appendingPathComponent(name)
        let size = try await pool.runIfActive { ReviewFiles.regularFileSize(url) }
        guard let type = Self.appFiles[name], let size else {
            return ReviewServer.text(.notFound, "\(name): not in the built app (\(app.path)); run clients/web/build.sh")
        }
        var (response, _) = RangedFile.response(
            url, size: size, headers: [.contentType: type], range: nil, head: head, pool: pool, shown: name)
        response.headers[.cacheControl] = "no-cache"
        return response
    }

    // MARK: The site

    private func siteObject(_ key: String, request: Request, head: Bool) async throws -> Response {
        switch site {
        case .folder(let root): return try await folderObject(key, root: root, request: request, head: head)
        case .url(let base): return try await proxied(key, base: base, request: request, head: head)
        }
    }

    /// A file of the site folder: its ETag is its size and modification
    /// time (objects are written once, the catalogue replaced by a rename),
    /// `If-None-Match` answers 304, a `Range` is honoured unless `If-Range`
    /// names another version.
    private func folderObject(_ key: String, root: URL, request: Request, head: Bool) async throws -> Response {
        let url: URL
        do { url = try Layout(root: root).resolve(relativePath: key) } catch {
            return ReviewServer.text(.forbidden, "refused: \(key) resolves outside the site")
        }
        let found = try await pool.runIfActive { () -> (size: Int, tag: String)? in
            guard let size = ReviewFiles.regularFileSize(url),
                let attributes = try? FileManager.default.attributesOfItem(atPath: url.resolvingSymlinksInPath().path),
                let modified = attributes[.modificationDate] as? Date
            else { return nil }
            return (size, "\"\(size)-\(Int64((modified.timeIntervalSince1970 * 1_000_000).rounded()))\"")
        }
        guard let (size, tag) = found else { return ReviewServer.text(.notFound, "\(key): no such object") }
        var headers: HTTPFields = [.contentType: Self.siteType(key), .eTag: tag]
        headers[.cacheControl] =
            key == "catalog.json" || key == "catalog.json.sig" ? "public, max-age=60" : "public, max-age=31536000, immutable"
        if let match = request.headers[.ifNoneMatch],
            match.split(separator: ",").contains(where: { $0.trimmingCharacters(in: .whitespaces) == tag })
        {
            headers[.contentLength] = "0"
            return Response(status: .notModified, headers: headers)
        }
        let stale = request.headers[.ifRange].map { $0 != tag } ?? false
        return RangedFile.response(
            url, size: size, headers: headers, range: request.headers[.range], head: head, pool: pool, shown: key, ignoreRange: stale
        ).response
    }

    static func siteType(_ key: String) -> String {
        if key.hasSuffix(".json") || key.hasSuffix(".sig") { return "application/json" }
        return "application/octet-stream"
    }

    /// The same key at the site's URL: the validators and range passed on,
    /// the answer's status and headers passed back. Objects are bounded by
    /// what a device reads (the catalogue 32 MiB, a file its signed size),
    /// so each answer is held whole here.
    private func proxied(_ key: String, base: URL, request: Request, head: Bool) async throws -> Response {
        let address = SiteLayout.address(base.absoluteString)
        let path = key.split(separator: "/").map { String($0).addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? String($0) }
        guard let url = URL(string: address.base + "/" + path.joined(separator: "/") + (address.query.map { "?" + $0 } ?? "")) else {
            return ReviewServer.text(.badRequest, "\(key): not a URL")
        }
        var outgoing = URLRequest(url: url)
        outgoing.httpMethod = head ? "HEAD" : "GET"
        outgoing.cachePolicy = .reloadIgnoringLocalCacheData
        for name in [HTTPField.Name.range, .ifRange, .ifNoneMatch, .ifModifiedSince] {
            if let value = request.headers[name] { outgoing.setValue(value, forHTTPHeaderField: name.rawName) }
        }
        let data: Data
        let answer: URLResponse
        do { (data, answer) = try await URLSession.shared.data(for: outgoing) } catch {
            return ReviewServer.text(.badGateway, "\(Secret.redacting(url: url.absoluteString)): \(error.localizedDescription)")
        }
        guard let http = answer as? HTTPURLResponse else { return ReviewServer.text(.badGateway, "\(key): not an HTTP answer") }
        let status = HTTPResponse.Status(code: http.statusCode)
        var headers: HTTPFields = [:]
        for name in ["ETag", "Last-Modified", "Content-Range", "Content-Type", "Cache-Control", "Accept-Ranges", "Retry-After"] {
            if let value = http.value(forHTTPHeaderField: name), let field = HTTPField.Name(name) { headers[field] = value }
        }
        headers[.contentLength] = String(data.count)
        if head || status == .notModified { return Response(status: status, headers: headers) }
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}

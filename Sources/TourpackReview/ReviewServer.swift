import Foundation
import HTTPTypes
import Hummingbird
package import Logging
package import NIOPosix
package import TourpackCore
import TourpackMaps
import UnixSignals

/// How `tourpack review` listens.
package struct ReviewServerConfiguration: Sendable {
    /// Loopback unless `--host` says otherwise: the pages show a team's
    /// unpublished work, and the server is meant for the person at this machine.
    package var host = "127.0.0.1"
    /// 0 picks a free port; `onReady` learns which.
    package var port = 8790
    /// One line per request (method, path, status, bytes) on stderr.
    package var logger = Logger(label: "tourpack.review", factory: { StreamLogHandler.standardError(label: $0) })

    package init(host: String = "127.0.0.1", port: Int = 8790) {
        self.host = host
        self.port = port
    }
}

/// Counters the tests read at `GET /debug/stats`: what the browser asked for.
package struct ReviewCounts: Sendable, Codable, Equatable {
    package var requests = 0
    package var pages = 0
    /// Tile requests answered from a pack, and the bytes sent for them.
    package var tiles = 0
    package var tileBytes = 0
    package var audio = 0
    /// Caption files sent (the players' `<track>`s).
    package var captions = 0
    /// Audio requests with a `Range` header answered 206.
    package var partial = 0
    /// Paths refused as unsafe (`..`, encoded dots, a link out of the root).
    package var refused = 0
    package var notFound = 0
}

/// `tourpack review ROOT`: the review site over Hummingbird, read-only.
///
/// Every request path is split and percent-decoded by `ReviewSite.segments`
/// (refusing `.`/`..` in any spelling), then looked up in `ReviewSite`,
/// which answers only its own paths: pages, assets, a pack's tiles, and the
/// audio and caption files package.json lists, each resolved under the root again per
/// request (`Layout.resolve`), so a symlink out of the root is refused even
/// when package.json names it. Only requests whose `Host` names this server
/// are answered (`ReviewHostCheck`), so a DNS-rebinding page cannot read it. Audio is served with `Range`, so players can seek.
package struct ReviewServer: Sendable {
    package let configuration: ReviewServerConfiguration
    package let site: ReviewSite
    package let counts = LockedCounts(ReviewCounts())
    private let packs: [String: MBTilesReader]
    private let pool: NIOThreadPool

    package init(site: ReviewSite, configuration: ReviewServerConfiguration = ReviewServerConfiguration(), pool: NIOThreadPool = .singleton)
        throws
    {
        self.site = site
        self.configuration = configuration
        self.pool = pool
        var packs: [String: MBTilesReader] = [:]
        for package in site.catalog.packages {
            if let url = package.tilePack { packs[package.folder] = try MBTilesReader(url) }
        }
        self.packs = packs
    }

    /// Serves until SIGINT or SIGTERM, then finishes in-flight requests and returns.
    package func runUntilSignalled(onReady: @escaping @Sendable (Int) async -> Void = { _ in }) async throws {
        try await application(onReady: onReady).runService(gracefulShutdownSignals: [.sigterm, .sigint])
    }

    /// Serves until the calling task is cancelled.
    package func run(onReady: @escaping @Sendable (Int) async -> Void = { _ in }) async throws {
        try await application(onReady: onReady).run()
    }

    private func application(onReady: @escaping @Sendable (Int) async -> Void) -> some ApplicationProtocol {
        let port = configuration.port
        return Application(
            responder: CallbackResponder<BasicRequestContext> { request, context in try await respond(request, logger: context.logger) },
            configuration: .init(address: .hostname(configuration.host, port: port), serverName: "tourpack-review"),
            onServerRunning: { channel in await onReady(channel.localAddress?.port ?? port) },
            logger: configuration.logger)
    }

    func respond(_ request: Request, logger: Logger) async throws -> Response {
        counts.update { $0.requests += 1 }
        let response = try await answer(request)
        logger.info(
            "request",
            metadata: [
                "method": "\(request.method.rawValue)", "path": "\(request.uri.path)", "status": "\(response.status.code)",
            ])
        return response
    }

    private func answer(_ request: Request) async throws -> Response {
        switch ReviewHostCheck(bound: configuration.host).verdict(request.head.authority) {
        case .allowed:
            break
        case .missing:
            counts.update { $0.refused += 1 }
            return Self.text(.badRequest, "refused: the request names no Host")
        case .misdirected:
            counts.update { $0.refused += 1 }
            return Self.text(.misdirectedRequest, "refused: this review answers only its own address, localhost and loopback")
        }
        guard request.method == .get || request.method == .head else {
            return Self.text(.methodNotAllowed, "review is read-only: GET and HEAD only", headers: [.allow: "GET, HEAD"])
        }
        guard let segments = ReviewSite.segments(ofPath: request.uri.path) else {
            counts.update { $0.refused += 1 }
            return Self.text(.badRequest, "refused: the path must not hold '.', '..' or empty segments, in any encoding")
        }
        if segments == ["debug", "stats"] {
            let data = try JSONEncoder().encode(counts.snapshot)
            return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: data)))
        }
        guard let resource = site.resource(at: segments) else {
            counts.update { $0.notFound += 1 }
            return Self.text(.notFound, "not found")
        }
        let head = request.method == .head
        switch resource {
        case .page(let html):
            counts.update { $0.pages += 1 }
            return Self.bytes(Array(html.utf8), type: "text/html; charset=utf-8", head: head)
        case .asset(let bytes, let type):
            return Self.bytes(bytes, type: type, head: head)
        case .tile(let folder, let tile, let type):
            guard let pack = packs[folder], let bytes = try await pool.runIfActive({ try pack.tile(tile) }) else {
                counts.update { $0.notFound += 1 }
                return Self.text(.notFound, "no such tile in the pack")
            }
            counts.update {
                $0.tiles += 1
                $0.tileBytes += bytes.count
            }
            return Self.bytes(bytes, type: type, head: head)
        case .audio(let relativePath, let type):
            return try await file(relativePath, type: type, range: request.headers[.range], head: head, captions: false)
        case .captions(let relativePath):
            return try await file(
                relativePath, type: ReviewSite.captionsContentType, range: request.headers[.range], head: head, captions: true)
        }
    }

    /// A file package.json lists (audio or captions), whole or the one
    /// range asked for (RFC 9110 §14).
    private func file(
        _ relativePath: String, type: String, range: String?, head: Bool, captions: Bool
    ) async throws -> Response {
        let url: URL
        do {
            url = try Layout(root: site.catalog.root).resolve(relativePath: relativePath)
        } catch {
            counts.update { $0.refused += 1 }
            return Self.text(.forbidden, "refused: \(relativePath) resolves outside the root")
        }
        guard let size = ReviewFiles.regularFileSize(url) else {
            counts.update { $0.notFound += 1 }
            return Self.text(.notFound, "\(relativePath): no such file")
        }
        counts.update {
            if captions { $0.captions += 1 } else { $0.audio += 1 }
        }
        let (response, span) = RangedFile.response(
            url, size: size, headers: [.contentType: type], range: range, head: head, pool: pool, shown: relativePath)
        if range != nil, span != nil { counts.update { $0.partial += 1 } }
        return response
    }

    static func bytes(_ bytes: [UInt8], type: String, head: Bool) -> Response {
        var headers: HTTPFields = [.contentType: type, .cacheControl: "no-cache"]
        if head {
            headers[.contentLength] = String(bytes.count)
            return Response(status: .ok, headers: headers)
        }
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    static func text(_ status: HTTPResponse.Status, _ message: String, headers: HTTPFields = [:]) -> Response {
        var headers = headers
        headers[.contentType] = "text/plain; charset=utf-8"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: message + "\n")))
    }
}

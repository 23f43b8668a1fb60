import Foundation
import HTTPTypes
import Hummingbird
package import Logging
import TourpackCore
import UnixSignals

/// How `serve-tiles` listens, what it sends, and how it misbehaves.
package struct TileServerConfiguration: Sendable {
    /// Loopback by default: a map source for offline builds and tests, not a package service.
    package var host: String = TileServerInfo.defaultHost
    /// 0 picks a free port; `onReady` learns which.
    package var port: Int = TileServerInfo.defaultPort
    package var faults = TileFaults()
    /// `Cache-Control: max-age=N` (and `Expires`, N seconds on) on every tile;
    /// nil sends neither, so a client falls back to its own freshness rule.
    package var maxAgeSeconds: Int? = TileServerInfo.defaultMaxAgeSeconds
    /// When set, tile requests must carry this key, in the `apiKeyHeader`
    /// header when that is set, else in the `apiKeyParameter` query parameter.
    package var requiredAPIKey: String?
    package var apiKeyParameter = "key"
    package var apiKeyHeader: String?
    /// Rendered tiles kept in memory, most recently used first.
    package var renderCacheCapacity = 512
    /// The access log: one line per request (method, path, status, time,
    /// size, fault); never a header or a query string, so never the key.
    package var logger = Logger(label: "tourpack.serve-tiles", factory: { StreamLogHandler.standardError(label: $0) })

    package init(host: String = TileServerInfo.defaultHost, port: Int = TileServerInfo.defaultPort, faults: TileFaults = TileFaults()) {
        self.host = host
        self.port = port
        self.faults = faults
    }

    /// Throws `FaultConfigurationError` for out-of-range faults or settings.
    package func validated() throws -> TileServerConfiguration {
        _ = try faults.validated()
        if let maxAgeSeconds, maxAgeSeconds < 0 {
            throw FaultConfigurationError(message: "--max-age must not be negative")
        }
        guard !apiKeyParameter.isEmpty else { throw FaultConfigurationError(message: "--api-key-param must not be empty") }
        if let apiKeyHeader, HTTPField.Name(apiKeyHeader) == nil {
            throw FaultConfigurationError(message: "--api-key-header '\(apiKeyHeader)' is not a valid header name")
        }
        guard renderCacheCapacity >= 0 else { throw FaultConfigurationError(message: "the render cache size must not be negative") }
        if requiredAPIKey?.isEmpty == true { throw FaultConfigurationError(message: "the required API key must not be empty") }
        return self
    }
}

/// Defaults shared by the CLI, the tests and `make tour`'s maps.
package enum TileServerInfo {
    package static let defaultHost = "127.0.0.1"
    package static let defaultPort = 8788
    package static let defaultMaxAgeSeconds = 86_400
}

/// The embedded map tile server (`tourpack serve-tiles`), on Hummingbird.
///
/// It lets `make tour` build the demo's maps with no internet, through the
/// same fetcher a real tile server gets, and lets tests drive that fetcher
/// over loopback with faults. Every tile is a 256×256 PNG, drawn here and
/// encoded by libavcodec, that shows its own "z/x/y"; the same tile gives
/// the same bytes, so its ETag never changes.
///
/// Start it in-process with `withRunning { port in … }` (tests, benchmarks),
/// or `run(onReady:)` under your own cancellation; the CLI uses
/// `runUntilSignalled`, which shuts down cleanly on SIGINT/SIGTERM.
///
/// Routes: `GET /{z}/{x}/{y}.png`, `GET /debug/stats`, `POST /debug/reset`
/// (also `POST /debug/stats/reset`, as serve-tts spells it), `GET /health`.
package struct TileServer: Sendable {
    package let configuration: TileServerConfiguration
    /// Live counters, the same ones `GET /debug/stats` shows.
    package let stats = TileStats()
    private let dice: TileFaultDice
    private let images: TileImages

    /// Throws `FaultConfigurationError` when faults or settings are out of range.
    package init(_ configuration: TileServerConfiguration = TileServerConfiguration()) throws {
        self.configuration = try configuration.validated()
        dice = TileFaultDice(configuration.faults)
        images = TileImages(capacity: configuration.renderCacheCapacity)
    }

    /// Serves until the calling task is cancelled. `onReady` gets the bound
    /// port once the socket listens.
    package func run(onReady: @escaping @Sendable (Int) async -> Void = { _ in }) async throws {
        try await application(onReady: onReady).run()
    }

    /// Serves until SIGINT or SIGTERM, then finishes in-flight requests and returns.
    package func runUntilSignalled(onReady: @escaping @Sendable (Int) async -> Void = { _ in }) async throws {
        try await application(onReady: onReady).runService(gracefulShutdownSignals: [.sigterm, .sigint])
    }

    /// Starts the server, runs `body` with its port, then shuts it down.
    package func withRunning<T>(_ body: (Int) async throws -> T) async throws -> T {
        try await ServerLifecycle.withRunning(name: "serve-tiles", serve: { try await run(onReady: $0) }, body)
    }

    /// The tile's PNG exactly as served, rendered on the calling thread:
    /// for tests and tools that want the picture without a socket.
    package static func renderPNG(z: Int, x: Int, y: Int) throws -> [UInt8] {
        let rendered = try TileImages.render(TileID(z: z, x: x, y: y))
        return Array(rendered.png.readableBytesView)
    }

    private func application(onReady: @escaping @Sendable (Int) async -> Void) -> some ApplicationProtocol {
        let routes = TileRoutes(configuration: configuration, stats: stats, dice: dice, images: images)
        let stats = self.stats
        let router = Router()
        router.add(middleware: AccessLog(stats: nil))
        router.get("{z}/{x}/{y}.png") { request, context in
            try await routes.tile(request, z: context.parameters.get("z"), x: context.parameters.get("x"), y: context.parameters.get("y"))
        }
        router.get("debug/stats") { _, _ in ErrorBody.json(.ok, try stats.json()) }
        let reset: @Sendable (Request, BasicRequestContext) async throws -> Response = { _, _ in
            stats.reset()
            return Response(status: .noContent)
        }
        router.post("debug/reset", use: reset)
        router.post("debug/stats/reset", use: reset)
        router.get("health") { _, _ in "ok" }
        let port = configuration.port
        return Application(
            router: router,
            // Idle or half-sent connections are closed after 30 s, as serve-tts's are.
            server: .http1(configuration: .init(idleTimeout: .seconds(30))),
            configuration: .init(address: .hostname(configuration.host, port: port), serverName: "tourpack-serve-tiles"),
            onServerRunning: { channel in await onReady(channel.localAddress?.port ?? port) },
            logger: configuration.logger)
    }
}

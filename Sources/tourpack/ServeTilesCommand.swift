import ArgumentParser
import Foundation
import TourpackServer

/// `tourpack serve-tiles`: the embedded map tile server, so `make tour`
/// builds the demo's maps with no internet and tests can fetch tiles from
/// a real HTTP server with faults.
struct ServeTiles: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve-tiles",
        abstract: "Serve labelled map tiles (GET /{z}/{x}/{y}.png) for offline builds and tests.",
        discussion: """
            Every tile is a 256×256 PNG encoded by libavcodec: a light background whose \
            colour follows the zoom, a 1-px dark border, and the tile's own "z/x/y" in large \
            digits. The same tile always gives the same bytes, so its ETag never changes. \
            Tiles are numbered XYZ (y grows south); z must be within 0...22 and x, y within \
            0..<2^z, else 400.

            Each tile carries ETag, Last-Modified (a fixed date) and Cache-Control: \
            max-age=--max-age with Expires; If-None-Match and If-Modified-Since get 304. \
            GET /debug/stats shows the counters as JSON; POST /debug/reset zeroes them.

            Faults (off by default; random ones are drawn per request from --fault-seed, \
            so a tile may fail once and succeed on retry):
              --latency-ms N       every tile answer takes at least N ms
              --failure-rate P     share answered 500 or 503
              --rate-limit-rate P  share answered 429 with Retry-After: --retry-after
              --truncate-rate P    share answered 200 whose body stops short of its Content-Length
              --html-rate P        share answered 200 with an HTML error page (text/html)
              --empty Z/X/Y        that tile has no data: 404 (or --empty-status 204); repeatable
              --empty-every N      tiles with (x + y) % N == 0 have no data, at every zoom
              --fail Z/X/Y         that tile always answers 500; repeatable
              --api-key-env NAME   require the key in $NAME, as ?--api-key-param= or in --api-key-header; else 401

            Prints the port it listens on as the first line of stdout (useful with --port 0); \
            the access log goes to stderr. Stops cleanly on SIGINT or SIGTERM.
            """
    )

    @Option(help: "Address to bind.") var host = TileServerInfo.defaultHost
    @Option(help: "Port to bind; 0 picks a free one.") var port = TileServerInfo.defaultPort

    @Option(name: .customLong("max-age"), help: "Seconds a tile stays fresh: sent as Cache-Control: max-age and Expires.")
    var maxAge = TileServerInfo.defaultMaxAgeSeconds
    @Flag(help: "Send neither Cache-Control nor Expires, so the client's own freshness rule (maxAgeDays) applies.")
    var noCacheHeaders = false
    @Option(help: "Rendered tiles kept in memory (LRU).") var renderCache = 512

    @Option(help: "Require the API key held in this environment variable.") var apiKeyEnv: String?
    @Option(help: "The query parameter that carries the key.") var apiKeyParam = "key"
    @Option(help: "Expect the key in this request header instead of the query string.") var apiKeyHeader: String?

    @Option(name: .customLong("latency-ms"), help: "Fault: every tile answer takes at least this many milliseconds.")
    var latencyMilliseconds = 0
    @Option(help: "Fault: share (0-1) of requests answered 500 or 503.") var failureRate = 0.0
    @Option(name: .customLong("rate-limit-rate"), help: "Fault: share of requests answered 429.") var rateLimitRate = 0.0
    @Option(help: "Fault: the Retry-After seconds sent with an injected 429.") var retryAfter = 1
    @Option(help: "Fault: share of 200 answers cut short of their Content-Length, the connection closed.")
    var truncateRate = 0.0
    @Option(help: "Fault: share of requests answered 200 with an HTML error page.") var htmlRate = 0.0
    @Option(help: ArgumentHelp("Fault: this tile has no data (repeatable).", valueName: "z/x/y")) var empty: [String] = []
    @Option(help: ArgumentHelp("Fault: tiles with (x + y) % N == 0 have no data, at every zoom.", valueName: "n"))
    var emptyEvery: Int?
    @Option(help: "Fault: the status for a tile with no data, 404 or 204.") var emptyStatus = 404
    @Option(help: ArgumentHelp("Fault: this tile always answers 500 (repeatable).", valueName: "z/x/y")) var fail: [String] = []
    @Option(help: "Fault: seed for the fault draws, for reproducible runs.") var faultSeed: UInt64 = 0x7469_6c65_7321

    func validate() throws {
        guard (0...65535).contains(port) else { throw ValidationError("--port must be within 0...65535") }
        do { _ = try settings(apiKey: "placeholder").validated() } catch { throw ValidationError("\(error)") }
    }

    /// The settled configuration; `apiKey` is the key read from `--api-key-env`.
    func settings(apiKey: String?) throws -> TileServerConfiguration {
        let faults = TileFaults(
            latencyMilliseconds: latencyMilliseconds, failureRate: failureRate, rateLimitRate: rateLimitRate,
            retryAfterSeconds: retryAfter, truncateRate: truncateRate, htmlRate: htmlRate,
            emptyTiles: Set(try empty.map(TileFaults.tile)), emptyEvery: emptyEvery, emptyStatus: emptyStatus,
            failingTiles: Set(try fail.map(TileFaults.tile)), seed: faultSeed)
        var configuration = TileServerConfiguration(host: host, port: port, faults: faults)
        configuration.maxAgeSeconds = noCacheHeaders ? nil : maxAge
        configuration.renderCacheCapacity = renderCache
        configuration.apiKeyParameter = apiKeyParam
        configuration.apiKeyHeader = apiKeyHeader
        configuration.requiredAPIKey = apiKeyEnv == nil ? nil : apiKey
        return configuration
    }

    func run() async throws {
        var key: String?
        if let apiKeyEnv {
            guard let value = ProcessInfo.processInfo.environment[apiKeyEnv], !value.isEmpty else {
                throw ValidationError("--api-key-env \(apiKeyEnv): the variable is not set")
            }
            key = value
        }
        let server = try TileServer(try settings(apiKey: key))
        try await server.runUntilSignalled { port in
            // Exactly the port, alone on the first line, unbuffered: scripts read it.
            FileHandle.standardOutput.write(Data("\(port)\n".utf8))
        }
    }
}

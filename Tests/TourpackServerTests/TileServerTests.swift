import Foundation
import Logging
import Testing
import TourpackAudio
import TourpackCore
import TourpackKit
import TourpackServer
import TourpackTesting

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Runs `body` against a fresh in-process serve-tiles on a free loopback port.
func withTileServer<T>(
    faults: TileFaults = TileFaults(),
    configure: (inout TileServerConfiguration) -> Void = { _ in },
    _ body: (_ client: TileClient, _ server: TileServer) async throws -> T
) async throws -> T {
    var configuration = TileServerConfiguration(port: 0, faults: faults)
    configuration.logger = Logger(label: "test.tiles", factory: { _ in SwiftLogNoOpLogHandler() })
    configure(&configuration)
    let server = try TileServer(configuration)
    return try await server.withRunning { port in try await body(TileClient(port: port), server) }
}

/// A plain HTTP client for the tile server: no cache of its own, so every
/// call reaches the server and a 304 comes back as a 304.
struct TileClient {
    let port: Int
    static let userAgent = "tourpack-tile-tests/1 (tests@example.com)"

    struct Answer {
        var status: Int
        var body: Data
        var headers: [String: String]

        /// A header by name, case-insensitively.
        func header(_ name: String) -> String? {
            headers.first { $0.key.lowercased() == name.lowercased() }?.value
        }
    }

    private static let session: URLSession = {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        return URLSession(configuration: configuration)
    }()

    func get(_ path: String, headers: [String: String] = [:]) async throws -> Answer {
        try await send("GET", path, headers: headers)
    }

    func send(_ method: String, _ path: String, headers: [String: String] = [:]) async throws -> Answer {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)\(path)")!)
        request.httpMethod = method
        request.setValue(Self.userAgent, forHTTPHeaderField: "User-Agent")
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let (data, response) = try await Self.session.data(for: request)
        let http = response as? HTTPURLResponse
        var fields: [String: String] = [:]
        for (name, value) in http?.allHeaderFields ?? [:] { fields["\(name)"] = "\(value)" }
        return Answer(status: http?.statusCode ?? 0, body: data, headers: fields)
    }

    /// `GET /debug/stats`, decoded.
    func stats() async throws -> [String: Any] {
        let answer = try await get("/debug/stats")
        return try #require(try JSONSerialization.jsonObject(with: answer.body) as? [String: Any])
    }
}

/// The width and height in a PNG's IHDR chunk, or nil when `data` is not a PNG.
func pngSize(_ data: Data) -> (width: Int, height: Int)? {
    let bytes = [UInt8](data)
    guard bytes.count > 24, bytes.prefix(8).elementsEqual([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]),
        bytes[12..<16].elementsEqual(Array("IHDR".utf8))
    else { return nil }
    func bigEndian(_ offset: Int) -> Int { bytes[offset..<offset + 4].reduce(0) { $0 << 8 | Int($1) } }
    return (bigEndian(16), bigEndian(20))
}

@Suite struct TileServerTests {
    @Test func servesA256PixelPNGThatFFprobeReads() async throws {
        try await withTileServer { client, _ in
            let answer = try await client.get("/14/8508/5807.png")
            #expect(answer.status == 200)
            #expect(answer.header("Content-Type") == "image/png")
            #expect(answer.header("Content-Length") == String(answer.body.count))
            let size = try #require(pngSize(answer.body), "the body should start with the PNG signature and IHDR")
            #expect(size.width == 256 && size.height == 256)

            let file = TemporaryFolder.path("tile", suffix: ".png")
            defer { TemporaryFolder.remove(file) }
            try answer.body.write(to: file)
            let probe = try await Tool.runOffThePool(
                "ffprobe",
                [
                    "-v", "error", "-select_streams", "v:0", "-show_entries", "stream=codec_name,width,height",
                    "-of", "csv=p=0", file.path,
                ]
            ).stdout
            #expect(probe.trimmingCharacters(in: .whitespacesAndNewlines) == "png,256,256")
        }
    }

    @Test func aTileIsTheSameBytesEveryTimeAndItsETagIsTheirHash() async throws {
        try await withTileServer(configure: { $0.renderCacheCapacity = 0 }) { client, _ in
            let first = try await client.get("/12/2200/1343.png")
            let second = try await client.get("/12/2200/1343.png")
            #expect(first.status == 200 && second.status == 200)
            #expect(first.body == second.body, "rendered twice (no cache), the bytes must not change")
            let etag = try #require(first.header("ETag"))
            #expect(etag == second.header("ETag"))

            let file = TemporaryFolder.path("tile", suffix: ".png")
            defer { TemporaryFolder.remove(file) }
            try first.body.write(to: file)
            let digest = try FileDigest.sha256(of: file).hex
            #expect(etag == "\"\(digest.prefix(16))\"")
            // The public renderer gives exactly what is served.
            #expect(Data(try TileServer.renderPNG(z: 12, x: 2200, y: 1343)) == first.body)
        }
    }

    @Test func differentTilesDiffer() async throws {
        try await withTileServer { client, _ in
            let tiles = ["/12/2200/1343.png", "/12/2201/1343.png", "/12/2200/1344.png", "/13/2200/1343.png", "/0/0/0.png"]
            var bodies: Set<Data> = [], etags: Set<String> = []
            for path in tiles {
                let answer = try await client.get(path)
                #expect(answer.status == 200, "\(path)")
                bodies.insert(answer.body)
                etags.insert(answer.header("ETag") ?? "")
            }
            #expect(bodies.count == tiles.count)
            #expect(etags.count == tiles.count)
        }
    }

    @Test func conditionalRequestsGet304WithValidatorsAndNoBody() async throws {
        try await withTileServer { client, _ in
            let fresh = try await client.get("/10/500/300.png")
            let etag = try #require(fresh.header("ETag"))
            #expect(fresh.header("Last-Modified") == "Fri, 02 Jan 1970 00:00:00 GMT")

            let matched = try await client.get("/10/500/300.png", headers: ["If-None-Match": etag])
            #expect(matched.status == 304)
            #expect(matched.body.isEmpty)
            #expect(matched.header("ETag") == etag)
            #expect(matched.header("Cache-Control") == "max-age=86400")

            #expect(try await client.get("/10/500/300.png", headers: ["If-None-Match": "*"]).status == 304)
            #expect(try await client.get("/10/500/300.png", headers: ["If-None-Match": "\"0123456789abcdef\", \(etag)"]).status == 304)
            let stale = try await client.get("/10/500/300.png", headers: ["If-None-Match": "\"0123456789abcdef\""])
            #expect(stale.status == 200)
            #expect(stale.body == fresh.body)
            // Another tile's ETag does not match this one.
            let other = try #require(try await client.get("/10/501/300.png").header("ETag"))
            #expect(try await client.get("/10/500/300.png", headers: ["If-None-Match": other]).status == 200)

            #expect(try await client.get("/10/500/300.png", headers: ["If-Modified-Since": "Fri, 02 Jan 1970 00:00:00 GMT"]).status == 304)
            #expect(try await client.get("/10/500/300.png", headers: ["If-Modified-Since": "Sat, 01 Jan 2000 00:00:00 GMT"]).status == 304)
            #expect(try await client.get("/10/500/300.png", headers: ["If-Modified-Since": "Thu, 01 Jan 1970 12:00:00 GMT"]).status == 200)
            // If-None-Match decides when both are sent.
            #expect(
                try await client.get(
                    "/10/500/300.png",
                    headers: [
                        "If-None-Match": "\"0123456789abcdef\"", "If-Modified-Since": "Sat, 01 Jan 2000 00:00:00 GMT",
                    ]
                ).status == 200)
        }
    }

    @Test func cacheHeadersFollowMaxAgeOrAreLeftOut() async throws {
        try await withTileServer { client, _ in
            let answer = try await client.get("/5/10/12.png")
            #expect(answer.header("Cache-Control") == "max-age=86400")
            #expect(answer.header("Expires")?.hasSuffix(" GMT") == true)
        }
        try await withTileServer(configure: { $0.maxAgeSeconds = 0 }) { client, _ in
            let answer = try await client.get("/5/10/12.png")
            #expect(answer.header("Cache-Control") == "max-age=0")
        }
        try await withTileServer(configure: { $0.maxAgeSeconds = nil }) { client, _ in
            let answer = try await client.get("/5/10/12.png")
            #expect(answer.status == 200)
            #expect(answer.header("Cache-Control") == nil)
            #expect(answer.header("Expires") == nil)
            #expect(answer.header("ETag") != nil, "validators are still sent, so conditional requests work")
            #expect(answer.header("Last-Modified") != nil)
        }
    }

    @Test func emptyAndFailingTiles() async throws {
        let faults = TileFaults(emptyTiles: [TileID(z: 14, x: 1, y: 2)], emptyEvery: 5, failingTiles: [TileID(z: 14, x: 3, y: 3)])
        try await withTileServer(faults: faults) { client, _ in
            #expect(try await client.get("/14/1/2.png").status == 404)
            #expect(try await client.get("/14/2/3.png").status == 404, "(2 + 3) % 5 == 0")
            #expect(try await client.get("/9/10/0.png").status == 404, "(10 + 0) % 5 == 0 at any zoom")
            #expect(try await client.get("/14/2/4.png").status == 200)
            for _ in 0..<3 {
                #expect(try await client.get("/14/3/3.png").status == 500, "a --fail tile fails every time")
            }
            let stats = try await client.stats()
            #expect(stats["empty"] as? Int == 3)
            #expect(stats["faults"] as? Int == 3)
        }
        try await withTileServer(faults: TileFaults(emptyTiles: [TileID(z: 14, x: 1, y: 2)], emptyStatus: 204)) { client, _ in
            let answer = try await client.get("/14/1/2.png")
            #expect(answer.status == 204)
            #expect(answer.body.isEmpty)
        }
    }

    @Test func theKeyTravelsAsAQueryParameter() async throws {
        let key = "tile-key-7f3a"
        try await withTileServer(configure: { $0.requiredAPIKey = key }) { client, _ in
            let missing = try await client.get("/3/1/1.png")
            #expect(missing.status == 401)
            let wrong = try await client.get("/3/1/1.png?key=WRONG-\(key)")
            #expect(wrong.status == 401)
            #expect(!String(decoding: wrong.body, as: UTF8.self).contains("WRONG"), "a 401 never echoes what was sent")
            #expect(try await client.get("/3/1/1.png?key=\(key)").status == 200)
            #expect(try await client.get("/3/1/1.png", headers: ["X-Api-Key": key]).status == 401, "only the query parameter counts")
            let stats = try await client.stats()
            #expect(stats["unauthorized"] as? Int == 3)
            #expect(stats["queryKeys"] as? [String] == ["key"])
        }
        try await withTileServer(configure: {
            $0.requiredAPIKey = key; $0.apiKeyParameter = "access_token"
        }) { client, _ in
            let underKey = try await client.get("/3/1/1.png?key=\(key)")
            let underToken = try await client.get("/3/1/1.png?access_token=\(key)")
            #expect(underKey.status == 401)
            #expect(underToken.status == 200)
        }
    }

    @Test func theKeyTravelsInAHeader() async throws {
        let key = "tile-key-header-91c2"
        try await withTileServer(configure: {
            $0.requiredAPIKey = key; $0.apiKeyHeader = "X-Api-Key"
        }) { client, _ in
            #expect(try await client.get("/3/1/1.png").status == 401)
            #expect(try await client.get("/3/1/1.png", headers: ["X-Api-Key": "nope"]).status == 401)
            #expect(try await client.get("/3/1/1.png?key=\(key)").status == 401, "only the header counts")
            let ok = try await client.get("/3/1/1.png", headers: ["X-Api-Key": key])
            #expect(ok.status == 200)
            #expect(pngSize(ok.body) != nil)
        }
    }

    @Test func tilesOutsideTheSchemeAre400() async throws {
        try await withTileServer { client, _ in
            for path in ["/23/0/0.png", "/3/8/0.png", "/3/0/8.png", "/abc/0/0.png", "/3/-1/0.png", "/3/1.5/0.png", "/3/0/x.png"] {
                let answer = try await client.get(path)
                #expect(answer.status == 400, "\(path)")
                #expect(answer.header("Content-Type")?.hasPrefix("text/plain") == true)
            }
            #expect(try await client.get("/22/4194303/4194303.png").status == 200, "the deepest corner exists")
            #expect(try await client.get("/3/1/1.jpg").status == 404, "not a route")
        }
    }

    @Test func statsCountEveryKindOfAnswerAndReset() async throws {
        let faults = TileFaults(emptyTiles: [TileID(z: 4, x: 0, y: 0)], failingTiles: [TileID(z: 4, x: 1, y: 1)])
        try await withTileServer(faults: faults, configure: { $0.requiredAPIKey = "k1" }) { client, server in
            let first = try await client.get("/4/2/2.png?key=k1&style=plain")
            let etag = try #require(first.header("ETag"))
            _ = try await client.get("/4/2/2.png?key=k1", headers: ["If-None-Match": etag])
            _ = try await client.get("/4/2/2.png?key=k1", headers: ["If-Modified-Since": "Fri, 02 Jan 1970 00:00:00 GMT"])
            _ = try await client.get("/4/3/3.png?key=k1")
            _ = try await client.get("/4/0/0.png?key=k1")
            _ = try await client.get("/4/1/1.png?key=k1")
            _ = try await client.get("/4/2/2.png")
            _ = try await client.get("/30/0/0.png")

            let stats = try await client.stats()
            #expect(stats["requests"] as? Int == 8)
            #expect(stats["ok"] as? Int == 2)
            #expect(stats["notModified"] as? Int == 2)
            #expect(stats["empty"] as? Int == 1)
            #expect(stats["faults"] as? Int == 1)
            #expect(stats["unauthorized"] as? Int == 1)
            #expect(stats["conditional"] as? Int == 2)
            #expect(stats["userAgents"] as? [String] == [TileClient.userAgent])
            #expect(stats["queryKeys"] as? [String] == ["key", "style"])
            let perTile = try #require(stats["perTile"] as? [String: [String: Int]])
            #expect(perTile["4/2/2"] == ["requests": 4, "ok": 1, "notModified": 2])
            #expect(perTile["4/3/3"] == ["requests": 1, "ok": 1, "notModified": 0])
            #expect(perTile.count == 4, "the out-of-range tile has no entry")
            #expect(server.stats.snapshot.ok == 2, "the in-process counters are the same ones")

            #expect(try await client.send("POST", "/debug/reset").status == 204)
            let zeroed = try await client.stats()
            #expect(zeroed["requests"] as? Int == 0)
            #expect(zeroed["ok"] as? Int == 0)
            #expect((zeroed["perTile"] as? [String: Any])?.isEmpty == true)
            #expect((zeroed["userAgents"] as? [String])?.isEmpty == true)
        }
    }

    @Test func injectedFaultsLookLikeABadTileServer() async throws {
        try await withTileServer(faults: TileFaults(failureRate: 1)) { client, _ in
            for _ in 0..<4 {
                let status = try await client.get("/6/1/1.png").status
                #expect(status == 500 || status == 503)
            }
        }
        try await withTileServer(faults: TileFaults(rateLimitRate: 1, retryAfterSeconds: 0)) { client, _ in
            let answer = try await client.get("/6/1/1.png")
            #expect(answer.status == 429)
            #expect(answer.header("Retry-After") == "0")
        }
        try await withTileServer(faults: TileFaults(htmlRate: 1)) { client, _ in
            let answer = try await client.get("/6/1/1.png")
            #expect(answer.status == 200)
            #expect(answer.header("Content-Type")?.hasPrefix("text/html") == true)
            #expect(String(decoding: answer.body, as: UTF8.self).contains("Service temporarily unavailable"))
        }
        try await withTileServer(faults: TileFaults(truncateRate: 1)) { client, _ in
            let full = Data(try TileServer.renderPNG(z: 6, x: 1, y: 1))
            do {
                let answer = try await client.get("/6/1/1.png")
                #expect(answer.body.count < full.count, "a truncated answer cannot carry the whole tile")
            } catch {
                // URLSession reports the connection closed before Content-Length: also a truncation.
            }
            #expect(try await client.stats()["faults"] as? Int == 1)
        }
    }

    @Test func faultsAreDrawnPerRequestAndReproducibleFromTheSeed() async throws {
        func statuses(seed: UInt64) async throws -> [Int] {
            try await withTileServer(faults: TileFaults(failureRate: 0.5, seed: seed)) { client, _ in
                var statuses: [Int] = []
                for _ in 0..<16 { statuses.append(try await client.get("/8/20/30.png").status) }
                return statuses
            }
        }
        let first = try await statuses(seed: 42)
        #expect(first.contains(200), "the same tile succeeds on some tries")
        #expect(first.contains { $0 >= 500 }, "and fails on others")
        #expect(try await statuses(seed: 42) == first)
    }

    @Test func latencyHoldsEveryAnswer() async throws {
        try await withTileServer(faults: TileFaults(latencyMilliseconds: 150)) { client, _ in
            let started = ContinuousClock.now
            let tile = try await client.get("/2/1/1.png")
            let outOfRange = try await client.get("/30/1/1.png")
            #expect(tile.status == 200)
            #expect(outOfRange.status == 400)
            #expect(started.duration(to: .now) >= .milliseconds(300), "each answer takes at least the latency")
        }
    }

    @Test func badSettingsAreRefused() throws {
        #expect(throws: FaultConfigurationError.self) {
            try TileServer(TileServerConfiguration(faults: TileFaults(failureRate: 0.7, htmlRate: 0.7)))
        }
        #expect(throws: FaultConfigurationError.self) { try TileServer(TileServerConfiguration(faults: TileFaults(emptyStatus: 500))) }
        #expect(throws: FaultConfigurationError.self) { try TileServer(TileServerConfiguration(faults: TileFaults(emptyEvery: 0))) }
        #expect(throws: FaultConfigurationError.self) { try TileFaults.tile("3/8/0") }
        #expect(throws: FaultConfigurationError.self) { try TileFaults.tile("3/1") }
        #expect(try TileFaults.tile("14/8508/5807") == TileID(z: 14, x: 8508, y: 5807))
        var configuration = TileServerConfiguration()
        configuration.apiKeyHeader = "bad header"
        #expect(throws: FaultConfigurationError.self) { try TileServer(configuration) }
    }

    @Test func serveTilesPrintsItsPortServesAndStopsOnSIGTERM() async throws {
        let executable = try #require(ExecutableTests.tourpackExecutable(), "build the tourpack product first (swift build)")
        let process = Process()
        process.executableURL = executable
        process.arguments = ["serve-tiles", "--port", "0", "--fail", "7/1/1", "--api-key-env", "TILE_TEST_KEY"]
        process.environment = ProcessInfo.processInfo.environment.merging(["TILE_TEST_KEY": "exe-key"]) { $1 }
        let stdout = Pipe(), stderr = Pipe()
        process.standardOutput = stdout
        process.standardError = stderr
        try process.run()
        defer { if process.isRunning { process.interrupt() } }

        let line = await ExecutableTests.firstLine(of: stdout.fileHandleForReading)
        let port = try #require(line.flatMap { Int($0) }, "first stdout line should be the port, got \(line ?? "nothing")")
        let client = TileClient(port: port)
        let tile = try await client.get("/7/2/2.png?key=exe-key")
        #expect(tile.status == 200)
        #expect(pngSize(tile.body)?.width == 256)
        #expect(try await client.get("/7/1/1.png?key=exe-key").status == 500)
        #expect(try await client.get("/7/2/2.png").status == 401)

        kill(process.processIdentifier, SIGTERM)
        let status = await ExecutableTests.waitForExit(process)
        #expect(status == 0, "clean exit after SIGTERM")
        let log = String(decoding: stderr.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(log.contains("path=/7/2/2.png"), "the access log names the tile")
        #expect(!log.contains("exe-key"), "the key never reaches the log")
    }
}

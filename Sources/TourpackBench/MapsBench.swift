import Foundation
import Logging
import TourpackCore
import TourpackKit
import TourpackMaps
import TourpackServer
import TourpackTesting

#if canImport(Glibc)
import Glibc
#endif

/// `tourpack-bench maps [--tiles 3000] [--big-tiles 20000] [--latency-ms 20] [--big-concurrency 8]`
///
/// Runs the real `tourpack build` (the release executable beside this one)
/// as a child process against an in-process serve-tiles that answers every
/// tile after `--latency-ms`, and an in-process serve-tts (the embedded
/// voice) for the audio, which is kept to one short narration per tour:
/// 1. throughput: one tour of about `--tiles` tiles (zooms 12–15, bbox),
///    `concurrency: 4`, `requestsPerSecond: 0`, a cold state folder. The
///    figure is tiles downloaded / the maps phase's wall time, from the
///    `started` event to the last `mapsDone` (the maps phase runs beside the
///    audio, from the start of the build); tiles / the whole build's
///    `wallSeconds` is printed too. The ceiling is concurrency / latency.
/// 2. memory: two tours, far apart (no shared tile), of about `--big-tiles`
///    tiles in all (zooms 12–16, bbox), `concurrency: --big-concurrency`,
///    cold: the build's own peak RSS (`peakMemoryBytes`, its `VmHWM`), wall
///    time, tiles downloaded and the packs' size on disk; then the warm
///    rebuild of the same state with nothing changed, which must send no
///    tile request.
///
/// Each tour's `bufferMiles` is worked out here with `TileMath`, so the tile
/// count lands near the target; the exact count is the build's own (`started`).
enum MapsBench {
    static func run(_ arguments: [String]) async -> Int32 {
        func option(_ name: String, _ fallback: Int) -> Int {
            arguments.firstIndex(of: name).flatMap { arguments.indices.contains($0 + 1) ? Int(arguments[$0 + 1]) : nil } ?? fallback
        }
        let throughputTiles = option("--tiles", 3_000)
        let bigTiles = option("--big-tiles", 20_000)
        let latencyMs = option("--latency-ms", 20)
        let bigConcurrency = option("--big-concurrency", 8)
        let executable = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
            .appendingPathComponent("tourpack")
        let scratch = TemporaryFolder.path("tourpack-bench-maps")
        defer { TemporaryFolder.remove(scratch) }
        guard FileManager.default.isExecutableFile(atPath: executable.path) else {
            print("maps bench: \(executable.path) is missing; run `swift build -c release --product tourpack` first")
            return 1
        }
        do {
            let quiet = Logger(label: "bench", factory: { _ in SwiftLogNoOpLogHandler() })
            var ttsConfiguration = TTSServerConfiguration(port: 0, faults: FaultInjection())
            ttsConfiguration.logger = quiet
            var tileConfiguration = TileServerConfiguration(port: 0, faults: TileFaults(latencyMilliseconds: latencyMs))
            tileConfiguration.logger = quiet
            let tileServer = try TileServer(tileConfiguration)
            return try await TTSServer(ttsConfiguration).withRunning { ttsPort in
                try await tileServer.withRunning { tilePort in
                    let servers = Servers(
                        endpoint: "http://127.0.0.1:\(ttsPort)", tilesURL: "http://127.0.0.1:\(tilePort)/{z}/{x}/{y}.png", tiles: tileServer
                    )
                    return try await measureAll(
                        executable, scratch: scratch, servers: servers, throughputTiles: throughputTiles, bigTiles: bigTiles,
                        latencyMs: latencyMs, bigConcurrency: bigConcurrency)
                }
            }
        } catch {
            print("maps bench failed: \(error)")
            return 1
        }
    }

    struct Servers {
        var endpoint: String
        var tilesURL: String
        var tiles: TileServer
    }

    private static func measureAll(
        _ executable: URL, scratch: URL, servers: Servers, throughputTiles: Int, bigTiles: Int, latencyMs: Int, bigConcurrency: Int
    ) async throws -> Int32 {
        // 1. Throughput at concurrency 4.
        let small = try generate(
            into: scratch.appendingPathComponent("throughput"), tours: 1, targetTiles: throughputTiles, zooms: 12...15, concurrency: 4)
        let cold = try await measure(executable, pipeline: small, servers: servers)
        let ceiling = 4 / (Double(max(latencyMs, 1)) / 1000)
        let mapsRate = Double(cold.tilesDownloaded) / max(cold.mapsSeconds, 1e-9)
        let buildRate = Double(cold.tilesDownloaded) / max(cold.pipelineSeconds, 1e-9)

        // 2. Memory of a ~20,000-tile build, then its warm rebuild.
        let big = try generate(
            into: scratch.appendingPathComponent("memory"), tours: 2, targetTiles: bigTiles, zooms: 12...16, concurrency: bigConcurrency)
        let bigCold = try await measure(executable, pipeline: big, servers: servers)
        let bigWarm = try await measure(executable, pipeline: big, servers: servers)
        let packBytes = packSizes(big.appendingPathComponent("Documents"))

        let mb = { (bytes: Int64) in Double(bytes) / 1_048_576 }
        print(
            "maps: serve-tiles in-process, \(latencyMs) ms per tile answer; tourpack build as a child process, cold state folder unless warm"
        )
        let rows: [[String]] = [
            ["run", "tiles", "requests", "downloaded", "maps s", "build s", "peak RSS", "packs", "exit"],
            [
                "throughput, c=4, cold", "\(cold.plannedTiles)", "\(cold.tileRequests)", "\(cold.tilesDownloaded)",
                String(format: "%.2f", cold.mapsSeconds), String(format: "%.2f", cold.pipelineSeconds),
                String(format: "%.1f MB", mb(cold.peakBytes)), "\(cold.tilePacks)", "\(cold.exitStatus)",
            ],
            [
                "\(bigTiles.grouped) tiles, c=\(bigConcurrency), cold", "\(bigCold.plannedTiles)", "\(bigCold.tileRequests)",
                "\(bigCold.tilesDownloaded)", String(format: "%.2f", bigCold.mapsSeconds), String(format: "%.2f", bigCold.pipelineSeconds),
                String(format: "%.1f MB", mb(bigCold.peakBytes)), "\(bigCold.tilePacks)", "\(bigCold.exitStatus)",
            ],
            [
                "\(bigTiles.grouped) tiles, warm rebuild", "\(bigWarm.plannedTiles)", "\(bigWarm.tileRequests)",
                "\(bigWarm.tilesDownloaded)",
                String(format: "%.2f", bigWarm.mapsSeconds), String(format: "%.2f", bigWarm.pipelineSeconds),
                String(format: "%.1f MB", mb(bigWarm.peakBytes)), "\(bigWarm.tilePacks)", "\(bigWarm.exitStatus)",
            ],
        ]
        printTable(rows)
        print(
            String(
                format:
                    "maps throughput at concurrency 4: %.1f tiles/s over the maps phase (%d tiles in %.2f s; ceiling 4 / %d ms = %.0f tiles/s, %.0f%% of it)",
                mapsRate, cold.tilesDownloaded, cold.mapsSeconds, latencyMs, ceiling, mapsRate / ceiling * 100))
        print(
            String(
                format: "maps throughput at concurrency 4, whole build: %.1f tiles/s (%d tiles / %.2f s wallSeconds, audio included)",
                buildRate, cold.tilesDownloaded, cold.pipelineSeconds))
        print(
            String(
                format:
                    "maps %@ tiles (%d planned in %d tours, %d downloaded): peak RSS %.1f MB, %.2f s wall, packs %.1f MB on disk (%d files); %.0f tiles/s at concurrency %d (ceiling %.0f)",
                bigTiles.grouped, bigCold.plannedTiles, 2, bigCold.tilesDownloaded, mb(bigCold.peakBytes), bigCold.pipelineSeconds,
                mb(packBytes.bytes), packBytes.files, Double(bigCold.tilesDownloaded) / max(bigCold.mapsSeconds, 1e-9), bigConcurrency,
                Double(bigConcurrency) / (Double(max(latencyMs, 1)) / 1000)))
        print(
            String(
                format: "maps warm rebuild of the same state: %.2f s wall, %d tile requests (server saw %d), %d packs written",
                bigWarm.pipelineSeconds, bigWarm.tileRequests, bigWarm.serverRequests, bigWarm.tilePacks))
        let complete = cold.tilesDownloaded == cold.plannedTiles && bigCold.tilesDownloaded == bigCold.plannedTiles
        let warmQuiet = bigWarm.tileRequests == 0 && bigWarm.serverRequests == 0 && bigWarm.tilePacks == 0
        let memoryOK = bigCold.peakBytes > 0 && bigCold.peakBytes < Budgets.bytes(megabytes: 200)
        print("every planned tile downloaded on the cold builds: \(complete ? "PASS" : "FAIL")")
        print("tile requests on the warm rebuild: \(bigWarm.tileRequests) (\(warmQuiet ? "PASS" : "FAIL"))")
        print(
            String(
                format: "peak memory %@ tiles < 200 MB: %.1f MB (%@)", bigTiles.grouped, mb(bigCold.peakBytes), memoryOK ? "PASS" : "FAIL"))
        let exits = [cold, bigCold, bigWarm].allSatisfy { $0.exitStatus == 0 }
        if !exits { print("maps: a build exited non-zero; its events are in the table's exit column") }
        return exits && complete && warmQuiet && memoryOK ? 0 : 1
    }

    struct Measurement {
        /// `started.tiles`: the packs' tiles summed over tours.
        var plannedTiles = 0
        var tileRequests = 0
        var tilesDownloaded = 0
        var tilePacks = 0
        /// From the `started` event to the last `mapsDone`.
        var mapsSeconds = 0.0
        /// The summary's `wallSeconds`.
        var pipelineSeconds = 0.0
        var peakBytes: Int64 = 0
        /// Tile requests the server counted during this build.
        var serverRequests = 0
        var exitStatus: Int32 = 0
    }

    /// One build of `pipeline` (its output and state sit beside it: cold the
    /// first time, warm the next), its NDJSON read back.
    private static func measure(_ executable: URL, pipeline folder: URL, servers: Servers) async throws -> Measurement {
        let events = folder.appendingPathComponent("events-\(UUID().uuidString).ndjson")
        defer { try? FileManager.default.removeItem(at: events) }
        let before = servers.tiles.stats.snapshot.requests
        let status = try await spawn(
            executable.path,
            [
                "build", folder.appendingPathComponent("pipeline.yaml").path, "--json",
                "--endpoint", servers.endpoint, "--tiles-url", servers.tilesURL,
            ], stdout: events.path)
        var result = Measurement(exitStatus: status)
        result.serverRequests = servers.tiles.stats.snapshot.requests - before
        var startedAt: Double?
        var lastMaps: Double?
        for line in try String(contentsOf: events, encoding: .utf8).split(separator: "\n") {
            guard let event = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { continue }
            let elapsed = event["elapsedSeconds"] as? Double ?? 0
            switch event["event"] as? String {
            case "started":
                startedAt = elapsed
                result.plannedTiles = event["tiles"] as? Int ?? 0
            case "mapsDone":
                lastMaps = max(lastMaps ?? 0, elapsed)
            case "finished":
                result.tileRequests = event["tileRequests"] as? Int ?? 0
                result.tilesDownloaded = event["tilesDownloaded"] as? Int ?? 0
                result.tilePacks = event["tilePacks"] as? Int ?? 0
                result.pipelineSeconds = event["wallSeconds"] as? Double ?? 0
                result.peakBytes = (event["peakMemoryBytes"] as? NSNumber)?.int64Value ?? 0
            case "error":
                print("maps: build error: \(event["message"] as? String ?? "?")")
            default:
                break
            }
        }
        if let startedAt, let lastMaps { result.mapsSeconds = lastMaps - startedAt }
        return result
    }

    /// The tile packs under `Documents/OfflineTours`, counted and summed.
    private static func packSizes(_ documents: URL) -> (files: Int, bytes: Int64) {
        let offline = documents.appendingPathComponent("OfflineTours")
        var files = 0
        var bytes: Int64 = 0
        for folder in (try? FileManager.default.contentsOfDirectory(atPath: offline.path)) ?? [] {
            let pack = offline.appendingPathComponent(folder).appendingPathComponent("tiles.mbtiles")
            guard let size = (try? FileManager.default.attributesOfItem(atPath: pack.path))?[.size] as? NSNumber else { continue }
            files += 1
            bytes += size.int64Value
        }
        return (files, bytes)
    }

    /// Waits for the child on a thread of its own, so the in-process servers
    /// keep every thread of the concurrency pool (2 on a 2-core machine).
    private static func spawn(_ path: String, _ arguments: [String], stdout: String) async throws -> Int32 {
        try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Result { try Child.run(path, arguments, stdout: stdout).status }) }.start()
        }
    }

    /// `tours` tours, each a diagonal route of up to 0.2° × 0.3° with one POI and one
    /// short narration, a degree apart so no two share a tile at zoom 12, and
    /// a pipeline whose `bufferMiles` gives about `targetTiles` tiles in all.
    private static func generate(into folder: URL, tours: Int, targetTiles: Int, zooms: ClosedRange<Int>, concurrency: Int) throws -> URL {
        let tourFolder = folder.appendingPathComponent("tours")
        try FileManager.default.createDirectory(at: tourFolder, withIntermediateDirectories: true)
        func routes(scale: Double) -> [[Coordinate]] {
            (0..<tours).map { index -> [Coordinate] in
                let lat = 46.4 + Double(index), lon = 10.3 + Double(index)
                return [
                    Coordinate(latitude: lat, longitude: lon), Coordinate(latitude: lat + 0.12 * scale, longitude: lon + 0.1 * scale),
                    Coordinate(latitude: lat + 0.2 * scale, longitude: lon + 0.3 * scale),
                ]
            }
        }
        // A small target gets a shorter route, so that a buffer is left to tune.
        let unbuffered = tileCount(routes(scale: 1), bufferMiles: 0, zooms: zooms)
        let scale = min(1, (Double(targetTiles) / Double(max(1, unbuffered))).squareRoot() * 0.7)
        let routes = routes(scale: scale)
        let buffer = bufferMiles(routes: routes, targetTiles: targetTiles, zooms: zooms)
        for (index, route) in routes.enumerated() {
            let waypoints = route.map { "{\"latitude\": \($0.latitude), \"longitude\": \($0.longitude)}" }.joined(separator: ", ")
            let tour = """
                {"id": "\(String(format: "00000000-0000-4000-a000-%012x", index + 1))", "name": "Maps Bench \(index + 1)",
                 "language": "en-US", "version": 1, "route": {"waypoints": [\(waypoints)]},
                 "pois": [{"id": "\(String(format: "00000000-0000-4000-b000-%012x", index + 1))", "name": "Lookout \(index + 1)",
                           "location": {"latitude": \(route[1].latitude), "longitude": \(route[1].longitude)}, "triggerRadiusMeters": 300,
                           "narrations": {"approaching": "The lookout is just ahead on the left."}}]}
                """
            try tour.write(to: tourFolder.appendingPathComponent("tour\(index + 1).json"), atomically: true, encoding: .utf8)
        }
        let voice = URL(fileURLWithPath: "voices/local-en-us.yaml").standardizedFileURL.path
        try """
        version: 1
        tours: ["tours/*.json"]
        voice: \(voice)
        formats: [aac]
        tts: {api: google, endpoint: "http://127.0.0.1:9", concurrency: 4, requestsPerMinute: 100000}
        output: Documents
        state: state
        maps:
          minZoom: \(zooms.lowerBound)
          maxZoom: \(zooms.upperBound)
          bufferMiles: \(String(format: "%.3f", buffer))
          selection: bbox
          source:
            url: http://127.0.0.1:9/{z}/{x}/{y}.png
            name: tourpack-bench-tiles
            attribution: "tourpack bench tiles (generated)"
            userAgent: "tourpack-bench maps"
            concurrency: \(concurrency)
            requestsPerSecond: 0
        """.write(to: folder.appendingPathComponent("pipeline.yaml"), atomically: true, encoding: .utf8)
        return folder
    }

    /// The bufferMiles (to 0.001) whose bbox coverage over `routes` comes
    /// closest to `targetTiles`, by bisection (the count grows with the buffer).
    private static func bufferMiles(routes: [[Coordinate]], targetTiles: Int, zooms: ClosedRange<Int>) -> Double {
        func tiles(_ miles: Double) -> Int { tileCount(routes, bufferMiles: miles, zooms: zooms) }
        var low = 0.0, high = 50.0
        for _ in 0..<40 {
            let middle = (low + high) / 2
            if tiles(middle) < targetTiles { low = middle } else { high = middle }
        }
        let candidates = [(low * 1000).rounded(.down) / 1000, (high * 1000).rounded(.up) / 1000]
        return candidates.min { abs(tiles($0) - targetTiles) < abs(tiles($1) - targetTiles) } ?? high
    }

    /// The bbox tiles of every route (its middle waypoint is the tour's POI), summed.
    private static func tileCount(_ routes: [[Coordinate]], bufferMiles: Double, zooms: ClosedRange<Int>) -> Int {
        let settings = MapSettings(minZoom: zooms.lowerBound, maxZoom: zooms.upperBound, bufferMiles: bufferMiles, selection: .bbox)
        return routes.reduce(0) { $0 + (TileMath.coverage(route: $1, pois: [$1[1]], settings: settings)?.tileCount ?? 0) }
    }

    private static func printTable(_ rows: [[String]]) {
        let widths = rows[0].indices.map { column in rows.map { $0[column].count }.max() ?? 0 }
        for (index, row) in rows.enumerated() {
            let cells = row.enumerated().map { column, cell in
                column == 0
                    ? cell.padding(toLength: widths[column], withPad: " ", startingAt: 0)
                    : String(repeating: " ", count: widths[column] - cell.count) + cell
            }
            print("maps  " + cells.joined(separator: "  "))
            if index == 0 { print("maps  " + widths.map { String(repeating: "-", count: $0) }.joined(separator: "  ")) }
        }
    }
}

extension Int {
    fileprivate var grouped: String {
        let digits = String(self)
        var out = ""
        for (index, character) in digits.enumerated() {
            if index > 0, (digits.count - index) % 3 == 0 { out.append(",") }
            out.append(character)
        }
        return out
    }
}

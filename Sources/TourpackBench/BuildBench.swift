import Foundation
import Logging
import TourpackCore
import TourpackKit
import TourpackServer
import TourpackTesting

#if canImport(Glibc)
import Glibc
#endif

/// `tourpack-bench build [--pois 300] [--warm-items 3000] [--warm-only]
/// [--short-narrations] [--warm-runs 1] [--no-captions-cost] [--keep FOLDER]`
///
/// Runs the real `tourpack build` (the executable beside this one)
/// as a child process against an in-process serve-tts, and reports its wall
/// time and peak memory (the child's own `VmHWM`, which its summary reports;
/// `ru_maxrss` from `wait4` would also count this process's memory, shared
/// by the spawned child before `exec`):
/// 1. the demo pipeline, as `make tour` builds it (with an in-process
///    serve-tiles for its map source);
/// 2. the same with the server answering after 150 ms;
/// 3. generated tours of 30 and of `--pois` POIs (three short phases each):
///    peak memory must stay flat as the tours grow, because the build keeps
///    only `concurrency` + cores items in flight;
/// 4. a warm rebuild of the demo and of the `--pois` set, nothing changed:
///    every file comes from the output cache (0 requests, 0 encodes);
/// 5. `WarmRebuildBench`: cold, then warm with captions, at 3,000 items of
///    paragraph narrations (`Narrations.paragraphs`), in ms per item beyond
///    start-up, `--warm-runs` rebuilds each printed; then the 3,000 items
///    with `captions: off` too, warm, against the same with captions
///    (`--no-captions-cost` leaves that out). `--short-narrations` builds
///    the catalogue of one or two sentences per phase instead, at 3,000 and
///    12,000 items, as issues 39 to 49 measured it. `--keep FOLDER` builds
///    the catalogues there and leaves them, so a profiler can rebuild them;
///    a catalogue already there is rebuilt warm, not cold.
///
/// The `--pois` build is also held to the streaming issue's ceiling, peak
/// RSS ≤ 200 MB (`StreamBench.peakGoalMB`; `tourpack-bench stream` holds
/// 30-minute narrations to it).
enum BuildBench {
    static func run(_ arguments: [String]) async -> Int32 {
        let pois = arguments.firstIndex(of: "--pois").flatMap { arguments.indices.contains($0 + 1) ? Int(arguments[$0 + 1]) : nil } ?? 300
        let value = { (name: String) in
            arguments.firstIndex(of: name).flatMap { arguments.indices.contains($0 + 1) ? arguments[$0 + 1] : nil }
        }
        var warm = WarmOptions()
        if arguments.contains("--short-narrations") { warm.narrations = .short }
        warm.runs = max(1, value("--warm-runs").flatMap { Int($0) } ?? 1)
        warm.captionsCost = !arguments.contains("--no-captions-cost")
        // `--warm-items 3000,12000`: the sizes of the warm rebuild with captions (0 leaves it out).
        warm.sizes =
            value("--warm-items").map { $0.split(separator: ",").compactMap { Int($0) }.filter { $0 > 0 } }
            ?? (warm.narrations == .short ? [3_000, 12_000] : [3_000])
        let executable = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
            .appendingPathComponent("tourpack")
        let kept = value("--keep").map { URL(fileURLWithPath: $0).standardizedFileURL }
        let scratch = kept ?? TemporaryFolder.path("tourpack-bench")
        defer { if kept == nil { TemporaryFolder.remove(scratch) } }
        // `--warm-only`: the warm rebuilds alone, without the demo and memory builds.
        if arguments.contains("--warm-only") { return await warmRebuilds(executable, warm, scratch: scratch) }
        do {
            let demo = URL(fileURLWithPath: "pipelines/demo.yaml")
            var results: [(String, Measurement)] = []
            results.append(
                (
                    "demo, no latency",
                    try await measure(executable, pipeline: demo, scratch: scratch, name: "demo", latencyMs: 0, tiles: true)
                ))
            results.append(
                (
                    "demo, warm rebuild",
                    try await measure(executable, pipeline: demo, scratch: scratch, name: "demo", latencyMs: 0, tiles: true)
                ))
            results.append(
                (
                    "demo, 150 ms latency",
                    try await measure(executable, pipeline: demo, scratch: scratch, name: "demo150", latencyMs: 150, tiles: true)
                ))
            var memory: [Int] = []
            var goal = (text: "", passed: false)
            for count in [30, pois] {
                let pipeline = try generate(pois: count, into: scratch.appendingPathComponent("gen\(count)"))
                let result = try await measure(executable, pipeline: pipeline, scratch: scratch, name: "gen\(count)", latencyMs: 0)
                results.append(("\(count) POIs, \(count * 3) items", result))
                memory.append(result.peakKB)
                if count == pois {
                    goal = StreamBench.memoryGoal(result); goal.text = String(format: "%.2f s wall, ", result.wallSeconds) + goal.text
                }
                if count == pois {
                    let warm = try await measure(executable, pipeline: pipeline, scratch: scratch, name: "gen\(count)", latencyMs: 0)
                    results.append(("\(count) POIs, warm rebuild", warm))
                }
            }
            for (label, result) in results {
                print(
                    String(
                        format:
                            "build %@: %.2f s wall (pipeline %.2f s), peak RSS %.1f MB, %d files written, %d reused, %d requests, %d encodes, exit %d",
                        label, result.wallSeconds, result.pipelineSeconds, Double(result.peakKB) / 1024, result.files, result.reused,
                        result.requests, result.encodes, result.exitStatus))
            }
            let growth = Double(memory[1]) / Double(max(1, memory[0]))
            let bounded = growth < 1.5
            print(
                String(
                    format: "build memory: %d → %d POIs grows peak RSS %.2f× (bounded by concurrency: %@)", 30, pois, growth,
                    bounded ? "PASS" : "FAIL"))
            print("build memory goal: \(pois) POIs, \(pois * 3) items: \(goal.text)")
            let warmStatus = await warmRebuilds(executable, warm, scratch: scratch)
            return results.allSatisfy { $0.1.exitStatus == 0 } && bounded && goal.passed && warmStatus == 0 ? 0 : 1
        } catch {
            print("build bench failed: \(error)")
            return 1
        }
    }

    /// What the warm rebuilds build and how often.
    struct WarmOptions {
        var sizes: [Int] = []
        var narrations = Narrations.paragraphs
        /// Measured rebuilds at each size, each printed.
        var runs = 1
        /// Whether the first size is also rebuilt with `captions: off`, in turns with captions.
        var captionsCost = true
    }

    /// `WarmRebuildBench` at each size, a line per run; 1 when a rebuild did not reuse everything.
    private static func warmRebuilds(_ executable: URL, _ options: WarmOptions, scratch: URL) async -> Int32 {
        do {
            var reusedEverything = true
            for items in options.sizes {
                let results = try await withServeTTS { port in
                    try WarmRebuildBench.run(
                        executable, items: items, narrations: options.narrations, runs: options.runs, scratch: scratch, port: port)
                }
                for result in results {
                    print(WarmRebuildBench.report(result))
                    reusedEverything = reusedEverything && result.reusedEverything
                }
            }
            // What captions cost a warm rebuild, at the first size.
            if options.captionsCost, let items = options.sizes.first {
                let cost = try await withServeTTS { port in
                    try WarmRebuildBench.captionsCost(
                        executable, items: items, narrations: options.narrations, scratch: scratch, port: port)
                }
                print(WarmRebuildBench.report(cost))
                reusedEverything = reusedEverything && cost.reusedEverything
            }
            return reusedEverything ? 0 : 1
        } catch {
            print("build bench failed: \(error)")
            return 1
        }
    }

    /// `body`, off the cooperative pool, with a fresh in-process serve-tts on `port`.
    private static func withServeTTS<T: Sendable>(_ body: @escaping @Sendable (_ port: Int) throws -> T) async throws -> T {
        var configuration = TTSServerConfiguration(port: 0)
        configuration.logger = Logger(label: "bench", factory: { _ in SwiftLogNoOpLogHandler() })
        return try await TTSServer(configuration).withRunning { port in
            try await OffPool.run { try body(port) }
        }
    }

    struct Measurement {
        var wallSeconds: Double
        var pipelineSeconds: Double
        var peakKB: Int
        var files: Int
        var requests: Int
        var reused: Int
        var encodes: Int
        var exitStatus: Int32
        /// The child's CPU time, user and system.
        var cpuSeconds = 0.0
        /// The summary's time since the process started (start-up, loading and planning included).
        var processSeconds: Double?
        /// The end of what a build that failed wrote to stderr; nil when it exited 0.
        var failure: String? = nil
    }

    /// One build of the output and state named `name` (fresh the first
    /// time, warm the next), against a fresh in-process server. With
    /// `tiles`, an in-process serve-tiles too: the demo pipeline names a map
    /// source, and without a server there its tours fail.
    static func measure(_ executable: URL, pipeline: URL, scratch: URL, name: String, latencyMs: Int, tiles: Bool = false)
        async throws -> Measurement
    {
        let quiet = Logger(label: "bench", factory: { _ in SwiftLogNoOpLogHandler() })
        var configuration = TTSServerConfiguration(port: 0, faults: FaultInjection(latencyMilliseconds: latencyMs))
        configuration.logger = quiet
        return try await TTSServer(configuration).withRunning { port in
            let folder = scratch.appendingPathComponent(name)
            guard tiles else { return try await OffPool.run { try build(executable, pipeline: pipeline, folder: folder, port: port) } }
            var tileConfiguration = TileServerConfiguration(port: 0)
            tileConfiguration.logger = quiet
            return try await TileServer(tileConfiguration).withRunning { tilePort in
                let tilesURL = "http://127.0.0.1:\(tilePort)/{z}/{x}/{y}.png"
                return try await OffPool.run { try build(executable, pipeline: pipeline, folder: folder, port: port, tilesURL: tilesURL) }
            }
        }
    }

    /// One `tourpack build --json` of `pipeline` into `folder`'s Documents
    /// and state (fresh when the folder is new), against the server on
    /// `port`. `StreamBench` and `PeerBench` run it against a server they
    /// keep for several builds. It blocks the calling thread until the
    /// child exits, as `measure` always has.
    static func build(_ executable: URL, pipeline: URL, folder: URL, port: Int, tilesURL: String? = nil, extra: [String] = []) throws
        -> Measurement
    {
        let events = folder.appendingPathComponent("events.ndjson")
        let errors = folder.appendingPathComponent("build.err")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let started = ContinuousClock.now
        let (status, peakKB, cpuSeconds) = try Child.runCounting(
            executable.path,
            [
                "build", pipeline.path, "--endpoint", "http://127.0.0.1:\(port)", "--json",
                "--output", folder.appendingPathComponent("Documents").path, "--state", folder.appendingPathComponent("state").path,
            ] + (tilesURL.map { ["--tiles-url", $0] } ?? []) + extra, stdout: events.path, stderr: errors.path)
        let wall = started.duration(to: .now)
        let failure = status == 0 ? nil : ((try? String(contentsOf: errors, encoding: .utf8)) ?? "").suffix(600).description
        let lines = try String(contentsOf: events, encoding: .utf8).split(separator: "\n")
        let finished = lines.last.flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] } ?? [:]
        return Measurement(
            wallSeconds: wall.seconds,
            pipelineSeconds: finished["wallSeconds"] as? Double ?? 0,
            peakKB: (finished["peakMemoryBytes"] as? Int).map { $0 / 1024 } ?? peakKB,
            files: finished["files"] as? Int ?? 0, requests: finished["requests"] as? Int ?? 0,
            reused: finished["reusedFiles"] as? Int ?? 0, encodes: finished["encodes"] as? Int ?? 0, exitStatus: status,
            cpuSeconds: cpuSeconds, processSeconds: finished["processSeconds"] as? Double, failure: failure)
    }

    /// How long a generated catalogue's narrations are.
    enum Narrations {
        /// One or two sentences per phase, the same six sentences in turn:
        /// the catalogue of issues 39 to 49, kept so their figures compare.
        case short
        /// Issue 50's realistic lengths, from `NarrationProse` with a fixed
        /// seed: `approaching` one sentence after "You are approaching …",
        /// `detailed` a paragraph of 4-9 sentences, `guidedTour` one of 3-6;
        /// `loudness: off`.
        case paragraphs
    }

    /// Tours of 30 POIs each, three phases per POI (`narrations` says how
    /// long), under cache budgets that hold 12,000 items (the default 500 MB
    /// refuses a build of about 6,000).
    static func generate(pois: Int, into folder: URL, captions: Bool = true, narrations: Narrations = .short) throws -> URL {
        let tours = folder.appendingPathComponent("tours")
        try FileManager.default.createDirectory(at: tours, withIntermediateDirectories: true)
        let sentences = [
            "The road climbs in tight hairpins above the valley.", "On a clear day you can see the glacier to the west.",
            "Marmots often sit on the rocks near the parking area.", "The pass was first crossed by a paved road in 1935.",
            "Keep to the right and watch for cyclists on the descent.", "The hut ahead serves soup and strudel until dusk.",
        ]
        var prose = NarrationProse(seed: 0x7061_7261_6772_6170)
        var made = 0
        var tourIndex = 0
        while made < pois {
            let count = min(30, pois - made)
            let poiJSON = (0..<count).map { index -> String in
                let n = made + index
                let id = String(format: "00000000-0000-4000-8000-%012x", n + 1)
                let texts: [String]
                switch narrations {
                case .short:
                    texts = (0..<3).map { phase in
                        "Stop \(n + 1). \(sentences[(n + phase) % sentences.count])\(phase == 2 ? " " + sentences[(n + 3) % sentences.count] : "")"
                    }
                case .paragraphs:
                    texts = [
                        prose.short(name: "Stop \(n + 1)", sentences: 1),
                        prose.paragraph(sentences: prose.number(in: 4...9)),
                        prose.paragraph(sentences: prose.number(in: 3...6)),
                    ]
                }
                let phases = zip(["approaching", "detailed", "guidedTour"], texts).map { key, text in "\"\(key)\": \(jsonString(text))" }
                    .joined(separator: ", ")
                return
                    "{\"id\": \"\(id)\", \"name\": \"Stop \(n + 1)\", \"location\": {\"latitude\": \(46.5 + Double(index) * 0.002), \"longitude\": 10.4}, \"triggerRadiusMeters\": 300, \"narrations\": {\(phases)}}"
            }.joined(separator: ",\n")
            let tourID = String(format: "00000000-0000-4000-9000-%012x", tourIndex + 1)
            let tour = """
                {"id": "\(tourID)", "name": "Generated Tour \(tourIndex + 1)", "language": "en-US", "version": 1,
                 "route": {"waypoints": [{"latitude": 46.5, "longitude": 10.39}, {"latitude": 46.56, "longitude": 10.41}]},
                 "pois": [\(poiJSON)]}
                """
            try tour.write(to: tours.appendingPathComponent("tour\(tourIndex + 1).json"), atomically: true, encoding: .utf8)
            made += count
            tourIndex += 1
        }
        let voice = URL(fileURLWithPath: "voices/local-en-us.yaml").standardizedFileURL.path
        let pipeline = folder.appendingPathComponent("pipeline.yaml")
        try """
        version: 1
        tours: ["tours/*.json"]
        voice: \(voice)
        captions: \(captions ? "webvtt" : "off")\(narrations == .paragraphs ? "\nloudness: off" : "")
        formats: [aac]
        tts: {api: google, endpoint: "http://127.0.0.1:9", concurrency: 4, requestsPerMinute: 100000}
        output: Documents
        state: state
        budgets: {cacheMaxMB: 8000, synthesisCacheMaxMB: 8000}
        """.write(to: pipeline, atomically: true, encoding: .utf8)
        return pipeline
    }

    /// `text` as a JSON string: quoted, with quotes, backslashes and control characters escaped.
    private static func jsonString(_ text: String) -> String {
        var escaped = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": escaped += "\\\""
            case "\\": escaped += "\\\\"
            case "\n": escaped += "\\n"
            case _ where scalar.value < 0x20: escaped += String(format: "\\u%04x", scalar.value)
            default: escaped.unicodeScalars.append(scalar)
            }
        }
        return escaped + "\""
    }
}

struct BenchFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

import Foundation
import Logging
import TourpackServer
import TourpackTesting

/// `tourpack-bench stream [--pois 6] [--characters 27000] [--concurrency 8]`
///
/// Memory against narration length, the streaming-audio issue's target.
/// The contract: "A 30-minute guided tour costs no more memory than a 30-second
/// one". Runs the real `tourpack build` (beside this binary) as a child, as
/// `BuildBench` does, against one in-process serve-tts (its espeak-ng voice
/// makes real speech, Google dialect):
/// 1. long narrations: one tour of `--pois` POIs, each with a guided tour of
///    about `--characters` characters (about 30 minutes of speech at the
///    planner's 14 characters a second) of varied prose (`NarrationProse`),
///    and a sentence or two for approaching and detailed; formats aac and
///    opus. Goal: the child's peak RSS ≤ 200 MB.
/// 2. the same tour with 30-second guided tours (about 420 characters), for
///    scale: a build whose memory does not grow with narration length shows
///    a ratio near 1. Printed, not judged.
///
/// `tourpack-bench build` holds its 300-POI build to the same 200 MB goal.
/// Exit status as `BuildBench`: 1 when a build fails or the goal is missed.
enum StreamBench {
    /// The streaming issue's ceiling for a build's peak RSS, whatever the narration length.
    static let peakGoalMB = 200.0

    /// "peak RSS 123.4 MB (goal: peak RSS ≤ 200 MB) PASS", and whether it passed.
    static func memoryGoal(_ result: BuildBench.Measurement) -> (text: String, passed: Bool) {
        let megabytes = Double(result.peakKB) / 1024
        let passed = megabytes <= peakGoalMB && result.exitStatus == 0
        return (String(format: "peak RSS %.1f MB (goal: peak RSS ≤ %.0f MB) %@", megabytes, peakGoalMB, passed ? "PASS" : "FAIL"), passed)
    }

    static func run(_ arguments: [String]) async -> Int32 {
        func option(_ name: String, _ fallback: Int) -> Int {
            guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count, let value = Int(arguments[index + 1]) else {
                return fallback
            }
            return value
        }
        let pois = max(1, option("--pois", 6))
        let characters = max(100, option("--characters", 27_000))
        let concurrency = max(1, option("--concurrency", 8))
        let executable = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
            .appendingPathComponent("tourpack")
        let scratch = TemporaryFolder.path("tourpack-bench-stream")
        defer { TemporaryFolder.remove(scratch) }
        do {
            let long = try LongTour.write(
                pois: pois, guidedCharacters: characters, formats: ["aac", "opus"], concurrency: concurrency,
                into: scratch.appendingPathComponent("long"))
            let short = try LongTour.write(
                pois: pois, guidedCharacters: 420, formats: ["aac", "opus"], concurrency: concurrency,
                into: scratch.appendingPathComponent("short"))
            var configuration = TTSServerConfiguration(port: 0)
            configuration.logger = Logger(label: "bench", factory: { _ in SwiftLogNoOpLogHandler() })
            let (longResult, shortResult) = try await TTSServer(configuration).withRunning { port in
                let longFolder = scratch.appendingPathComponent("long-build")
                let longResult = try await OffPool.run { try BuildBench.build(executable, pipeline: long, folder: longFolder, port: port) }
                let speech = LongTour.speechSeconds(in: longFolder.appendingPathComponent("Documents"), format: "aac")
                print(
                    String(
                        format:
                            "stream long narrations: %d POIs, guided tours of ~%d characters (%.1f h of aac in total), formats aac+opus, concurrency %d",
                        pois, characters, speech / 3600, concurrency))
                let shortResult = try await OffPool.run {
                    try BuildBench.build(executable, pipeline: short, folder: scratch.appendingPathComponent("short-build"), port: port)
                }
                return (longResult, shortResult)
            }
            let goal = memoryGoal(longResult)
            print(
                String(
                    format:
                        "stream %d POIs × %d-character guided tour (aac, opus): %.2f s wall (pipeline %.2f s), %d files, %d requests, %d encodes, exit %d, %@",
                    pois, characters, longResult.wallSeconds, longResult.pipelineSeconds, longResult.files, longResult.requests,
                    longResult.encodes,
                    longResult.exitStatus, goal.text))
            print(
                String(
                    format:
                        "stream %d POIs × 420-character (~30 s) guided tour (aac, opus): %.2f s wall, peak RSS %.1f MB, exit %d; long/short peak RSS %.2f× (flat in narration length is ~1)",
                    pois, shortResult.wallSeconds, Double(shortResult.peakKB) / 1024, shortResult.exitStatus,
                    Double(longResult.peakKB) / Double(max(1, shortResult.peakKB))))
            return goal.passed && shortResult.exitStatus == 0 ? 0 : 1
        } catch {
            print("stream bench failed: \(error)")
            return 1
        }
    }
}

/// A generated tour of long narrations and its pipeline, for `stream` and `peer`.
enum LongTour {
    /// Writes `tours/long.json` and `pipeline.yaml` into `folder`; returns the pipeline.
    ///
    /// The tour JSON is made with JSONSerialization, so the prose's quotes and
    /// line breaks are escaped as JSON wants. No map source: the build only
    /// estimates tiles, and the bench measures audio.
    static func write(pois: Int, guidedCharacters: Int, formats: [String], concurrency: Int, extraYAML: String = "", into folder: URL)
        throws -> URL
    {
        let tours = folder.appendingPathComponent("tours")
        try FileManager.default.createDirectory(at: tours, withIntermediateDirectories: true)
        let names = [
            "Kaiser-Franz-Josefs-Höhe", "Fuscher Törl", "Edelweissspitze", "Hochtor", "Glocknerhaus", "Franz-Josefs-Höhe Chapel",
            "Wallackhaus", "Piffkar", "Haus Alpine Naturschau", "Schöneck",
        ]
        var poiObjects: [[String: Any]] = []
        for index in 0..<pois {
            let name = index < names.count ? names[index] : "\(names[index % names.count]) \(index / names.count + 1)"
            var prose = NarrationProse(seed: UInt64(0x7475_7270 + index))
            poiObjects.append([
                "id": String(format: "00000000-0000-4000-8000-%012x", index + 1),
                "name": name,
                "location": ["latitude": 47.07 + Double(index) * 0.004, "longitude": 12.75 + Double(index) * 0.003],
                "triggerRadiusMeters": 400,
                "narrations": [
                    "approaching": prose.short(name: name, sentences: 1),
                    "detailed": prose.short(name: name, sentences: 3),
                    "guidedTour": prose.guidedTour(name: name, characters: guidedCharacters),
                ],
            ])
        }
        let tour: [String: Any] = [
            "id": "00000000-0000-4000-9000-00000000a001", "name": "Long Narrations", "language": "en-US", "version": 1,
            "route": ["waypoints": [["latitude": 47.07, "longitude": 12.75], ["latitude": 47.12, "longitude": 12.80]]],
            "pois": poiObjects,
        ]
        try JSONSerialization.data(withJSONObject: tour, options: [.sortedKeys, .prettyPrinted]).write(
            to: tours.appendingPathComponent("long.json"))
        return try pipeline(tours: "tours/*.json", formats: formats, concurrency: concurrency, extraYAML: extraYAML, in: folder)
    }

    /// A pipeline in `folder` over `tours` (a glob, relative to `folder` or
    /// absolute) with the local voice, the Google dialect and a cache budget
    /// that holds hours of audio. The endpoint is replaced on the command line.
    /// `extraYAML`: more top-level keys, e.g. `loudness: off`.
    static func pipeline(tours: String, formats: [String], concurrency: Int, extraYAML: String = "", in folder: URL) throws -> URL {
        let voice = URL(fileURLWithPath: "voices/local-en-us.yaml").standardizedFileURL.path
        let url = folder.appendingPathComponent("pipeline.yaml")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try """
        version: 1
        tours: ["\(tours)"]
        voice: \(voice)
        formats: [\(formats.joined(separator: ", "))]
        tts: {api: google, endpoint: "http://127.0.0.1:9", concurrency: \(concurrency), requestsPerMinute: 100000}
        output: Documents
        state: state
        budgets: {cacheMaxMB: 4000}
        \(extraYAML)
        """.write(to: url, atomically: true, encoding: .utf8)
        return url
    }

    /// Seconds of audio in `format` that the packages under `documents` list.
    static func speechSeconds(in documents: URL, format: String) -> Double {
        let packages = documents.appendingPathComponent("OfflineTours")
        let folders = (try? FileManager.default.contentsOfDirectory(at: packages, includingPropertiesForKeys: nil)) ?? []
        return folders.reduce(0) { total, folder in
            guard let data = try? Data(contentsOf: folder.appendingPathComponent("package.json")),
                let package = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
                let audio = package["audio"] as? [[String: Any]]
            else { return total }
            return total
                + audio.filter { $0["format"] as? String == format }.reduce(0) {
                    $0 + (($1["durationSeconds"] as? NSNumber)?.doubleValue ?? 0)
                }
        }
    }
}

/// Runs blocking work (a child build waited on with `wait4`, a peer's
/// threads) on a thread of its own, so the cooperative pool, which also
/// serves the in-process serve-tts, keeps both its threads on a 2-core box.
enum OffPool {
    static func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            let thread = Thread { continuation.resume(with: Result { try body() }) }
            thread.start()
        }
    }
}

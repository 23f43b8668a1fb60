import Foundation
import TourpackCore

/// The warm-rebuild goal of issues 39 and 50, run by `tourpack-bench
/// build`: a catalogue of `items` generated items (`BuildBench.generate`,
/// three phases per POI, paragraph narrations or the short ones, `captions`
/// on, as the Google dialect of serve-tts gives them) is built cold, then
/// rebuilt with nothing changed. The rebuild must
/// reuse every file with 0 requests and 0 encodes (a goal the machine's
/// load cannot miss, so a miss fails the bench); its cost per item beyond
/// start-up is printed beside its goal of 0.2 ms, which depends on the load
/// and so only reports.
enum WarmRebuildBench {
    static let goalMillisecondsPerItem = 0.2

    struct Result {
        var items: Int
        var narrations: BuildBench.Narrations
        var warm: BuildBench.Measurement
        var startupSeconds: Double
        /// The CPU time (user + system) of `tourpack --help`.
        var startupCPUSeconds: Double
        /// The rebuild's wall time beyond start-up, per item.
        var millisecondsPerItem: Double { max(0, warm.wallSeconds - startupSeconds) * 1000 / Double(max(1, items)) }
        /// The rebuild's CPU time beyond start-up's, per item: what a loaded machine changes least.
        var cpuMillisecondsPerItem: Double { max(0, warm.cpuSeconds - startupCPUSeconds) * 1000 / Double(max(1, items)) }
        /// What the machine's load cannot change: every file reused, nothing requested or encoded.
        var reusedEverything: Bool { warm.exitStatus == 0 && warm.reused == items && warm.requests == 0 && warm.encodes == 0 }
    }

    /// The catalogue's folder under `scratch`: `warm3000` for paragraphs,
    /// `warm3000-short` for the short narrations, `-off` after either
    /// without captions.
    static func folder(items: Int, narrations: BuildBench.Narrations, captions: Bool = true, scratch: URL) -> URL {
        scratch.appendingPathComponent("warm\(items)\(narrations == .short ? "-short" : "")\(captions ? "" : "-off")")
    }

    /// Cold, then `runs` measured warm rebuilds, for `items` items under
    /// `scratch`, against serve-tts on `port`; start-up is measured after
    /// each.
    static func run(
        _ executable: URL, items: Int, narrations: BuildBench.Narrations, runs: Int = 1, scratch: URL, port: Int
    ) throws -> [Result] {
        let folder = folder(items: items, narrations: narrations, scratch: scratch)
        let pipeline = try BuildBench.generate(pois: (items + 2) / 3, into: folder, narrations: narrations)
        let output = folder.appendingPathComponent("run")
        _ = try BuildBench.build(executable, pipeline: pipeline, folder: output, port: port)
        // The first rebuild may still rewrite what the cold build left to it; the second changes nothing.
        _ = try BuildBench.build(executable, pipeline: pipeline, folder: output, port: port)
        return try (0..<max(1, runs)).map { _ in
            let warm = try BuildBench.build(executable, pipeline: pipeline, folder: output, port: port)
            let startup = try startup(executable, scratch: scratch)
            return Result(
                items: (items + 2) / 3 * 3, narrations: narrations, warm: warm, startupSeconds: startup.wall,
                startupCPUSeconds: startup.cpu)
        }
    }

    /// The process's start-up: the wall and CPU time of `tourpack --help`, the least of three each.
    static func startup(_ executable: URL, scratch: URL) throws -> (wall: Double, cpu: Double) {
        let sink = scratch.appendingPathComponent("help.txt").path
        var best = (wall: Double.infinity, cpu: Double.infinity)
        for _ in 0..<3 {
            let started = ContinuousClock.now
            let run = try Child.runCounting(executable.path, ["--help"], stdout: sink)
            best = (min(best.wall, started.duration(to: .now).seconds), min(best.cpu, run.cpuSeconds))
        }
        return best
    }

    /// One line per size, with the goal beside the figure.
    static func report(_ result: Result) -> String {
        String(
            format:
                "build warm rebuild, %d items, %@, captions on: %.2f s wall (summary %.2f s from the lock, %.2f s from the process's start), "
                + "%.2f s CPU, start-up %.3f s wall and %.3f s CPU; per item beyond start-up %.3f ms wall, %.3f ms CPU "
                + "(goal ≤ %.1f ms: %@; depends on the machine's load, reported only); %d reused, %d requests, %d encodes (goal: all reused, "
                + "0 requests, 0 encodes: %@); load average %@",
            result.items,
            result.narrations == .short ? "1-2 sentences per narration" : "paragraph narrations, loudness off", result.warm.wallSeconds,
            result.warm.pipelineSeconds, result.warm.processSeconds ?? 0, result.warm.cpuSeconds,
            result.startupSeconds, result.startupCPUSeconds, result.millisecondsPerItem, result.cpuMillisecondsPerItem,
            goalMillisecondsPerItem, result.millisecondsPerItem <= goalMillisecondsPerItem ? "met" : "missed", result.warm.reused,
            result.warm.requests, result.warm.encodes, result.reusedEverything ? "PASS" : "FAIL", BenchLoad.text)
            + (result.warm.failure.map { "; the rebuild exited \(result.warm.exitStatus): \($0)" } ?? "")
    }

    static let goalCaptionsRatio = 1.1

    /// A warm rebuild of the same catalogue with captions and without,
    /// `runs` times each, taking turns.
    struct CaptionsCost {
        var items: Int
        var on: [BuildBench.Measurement]
        var off: [BuildBench.Measurement]

        static func median(_ values: [Double]) -> Double {
            let sorted = values.sorted()
            return sorted.isEmpty ? 0 : sorted[sorted.count / 2]
        }
        var wallRatio: Double { Self.median(on.map(\.wallSeconds)) / max(1e-9, Self.median(off.map(\.wallSeconds))) }
        var cpuRatio: Double { Self.median(on.map(\.cpuSeconds)) / max(1e-9, Self.median(off.map(\.cpuSeconds))) }
        var reusedEverything: Bool {
            (on + off).allSatisfy { $0.exitStatus == 0 && $0.reused == items && $0.requests == 0 && $0.encodes == 0 }
        }
    }

    /// The catalogue `run` built with captions at `items`, and the same
    /// with `captions: off` built here, rebuilt warm in turns.
    static func captionsCost(
        _ executable: URL, items: Int, narrations: BuildBench.Narrations, scratch: URL, port: Int, runs: Int = 7
    ) throws -> CaptionsCost {
        let on = folder(items: items, narrations: narrations, scratch: scratch)
        let onPipeline = try BuildBench.generate(pois: (items + 2) / 3, into: on, narrations: narrations)
        let off = folder(items: items, narrations: narrations, captions: false, scratch: scratch)
        let offPipeline = try BuildBench.generate(pois: (items + 2) / 3, into: off, captions: false, narrations: narrations)
        let (onRun, offRun) = (on.appendingPathComponent("run"), off.appendingPathComponent("run"))
        for _ in 0..<3 { _ = try BuildBench.build(executable, pipeline: offPipeline, folder: offRun, port: port) }
        var cost = CaptionsCost(items: (items + 2) / 3 * 3, on: [], off: [])
        for _ in 0..<runs {
            cost.on.append(try BuildBench.build(executable, pipeline: onPipeline, folder: onRun, port: port))
            cost.off.append(try BuildBench.build(executable, pipeline: offPipeline, folder: offRun, port: port))
        }
        return cost
    }

    static func report(_ cost: CaptionsCost) -> String {
        let median = CaptionsCost.median
        return String(
            format:
                "build captions' cost, warm rebuild of %d items: captions on %.3f s wall, %.3f s CPU; off %.3f s wall, %.3f s CPU "
                + "(medians of %d runs each, in turns): %.2f× wall, %.2f× CPU (goal ≤ %.1f×: %@; depends on the machine's load, "
                + "reported only); every rebuild reused everything: %@; load average %@",
            cost.items, median(cost.on.map(\.wallSeconds)), median(cost.on.map(\.cpuSeconds)), median(cost.off.map(\.wallSeconds)),
            median(cost.off.map(\.cpuSeconds)), cost.on.count, cost.wallRatio, cost.cpuRatio, goalCaptionsRatio,
            cost.wallRatio <= goalCaptionsRatio ? "met" : "missed", cost.reusedEverything ? "PASS" : "FAIL", BenchLoad.text)
            + ((cost.on + cost.off).compactMap(\.failure).first.map { "; a rebuild failed: \($0)" } ?? "")
    }
}

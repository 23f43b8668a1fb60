import Foundation
import TourpackCore

/// The warm-rebuild goal of issue 39, run by `tourpack-bench build`: a
/// catalogue of `items` generated items (`BuildBench.generate`, three
/// phases per POI, `captions` on, as the Google dialect of serve-tts gives
/// them) is built cold, then rebuilt with nothing changed. The rebuild must
/// reuse every file with 0 requests and 0 encodes (a goal the machine's
/// load cannot miss, so a miss fails the bench); its cost per item beyond
/// start-up is printed beside its goal of 0.2 ms, which depends on the load
/// and so only reports.
enum WarmRebuildBench {
    static let goalMillisecondsPerItem = 0.2

    struct Result {
        var items: Int
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

    /// Cold, then warm, for `items` items under `scratch`, against serve-tts on `port`.
    static func run(_ executable: URL, items: Int, scratch: URL, port: Int) throws -> Result {
        let folder = scratch.appendingPathComponent("warm\(items)")
        let pipeline = try BuildBench.generate(pois: (items + 2) / 3, into: folder)
        let output = folder.appendingPathComponent("run")
        _ = try BuildBench.build(executable, pipeline: pipeline, folder: output, port: port)
        // The first rebuild may still rewrite what the cold build left to it; the second changes nothing.
        _ = try BuildBench.build(executable, pipeline: pipeline, folder: output, port: port)
        let warm = try BuildBench.build(executable, pipeline: pipeline, folder: output, port: port)
        let startup = try startup(executable, scratch: scratch)
        return Result(items: (items + 2) / 3 * 3, warm: warm, startupSeconds: startup.wall, startupCPUSeconds: startup.cpu)
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
                "build warm rebuild, %d items, captions on: %.2f s wall (summary %.2f s from the lock, %.2f s from the process's start), "
                + "%.2f s CPU, start-up %.3f s wall and %.3f s CPU; per item beyond start-up %.3f ms wall, %.3f ms CPU "
                + "(goal ≤ %.1f ms: %@; depends on the machine's load, reported only); %d reused, %d requests, %d encodes (goal: all reused, "
                + "0 requests, 0 encodes: %@); load average %@",
            result.items, result.warm.wallSeconds, result.warm.pipelineSeconds, result.warm.processSeconds ?? 0, result.warm.cpuSeconds,
            result.startupSeconds, result.startupCPUSeconds, result.millisecondsPerItem, result.cpuMillisecondsPerItem,
            goalMillisecondsPerItem, result.millisecondsPerItem <= goalMillisecondsPerItem ? "met" : "missed", result.warm.reused,
            result.warm.requests, result.warm.encodes, result.reusedEverything ? "PASS" : "FAIL", BenchLoad.text)
    }
}

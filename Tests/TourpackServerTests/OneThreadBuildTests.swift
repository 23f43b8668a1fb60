import Foundation
import Testing
import TourpackCore
import TourpackKit
import TourpackTesting

/// Runs every job it is given on one thread of its own: a cooperative pool
/// one thread wide. Work that blocks it stalls everything else on it.
final class OneThreadExecutor: TaskExecutor, @unchecked Sendable {
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var stopped = false

    init() {
        let thread = Thread { [self] in loop() }
        thread.name = "one-thread-executor"
        thread.start()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    func stop() {
        condition.lock()
        stopped = true
        condition.signal()
        condition.unlock()
    }

    private func loop() {
        while true {
            condition.lock()
            while jobs.isEmpty && !stopped { condition.wait() }
            if jobs.isEmpty && stopped {
                condition.unlock()
                return
            }
            let job = jobs.removeFirst()
            condition.unlock()
            job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }
}

/// Collects events from the build's callback, which may come from any thread.
final class EventLog: @unchecked Sendable {
    private let lock = NSLock()
    private var entries: [String] = []
    func append(_ entry: String) { lock.withLock { entries.append(entry) } }
    var all: [String] { lock.withLock { entries } }
}

/// Blocking work (SQLite, fsync, renames, FFmpeg, decoding answers) runs on
/// thread pools, never on Swift's cooperative pool. With the build's tasks
/// held to one thread, the build still completes, and a heartbeat task on
/// that same thread keeps beating while items are made.
@Suite struct OneThreadBuildTests {
    @Test func aBuildOnOneCooperativeThreadCompletesWithProgressFlowing() async throws {
        let folder = TemporaryFolder.path("one-thread")
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("tours"), withIntermediateDirectories: true)
        defer { TemporaryFolder.remove(folder) }
        let sentences = [
            "The road climbs in tight hairpins above the valley.", "On a clear day you can see the glacier to the west.",
            "Marmots often sit on the rocks near the parking area.", "The pass was first crossed by a paved road in 1935.",
        ]
        let pois = (0..<4).map { index in
            // Ten sentences a guided tour: long enough to beat between items, short
            // enough that the process's one espeak thread (every in-process server
            // shares it) is not held for seconds while other suites wait on it.
            let long = (0..<10).map { sentences[($0 + index) % sentences.count] }.joined(separator: " ")
            return """
                {"id": "00000000-0000-4000-8000-00000000000\(index + 1)", "name": "Stop \(index + 1)", "location": {"latitude": \(46.5 + Double(index) * 0.01), "longitude": 10.4},
                 "triggerRadiusMeters": 300, "narrations": {"approaching": "Stop \(index + 1) ahead.", "guidedTour": "\(long)"}}
                """
        }.joined(separator: ",\n")
        try """
        {"id": "00000000-0000-4000-9000-000000000001", "name": "One Thread Road", "language": "en-US", "version": 1,
         "route": {"waypoints": [{"latitude": 46.5, "longitude": 10.39}, {"latitude": 46.56, "longitude": 10.41}]},
         "pois": [\(pois)]}
        """.write(to: folder.appendingPathComponent("tours/road.json"), atomically: true, encoding: .utf8)

        try await withServer { port, _ in
            try """
            version: 1
            tours: ["tours/*.json"]
            formats: [aac, opus]
            tts: {api: google, endpoint: "http://127.0.0.1:\(port)", concurrency: 4, requestsPerMinute: 100000}
            output: Documents
            state: state
            """.write(to: folder.appendingPathComponent("pipeline.yaml"), atomically: true, encoding: .utf8)
            let config = try PipelineLoader.load(folder.appendingPathComponent("pipeline.yaml"), workingDirectory: folder)
            let tours = try TourLoader().loadAll(globs: config.tourGlobs, relativeTo: folder)
            let plan = try Planner(config: config).plan(tours)
            let synthesizer = try HTTPSpeechSynthesizer(settings: config.tts, apiKey: nil)
            var options = Builder.Options()
            options.encodeThreads = 2
            let builder = Builder(config: config, synthesizer: synthesizer, options: options)

            let executor = OneThreadExecutor()
            defer { executor.stop() }
            let log = EventLog()
            let summary = try await withTaskExecutorPreference(executor) {
                try await withThrowingTaskGroup(of: BuildSummary?.self) { group in
                    group.addTask {
                        try await builder.build(plan) { event in
                            switch event {
                            case .itemDone: log.append("item")
                            case .finished: log.append("finished")
                            default: break
                            }
                        }
                    }
                    group.addTask {
                        // The heartbeat: on the same single thread as the build's tasks.
                        while !log.all.contains("finished") {
                            log.append("beat")
                            try await Task.sleep(for: .milliseconds(20))
                        }
                        return nil
                    }
                    var summary: BuildSummary?
                    for try await result in group { if let result { summary = result } }
                    return try #require(summary)
                }
            }
            #expect(summary.exitCode == 0 && summary.toursBuilt == 1, "\(summary.failures)")
            let entries = log.all
            let items = entries.filter { $0 == "item" }.count
            #expect(items == plan.phases)
            // The heartbeat kept beating between the first and the last item: the one thread was never held by blocking work for the whole build.
            let first = try #require(entries.firstIndex(of: "item"))
            let last = try #require(entries.lastIndex(of: "item"))
            #expect(entries[first...last].contains("beat"), "no heartbeat while items were made: \(entries)")
            let report = try await BundleValidator(options: ValidationOptions(threads: 2)).validate(root: config.output)
            #expect(report.passed, "\(report.findings.map(\.description))")
        }
    }
}

import Foundation
import Logging
import TourpackCore
import TourpackKit
import TourpackServer
import TourpackTesting

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif

/// `tourpack-bench peer [--runs 2] [--threads 8] [--latency-ms 150] [--long] [--pois 2] [--characters 6000] [--loudness]`
///
/// tourpack against the obvious script, side by side in one run, on real
/// speech: a cold `tourpack build` (fresh state and output, aac only)
/// against an ffmpeg-CLI peer that makes the same chunks into AAC at the
/// contract's rate (the endpoint's, 24 kHz). Both talk to one in-process
/// serve-tts (Google dialect, espeak-ng speech) answering after
/// `--latency-ms` (150 ms, as issue 39 measures), so they pay the same
/// synthesis.
///
/// Goals (issue 39): tourpack's cold wall time at most 0.45× the peer's with
/// `loudness: off`, and at most 0.25× with normalization on (`--loudness`),
/// where the peer normalizes too, as a script would: ffmpeg's `loudnorm`
/// in two passes (measure, then apply the measured figures, linear) to
/// -16 LUFS and -1 dBTP. And a warm rebuild of tourpack's output (nothing
/// changed, captions on, every file reused) at most 1% of the peer's cold
/// run. The cold ratios fail the bench when missed; they compare runs
/// taken in turn on the same machine, so its load counts on both sides.
/// The warm ratio is a fraction of a second against tens of seconds and
/// follows the load, so it only reports.
///
/// The peer, as a shell or Python script would do it:
/// - the chunks are the ones tourpack plans (`PipelineLoader`, `TourLoader`,
///   `Planner`: every `PlanItem.chunks`), each distinct chunk once, as a
///   cold build requests them;
/// - 8 threads (`--threads`) request them, 8 at a time, with URLSession
///   (FoundationNetworking). The project's libcurl client is internal to
///   TourpackSpeech, and its face (`HTTPSpeechSynthesizer`) also decodes
///   the answer, which is part of the peer's work; URLSession is what a
///   Swift script would reach for, and it drives libcurl underneath too;
/// - each answer's JSON is parsed and its base64 `audioContent` decoded to
///   the WAV file, which is piped into `ffmpeg -i - -c:a aac -b:a 128k -ar
///   24000 out.m4a` (the CLI's defaults otherwise; `-v error -y` only quiet
///   it), 8 ffmpeg processes at a time, fed by the request threads through
///   a queue, so requests and encodes overlap as they do in tourpack.
///
/// The input is the demo tours (hand-written narration, about 13 minutes of
/// speech) unless `--long`, which generates `--pois` POIs with guided tours
/// of `--characters` characters (`LongTour`). Each side runs `--runs` times
/// (at least 2), the order alternating (tourpack first, then peer first),
/// and the medians are compared, after one untimed request and encode and
/// one start of `tourpack`. Exit status 1 when a build or a peer run
/// fails, or a cold goal is missed, as `BuildBench`.
enum PeerBench {
    /// Issue 39's goals for tourpack's cold wall time over the peer's,
    /// without and with loudness normalization, and for a warm rebuild's.
    static let ratioGoal = 0.45
    static let loudnessRatioGoal = 0.25
    static let warmRatioGoal = 0.01

    static func run(_ arguments: [String]) async -> Int32 {
        func option(_ name: String, _ fallback: Int) -> Int {
            guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count, let value = Int(arguments[index + 1]) else {
                return fallback
            }
            return value
        }
        let runs = max(2, option("--runs", 2))
        let threads = max(1, option("--threads", 8))
        let long = arguments.contains("--long")
        let loudness = arguments.contains("--loudness")
        let latencyMs = max(0, option("--latency-ms", 150))
        let extraYAML = loudness ? "" : "loudness: off"
        let executable = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
            .appendingPathComponent("tourpack")
        let scratch = TemporaryFolder.path("tourpack-bench-peer")
        defer { TemporaryFolder.remove(scratch) }
        signal(SIGPIPE, SIG_IGN)  // an ffmpeg that dies mid-write is a failed chunk, not a dead bench
        do {
            let pipeline: URL
            let source: String
            if long {
                let pois = max(1, option("--pois", 2)), characters = max(100, option("--characters", 6_000))
                pipeline = try LongTour.write(
                    pois: pois, guidedCharacters: characters, formats: ["aac"], concurrency: threads, extraYAML: extraYAML,
                    into: scratch.appendingPathComponent("input"))
                source = "\(pois) generated POIs with ~\(characters)-character guided tours"
            } else {
                let tours = URL(fileURLWithPath: "tours").standardizedFileURL.appendingPathComponent("*.json").path
                pipeline = try LongTour.pipeline(
                    tours: tours, formats: ["aac"], concurrency: threads, extraYAML: extraYAML, in: scratch.appendingPathComponent("input"))
                source = "the demo tours"
            }
            let config = try PipelineLoader.load(pipeline)
            let plan = try Planner(config: config).plan(try TourLoader().loadAll(globs: config.tourGlobs))
            var seen: Set<Chunk> = []
            let chunks = plan.tours.flatMap { $0.items.flatMap(\.chunks) }.filter { seen.insert($0).inserted }
            let bodies = try chunks.map { try FFmpegCLIPeer.googleBody($0, voice: config.voice, sampleRateHz: config.tts.sampleRateHz) }
            print(
                "peer: \(source): \(plan.phases) items, \(chunks.count) distinct chunks, \(plan.characters) characters; "
                    + "tourpack build (aac, concurrency \(threads)\(loudness ? ", normalized" : ", loudness: off")) vs. ffmpeg CLI peer "
                    + "(\(threads) request threads, \(threads) ffmpeg at a time\(loudness ? ", loudnorm in two passes" : "")), "
                    + "\(latencyMs) ms latency, \(runs) runs each"
            )

            var configuration = TTSServerConfiguration(port: 0, faults: FaultInjection(latencyMilliseconds: latencyMs))
            configuration.logger = Logger(label: "bench", factory: { _ in SwiftLogNoOpLogHandler() })
            var ours: [Double] = [], theirs: [Double] = [], rebuilds: [Double] = []
            var failed = false
            try await TTSServer(configuration).withRunning { port in
                let endpoint = URL(string: "http://127.0.0.1:\(port)/v1/text:synthesize")!
                // Warm-up, untimed: espeak-ng starts on the server's first
                // request, and both executables are paged in, so neither side
                // pays for going first.
                let warmUp = FFmpegCLIPeer(
                    endpoint: endpoint, bodies: Array(bodies.prefix(1)), output: scratch.appendingPathComponent("warm-up"),
                    threads: 1, sampleRateHz: config.tts.sampleRateHz, normalizes: loudness)
                let warm = try await OffPool.run { try warmUp.run() }
                guard warm.failures.isEmpty else { throw BenchFailure("warm-up: \(warm.failures[0])") }
                _ = try await OffPool.run { try Child.run(executable.path, ["--help"], stdout: "/dev/null") }
                for run in 0..<runs {
                    for side in run % 2 == 0 ? ["tourpack", "peer"] : ["peer", "tourpack"] {
                        if side == "tourpack" {
                            let folder = scratch.appendingPathComponent("tourpack-\(run)")
                            let result = try await OffPool.run {
                                try BuildBench.build(executable, pipeline: pipeline, folder: folder, port: port)
                            }
                            ours.append(result.wallSeconds)
                            failed = failed || result.exitStatus != 0
                            print(
                                String(
                                    format: "peer run %d tourpack: %.2f s wall, %d files, %d requests, %d encodes, exit %d",
                                    run + 1, result.wallSeconds, result.files, result.requests, result.encodes, result.exitStatus))
                            // The same build again, nothing changed: every file reused.
                            let again = try await OffPool.run {
                                try BuildBench.build(executable, pipeline: pipeline, folder: folder, port: port)
                            }
                            rebuilds.append(again.wallSeconds)
                            failed = failed || again.exitStatus != 0 || again.requests != 0 || again.encodes != 0
                            print(
                                String(
                                    format: "peer run %d tourpack warm: %.3f s wall, %d reused, %d requests, %d encodes, exit %d",
                                    run + 1, again.wallSeconds, again.reused, again.requests, again.encodes, again.exitStatus))
                        } else {
                            let output = scratch.appendingPathComponent("peer-\(run)")
                            let peer = FFmpegCLIPeer(
                                endpoint: endpoint, bodies: bodies, output: output, threads: threads, sampleRateHz: config.tts.sampleRateHz,
                                normalizes: loudness)
                            let result = try await OffPool.run { try peer.run() }
                            theirs.append(result.wallSeconds)
                            failed = failed || !result.failures.isEmpty
                            print(
                                String(
                                    format:
                                        "peer run %d ffmpeg CLI: %.2f s wall, %d files (%.1f min of speech, %.1f MB of AAC), %d failures%@",
                                    run + 1, result.wallSeconds, result.files, result.speechSeconds / 60,
                                    Double(result.outputBytes) / 1_048_576,
                                    result.failures.count, result.failures.first.map { ": " + $0 } ?? ""))
                        }
                        try? FileManager.default.removeItem(
                            at: scratch.appendingPathComponent(side == "tourpack" ? "tourpack-\(run)" : "peer-\(run)"))
                    }
                }
            }
            let ratio = EncodeBench.median(ours) / EncodeBench.median(theirs)
            let goal = loudness ? loudnessRatioGoal : ratioGoal
            let passed = ratio <= goal && !failed
            let both = loudness ? "both normalizing loudness" : "both with loudness off"
            print(
                String(
                    format: "peer ratio tourpack/peer cold (%@): median %.2f s / median %.2f s = %.2f (goal ≤ %.2f, issue 39) %@",
                    both, EncodeBench.median(ours), EncodeBench.median(theirs), ratio, goal, passed ? "PASS" : "FAIL"))
            let warmRatio = EncodeBench.median(rebuilds) / EncodeBench.median(theirs)
            print(
                String(
                    format:
                        "peer ratio tourpack warm rebuild (captions on) / peer cold: median %.3f s / median %.2f s = %.2f%% (goal ≤ %.0f%%, issue 39: %@; load average %@, reported only)",
                    EncodeBench.median(rebuilds), EncodeBench.median(theirs), warmRatio * 100, warmRatioGoal * 100,
                    warmRatio <= warmRatioGoal ? "met" : "missed", BenchLoad.text))
            return passed ? 0 : 1
        } catch {
            print("peer bench failed: \(error)")
            return 1
        }
    }
}

/// The ffmpeg-CLI peer of one run: request threads feed WAV files to
/// encoder threads, each of which pipes one WAV into one `ffmpeg` process.
final class FFmpegCLIPeer: @unchecked Sendable {
    struct Result: Sendable {
        var wallSeconds: Double
        var files: Int
        var outputBytes: Int64
        var speechSeconds: Double
        var failures: [String]
    }

    private let endpoint: URL
    private let bodies: [Data]
    private let output: URL
    private let threads: Int
    private let sampleRateHz: Int
    /// Whether each file is normalized with `loudnorm` in two passes.
    private let normalizes: Bool
    private let session: URLSession

    // Guarded by `condition`:
    private let condition = NSCondition()
    private var nextRequest = 0
    private var fetchersRunning = 0
    private var ready: [(index: Int, wav: Data)] = []
    private var failures: [String] = []
    private var wavBytes = 0

    init(endpoint: URL, bodies: [Data], output: URL, threads: Int, sampleRateHz: Int, normalizes: Bool = false) {
        self.endpoint = endpoint
        self.bodies = bodies
        self.output = output
        self.threads = threads
        self.sampleRateHz = sampleRateHz
        self.normalizes = normalizes
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpMaximumConnectionsPerHost = threads
        configuration.timeoutIntervalForRequest = 300
        session = URLSession(configuration: configuration)
    }

    /// The Google v1 request body for `chunk`, as the peer script writes it.
    static func googleBody(_ chunk: Chunk, voice: VoicePreset, sampleRateHz: Int) throws -> Data {
        var voiceObject: [String: Any] = ["languageCode": voice.languageCode]
        if !voice.name.isEmpty { voiceObject["name"] = voice.name }
        let body: [String: Any] = [
            "input": [chunk.isSSML ? "ssml" : "text": chunk.text],
            "voice": voiceObject,
            "audioConfig": [
                "audioEncoding": "LINEAR16", "sampleRateHertz": sampleRateHz, "speakingRate": voice.speakingRate, "pitch": voice.pitch,
            ],
        ]
        return try JSONSerialization.data(withJSONObject: body)
    }

    /// Blocks until every chunk is encoded or has failed.
    func run() throws -> Result {
        try FileManager.default.createDirectory(at: output, withIntermediateDirectories: true)
        let started = ContinuousClock.now
        let finished = DispatchGroup()
        fetchersRunning = threads
        for _ in 0..<threads {
            finished.enter()
            Thread {
                self.fetchLoop(); finished.leave()
            }.start()
            finished.enter()
            Thread {
                self.encodeLoop(); finished.leave()
            }.start()
        }
        finished.wait()
        let wall = started.duration(to: .now).seconds
        session.finishTasksAndInvalidate()
        var files = 0
        var bytes: Int64 = 0
        for index in bodies.indices {
            let size = (try? FileManager.default.attributesOfItem(atPath: file(index).path)[.size] as? NSNumber)?.int64Value ?? 0
            if size > 0 { files += 1; bytes += size }
        }
        // LINEAR16 mono: two bytes a sample, less a 44-byte header per file.
        let speech = Double(wavBytes - 44 * bodies.count) / 2 / Double(sampleRateHz)
        return Result(wallSeconds: wall, files: files, outputBytes: bytes, speechSeconds: speech, failures: failures)
    }

    private func file(_ index: Int) -> URL { output.appendingPathComponent(String(format: "%05d.m4a", index)) }

    private func fetchLoop() {
        while true {
            condition.lock()
            let index = nextRequest
            nextRequest += 1
            condition.unlock()
            guard index < bodies.count else { break }
            do {
                let wav = try fetch(bodies[index])
                condition.lock()
                ready.append((index, wav))
                wavBytes += wav.count
                condition.signal()
                condition.unlock()
            } catch {
                fail("chunk \(index): \(error)")
            }
        }
        condition.lock()
        fetchersRunning -= 1
        condition.broadcast()
        condition.unlock()
    }

    private func encodeLoop() {
        while true {
            condition.lock()
            while ready.isEmpty && fetchersRunning > 0 { condition.wait() }
            guard !ready.isEmpty else { condition.unlock(); return }
            let (index, wav) = ready.removeFirst()
            condition.unlock()
            do {
                try encode(wav, to: file(index))
            } catch {
                fail("chunk \(index): \(error)")
            }
        }
    }

    private func fail(_ message: String) {
        condition.lock()
        failures.append(message)
        condition.unlock()
    }

    /// One POST, waited for on this thread; the WAV from the JSON answer.
    private func fetch(_ body: Data) throws -> Data {
        var request = URLRequest(url: endpoint)
        request.httpMethod = "POST"
        request.httpBody = body
        request.setValue("application/json; charset=utf-8", forHTTPHeaderField: "Content-Type")
        let answer = Answer()
        let done = DispatchSemaphore(value: 0)
        session.dataTask(with: request) { data, response, error in
            answer.set(data: data, status: (response as? HTTPURLResponse)?.statusCode ?? 0, error: error)
            done.signal()
        }.resume()
        done.wait()
        let (data, status, error) = answer.get()
        if let error { throw BenchFailure("request failed: \(error)") }
        guard status == 200, let data else {
            throw BenchFailure("HTTP \(status): \(String(decoding: (data ?? Data()).prefix(200), as: UTF8.self))")
        }
        guard let json = try JSONSerialization.jsonObject(with: data) as? [String: Any], let content = json["audioContent"] as? String,
            let wav = Data(base64Encoded: content)
        else { throw BenchFailure("the answer holds no base64 audioContent") }
        return wav
    }

    /// `ffmpeg -i - -c:a aac -b:a 128k -ar <rate> out.m4a`, the WAV on its
    /// stdin. Normalizing, a first `loudnorm` pass measures the file and the
    /// second applies its figures, as ffmpeg's documentation of the filter
    /// describes for files.
    private func encode(_ wav: Data, to url: URL) throws {
        let encode = ["-c:a", "aac", "-b:a", "128k", "-ar", "\(sampleRateHz)", url.path]
        guard normalizes else {
            try Self.ffmpeg(["-v", "error", "-y", "-i", "-"] + encode, stdin: wav)
            return
        }
        let target = "I=-16:TP=-1:LRA=11"
        let report = url.deletingPathExtension().appendingPathExtension("loudnorm.txt")
        defer { try? FileManager.default.removeItem(at: report) }
        try Self.ffmpeg(
            ["-hide_banner", "-nostats", "-i", "-", "-af", "loudnorm=\(target):print_format=json", "-f", "null", "-"], stdin: wav,
            stderr: report.path)
        let printed = try String(contentsOf: report, encoding: .utf8)
        guard let open = printed.lastIndex(of: "{"), let close = printed.lastIndex(of: "}"), open < close,
            let figures = try JSONSerialization.jsonObject(with: Data(printed[open...close].utf8)) as? [String: String],
            let input = figures["input_i"], let peak = figures["input_tp"], let range = figures["input_lra"],
            let threshold = figures["input_thresh"], let offset = figures["target_offset"]
        else { throw BenchFailure("loudnorm printed no measurement: \(printed.suffix(300))") }
        let measured = "measured_I=\(input):measured_TP=\(peak):measured_LRA=\(range):measured_thresh=\(threshold):offset=\(offset)"
        try Self.ffmpeg(["-v", "error", "-y", "-i", "-", "-af", "loudnorm=\(target):\(measured):linear=true"] + encode, stdin: wav)
    }

    private static let spawnLock = NSLock()

    /// `ffmpeg` with `arguments`, `input` on its stdin, its stderr to
    /// `stderr` (or nowhere); waits for it to exit.
    static func ffmpeg(_ arguments: [String], stdin input: Data, stderr: String = "/dev/null") throws {
        var fds: [Int32] = [0, 0]
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, stderr, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        let argv = (["ffmpeg"] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        // The pipe is close-on-exec (the child's stdin is a dup2 of it, which
        // is not), so an ffmpeg that another thread starts does not inherit
        // this write end and keep this ffmpeg from seeing EOF. Glibc's
        // `pipe2` is not imported into Swift, so `pipe` and `fcntl` do it,
        // and one lock keeps any other spawn out of the gap between them.
        let spawned: Int32 = spawnLock.withLock {
            guard pipe(&fds) == 0 else { return errno }
            _ = fcntl(fds[0], F_SETFD, FD_CLOEXEC)
            _ = fcntl(fds[1], F_SETFD, FD_CLOEXEC)
            posix_spawn_file_actions_adddup2(&actions, fds[0], 0)
            return posix_spawnp(&pid, "ffmpeg", &actions, nil, argv, environ)
        }
        guard fds[1] != 0 else { throw BenchFailure("pipe: errno \(spawned)") }
        close(fds[0])
        guard spawned == 0 else { close(fds[1]); throw BenchFailure("could not start ffmpeg: errno \(spawned)") }
        var writeError: Int32 = 0
        input.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = write(fds[1], buffer.baseAddress! + offset, buffer.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    writeError = errno
                    return
                }
                offset += written
            }
        }
        close(fds[1])
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        guard writeError == 0 else { throw BenchFailure("writing to ffmpeg: errno \(writeError)") }
        guard status == 0 else { throw BenchFailure("ffmpeg exited with status \(status)") }
    }
}

/// What a URLSession completion handler hands back to the waiting thread.
private final class Answer: @unchecked Sendable {
    private let lock = NSLock()
    private var data: Data?
    private var status = 0
    private var error: (any Error)?

    func set(data: Data?, status: Int, error: (any Error)?) {
        lock.withLock { (self.data, self.status, self.error) = (data, status, error) }
    }

    func get() -> (Data?, Int, (any Error)?) {
        lock.withLock { (data, status, error) }
    }
}

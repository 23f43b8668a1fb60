import Foundation
import Logging
import TourpackServer
import TourpackTesting

#if canImport(Glibc)
import Glibc
#endif

/// `tourpack-bench piper`
///
/// Piper's own HTTP server (`python3 -m piper.http_server`, the pinned
/// en_US-joe-medium voice that `make setup` installs; `scripts/piper-voice.sh`
/// finds and checks it) on a free loopback port, then:
/// 1. Piper's real-time factor on this machine: seconds of audio per second
///    of wall time, for the demo-like sentences below sent one at a time,
///    then two requests in flight (what `make tour` asks of it). Each
///    request is a `curl` child, so the figure is Piper's, end to end.
/// 2. The demo's cold build (`pipelines/demo.yaml`, fresh output and state,
///    an in-process serve-tiles for its maps) through Piper against the same
///    build through serve-tts (espeak-ng).
///
/// It reports; no goal is held (the machine's load moves both figures).
enum PiperBench {
    static let sentences = [
        "Behind the hotel, meltwater rushes out from under the ice.",
        "Since 1856 the Rhône Glacier has lost more than 1.4 kilometres of length.",
        "The blankets you see reflect sunlight, and they save up to 70 percent of the snow and ice beneath them.",
        "The road climbs in thirty-six hairpins.",
        "On a clear day you can see the glacier to the west.",
        "Marmots often sit on the rocks near the parking area.",
        "The pass was first crossed by a paved road in 1935.",
        "Keep to the right and watch for cyclists on the descent.",
    ]

    static func run(_ arguments: [String]) async -> Int32 {
        let executable = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
            .appendingPathComponent("tourpack")
        let scratch = TemporaryFolder.path("tourpack-bench-piper")
        defer { TemporaryFolder.remove(scratch) }
        var server: pid_t = 0
        defer {
            if server > 0 {
                kill(server, SIGKILL)
                _ = try? Child.wait(server)
            }
        }
        do {
            try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
            let model = try voiceModel(scratch: scratch)
            let port = try freePort()
            server = try Child.launch(
                "/usr/bin/env",
                [
                    "python3", "-m", "piper.http_server", "--host", "127.0.0.1", "--port", String(port), "-m", model, "--data-dir",
                    URL(fileURLWithPath: model).deletingLastPathComponent().path,
                ], stdout: "/dev/null", stderr: scratch.appendingPathComponent("piper.log").path)
            try await waitUntilAnswering(port: port)
            let endpoint = "http://127.0.0.1:\(port)"
            // One warm-up request: the first inference also loads the model's graph.
            _ = try await OffPool.run { try synthesize(sentences[0], endpoint: endpoint, into: scratch, index: 999) }
            for concurrency in [1, 2] {
                let (audio, wall) = try await realTimeFactor(endpoint: endpoint, concurrency: concurrency, scratch: scratch)
                print(
                    String(
                        format: "piper real-time factor, %d in flight: %.1f s of audio in %.1f s wall = %.2f× real time (%d requests)",
                        concurrency, audio, wall, audio / wall, sentences.count * concurrency))
            }

            let demo = URL(fileURLWithPath: "pipelines/demo.yaml")
            let espeak = try await BuildBench.measure(
                executable, pipeline: demo, scratch: scratch, name: "espeak", latencyMs: 0, tiles: true)
            var tileConfiguration = TileServerConfiguration(port: 0)
            tileConfiguration.logger = Logger(label: "bench", factory: { _ in SwiftLogNoOpLogHandler() })
            let piper = try await TileServer(tileConfiguration).withRunning { tilePort in
                try await OffPool.run {
                    try BuildBench.build(
                        executable, pipeline: demo, folder: scratch.appendingPathComponent("piper"), port: port,
                        tilesURL: "http://127.0.0.1:\(tilePort)/{z}/{x}/{y}.png",
                        extra: ["--api", "piper", "--voice", "voices/piper-joe.yaml", "--concurrency", "2"])
                }
            }
            for (label, result) in [("espeak-ng (serve-tts)", espeak), ("Piper (en_US-joe-medium)", piper)] {
                print(
                    String(
                        format: "piper demo cold build, %@: %.2f s wall (pipeline %.2f s), %d requests, %d files, exit %d", label,
                        result.wallSeconds, result.pipelineSeconds, result.requests, result.files, result.exitStatus))
            }
            print(
                String(
                    format: "piper demo cold build: Piper takes %.1f× espeak-ng's wall time",
                    piper.wallSeconds / max(0.001, espeak.wallSeconds)))
            return espeak.exitStatus == 0 && piper.exitStatus == 0 ? 0 : 1
        } catch {
            print("piper bench failed: \(error)")
            return 1
        }
    }

    /// Every sentence sent `concurrency` times over, `concurrency` requests
    /// in flight: the seconds of audio Piper answered and the wall time.
    static func realTimeFactor(endpoint: String, concurrency: Int, scratch: URL) async throws -> (audio: Double, wall: Double) {
        let started = ContinuousClock.now
        let audio = try await withThrowingTaskGroup(of: Double.self) { group in
            for lane in 0..<concurrency {
                group.addTask {
                    try await OffPool.run {
                        var seconds = 0.0
                        for (index, sentence) in sentences.enumerated() {
                            seconds += try synthesize(sentence, endpoint: endpoint, into: scratch, index: lane * 100 + index)
                        }
                        return seconds
                    }
                }
            }
            return try await group.reduce(0, +)
        }
        let wall = started.duration(to: .now)
        return (audio, Double(wall.components.seconds) + Double(wall.components.attoseconds) / 1e18)
    }

    /// One `POST /synthesize` through curl; the seconds of audio in the WAV it answered.
    static func synthesize(_ text: String, endpoint: String, into scratch: URL, index: Int) throws -> Double {
        let body = scratch.appendingPathComponent("body-\(index).json")
        let wav = scratch.appendingPathComponent("answer-\(index).wav")
        try JSONSerialization.data(withJSONObject: ["text": text]).write(to: body)
        let (status, _) = try Child.run(
            "/usr/bin/env",
            [
                "curl", "-sf", "-X", "POST", "-H", "Content-Type: application/json", "--data-binary", "@\(body.path)", "-o", wav.path,
                "\(endpoint)/synthesize",
            ],
            stdout: "/dev/null")
        guard status == 0 else { throw BenchFailure("curl to \(endpoint)/synthesize exited \(status)") }
        let bytes = try Data(contentsOf: wav)
        guard bytes.count > 44 else { throw BenchFailure("Piper answered \(bytes.count) bytes for \"\(text)\"") }
        let rate = bytes[24..<28].enumerated().reduce(0) { $0 | Int($1.element) << (8 * $1.offset) }
        return Double(bytes.count - 44) / 2 / Double(max(1, rate))
    }

    /// The pinned voice's model, from `scripts/piper-voice.sh`.
    static func voiceModel(scratch: URL) throws -> String {
        let out = scratch.appendingPathComponent("voice.txt")
        let (status, _) = try Child.run("/usr/bin/env", ["bash", "scripts/piper-voice.sh"], stdout: out.path)
        let path = try String(contentsOf: out, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        guard status == 0, !path.isEmpty else { throw BenchFailure("scripts/piper-voice.sh found no pinned voice: run make setup") }
        return path
    }

    static func waitUntilAnswering(port: Int) async throws {
        for _ in 0..<600 {
            if (try? Data(contentsOf: URL(string: "http://127.0.0.1:\(port)/info")!)) != nil { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw BenchFailure("piper.http_server did not answer on port \(port)")
    }

    /// A loopback port nothing listens on now.
    static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard ok else { throw BenchFailure("no free loopback port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}

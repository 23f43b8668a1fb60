import Foundation
import Testing
import TourpackTesting

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The real `tourpack serve-tiles`, spawned on a free loopback port: a map
/// tile source for builds with a `maps.source.url`, with faults on request.
///
///     let tiles = try LocalTileServer(flags: ["--empty", "14/8508/5807"])
///     defer { tiles.stop() }
///     // maps: { source: { url: tiles.urlTemplate } }
///     #expect(tiles.stats()["requests"] as? Int == 0)
final class LocalTileServer {
    let process = Process()
    let port: Int
    var endpoint: String { "http://127.0.0.1:\(port)" }
    /// The XYZ template a pipeline's `maps.source.url` takes.
    var urlTemplate: String { "\(endpoint)/{z}/{x}/{y}.png" }

    /// - Parameters:
    ///   - flags: extra serve-tiles flags, e.g. `["--failure-rate", "0.3", "--api-key-env", "TILE_KEY"]`.
    ///   - environment: added to the server's environment (the variable `--api-key-env` names).
    ///   - accessLog: where the server's stderr (its access log) goes; discarded when nil.
    init(flags: [String] = [], environment: [String: String] = [:], accessLog: URL? = nil) throws {
        var log: FileHandle?
        if let accessLog {
            _ = FileManager.default.createFile(atPath: accessLog.path, contents: nil)
            log = try FileHandle(forWritingTo: accessLog)
        }
        port = try ServerProcess.start(process, arguments: ["serve-tiles", "--port", "0"] + flags, environment: environment, stderr: log)
    }

    /// The server's `/debug/stats` counters: `requests`, `ok`, `notModified`,
    /// `empty`, `faults`, `unauthorized`, `conditional`, `perTile`
    /// (`{"z/x/y": {"requests", "ok", "notModified"}}`), `userAgents`, `queryKeys`.
    func stats() throws -> [String: Any] {
        let data = try Data(contentsOf: URL(string: "\(endpoint)/debug/stats")!)
        return try JSONSerialization.jsonObject(with: data) as? [String: Any] ?? [:]
    }

    /// Zeroes the counters (`POST /debug/reset`), e.g. between a build and its rebuild.
    func reset() throws {
        var request = URLRequest(url: URL(string: "\(endpoint)/debug/reset")!)
        request.httpMethod = "POST"
        let done = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var status = 0
        nonisolated(unsafe) var failure: (any Error)?
        URLSession.shared.dataTask(with: request) { _, response, error in
            status = (response as? HTTPURLResponse)?.statusCode ?? 0
            failure = error
            done.signal()
        }.resume()
        done.wait()
        if let failure { throw failure }
        guard status == 204 else { throw SetupFailure("serve-tiles /debug/reset answered \(status)") }
    }

    func stop() {
        guard process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
    }

    deinit { stop() }
}

/// The helper itself: it starts the executable, reads its port, and its
/// counters and reset work, so map build tests can lean on it.
@Suite(.offThePool) struct LocalTileServerTests {
    @Test func spawnsServesCountsAndResets() throws {
        let tiles = try LocalTileServer(
            flags: ["--empty", "3/1/1", "--api-key-env", "TILE_SUPPORT_KEY"],
            environment: ["TILE_SUPPORT_KEY": "support-key"])
        defer { tiles.stop() }
        #expect(tiles.urlTemplate == "http://127.0.0.1:\(tiles.port)/{z}/{x}/{y}.png")
        let tile = try Data(contentsOf: URL(string: "\(tiles.endpoint)/3/2/2.png?key=support-key")!)
        #expect(tile.prefix(4) == Data([0x89, 0x50, 0x4E, 0x47]))
        #expect((try? Data(contentsOf: URL(string: "\(tiles.endpoint)/3/1/1.png?key=support-key")!)) == nil, "an --empty tile is a 404")
        let stats = try tiles.stats()
        #expect(stats["requests"] as? Int == 2)
        #expect(stats["ok"] as? Int == 1)
        #expect(stats["empty"] as? Int == 1)
        #expect(stats["queryKeys"] as? [String] == ["key"])
        try tiles.reset()
        #expect(try tiles.stats()["requests"] as? Int == 0)
        tiles.stop()
        #expect(!tiles.process.isRunning)
    }
}

import Foundation
import Testing
import TourpackTesting

/// A key with `+`, `/` and `=` that a server echoes in another spelling
/// (percent-encoded, lowercased) appears nowhere: not in the log, not in
/// `--json`, not in the state's tables (issue 27, defect 2).
@Suite(.serialized, .offThePool) struct SecretLeakTests {
    static let key = "Tk+Tile/Key=Wq8"

    /// Every spelling the probe found, and the key's tail in any case.
    static func leaks(in text: String) -> [String] {
        let lowered = text.lowercased()
        return ["tk+tile/key=wq8", "tk%2btile%2fkey%3dwq8", "key%3dwq8", "key=wq8", "tile/key", "tile%2fkey"].filter {
            lowered.contains($0)
        }
    }

    /// Every file under the workspace's output and state, as text.
    static func files(_ workspace: BuildWorkspace) throws -> [(String, String)] {
        try [workspace.output, workspace.state].flatMap { root in
            try RootCheck.allFiles(under: root).map { path in
                (path, String(decoding: try Data(contentsOf: root.appendingPathComponent(path)), as: UTF8.self))
            }
        }
    }

    @Test("A tile server's 403 that echoes the key percent-encoded leaks it nowhere")
    func aTileServerEchoingTheKey() throws {
        // The server answers every tile 403, echoing the request line it got: the key as the query carries it.
        let server = try CaptureServer { head in
            (403, "Forbidden: \(head.split(separator: "\r\n").first ?? "") is not allowed for this key")
        }
        defer { server.stop() }
        let voice = try LocalVoiceServer()
        let workspace = try MapBuildTests.workspace(
            source: "url: http://127.0.0.1:\(server.port)/{z}/{x}/{y}.png\nattribution: Test tiles\napiKeyEnv: TILE_TEST_KEY\n"
                + "userAgent: tourpack-tests (maps@example.com)\nrequestsPerSecond: 0\n")
        let environment = ["TILE_TEST_KEY": Self.key]
        let json = try Executable.run(
            ["build", workspace.pipeline.path, "--endpoint", voice.endpoint, "--json"], in: workspace.root, environment: environment)
        let lines = try Executable.run(
            ["build", workspace.pipeline.path, "--endpoint", voice.endpoint], in: workspace.root, environment: environment)
        #expect(json.status == 1 && lines.status == 1, "\(json.stdout.suffix(800))")
        // The server did get the key, percent-encoded, and echoed it.
        #expect(server.received.contains { $0.contains("key=Tk%2BTile%2FKey%3DWq8") }, "\(server.received.prefix(1))")
        #expect(json.stdout.contains("HTTP 403") && json.stdout.contains("<redacted>"), "\(json.stdout.suffix(800))")
        for (name, text) in [("--json", json.stdout), ("its stderr", json.stderr), ("the log", lines.stdout), ("its stderr", lines.stderr)]
        {
            #expect(Self.leaks(in: text).isEmpty, "the key is in \(name): \(Self.leaks(in: text))")
        }
        for (path, text) in try Self.files(workspace) {
            #expect(Self.leaks(in: text).isEmpty, "the key is in \(path) (the build and buildTour tables live in state.sqlite)")
        }
    }

    @Test("A TTS 400 that echoes the key URL-encoded and lowercased leaks it nowhere")
    func aTTSEndpointEchoingTheKey() throws {
        let server = try CaptureServer { _ in
            (
                400,
                #"{"error": {"code": 400, "message": "API key tk+tile/key=wq8 (Tk%2bTile%2fKey%3dWq8) is not valid", "status": "INVALID_ARGUMENT"}}"#
            )
        }
        defer { server.stop() }
        let workspace = try BuildWorkspace()
        let yaml = try String(contentsOf: workspace.pipeline, encoding: .utf8)
            .replacingOccurrences(of: "  timeoutSeconds: 30", with: "  timeoutSeconds: 30\n  apiKeyEnv: TTS_TEST_KEY")
        try yaml.write(to: workspace.pipeline, atomically: true, encoding: .utf8)
        let result = try Executable.run(
            ["build", workspace.pipeline.path, "--endpoint", "http://127.0.0.1:\(server.port)", "--json"], in: workspace.root,
            environment: ["TTS_TEST_KEY": Self.key])
        #expect(result.status == 1, "\(result.stdout.suffix(800))\n\(result.stderr)")
        #expect(result.stdout.contains("is not valid") && result.stdout.contains("<redacted>"), "\(result.stdout.suffix(800))")
        for text in [result.stdout, result.stderr] { #expect(Self.leaks(in: text).isEmpty, "\(Self.leaks(in: text))") }
        for (path, text) in try Self.files(workspace) { #expect(Self.leaks(in: text).isEmpty, "the key is in \(path)") }
    }
}

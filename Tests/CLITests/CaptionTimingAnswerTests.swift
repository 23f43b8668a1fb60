import Foundation
import Testing
import TourpackCore
import TourpackKit
import TourpackTesting

/// A build asks each provider for sentence timings the provider's way, and
/// the caption times follow what the endpoint answered: a loopback server
/// answers with audio whose shape is known (quiet, tone, quiet, tone) and
/// timings of its choosing, so the expected cue times are worked out here
/// by hand.
@Suite(.serialized, .offThePool) struct CaptionTimingAnswerTests {
    static let rate = 24_000
    /// 0.3 s of silence, 1 s of tone, 0.4 s of silence, 1 s of tone, 0.3 s of silence.
    static let pcm: [Int16] = {
        func silence(_ seconds: Double) -> [Int16] { Array(repeating: 0, count: Int(seconds * Double(rate))) }
        func tone(_ seconds: Double) -> [Int16] {
            (0..<Int(seconds * Double(rate))).map { Int16(8000 * sin(2 * Double.pi * 440 * Double($0) / Double(rate))) }
        }
        return silence(0.3) + tone(1) + silence(0.4) + tone(1) + silence(0.3)
    }()
    /// Where the answers say the second sentence starts (a little before its tone).
    static let secondStart = 1.6543

    static var pcmBytes: [UInt8] { pcm.flatMap { [UInt8(truncatingIfNeeded: $0), UInt8(truncatingIfNeeded: $0 >> 8)] } }

    static var wav: [UInt8] {
        func u32(_ value: Int) -> [UInt8] { (0..<4).map { UInt8((value >> (8 * $0)) & 0xFF) } }
        func u16(_ value: Int) -> [UInt8] { (0..<2).map { UInt8((value >> (8 * $0)) & 0xFF) } }
        let data = pcmBytes
        return Array("RIFF".utf8) + u32(36 + data.count) + Array("WAVEfmt ".utf8) + u32(16) + u16(1) + u16(1) + u32(rate)
            + u32(rate * 2) + u16(2) + u16(16) + Array("data".utf8) + u32(data.count) + data
    }

    static func workspace(api: String, voice: String? = nil, key: String? = nil) throws -> BuildWorkspace {
        let workspace = try BuildWorkspace(formats: ["aac"])
        try FileManager.default.removeItem(at: workspace.root.appendingPathComponent("tours/lakes.json"))
        try """
        {"id": "\(CaptionBuildTests.tourID)", "name": "Answer Pass", "language": "en-US", "version": 1,
         "route": {"waypoints": [{"latitude": 46.0, "longitude": 7.1}, {"latitude": 46.05, "longitude": 7.2}],
                   "segments": [{"from": 0, "to": 1, "distanceMeters": 6000, "durationSeconds": 600}]},
         "pois": [{"id": "\(CaptionBuildTests.shortPOI)", "name": "Short", "location": {"latitude": 46.0, "longitude": 7.1},
                   "triggerRadiusMeters": 300, "narrations": {"approaching": "One road. Two lakes."}}]}
        """.write(to: workspace.root.appendingPathComponent("tours/alps.json"), atomically: true, encoding: .utf8)
        var text = try String(contentsOf: workspace.pipeline, encoding: .utf8)
        text = text.replacingOccurrences(of: "api: google", with: "api: \(api)" + (key.map { "\n  apiKeyEnv: \($0)" } ?? ""))
        if let voice { text = text.replacing(#/voice: .*\n/#, with: "voice: \(voice)\n") }
        try text.write(to: workspace.pipeline, atomically: true, encoding: .utf8)
        return workspace
    }

    /// The single caption file's cues, as written.
    static func cues(_ workspace: BuildWorkspace) throws -> (entry: PackageManifest.CaptionsEntry, text: String) {
        let packages = try FileManager.default.contentsOfDirectory(
            at: workspace.output.appendingPathComponent("OfflineTours"), includingPropertiesForKeys: nil)
        let manifest = try PackageManifest.read(from: try #require(packages.first).appendingPathComponent("package.json"))
        let captions = try #require(manifest.audio.first?.captions)
        return (captions, try String(contentsOf: workspace.output.appendingPathComponent(captions.path), encoding: .utf8))
    }

    static func build(_ workspace: BuildWorkspace, port: Int, environment: [String: String] = [:]) throws -> Executable.Result {
        try Executable.run(
            ["build", workspace.pipeline.path, "--endpoint", "http://127.0.0.1:\(port)"], in: workspace.root, environment: environment)
    }

    @Test func googleIsAskedForTimepointsAndTheCuesFollowThem() throws {
        let audio = Data(Self.wav).base64EncodedString()
        let server = try CaptureServer(answerRequest: { _, _ in
            let body =
                #"{"audioContent":"\#(audio)","timepoints":[{"markName":"s0","timeSeconds":0.25},{"markName":"s1","timeSeconds":\#(Self.secondStart)}]}"#
            return (200, ["Content-Type: application/json"], Array(body.utf8))
        })
        defer { server.stop() }
        let workspace = try Self.workspace(api: "google")
        let build = try Self.build(workspace, port: server.port)
        #expect(build.status == 0, "\(build.stderr)")

        let head = try #require(server.received.first)
        #expect(head.hasPrefix("POST /v1beta1/text:synthesize "))
        let body = try #require(server.receivedBodies.first)
        let request = try #require(try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any])
        #expect(request["enableTimePointing"] as? [String] == ["SSML_MARK"])
        let ssml = (request["input"] as? [String: Any])?["ssml"] as? String
        #expect(ssml == #"<speak><mark name="s0"/>One road. <mark name="s1"/>Two lakes.</speak>"#)

        let (entry, text) = try Self.cues(workspace)
        #expect(entry.timing == .provider && entry.cues == 2)
        // The first chunk keeps its lead-in, so the file's times are the answer's: the first
        // sentence at its first audible sample (0.3 s), the second where the timepoint says.
        #expect(text.contains("00:00:00.300 --> 00:00:01.654\nOne road.\n"), "\(text)")
        #expect(text.contains("00:00:01.654 --> 00:00:02.700\nTwo lakes.\n"), "\(text)")
    }

    @Test func elevenLabsIsAskedForItsAlignmentAndTheCuesFollowIt() throws {
        let audio = Data(Self.pcmBytes).base64EncodedString()
        let characters = Array("One road. Two lakes.").map(String.init)
        let starts = characters.indices.map { $0 < 10 ? 0.25 + Double($0) * 0.1 : Self.secondStart + Double($0 - 10) * 0.1 }
        let alignment =
            #"{"characters":\#(try String(decoding: JSONSerialization.data(withJSONObject: characters), as: UTF8.self)),"character_start_times_seconds":\#(starts),"character_end_times_seconds":\#(starts.map { $0 + 0.1 })}"#
        let server = try CaptureServer(answerRequest: { _, _ in
            let body = #"{"audio_base64":"\#(audio)","alignment":\#(alignment),"normalized_alignment":\#(alignment)}"#
            return (200, ["Content-Type: application/json"], Array(body.utf8))
        })
        defer { server.stop() }
        let voice = Executable.packageRoot.appendingPathComponent("voices/elevenlabs-george.yaml").path
        let workspace = try Self.workspace(api: "elevenlabs", voice: voice, key: "CAPTION_TEST_XI_KEY")
        let build = try Self.build(workspace, port: server.port, environment: ["CAPTION_TEST_XI_KEY": "xi-test-key"])
        #expect(build.status == 0, "\(build.stderr)")
        let head = try #require(server.received.first)
        #expect(head.hasPrefix("POST /v1/text-to-speech/JBFqnCBsd6RMkjVDRZzb/with-timestamps?output_format=pcm_24000 "), "\(head)")

        let (entry, text) = try Self.cues(workspace)
        #expect(entry.timing == .provider && entry.cues == 2)
        #expect(text.contains("00:00:00.300 --> 00:00:01.654\nOne road.\n"), "\(text)")
        #expect(text.contains("00:00:01.654 --> 00:00:02.700\nTwo lakes.\n"), "\(text)")
    }
}

import Foundation
import Testing
import TourpackAudio
import TourpackCore
import TourpackKit
import TourpackTesting

/// `tts.api: piper` end to end, against the real Piper server
/// (`PiperTestServer`: `python3 -m piper.http_server` with the pinned
/// en_US-joe-medium voice), started by each test and stopped whatever
/// happens. Faults are put in front of it by `FaultProxy`. Every file is
/// measured by tools that share no code with tourpack: ffmpeg's `ebur128`
/// for loudness, ffmpeg's samples for where speech starts, webvtt-py for
/// the captions.
@Suite(.serialized, .offThePool) struct PiperBuildTests {
    /// `BuildWorkspace`'s two tours, spoken by Piper: one sentence a request.
    static func workspace() throws -> BuildWorkspace {
        let workspace = try BuildWorkspace()
        var text = try String(contentsOf: workspace.pipeline, encoding: .utf8)
        text = text.replacingOccurrences(of: "api: google", with: "api: piper")
        text = text.replacingOccurrences(of: "voices/local-en-us.yaml", with: "voices/piper-joe.yaml")
        text = text.replacingOccurrences(of: "concurrency: 4", with: "concurrency: 2")
        try text.write(to: workspace.pipeline, atomically: true, encoding: .utf8)
        return workspace
    }

    static func build(_ workspace: BuildWorkspace, endpoint: String) throws -> Executable.Result {
        try Executable.run(["build", workspace.pipeline.path, "--endpoint", endpoint], in: workspace.root)
    }

    /// The distinct sentences of the two tours as `BuildWorkspace.writeTours` writes them.
    static func sentences(alps: String, lakes: String) -> Set<String> {
        [
            "Ahead is the first hairpin.", "Look left at the glacier.", "It is retreating every year.", "The hut was built in 1899.",
            "Soon you will see the lake.", "The lake is 40 metres deep.", alps, lakes,
        ]
    }

    @Test func twoToursThroughFaultsAreLevelledCaptionedAndAskedForOnce() throws {
        let piper = try PiperTestServer()
        // A 503, an answer cut in half, and a 429, in front of a real Piper.
        let proxy = try FaultProxy(upstreamPort: piper.port) { index in
            switch index {
            case 0: return .status(503)
            case 3: return .cut(fraction: 0.5)
            case 5: return .tooMany
            default: return nil
            }
        }
        let workspace = try Self.workspace()
        let alps = "The road climbs in thirty-six hairpins.", lakes = "The lake lies still below the pass."

        let first = try Self.build(workspace, endpoint: proxy.endpoint)
        #expect(first.status == 0, "\(first.stdout)\(first.stderr)")
        let sent = proxy.requests
        #expect(sent.filter { $0.fault != nil }.count == 3, "the three faults were met and retried")
        // One request a sentence, each sentence asked for once (and again only after a fault).
        let texts = sent.filter { $0.fault == nil }.compactMap { Self.text(of: $0.body) }
        #expect(Set(texts) == Self.sentences(alps: alps, lakes: lakes), "\(texts)")
        #expect(texts.count == Set(texts).count, "a sentence was asked for twice: \(texts.sorted())")
        #expect(sent.allSatisfy { $0.path == "/synthesize" })

        let validated = try Executable.run(["validate", workspace.output.path, "--pipeline", workspace.pipeline.path], in: workspace.root)
        #expect(validated.status == 0, "\(validated.stdout)\(validated.stderr)")

        // Loudness, by ffmpeg's own meter.
        let files = try LoudnessBuildTests.measured(workspace)
        #expect(files.count == 5)
        for (entry, _, ffmpeg) in files {
            #expect(
                abs(ffmpeg.integrated - -16) <= 1, "\(entry.path) (\(entry.durationSeconds) s): ffmpeg measures \(ffmpeg.integrated) LUFS")
            #expect(ffmpeg.truePeak <= -1, "\(entry.path): ffmpeg's true peak is \(ffmpeg.truePeak) dBTP")
        }

        // Captions: one cue a sentence, in order, inside the audio, each where speech starts.
        for file in try CaptionBuildTests.captioned(workspace) {
            #expect(file.captions.timing == .provider, "\(file.captions.path)")
            let audio = workspace.output.appendingPathComponent(file.entry.path)
            #expect(file.cues.count >= 2, "\(file.captions.path): \(file.cues.map(\.text))")
            #expect(file.cues.allSatisfy { Self.sentences(alps: alps, lakes: lakes).contains($0.text) }, "\(file.cues.map(\.text))")
            let starts = try CaptionBuildTests.speechStarts(audio)
            for cue in file.cues {
                let nearest = starts.map { abs($0 - cue.start) }.min() ?? .infinity
                #expect(nearest <= 0.150, "\(file.entry.path): cue \"\(cue.text)\" at \(cue.start) s, speech starts \(starts)")
                #expect(cue.start >= 0 && cue.start < cue.end && cue.end <= file.entry.durationSeconds + 0.001)
            }
            for (cue, next) in zip(file.cues, file.cues.dropFirst()) { #expect(cue.end <= next.start) }
        }

        // A rebuild asks Piper nothing.
        proxy.resetLog()
        proxy.inject { _ in nil }
        let again = try Self.build(workspace, endpoint: proxy.endpoint)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(proxy.requests.isEmpty, "a rebuild sent \(proxy.requests.count) request(s)")

        // One sentence edited (it appears in three narrations): one request.
        try workspace.writeTours(alps: "The road climbs in forty hairpins.", lakes: lakes)
        let edited = try Self.build(workspace, endpoint: proxy.endpoint)
        #expect(edited.status == 0, "\(edited.stderr)")
        #expect(proxy.requests.compactMap { Self.text(of: $0.body) } == ["The road climbs in forty hairpins."])
        proxy.stop()
        piper.stop()
    }

    @Test func aServerThatIsGoneIsNetworkUnavailableNamingTheEndpoint() throws {
        let piper = try PiperTestServer()
        let endpoint = piper.endpoint
        piper.stop()
        let workspace = try Self.workspace()
        let result = try Self.build(workspace, endpoint: endpoint)
        #expect(result.status == 1)
        #expect(result.stdout.contains("network unavailable: \(endpoint)/synthesize"), "\(result.stdout)")
    }

    @Test func whatPiperCannotDoIsRefusedBeforeAnythingIsSent() throws {
        let workspace = try Self.workspace()
        // Nothing listens on port 9: a refusal must come before any request.
        let voice = workspace.root.appendingPathComponent("pitched.yaml")
        try "version: 1\nprovider: piper\nlanguageCode: en-US\nname: en_US-joe-medium\ntier: local\npitch: 2\n"
            .write(to: voice, atomically: true, encoding: .utf8)
        let pitched = try Executable.run(["build", workspace.pipeline.path, "--voice", voice.path], in: workspace.root)
        #expect(pitched.status == 2)
        #expect(pitched.stderr.contains("pitched.yaml") && pitched.stderr.contains("pitch"), "\(pitched.stderr)")

        // The lake tour's narrations as SSML: a <sub> and a <break/> Piper can take, a <prosody> it cannot.
        let lakes = workspace.root.appendingPathComponent("tours/lakes.json")
        var tour = try String(contentsOf: lakes, encoding: .utf8)
        tour = tour.replacingOccurrences(
            of: "\"Soon you will see the lake. The lake lies still below the pass.\"",
            with:
                "\"<speak>Soon you will see the <sub alias=\\\"lake\\\">L.</sub> <break time=\\\"500ms\\\"/> <prosody rate=\\\"slow\\\">It lies still.</prosody></speak>\""
        )
        #expect(tour.contains("<prosody"))
        try tour.write(to: lakes, atomically: true, encoding: .utf8)
        let marked = try Executable.run(["build", workspace.pipeline.path], in: workspace.root)
        #expect(marked.status == 2, "\(marked.stdout)\(marked.stderr)")
        #expect(marked.stderr.contains("lakes.json") && marked.stderr.contains("<prosody>"), "\(marked.stderr)")
        #expect(!marked.stderr.contains("<sub>") && !marked.stderr.contains("<break"), "\(marked.stderr)")
        #expect(!marked.stdout.contains("network unavailable"))
    }

    /// The `text` of a request body Piper was sent.
    static func text(of body: [UInt8]) -> String? {
        (try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any])?["text"] as? String
    }
}

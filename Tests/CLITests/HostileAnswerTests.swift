import Foundation
import Testing
import TourpackCore
import TourpackKit
import TourpackTesting

/// Issue 35 replayed: a hostile proxy in front of the real `serve-tts`
/// changes one field of its answers (a sentence time, or the audio), in
/// each dialect, for single- and multi-chunk narrations. Every build exits
/// 0 with estimated captions, or 1 naming the failed item and chunk; none
/// crashes. What ships passes `validate --pipeline`, and a build against an
/// honest proxy asks only for the chunks that failed.
@Suite(.offThePool) struct HostileAnswerTests {
    static let key = "HOSTILEPROXYKEY35"
    static let tourID = "3b5a7c1d-2e4f-4a6b-8c0d-1e2f3a4b5c60"
    /// A single-chunk narration (its last word aims the proxy), a long one
    /// cut into 2 to 4 chunks (the marker in its last sentence), and one left alone.
    static let singlePOI = "3b5a7c1d-2e4f-4a6b-8c0d-1e2f3a4b5c61"
    static let longPOI = "3b5a7c1d-2e4f-4a6b-8c0d-1e2f3a4b5c62"
    static let quietPOI = "3b5a7c1d-2e4f-4a6b-8c0d-1e2f3a4b5c63"
    static let long =
        (1...52).map { "Stop \($0) of the valley road shows old stone bridges and a river below." }.joined(separator: " ")
        + " The last bridge leads to Zanzibar."

    static let apis = ["google", "openai", "azure", "polly", "elevenlabs"]

    /// The voice and the `tts:` lines of each dialect.
    static func setup(_ api: String) -> (voice: String, tts: String) {
        switch api {
        case "polly":
            return (
                "version: 1\nprovider: polly\nlanguageCode: en-US\nname: en-US\ntier: neural\nengine: neural\n",
                "  region: eu-central-1\n  accessKeyEnv: TP_TEST_ACCESS\n  secretKeyEnv: TP_TEST_SECRET\n"
            )
        case "azure":
            return ("version: 1\nprovider: azure\nlanguageCode: en-US\nname: en-US\ntier: neural\n", "  apiKeyEnv: TP_TEST_KEY\n")
        case "elevenlabs":
            // eleven_v3 takes 5,000 characters a request: with the headroom, the long narration is two chunks.
            return (
                "version: 1\nprovider: elevenlabs\nlanguageCode: en-US\nname: en-US\ntier: full-credit\nmodelId: eleven_v3\n",
                "  apiKeyEnv: TP_TEST_KEY\n"
            )
        default:
            return (try! String(contentsOf: Executable.packageRoot.appendingPathComponent("voices/local-en-us.yaml"), encoding: .utf8), "")
        }
    }

    static let environment = ["TP_TEST_KEY": key, "TP_TEST_ACCESS": key, "TP_TEST_SECRET": "hostile-secret-0123456789"]

    /// A workspace whose pipeline speaks through `proxy` in `api`'s dialect.
    static func workspace(_ api: String, proxy: HostileProxy) throws -> BuildWorkspace {
        let workspace = try BuildWorkspace()
        for file in ["alps.json", "lakes.json"] {
            try FileManager.default.removeItem(at: workspace.root.appendingPathComponent("tours/\(file)"))
        }
        try """
        {"id": "\(tourID)", "name": "Hostile Valley", "language": "en-US", "version": 1,
         "route": {"waypoints": [{"latitude": 46.0, "longitude": 7.1}, {"latitude": 46.05, "longitude": 7.2}],
                   "segments": [{"from": 0, "to": 1, "distanceMeters": 6000, "durationSeconds": 600}]},
         "pois": [
          {"id": "\(singlePOI)", "name": "Single", "location": {"latitude": 46.0, "longitude": 7.1}, "triggerRadiusMeters": 300,
           "narrations": {"approaching": "Ahead is the first hairpin. The road climbs to the quokka."}},
          {"id": "\(longPOI)", "name": "Long", "location": {"latitude": 46.01, "longitude": 7.11}, "triggerRadiusMeters": 300,
           "narrations": {"guidedTour": "\(long)"}},
          {"id": "\(quietPOI)", "name": "Quiet", "location": {"latitude": 46.02, "longitude": 7.12}, "triggerRadiusMeters": 300,
           "narrations": {"detailed": "The lake lies still below the pass. Nobody swims in it."}}
         ]}
        """.write(to: workspace.root.appendingPathComponent("tours/valley.json"), atomically: true, encoding: .utf8)
        let (voice, tts) = setup(api)
        try voice.write(to: workspace.root.appendingPathComponent("voice.yaml"), atomically: true, encoding: .utf8)
        try """
        version: 1
        tours: ["tours/*.json"]
        voice: voice.yaml
        formats: [aac]
        tts:
          api: \(api)
          endpoint: \(proxy.endpoint)
          concurrency: 2
          requestsPerMinute: 6000
          maxAttempts: 3
          initialBackoffMs: 1
          maxBackoffMs: 5
        \(tts)
        chunking: {headroom: 2000}
        output: Documents
        state: state
        """.write(to: workspace.pipeline, atomically: true, encoding: .utf8)
        return workspace
    }

    static func build(_ workspace: BuildWorkspace) throws -> Executable.Result {
        try Executable.run(["build", workspace.pipeline.path], in: workspace.root, environment: environment)
    }

    static func validate(_ workspace: BuildWorkspace) throws -> Executable.Result {
        try Executable.run(["validate", workspace.output.path, "--pipeline", workspace.pipeline.path], in: workspace.root)
    }

    /// The audio requests among `bodies` (Polly's speech-marks requests left out).
    static func audioRequests(_ bodies: [String]) -> Int { bodies.filter { !$0.contains("SpeechMarkTypes") }.count }

    static func manifests(_ workspace: BuildWorkspace) throws -> [PackageManifest] {
        try FileManager.default.contentsOfDirectory(
            at: workspace.output.appendingPathComponent("OfflineTours"), includingPropertiesForKeys: nil
        ).map { try PackageManifest.read(from: $0.appendingPathComponent("package.json")) }
    }

    /// Huge (the 1e15 s, 1e308 s, 10^300 ms), negative and decreasing
    /// times, one fault a request: the build exits 0 with every narration's
    /// captions estimated; the times never reach the cache, so a second
    /// build reuses everything, makes no request and does not crash.
    @Test(arguments: ["google", "elevenlabs", "polly"])
    func hostileTimesAreEstimatedNeverACrash(api: String) throws {
        let server = try LocalVoiceServer()
        let proxy = try HostileProxy(upstream: server.endpoint)
        defer { proxy.stop() }
        let huge = ["google": 1e15, "elevenlabs": 1e308, "polly": 1e300][api]!
        proxy.aim([.time(huge), .time(-1), .decreasingTimes])
        let workspace = try Self.workspace(api, proxy: proxy)
        let first = try Self.build(workspace)
        #expect(first.status == 0, "\(first.stdout)\n\(first.stderr)")
        #expect(Self.audioRequests(proxy.requests) >= 4, "the long narration is more than one chunk")
        for entry in try Self.manifests(workspace).flatMap(\.audio) {
            #expect(entry.captions?.timing == .estimated, "\(entry.path): \(String(describing: entry.captions))")
        }
        let validate = try Self.validate(workspace)
        #expect(validate.status == 0, "\(validate.stdout)\n\(validate.stderr)")

        proxy.aim([])
        proxy.reset()
        let second = try Self.build(workspace)
        #expect(second.status == 0, "\(second.stdout)\n\(second.stderr)")
        #expect(proxy.requests.isEmpty, "\(proxy.requests.count) requests")
    }

    /// No audio, or one byte of it, for the last chunk of the long
    /// narration and the single-chunk one, on every try: each is billed,
    /// retried and fails its item naming the chunk; the rest is spoken. An
    /// honest proxy then gets requests for exactly those two chunks.
    @Test(arguments: apis)
    func anEmptyOrOneByteAnswerFailsItsItemNamingTheChunk(api: String) throws {
        let server = try LocalVoiceServer()
        let proxy = try HostileProxy(upstream: server.endpoint)
        defer { proxy.stop() }
        proxy.aim([.noAudio, .oneByte], at: ["Zanzibar", "quokka"])
        let workspace = try Self.workspace(api, proxy: proxy)
        let first = try Self.build(workspace)
        let output = first.stdout + first.stderr
        #expect(first.status == 1, "\(output)")
        let lines = output.split(separator: "\n")
        let single = lines.first { $0.contains("FAILED Hostile Valley / Single") } ?? ""
        #expect(single.contains("gave up after 3 tries on chunk 1 of 1"), "\(output)")
        let long = lines.first { $0.contains("FAILED Hostile Valley / Long") } ?? ""
        let place = long.firstMatch(of: /on chunk (\d+) of (\d+)/).map { (Int($0.1) ?? 0, Int($0.2) ?? 0) }
        #expect(place.map { $0.0 == $0.1 && $0.1 >= 2 } == true, "the last of its chunks: \(output)")
        #expect(output.contains("1 failed"), "the tour fails: \(output)")
        #expect(output.contains("no audio") || output.contains("too little audio") || output.contains("undecodable"), "\(output)")
        // Three tries each for the two aimed chunks.
        let failures = output.split(separator: "\n").filter { $0.contains("FAILED") && $0.contains("gave up after 3 tries") }
        #expect(failures.count == 2, "three tries of each aimed chunk: \(output)")

        proxy.aim([])
        proxy.reset()
        let second = try Self.build(workspace)
        #expect(second.status == 0, "\(second.stdout)\n\(second.stderr)")
        #expect(Self.audioRequests(proxy.requests) == 2, "\(proxy.requests.map { String($0.prefix(80)) })")
        let validate = try Self.validate(workspace)
        #expect(validate.status == 0, "\(validate.stdout)\n\(validate.stderr)")
        #expect(try Self.manifests(workspace).flatMap(\.audio).count == 3)
    }

    /// Half an answer for the long narration's last chunk: a cut WAV or
    /// JSON body is undecodable and fails the item; half of raw PCM is
    /// still speech enough for its text, and ships. Either way nothing
    /// crashes, what ships passes `validate --pipeline`, and an honest
    /// proxy then completes the build.
    @Test(arguments: apis)
    func aHalfAnswerShipsOnlyWhatValidates(api: String) throws {
        let server = try LocalVoiceServer()
        let proxy = try HostileProxy(upstream: server.endpoint)
        defer { proxy.stop() }
        proxy.aim([.halfBody], at: ["Zanzibar"])
        let workspace = try Self.workspace(api, proxy: proxy)
        let first = try Self.build(workspace)
        let output = first.stdout + first.stderr
        #expect(first.status == 0 || first.status == 1, "\(output)")
        if first.status == 1 {
            #expect(output.contains("Long") && output.contains("chunk "), "\(output)")
        } else {
            let validate = try Self.validate(workspace)
            #expect(validate.status == 0, "\(validate.stdout)\n\(validate.stderr)")
        }
        proxy.aim([])
        let second = try Self.build(workspace)
        #expect(second.status == 0, "\(second.stdout)\n\(second.stderr)")
        let validate = try Self.validate(workspace)
        #expect(validate.status == 0, "\(validate.stdout)\n\(validate.stderr)")
    }
}

import Foundation
import Testing
import TourpackAudio
import TourpackServer
import TourpackTesting

/// serve-tts as Polly, Azure Speech and ElevenLabs, seen by the clients a
/// team would use: boto3's Polly client (`endpoint_url`), ElevenLabs' SDK
/// (`base_url`), and plain HTTP for Azure's REST API. Each server requires
/// the key, so the clients must send it where the real service reads it.
@Suite(.serialized) struct ProviderClientTests {
    static let key = "AKIDTOURPACKTEST0001"

    @Test func boto3PollyClientSynthesizesAndListsVoices() async throws {
        let folder = try TemporaryFolder.make("tourpack-clients")
        defer { TemporaryFolder.remove(folder) }
        let stats = try await withServer(configure: { $0.requiredAPIKey = Self.key }) { port, server in
            try await OfficialClientTests.runClient("polly_client.py", port: port, outdir: folder, arguments: [Self.key])
            return server.stats.snapshot
        }
        let manifest = try OfficialClientTests.manifest(in: folder)
        #expect((manifest["voices"] as? [[String: Any]])?.isEmpty == false)
        let files = try #require(manifest["files"] as? [[String: Any]])
        let byName = Dictionary(uniqueKeysWithValues: files.compactMap { entry in (entry["file"] as? String).map { ($0, entry) } })
        let text = "The road climbs to the glacier in thirty six hairpin bends."
        // Polly bills the text, never the SSML tags: RequestCharacters says so.
        #expect(byName["polly-pcm-16000.pcm"]?["requestCharacters"] as? Int == text.count)
        #expect(byName["polly-ssml.pcm"]?["requestCharacters"] as? Int == 2 * text.count + 2)
        #expect(byName["polly-pcm-16000.pcm"]?["contentType"] as? String == "audio/pcm")
        #expect(byName["polly-mp3.mp3"]?["contentType"] as? String == "audio/mpeg")
        for (name, rate) in [("polly-pcm-16000.pcm", 16_000), ("polly-pcm-8000.pcm", 8000)] {
            let pcm = try Data(contentsOf: folder.appendingPathComponent(name))
            Self.checkSpeech(pcm, rate: rate, name: name)
        }
        let plain = try Data(contentsOf: folder.appendingPathComponent("polly-pcm-16000.pcm")).count
        let paused = try Data(contentsOf: folder.appendingPathComponent("polly-ssml.pcm")).count
        #expect(paused > 2 * plain, "the SSML speaks the text twice with a two-second break")
        try await OfficialClientTests.checkAudio(
            folder.appendingPathComponent("polly-mp3.mp3"), codec: "mp3", rate: 22_050, wavCode: nil)
        let refusals = try #require(manifest["refusals"] as? [[String: Any]])
        #expect(
            refusals.map { $0["code"] as? String } == [
                "TextLengthExceededException", "InvalidSampleRateException", "UnrecognizedClientException",
            ])
        #expect(refusals.map { $0["status"] as? Int } == [400, 400, 403])
        // The server billed what Polly bills: four texts, one twice, the SSML tags free.
        #expect(stats.characters == 4 * text.count + (text.count + 2))
    }

    @Test func elevenLabsSDKConvertsAndListsVoices() async throws {
        let folder = try TemporaryFolder.make("tourpack-clients")
        defer { TemporaryFolder.remove(folder) }
        let stats = try await withServer(configure: { $0.requiredAPIKey = Self.key }) { port, server in
            try await OfficialClientTests.runClient("elevenlabs_client.py", port: port, outdir: folder, arguments: [Self.key])
            return server.stats.snapshot
        }
        let manifest = try OfficialClientTests.manifest(in: folder)
        #expect((manifest["voices"] as? [String])?.contains("en-US") == true)
        let normal = try Data(contentsOf: folder.appendingPathComponent("eleven-pcm_24000.pcm"))
        Self.checkSpeech(normal, rate: 24_000, name: "pcm_24000")
        Self.checkSpeech(try Data(contentsOf: folder.appendingPathComponent("eleven-pcm_16000.pcm")), rate: 16_000, name: "pcm_16000")
        let fast = try Data(contentsOf: folder.appendingPathComponent("eleven-speed-1.2.pcm"))
        #expect(Double(fast.count) < Double(normal.count) * 0.95, "speed 1.2 is shorter: \(fast.count) vs \(normal.count) bytes")
        try await OfficialClientTests.checkAudio(folder.appendingPathComponent("eleven-mp3.mp3"), codec: "mp3", rate: 24_000, wavCode: nil)
        let refusals = try #require(manifest["refusals"] as? [[String: Any]])
        #expect(refusals.map { $0["status"] as? Int } == [400, 401])
        #expect(refusals.map { $0["code"] as? String } == ["max_character_limit_exceeded", "invalid_api_key"])
        #expect(stats.requestsWithNeighbourText == 1)
        // Credits: one a character, half for the Flash model (rounded up).
        let text = "The road climbs to the glacier in thirty six hairpin bends."
        #expect(stats.characters == 3 * text.count + (text.count + 1) / 2)
    }

    @Test func azureRESTAnswersAsTheReferenceShows() async throws {
        let folder = try TemporaryFolder.make("tourpack-clients")
        defer { TemporaryFolder.remove(folder) }
        try await withServer(configure: { $0.requiredAPIKey = Self.key }) { port, _ in
            try await OfficialClientTests.runClient("azure_client.py", port: port, outdir: folder, arguments: [Self.key])
        }
        let manifest = try OfficialClientTests.manifest(in: folder)
        #expect((manifest["voices"] as? [String])?.isEmpty == false)
        let raw = try Data(contentsOf: folder.appendingPathComponent("azure-raw-24khz.pcm"))
        Self.checkSpeech(raw, rate: 24_000, name: "raw-24khz")
        Self.checkSpeech(try Data(contentsOf: folder.appendingPathComponent("azure-raw-16khz.pcm")), rate: 16_000, name: "raw-16khz")
        try await OfficialClientTests.checkAudio(
            folder.appendingPathComponent("azure-riff-24khz.wav"), codec: "pcm_s16le", rate: 24_000, wavCode: 1)
        let fast = try Data(contentsOf: folder.appendingPathComponent("azure-prosody.pcm"))
        #expect(Double(fast.count) < Double(raw.count) * 0.75, "prosody rate 2 is shorter: \(fast.count) vs \(raw.count) bytes")
        let refusals = try #require(manifest["refusals"] as? [[String: Any]])
        #expect(refusals.map { $0["status"] as? Int } == [401, 400, 415])
    }

    /// Headerless s16le: an even byte count, no RIFF, more than half a second, not silence.
    static func checkSpeech(_ pcm: Data, rate: Int, name: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(pcm.count % 2 == 0 && !pcm.starts(with: Data("RIFF".utf8)), "\(name)", sourceLocation: sourceLocation)
        let samples = pcm.withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) }.map { Int16(littleEndian: $0) }
        #expect(Double(samples.count) / Double(rate) > 0.5, "\(name) lasts", sourceLocation: sourceLocation)
        #expect(rms(PCMAudio(samples: samples, sampleRate: rate)) > 100, "\(name) is speech", sourceLocation: sourceLocation)
    }
}

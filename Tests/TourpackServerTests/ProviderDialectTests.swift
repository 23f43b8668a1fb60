import Foundation
import Testing
import TourpackAudio
import TourpackCore
import TourpackKit
import TourpackServer

/// tourpack's own client speaking Polly, Azure Speech and ElevenLabs to an
/// in-process serve-tts that requires the key: each provider's faults are
/// retried, its text-too-long answer splits the chunk, its auth refusal
/// fails at once naming the variable, and what the client counts as billed
/// is what the server billed, in the provider's unit.
@Suite struct ProviderDialectTests {
    static let secret = "SECRET-provider-never-print-0123456789"

    static func settings(port: Int, api: TTSAPI, key: String = sentinelKey) -> TTSSettings {
        var settings = fastSettings(port: port, api: api, maxAttempts: 20)
        switch api {
        case .polly:
            settings.region = "eu-central-1"
            settings.accessKeyEnv = "TP_ACCESS"
            settings.secretKeyEnv = "TP_SECRET"
            settings.accessKey = Secret(key)
            settings.secretKey = Secret(secret)
        default:
            settings.apiKeyEnv = "TP_KEY"
            settings.apiKey = Secret(key)
        }
        return settings
    }

    static func voice(_ api: TTSAPI) -> VoicePreset {
        switch api {
        case .polly: return VoicePreset(provider: "polly", languageCode: "en-US", name: "en-US", tier: .neural, engine: "neural")
        case .elevenlabs:
            return VoicePreset(
                provider: "elevenlabs", languageCode: "en-US", name: "en-US", tier: .halfCredit, modelId: "eleven_flash_v2_5")
        default: return VoicePreset(provider: api.rawValue, languageCode: "en-US", name: "en-US", tier: .neural)
        }
    }

    @Test(arguments: [
        (InjectedFault.failure, TTSAPI.polly), (.rateLimited, .polly), (.truncated, .polly), (.garbage, .polly),
        (.failure, .azure), (.rateLimited, .azure), (.truncated, .azure), (.garbage, .azure),
        (.failure, .elevenlabs), (.rateLimited, .elevenlabs), (.truncated, .elevenlabs), (.garbage, .elevenlabs),
    ])
    func eachProvidersFaultIsRetried(fault: InjectedFault, api: TTSAPI) async throws {
        var faults = FaultInjection(seed: 42)
        switch fault {
        case .failure: faults.failureRate = 0.5
        case .rateLimited: faults.rateLimitRate = 0.5; faults.retryAfterSeconds = 0
        case .truncated: faults.truncateRate = 0.5
        case .garbage: faults.garbageRate = 0.5
        }
        try await withServer(faults: faults, configure: { $0.requiredAPIKey = sentinelKey }) { port, server in
            let synthesizer = try HTTPSpeechSynthesizer(settings: Self.settings(port: port, api: api))
            var billed = 0
            for index in 0..<6 {
                var request = speechRequest("Stop number \(index).", voice: Self.voice(api))
                request.previousText = "Before."
                let pcm = try await synthesizer.synthesize(request)
                #expect(pcm.sampleRate == 24_000 && pcm.durationSeconds > 0.3)
                billed += BillingRule(api: api, voice: Self.voice(api)).units(for: request.chunk)
            }
            let snapshot = server.stats.snapshot
            let injected = snapshot.faultsInjected[fault.key] ?? 0
            #expect(injected > 0, "the fault never fired; the test proves nothing")
            #expect(synthesizer.stats.retries == injected, "one retry per injected fault")
            // Answers cut short or garbled under a 200 are billed too, by the server and by the client alike.
            let billedAnswers = fault == .truncated || fault == .garbage ? injected : 0
            let perRequest = billed / 6  // six texts of one length
            #expect(snapshot.characters == billed + billedAnswers * perRequest)
            #expect(synthesizer.description.contains("<redacted>") && !synthesizer.description.contains(sentinelKey))
        }
    }

    @Test(arguments: [TTSAPI.polly, .azure, .elevenlabs])
    func aRefusedKeyFailsAtOnceAndNamesTheVariable(api: TTSAPI) async throws {
        try await withServer(configure: { $0.requiredAPIKey = sentinelKey }) { port, server in
            let wrong = "WRONG-KEY-never-print-9876"
            let synthesizer = try HTTPSpeechSynthesizer(settings: Self.settings(port: port, api: api, key: wrong))
            do {
                _ = try await synthesizer.synthesize(speechRequest("Refused.", voice: Self.voice(api)))
                Issue.record("a wrong key must be refused")
            } catch let error as TourpackError {
                #expect(error.message.contains(api == .polly ? "TP_ACCESS" : "TP_KEY"), "\(error.message)")
                #expect(!error.message.contains(wrong) && !error.message.contains(Self.secret))
            }
            #expect(server.stats.snapshot.synthesizeRequests == 1, "no retry of an auth refusal")
        }
    }

    @Test(arguments: [TTSAPI.polly, .elevenlabs])
    func textOverTheProvidersLimitIsSplit(api: TTSAPI) async throws {
        try await withServer(configure: { $0.requiredAPIKey = sentinelKey }) { port, server in
            // Polly: 3,000 billed characters; ElevenLabs' eleven_v3: 5,000.
            var voice = Self.voice(api)
            if api == .elevenlabs {
                voice.modelId = "eleven_v3"
                voice.tier = .fullCredit
            }
            let limit = api == .polly ? 3000 : 5000
            let sentence = "The pass road climbs to the glacier in many bends."
            let sentences = Array(repeating: sentence, count: limit / sentence.count + 2)
            let splitter: HTTPSpeechSynthesizer.Splitter = { chunk in
                let words = chunk.text.split(separator: " ")
                let half = words.count / 2
                return [
                    Chunk(text: words[..<half].joined(separator: " "), isSSML: false),
                    Chunk(text: words[half...].joined(separator: " "), isSSML: false),
                ]
            }
            let synthesizer = try HTTPSpeechSynthesizer(settings: Self.settings(port: port, api: api), splitter: splitter)
            let pcm = try await synthesizer.synthesize(speechRequest(sentences.joined(separator: " "), voice: voice))
            #expect(pcm.durationSeconds > 10)
            #expect(synthesizer.stats.splits == 1)
            #expect(server.stats.snapshot.responsesByStatus["400"] == 1)
            #expect(server.stats.snapshot.synthesizeRequests == 3)
        }
    }

    @Test func elevenLabsCarriesTheNeighboursText() async throws {
        try await withServer(configure: { $0.requiredAPIKey = sentinelKey }) { port, server in
            let synthesizer = try HTTPSpeechSynthesizer(settings: Self.settings(port: port, api: .elevenlabs))
            var request = speechRequest("The middle sentence.", voice: Self.voice(.elevenlabs))
            _ = try await synthesizer.synthesize(request)
            #expect(server.stats.snapshot.requestsWithNeighbourText == 0)
            request.previousText = "The first sentence."
            request.nextText = "The last sentence."
            _ = try await synthesizer.synthesize(request)
            // At least one: on a loaded machine a try may time out and be sent again, neighbours and all.
            #expect(server.stats.snapshot.requestsWithNeighbourText >= 1)
        }
    }

    @Test func billingCountsAsEachProviderCounts() {
        let ssml = Chunk(text: #"<speak>Hello <break time="1s"/> world &amp; more</speak>"#, isSSML: true)
        let plain = Chunk(text: "Grüße aus Zürich", isSSML: false)
        let voice = VoicePreset(provider: "x", languageCode: "en-US", name: "v", tier: .neural)
        #expect(BillingRule(api: .google, voice: voice).units(for: ssml) == ssml.characters)
        // Polly: the text only, an entity as one character.
        #expect(BillingRule(api: .polly, voice: voice).units(for: ssml) == "Hello  world & more".count)
        // Azure: the markup inside <voice>, not <speak>; CJK twice.
        #expect(BillingRule(api: .azure, voice: voice).units(for: ssml) == #"Hello <break time="1s"/> world &amp; more"#.count)
        #expect(BillingRule(api: .azure, voice: voice).units(for: Chunk(text: "東京 ok", isSSML: false)) == 2 * 2 + 3)
        // ElevenLabs: credits, half a credit a character for Flash, rounded up.
        #expect(BillingRule(api: .elevenlabs, tier: .fullCredit).units(for: plain) == 16)
        #expect(BillingRule(api: .elevenlabs, tier: .halfCredit).units(for: plain) == 8)
        #expect(BillingRule(api: .elevenlabs, tier: .halfCredit).units(for: Chunk(text: "abc", isSSML: false)) == 2)
        #expect(BillingRule(api: .elevenlabs, tier: .halfCredit).unit == "credits")
    }
}

import Foundation
import Logging
import Testing
import TourpackAudio
import TourpackServer

@testable import TourpackCore
@testable import TourpackHTTP
@testable import TourpackKit
@testable import TourpackSpeech

/// The libcurl client against the real serve-tts over loopback.
@Suite struct ClientTests {
    @Test func googleDialectReturnsSpeechAtTheRequestedRate() async throws {
        try await withServer { port, server in
            let synthesizer = try HTTPSpeechSynthesizer(settings: fastSettings(port: port), apiKey: nil)
            let words = "one two three four five six seven eight nine ten"
            let normal = try await synthesizer.synthesize(speechRequest(words, rate: 24_000))
            let low = try await synthesizer.synthesize(speechRequest(words, rate: 16_000))
            #expect(normal.sampleRate == 24_000)
            #expect(low.sampleRate == 16_000)
            // Ten words at espeak's 175 words per minute, plus pauses: about 3.5 s.
            #expect((2.0...6.0).contains(normal.durationSeconds), "duration \(normal.durationSeconds)")
            #expect(abs(low.durationSeconds - normal.durationSeconds) < 0.15, "same speech, another rate")
            #expect(rms(normal) > 300, "speech, not silence")
            #expect(server.stats.snapshot.synthesizeRequests == 2)
            #expect(server.stats.snapshot.characters == 2 * words.count)
        }
    }

    @Test func speakingRateChangesDuration() async throws {
        try await withServer { port, _ in
            let synthesizer = try HTTPSpeechSynthesizer(settings: fastSettings(port: port), apiKey: nil)
            let words = "The road climbs in thirty six hairpin bends to the glacier viewpoint at the top."
            var fast = englishVoice
            fast.speakingRate = 2
            let normal = try await synthesizer.synthesize(speechRequest(words))
            let quick = try await synthesizer.synthesize(speechRequest(words, voice: fast))
            let ratio = quick.durationSeconds / normal.durationSeconds
            #expect((0.35...0.7).contains(ratio), "ratio \(ratio)")
        }
    }

    @Test func openAIDialectReturnsSpeech() async throws {
        try await withServer { port, server in
            let synthesizer = try HTTPSpeechSynthesizer(settings: fastSettings(port: port, api: .openai), apiKey: nil)
            var voice = englishVoice
            voice.name = "alloy"
            let pcm = try await synthesizer.synthesize(
                speechRequest("Welcome to the Kaiser Franz Josefs Hoehe.", rate: 44_100, voice: voice))
            #expect(pcm.sampleRate == 44_100)  // 24 kHz from the server, resampled by the client
            #expect(pcm.durationSeconds > 1 && pcm.durationSeconds < 6)
            #expect(rms(pcm) > 300)
            #expect(server.stats.snapshot.synthesizeRequests == 1)
        }
    }

    @Test func ssmlBreakAndSubAreSpoken() async throws {
        try await withServer { port, _ in
            let synthesizer = try HTTPSpeechSynthesizer(settings: fastSettings(port: port), apiKey: nil)
            let plain = try await synthesizer.synthesize(speechRequest("<speak>Hello world</speak>", ssml: true))
            let paused = try await synthesizer.synthesize(speechRequest(#"<speak>Hello <break time="2s"/> world</speak>"#, ssml: true))
            let substituted = try await synthesizer.synthesize(
                speechRequest(#"<speak><sub alias="one two three four five six seven">x</sub></speak>"#, ssml: true))
            #expect(paused.durationSeconds - plain.durationSeconds > 1.5)
            #expect(substituted.durationSeconds > plain.durationSeconds + 0.5)
        }
    }

    @Test(arguments: [
        (InjectedFault.failure, TTSAPI.google), (.rateLimited, .google), (.truncated, .google), (.garbage, .google),
        (.truncated, .openai), (.garbage, .openai), (.failure, .openai),
    ])
    func retryableFaultRecovers(fault: InjectedFault, api: TTSAPI) async throws {
        var faults = FaultInjection(seed: 42)
        switch fault {
        case .failure: faults.failureRate = 0.5
        case .rateLimited: faults.rateLimitRate = 0.5; faults.retryAfterSeconds = 0
        case .truncated: faults.truncateRate = 0.5
        case .garbage: faults.garbageRate = 0.5
        }
        try await withServer(faults: faults) { port, server in
            let synthesizer = try HTTPSpeechSynthesizer(settings: fastSettings(port: port, api: api, maxAttempts: 20), apiKey: nil)
            for index in 0..<6 {
                let pcm = try await synthesizer.synthesize(speechRequest("Stop number \(index)."))
                #expect(pcm.durationSeconds > 0.3)
            }
            let injected = server.stats.snapshot.faultsInjected[fault.key] ?? 0
            #expect(injected > 0, "the fault never fired; the test proves nothing")
            #expect(synthesizer.stats.retries == injected, "one retry per injected fault")
            #expect(synthesizer.stats.requests == 6 + injected)
        }
    }

    @Test func stalledRequestTimesOutAndIsRetried() async throws {
        let faults = FaultInjection(stallRate: 0.5, stallMilliseconds: 1500, seed: 7)
        try await withServer(faults: faults) { port, server in
            // 1 s: well under the 1.5 s stall, and room for espeak on a loaded machine (0.6 s timed out whole runs under the full suite).
            let synthesizer = try HTTPSpeechSynthesizer(settings: fastSettings(port: port, maxAttempts: 20, timeout: 1.0), apiKey: nil)
            for index in 0..<4 {
                _ = try await synthesizer.synthesize(speechRequest("Stall \(index)."))
            }
            let stalled = server.stats.snapshot.faultsInjected["stalled"] ?? 0
            #expect(stalled > 0)
            #expect(synthesizer.stats.retries >= stalled)
        }
    }

    @Test func connectionRefusedIsRetriedUntilTheServerComesUp() async throws {
        // Learn a free port, then free it again.
        let port = try await withServer { port, _ in port }
        let policy = RetryPolicy(maxAttempts: 60, initialBackoffSeconds: 0.05, maxBackoffSeconds: 0.05, deadlineSeconds: 20, random: { 1 })
        var options = HTTPSpeechSynthesizer.Options(retry: policy)
        options.connectTimeoutSeconds = 1
        let synthesizer = try HTTPSpeechSynthesizer(settings: fastSettings(port: port), apiKey: nil, options: options)
        let speech = Task { try await synthesizer.synthesize(speechRequest("Back online.")) }
        try await Task.sleep(for: .milliseconds(300))
        var configuration = TTSServerConfiguration(port: port)
        configuration.logger = .init(label: "quiet", factory: { _ in SwiftLogNoOpLogHandler() })
        let pcm = try await TTSServer(configuration).withRunning { _ in try await speech.value }
        #expect(pcm.durationSeconds > 0.3)
        #expect(synthesizer.stats.retries >= 1)
    }

    @Test func unreachableEndpointIsNetworkUnavailable() async throws {
        let port = try await withServer { port, _ in port }
        let synthesizer = try HTTPSpeechSynthesizer(settings: fastSettings(port: port, maxAttempts: 2), apiKey: nil)
        do {
            _ = try await synthesizer.synthesize(speechRequest("Nobody home."))
            Issue.record("expected a failure")
        } catch let error as TourpackError {
            guard error.kind == .networkUnavailable else { Issue.record("got \(error)"); return }
            #expect(error.context.url == "http://127.0.0.1:\(port)/v1/text:synthesize")
            #expect(error.message.contains("gave up after 2 tries"))
        }
        #expect(synthesizer.stats.requests == 2)
    }

    /// A 2xx answer whose body passes the cap was still answered, so the
    /// provider bills it: every such try counts its characters, as the 2xx
    /// path does, and it is retried as a fault of that request, never taken
    /// for "network unavailable".
    @Test func anOversizedAnswerIsBilledAndRetried() async throws {
        try await withServer { port, server in
            var options = HTTPSpeechSynthesizer.Options()
            options.maxResponseBytes = 10_000  // a second of 24 kHz audio is ~64 kB in base64
            let synthesizer = try HTTPSpeechSynthesizer(settings: fastSettings(port: port, maxAttempts: 2), apiKey: nil, options: options)
            let request = speechRequest("A sentence that makes more than ten kilobytes of audio.")
            let billed = BilledCharacters()
            do {
                _ = try await BilledCharacters.$current.withValue(billed) { try await synthesizer.synthesize(request) }
                Issue.record("expected the cap to refuse the body")
            } catch let error as TourpackError where error.kind == .audioGenerationFailed {
                #expect(error.context.status == 200)
                #expect(error.message.contains("response larger than 10000 bytes"), "\(error.message)")
                #expect(error.message.contains("gave up after 2 tries"), "\(error.message)")
            }
            #expect(server.stats.snapshot.synthesizeRequests == 2)
            #expect(billed.value == 2 * request.chunk.characters)
        }
    }

    @Test func cancellingAbandonsTheTransferPromptly() async throws {
        try await withServer(faults: FaultInjection(latencyMilliseconds: 3000)) { port, server in
            let synthesizer = try HTTPSpeechSynthesizer(settings: fastSettings(port: port), apiKey: nil)
            let speech = Task { try await synthesizer.synthesize(speechRequest("Never mind.")) }
            while server.stats.snapshot.inFlight == 0 { try await Task.sleep(for: .milliseconds(10)) }
            let cancelled = ContinuousClock.now
            speech.cancel()
            await #expect(throws: TourpackError.cancelled) { try await speech.value }
            #expect(cancelled.duration(to: .now) < .seconds(1), "did not wait for the 3 s answer")
            #expect(synthesizer.stats.retries == 0)
        }
    }

    @Test func keyComesFromTheNamedEnvironmentVariable() async throws {
        try await withServer(configure: { $0.requiredAPIKey = sentinelKey }) { port, _ in
            var settings = fastSettings(port: port)
            settings.apiKeyEnv = "TOURPACK_TEST_TTS_KEY"
            let synthesizer = try HTTPSpeechSynthesizer(settings: settings, environment: ["TOURPACK_TEST_TTS_KEY": sentinelKey])
            #expect(try await synthesizer.synthesize(speechRequest("Authorized.")).durationSeconds > 0.3)
            do {
                _ = try HTTPSpeechSynthesizer(settings: settings, environment: [:])
                Issue.record("an unset key variable must be refused")
            } catch let error as TourpackError where error.kind == .invalidInput {
                #expect(error.message.contains("TOURPACK_TEST_TTS_KEY"))
            }
        }
    }

    @Test func connectionsAreReused() async throws {
        try await withServer { port, _ in
            let synthesizer = try HTTPSpeechSynthesizer(settings: fastSettings(port: port), apiKey: nil)
            for index in 0..<5 { _ = try await synthesizer.synthesize(speechRequest("Reuse \(index).")) }
            #expect(synthesizer.stats.requests == 5)
            #expect(synthesizer.stats.connectionsOpened == 1)
        }
    }

    /// A build whose every chunk is cached sends nothing: its synthesizer
    /// starts no transfer thread, no decode pool and not libcurl until a
    /// request is made, and then once, however many requests start together.
    @Test func threadsStartWithTheFirstRequest() async throws {
        try await withServer { port, server in
            let synthesizer = try HTTPSpeechSynthesizer(settings: fastSettings(port: port, concurrency: 8), apiKey: nil)
            #expect(synthesizer.core.transport.multi.made == nil)
            #expect(synthesizer.core.pool.made == nil)
            try await withThrowingTaskGroup(of: Double.self) { group in
                for index in 0..<8 {
                    group.addTask { try await synthesizer.synthesize(speechRequest("Together \(index).")).durationSeconds }
                }
                for try await seconds in group { #expect(seconds > 0.3) }
            }
            #expect(try synthesizer.core.transport.multi.made?.get() != nil)
            #expect(synthesizer.core.pool.made != nil)
            #expect(server.stats.snapshot.synthesizeRequests == 8)
        }
    }

    @Test func firstUseMakesTheValueOnce() async {
        let makes = LockedCounts(0)
        let value = OnFirstUse<Int> {
            makes.update {
                $0 += 1; return 42
            }
        }
        #expect(value.made == nil)
        await withTaskGroup(of: Int.self) { group in
            for _ in 0..<64 { group.addTask { value.value } }
            for await made in group { #expect(made == 42) }
        }
        #expect(value.made == 42)
        #expect(makes.snapshot == 1)
    }
}

extension InjectedFault {
    /// The key serve-tts uses for this fault in `faultsInjected`.
    var key: String {
        switch self {
        case .failure: return "failure"
        case .rateLimited: return "rateLimited"
        case .truncated: return "truncated"
        case .garbage: return "garbage"
        }
    }
}

/// The faults a parameterized test injects (stalls have their own test: they need a short timeout).
enum InjectedFault: Sendable, CustomTestStringConvertible {
    case failure, rateLimited, truncated, garbage
    var testDescription: String { key }
}

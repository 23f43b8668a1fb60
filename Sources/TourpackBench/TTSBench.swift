import Foundation
import Logging
import TourpackAudio
import TourpackCore
import TourpackKit
import TourpackServer

/// `tourpack-bench tts [--requests N] [--latency-ms 150] [--concurrency 8]`
///
/// 1. Throughput: an in-process serve-tts answering after 150 ms, a client
///    with concurrency 8. The ceiling is 8 / 0.15 = 53.3 requests/s; the
///    target is 90 % of it.
/// 2. The same throughput for each of the five dialects (Google, OpenAI,
///    Polly signed with SigV4, Azure, ElevenLabs), one line each.
/// 3. Resilience: the same client against 15 % mixed faults (5xx, 429 with
///    Retry-After, truncated and garbage bodies); every item must arrive.
enum TTSBench {
    static func run(_ arguments: [String]) async -> Int32 {
        func option(_ name: String, _ fallback: Int) -> Int {
            guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count, let value = Int(arguments[index + 1]) else {
                return fallback
            }
            return value
        }
        let requests = option("--requests", 320)
        let latency = option("--latency-ms", 150)
        let concurrency = option("--concurrency", 8)
        do {
            let throughput = try await measureThroughput(requests: requests, latencyMs: latency, concurrency: concurrency)
            let ceiling = Double(concurrency) / (Double(latency) / 1000)
            let share = throughput / ceiling * 100
            print(
                String(
                    format:
                        "tts throughput: %d requests, concurrency %d, latency %d ms: %.1f req/s of %.1f ideal (%.1f%%, target ≥ 90%%) %@",
                    requests, concurrency, latency, throughput, ceiling, share, share >= 90 ? "PASS" : "BELOW TARGET"))
            // serve-tts speaks the five providers' APIs; Piper's own server is `tourpack-bench piper`'s.
            for api in TTSAPI.allCases where api != .piper {
                let rate = try await measureThroughput(requests: requests, latencyMs: latency, concurrency: concurrency, api: api)
                print(
                    String(
                        format: "tts throughput %@: %.1f req/s of %.1f ideal (%.1f%%)", api.rawValue, rate, ceiling, rate / ceiling * 100))
            }

            let faults = try await surviveFaults(requests: max(100, requests / 2), concurrency: concurrency)
            print(
                "tts faults: \(faults.delivered)/\(faults.total) delivered under 15% mixed faults; "
                    + "\(faults.injected) faults in \(faults.served) requests "
                    + String(format: "(%.1f%%) ", Double(faults.injected) / Double(max(1, faults.served)) * 100)
                    + "\(faults.byKind.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")), \(faults.retries) retries, "
                    + String(format: "%.1f s", faults.seconds) + (faults.delivered == faults.total ? " PASS" : " FAIL"))
            return share >= 90 && faults.delivered == faults.total ? 0 : 1
        } catch {
            print("tts bench failed: \(error)")
            return 1
        }
    }

    private static var quietLogger: Logger { Logger(label: "bench", factory: { _ in SwiftLogNoOpLogHandler() }) }

    private static func settings(port: Int, concurrency: Int, api: TTSAPI = .google) -> TTSSettings {
        var settings = TTSSettings(
            api: api, endpoint: "http://127.0.0.1:\(port)", concurrency: concurrency, requestsPerMinute: 1_000_000,
            timeoutSeconds: 10, maxAttempts: 10, initialBackoffSeconds: 0.05, maxBackoffSeconds: 1, sampleRateHz: 24_000)
        if api == .polly {
            // serve-tts checks the signature's form, not a real key pair.
            settings.region = "eu-central-1"
            settings.accessKey = Secret("AKIDBENCH")
            settings.secretKey = Secret("bench-secret")
        }
        return settings
    }

    private static func request(_ index: Int, api: TTSAPI) -> SynthesisRequest {
        let named = api == .polly || api == .azure || api == .elevenlabs
        return SynthesisRequest(
            chunk: Chunk(text: "Stop \(index): the view opens to the glacier.", isSSML: false),
            voice: VoicePreset(provider: "local", languageCode: "en-US", name: named ? "en-US" : "", tier: .local),
            sampleRateHz: 24_000, itemLabel: "bench/\(index)")
    }

    private static func request(_ index: Int) -> SynthesisRequest { request(index, api: .google) }

    /// Requests per second over `requests` requests, after a warm-up round.
    private static func measureThroughput(requests: Int, latencyMs: Int, concurrency: Int, api: TTSAPI = .google) async throws -> Double {
        var configuration = TTSServerConfiguration(port: 0, faults: FaultInjection(latencyMilliseconds: latencyMs))
        configuration.logger = quietLogger
        return try await TTSServer(configuration).withRunning { port in
            let synthesizer = try HTTPSpeechSynthesizer(settings: settings(port: port, concurrency: concurrency, api: api), apiKey: nil)
            try await speakAll(synthesizer, (0..<concurrency).map { request($0, api: api) })  // connections and espeak warm
            let started = ContinuousClock.now
            try await speakAll(synthesizer, (0..<requests).map { request($0, api: api) })
            let elapsed = started.duration(to: .now)
            return Double(requests) / elapsed.seconds
        }
    }

    private static func speakAll(_ synthesizer: HTTPSpeechSynthesizer, _ requests: [SynthesisRequest]) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for request in requests { group.addTask { _ = try await synthesizer.synthesize(request) } }
            try await group.waitForAll()
        }
    }

    private struct FaultRun {
        var total: Int
        var delivered: Int
        var injected: Int
        var served: Int
        var byKind: [String: Int]
        var retries: Int
        var seconds: Double
    }

    private static func surviveFaults(requests: Int, concurrency: Int) async throws -> FaultRun {
        let faults = FaultInjection(
            latencyMilliseconds: 20, failureRate: 0.05, rateLimitRate: 0.03, retryAfterSeconds: 1,
            truncateRate: 0.03, garbageRate: 0.04, seed: 2024)
        var configuration = TTSServerConfiguration(port: 0, faults: faults)
        configuration.logger = quietLogger
        let server = try TTSServer(configuration)
        return try await server.withRunning { port in
            let synthesizer = try HTTPSpeechSynthesizer(settings: settings(port: port, concurrency: concurrency), apiKey: nil)
            let started = ContinuousClock.now
            let delivered = await withTaskGroup(of: Bool.self) { group in
                for index in 0..<requests {
                    group.addTask { (try? await synthesizer.synthesize(request(index))).map { $0.durationSeconds > 0.5 } ?? false }
                }
                return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
            let elapsed = started.duration(to: .now)
            let stats = server.stats.snapshot
            return FaultRun(
                total: requests, delivered: delivered, injected: stats.totalFaults, served: stats.synthesizeRequests,
                byKind: stats.faultsInjected,
                retries: synthesizer.stats.retries,
                seconds: elapsed.seconds)
        }
    }
}

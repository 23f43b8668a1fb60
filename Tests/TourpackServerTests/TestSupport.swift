import Foundation
import Logging
import TourpackAudio
import TourpackCore
import TourpackKit
import TourpackServer

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A key no code path may ever print.
let sentinelKey = "SENTINEL-kq7Zp4Wx-never-print-me"

/// Runs `body` against a fresh in-process serve-tts on a free loopback port.
func withServer<T>(
    faults: FaultInjection = FaultInjection(),
    configure: (inout TTSServerConfiguration) -> Void = { _ in },
    _ body: (_ port: Int, _ server: TTSServer) async throws -> T
) async throws -> T {
    var configuration = TTSServerConfiguration(port: 0, faults: faults)
    configuration.logger = Logger(label: "test.server", factory: { _ in SwiftLogNoOpLogHandler() })
    configure(&configuration)
    let server = try TTSServer(configuration)
    return try await server.withRunning { port in try await body(port, server) }
}

/// Client settings for tests: backoffs in milliseconds, generous limits.
func fastSettings(port: Int, api: TTSAPI = .google, concurrency: Int = 4, maxAttempts: Int = 8, timeout: Double = 10) -> TTSSettings {
    TTSSettings(
        api: api, endpoint: "http://127.0.0.1:\(port)", concurrency: concurrency, requestsPerMinute: 60_000,
        timeoutSeconds: timeout, maxAttempts: maxAttempts, initialBackoffSeconds: 0.001, maxBackoffSeconds: 0.005,
        sampleRateHz: 24_000)
}

let englishVoice = VoicePreset(provider: "local", languageCode: "en-US", name: "", tier: .local)

func speechRequest(
    _ text: String, ssml: Bool = false, rate: Int = 24_000, voice: VoicePreset = englishVoice, label: String = "tour/poi/Detailed"
) -> SynthesisRequest {
    SynthesisRequest(chunk: Chunk(text: text, isSSML: ssml), voice: voice, sampleRateHz: rate, itemLabel: label)
}

/// Root-mean-square level of the samples: speech is far above 0.
func rms(_ pcm: PCMAudio) -> Double {
    guard !pcm.samples.isEmpty else { return 0 }
    let sum = pcm.samples.reduce(0.0) { $0 + Double($1) * Double($1) }
    return (sum / Double(pcm.samples.count)).squareRoot()
}

/// Records every log line (message and metadata) so a test can scan them.
final class LogCapture: @unchecked Sendable {
    private let lock = NSLock()
    private var storage: [String] = []

    var lines: [String] {
        lock.lock()
        defer { lock.unlock() }
        return storage
    }

    func append(_ line: String) {
        lock.lock()
        storage.append(line)
        lock.unlock()
    }

    func logger(_ label: String) -> Logger {
        var logger = Logger(label: label, factory: { label in CapturingHandler(label: label, capture: self) })
        logger.logLevel = .trace
        return logger
    }
}

struct CapturingHandler: LogHandler {
    let label: String
    let capture: LogCapture
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let merged = metadata.merging(event.metadata ?? [:]) { $1 }
        let fields = merged.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        capture.append("\(event.level) \(label): \(event.message) \(fields)")
    }
}

/// Waits recorded by the client instead of slept.
final class SleepRecorder: @unchecked Sendable {
    private let lock = NSLock()
    private var storage: [Double] = []

    var waits: [Double] {
        lock.lock()
        defer { lock.unlock() }
        return storage
    }

    var sleep: @Sendable (Duration) async throws -> Void {
        { duration in self.record(duration) }
    }

    private func record(_ duration: Duration) {
        lock.lock()
        storage.append(duration.seconds)
        lock.unlock()
    }
}

/// A plain HTTP call (URLSession) for the routes the synthesizer does not speak.
func rawHTTP(_ method: String, port: Int, path: String, json: String? = nil, headers: [String: String] = [:]) async throws -> (
    status: Int, body: Data
) {
    var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)\(path)")!)
    request.httpMethod = method
    if let json {
        request.httpBody = Data(json.utf8)
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
    }
    for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
    let (data, response) = try await URLSession.shared.data(for: request)
    return ((response as? HTTPURLResponse)?.statusCode ?? 0, data)
}

import ArgumentParser
import Foundation
import TourpackServer

/// `tourpack serve-tts`: the embedded espeak-ng endpoint, for draft builds
/// and tests that need a real TTS server and no API key.
struct ServeTTS: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve-tts",
        abstract: "Serve Google v1 and OpenAI-style TTS from libespeak-ng.",
        discussion: """
            Prints the port it listens on as the first line of stdout (useful with --port 0); \
            the access log goes to stderr. Stops cleanly on SIGINT or SIGTERM.
            """
    )

    @Option(help: "Address to bind.") var host = TTSServerInfo.defaultHost
    @Option(help: "Port to bind; 0 picks a free one.") var port = TTSServerInfo.defaultPort

    @Option(
        help:
            "Require the API key held in this environment variable (x-goog-api-key, Authorization: Bearer, Ocp-Apim-Subscription-Key, xi-api-key, or the SigV4 access key ID for Polly)."
    )
    var apiKeyEnv: String?

    @Option(name: .customLong("latency-ms"), help: "Fault: every synthesize answer takes at least this many milliseconds.")
    var latencyMilliseconds = 0
    @Option(help: "Fault: share (0-1) of requests answered 500, 503 or 504.") var failureRate = 0.0
    @Option(name: .customLong("rate-limit-rate"), help: "Fault: share of requests answered 429.") var rateLimitRate = 0.0
    @Option(help: "Fault: the Retry-After seconds sent with an injected 429.") var retryAfter = 1
    @Option(help: "Fault: share of answers whose body is cut short.") var truncateRate = 0.0
    @Option(help: "Fault: share of answers whose audio is garbage.") var garbageRate = 0.0
    @Option(help: "Fault: share of requests held for --stall-ms before answering.") var stallRate = 0.0
    @Option(name: .customLong("stall-ms"), help: "Fault: how long a stalled request is held.") var stallMilliseconds = 5000
    @Option(help: "Fault: answer 400 to every request whose input contains this text (a permanent failure).")
    var refuseText: String?
    @Option(
        help: "Fault: hold the first request whose input contains this text for --stall-ms, then answer 503 (nothing spoken or counted).")
    var holdText: String?
    @Option(
        name: .customLong("level-spread-db"),
        help: "Fault: attenuate each answer by 0 to this many dB, drawn from its text (levels far apart, for loudness tests).")
    var levelSpreadDB = 0.0
    @Option(help: "Fault: seed for the fault draws, for reproducible runs.") var faultSeed: UInt64 = 0x7075_7270_6c65

    func validate() throws {
        guard (0...65535).contains(port) else { throw ValidationError("--port must be within 0...65535") }
        do { _ = try faults.validated() } catch { throw ValidationError("\(error)") }
    }

    var faults: FaultInjection {
        FaultInjection(
            latencyMilliseconds: latencyMilliseconds, failureRate: failureRate, rateLimitRate: rateLimitRate,
            retryAfterSeconds: retryAfter, truncateRate: truncateRate, garbageRate: garbageRate,
            stallRate: stallRate, stallMilliseconds: stallMilliseconds, refuseText: refuseText, holdText: holdText,
            levelSpreadDB: levelSpreadDB, seed: faultSeed)
    }

    func run() async throws {
        var configuration = TTSServerConfiguration(host: host, port: port, faults: faults)
        if let apiKeyEnv {
            guard let key = ProcessInfo.processInfo.environment[apiKeyEnv], !key.isEmpty else {
                throw ValidationError("--api-key-env \(apiKeyEnv): the variable is not set")
            }
            configuration.requiredAPIKey = key
        }
        let server = try TTSServer(configuration)
        try await server.runUntilSignalled { port in
            // Exactly the port, alone on the first line, unbuffered: scripts read it.
            FileHandle.standardOutput.write(Data("\(port)\n".utf8))
        }
    }
}

import Foundation
import Hummingbird
package import Logging
import TourpackCore
import UnixSignals

/// How `serve-tts` listens and misbehaves.
package struct TTSServerConfiguration: Sendable {
    /// Loopback by default: a local voice for builds and tests, not a package service.
    package var host: String = TTSServerInfo.defaultHost
    /// 0 picks a free port; `onReady` learns which.
    package var port: Int = TTSServerInfo.defaultPort
    package var faults = FaultInjection()
    /// `sampleRateHertz` when a Google request leaves it out.
    package var defaultSampleRateHz = 24_000
    /// Google's limit on `input.text`/`input.ssml`; tests lower it to exercise splitting cheaply.
    package var googleInputLimitBytes = 5000
    /// When set, requests must carry this key the way each API expects it
    /// (`x-goog-api-key`, `Authorization: Bearer`, `Ocp-Apim-Subscription-Key`,
    /// `xi-api-key`, or Polly's access key ID in the SigV4 credential); a key
    /// in the query string is not accepted.
    package var requiredAPIKey: String?
    /// Seconds a connection may sit with no request before it is closed:
    /// a client that opens connections and sends nothing (or half a
    /// request) cannot hold them, and the server's descriptors, for ever.
    package var idleTimeoutSeconds: Int64 = 30
    /// The access log: one line per request (method, path, status, time,
    /// size, fault); never a body, a header, or a query string.
    package var logger = Logger(label: "tourpack.serve-tts", factory: { StreamLogHandler.standardError(label: $0) })

    package init(host: String = TTSServerInfo.defaultHost, port: Int = TTSServerInfo.defaultPort, faults: FaultInjection = FaultInjection())
    {
        self.host = host
        self.port = port
        self.faults = faults
    }
}

/// Defaults shared by the CLI and the pipeline's `make tour` voice.
package enum TTSServerInfo {
    package static let defaultHost = "127.0.0.1"
    package static let defaultPort = 8787
}

/// The embedded TTS endpoint (`tourpack serve-tts`): Google v1 and
/// OpenAI-style speech from libespeak-ng, on Hummingbird.
///
/// It lets the content team's draft builds and every test run with no API
/// key and no quota. Start it in-process with `withRunning { port in … }`
/// (tests, benchmarks), or `run(onReady:)` under your own cancellation;
/// the CLI uses `runUntilSignalled`, which shuts down cleanly on SIGINT/SIGTERM.
///
/// Routes: `POST /v1/text:synthesize`, `POST /v1beta1/text:synthesize`
/// (with `<mark>` timepoints), `GET /v1/voices` (Google's, or
/// Polly's or ElevenLabs' by the caller's credentials), `POST /v1/audio/speech`,
/// `POST /v1/speech` (Polly, audio or speech marks), `POST /cognitiveservices/v1` and
/// `GET /cognitiveservices/voices/list` (Azure),
/// `POST /v1/text-to-speech/{voice_id}[/stream][/with-timestamps]` (ElevenLabs),
/// `GET /debug/stats`, `POST /debug/stats/reset`, `GET /health`.
package struct TTSServer: Sendable {
    package let configuration: TTSServerConfiguration
    /// Live counters, the same ones `GET /debug/stats` shows.
    package let stats = ServerStats()
    private let dice: FaultDice

    /// Throws `FaultConfigurationError` when fault rates are out of range.
    package init(_ configuration: TTSServerConfiguration = TTSServerConfiguration()) throws {
        self.configuration = configuration
        dice = FaultDice(try configuration.faults.validated())
    }

    /// Serves until the calling task is cancelled. `onReady` gets the bound
    /// port once the socket listens.
    package func run(onReady: @escaping @Sendable (Int) async -> Void = { _ in }) async throws {
        try await application(onReady: onReady).run()
    }

    /// Serves until SIGINT or SIGTERM, then finishes in-flight requests and returns.
    package func runUntilSignalled(onReady: @escaping @Sendable (Int) async -> Void = { _ in }) async throws {
        try await application(onReady: onReady).runService(gracefulShutdownSignals: [.sigterm, .sigint])
    }

    /// Starts the server, runs `body` with its port, then shuts it down.
    package func withRunning<T>(_ body: (Int) async throws -> T) async throws -> T {
        try await ServerLifecycle.withRunning(name: "serve-tts", serve: { try await run(onReady: $0) }, body)
    }

    private func application(onReady: @escaping @Sendable (Int) async -> Void) -> some ApplicationProtocol {
        let logger = configuration.logger
        let routes = SynthesisRoutes(
            stats: stats, dice: dice, defaultSampleRate: configuration.defaultSampleRateHz,
            googleInputLimitBytes: configuration.googleInputLimitBytes, requiredAPIKey: configuration.requiredAPIKey)
        let stats = self.stats
        let router = Router()
        router.add(middleware: AccessLog(stats: stats))
        router.post("v1/text:synthesize") { request, _ in try await routes.googleSynthesize(request) }
        router.post("v1beta1/text:synthesize") { request, _ in try await routes.googleBetaSynthesize(request) }
        router.get("v1/voices") { request, _ in try await routes.anyVoices(request) }
        router.post("v1/audio/speech") { request, _ in try await routes.openAISpeech(request) }
        router.post("v1/speech") { request, _ in try await routes.pollySpeech(request) }
        router.post("cognitiveservices/v1") { request, _ in try await routes.azureSpeech(request) }
        router.get("cognitiveservices/voices/list") { request, _ in try await routes.azureVoices(request) }
        router.post("v1/text-to-speech/:voice") { request, context in
            try await routes.elevenLabsSpeech(request, voiceID: context.parameters.get("voice") ?? "")
        }
        router.post("v1/text-to-speech/:voice/stream") { request, context in
            try await routes.elevenLabsSpeech(request, voiceID: context.parameters.get("voice") ?? "")
        }
        router.post("v1/text-to-speech/:voice/with-timestamps") { request, context in
            try await routes.elevenLabsSpeech(request, voiceID: context.parameters.get("voice") ?? "", shape: .timestamps)
        }
        router.post("v1/text-to-speech/:voice/stream/with-timestamps") { request, context in
            try await routes.elevenLabsSpeech(request, voiceID: context.parameters.get("voice") ?? "", shape: .streamedTimestamps)
        }
        router.get("debug/stats") { _, _ in
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            return ErrorBody.json(.ok, Array(try encoder.encode(stats.snapshot)))
        }
        router.post("debug/stats/reset") { _, _ in
            stats.reset()
            return Response(status: .noContent)
        }
        router.get("health") { _, _ in "ok" }
        let port = configuration.port
        return Application(
            router: router,
            server: .http1(configuration: .init(idleTimeout: .seconds(configuration.idleTimeoutSeconds))),
            configuration: .init(address: .hostname(configuration.host, port: port), serverName: "tourpack-serve-tts"),
            onServerRunning: { channel in await onReady(channel.localAddress?.port ?? port) },
            logger: logger)
    }
}

/// The server stopped before it listened (for instance, the port was taken).
package struct ServerStartError: Error, CustomStringConvertible {
    package var message: String
    package var description: String { message }
}

/// One structured line per request: method, path, status, milliseconds,
/// response bytes, the injected fault if any, and Hummingbird's request id.
/// No bodies, headers or query strings, so neither narration nor a key
/// ever lands in the log. serve-tts also counts responses by status in its
/// stats; serve-tiles keeps its own counters and passes nil.
struct AccessLog<Context: RequestContext>: RouterMiddleware {
    let stats: ServerStats?

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let started = ContinuousClock.now
        stats?.update { $0.totalRequests += 1 }
        do {
            let response = try await next(request, context)
            record(
                request, context.logger, status: response.status.code, bytes: response.body.contentLength,
                fault: response.headers[ErrorBody.faultHeader], started: started)
            return response
        } catch {
            let status = (error as? any HTTPResponseError)?.status.code ?? 500
            record(request, context.logger, status: status, bytes: nil, fault: nil, started: started)
            throw error
        }
    }

    private func record(_ request: Request, _ logger: Logger, status: Int, bytes: Int?, fault: String?, started: ContinuousClock.Instant) {
        stats?.update { $0.responsesByStatus[String(status), default: 0] += 1 }
        let elapsed = started.duration(to: .now)
        let milliseconds = elapsed.seconds * 1000
        var metadata: Logger.Metadata = [
            "method": "\(request.method.rawValue)", "path": "\(request.uri.path)", "status": "\(status)",
            "ms": "\(String(format: "%.1f", milliseconds))",
        ]
        if let bytes { metadata["bytes"] = "\(bytes)" }
        if let fault { metadata["fault"] = "\(fault)" }
        logger.info("request", metadata: metadata)
    }
}

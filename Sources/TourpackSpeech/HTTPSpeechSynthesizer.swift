package import Foundation
package import Logging
import NIOPosix
package import TourpackAudio
package import TourpackCore
package import TourpackHTTP

/// The default synthesize stage: one chunk in, PCM out, over HTTP with libcurl.
///
/// Speaks the API of the provider `TTSSettings.api` names, in the
/// `TTSDialect` its descriptor gives (`SpeechProviders`). It
/// retries what the contract calls retryable (429, 500, 503, 504, connection
/// errors, timeouts, truncated or undecodable bodies) with full-jitter
/// backoff and `Retry-After`, keeps `concurrency` requests in flight at most
/// and starts no more than `requestsPerMinute`. A 400 "longer than the
/// limit" hands the chunk to `splitter` and speaks the parts once more.
///
/// The API key goes into one header and nowhere else: not the URL, a log
/// line, an error, or this value's description, debug description or mirror.
/// Copies share one connection pool, one set of limits and one set of counters.
package struct HTTPSpeechSynthesizer: SpeechSynthesizer, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// Knobs that `TTSSettings` does not carry; tests shrink them to milliseconds.
    package struct Options: Sendable {
        /// Overrides the attempts and backoff of `TTSSettings`, adds a deadline and a random source.
        package var retry: RetryPolicy?
        package var connectTimeoutSeconds: Double = 10
        /// Abort a request when no byte arrived for this long.
        package var stallTimeoutSeconds: Double = 20
        /// A larger response is refused, not buffered: 64 MB is ~23 minutes of 24 kHz LINEAR16 in base64.
        package var maxResponseBytes = 64 * 1024 * 1024
        /// Waits between tries; injectable so a test can record them.
        package var sleep: @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) }
        /// Retries and failures are logged at `notice`, each request at `debug`. Never bodies or headers.
        package var logger = Logger(label: "tourpack.tts", factory: { _ in SwiftLogNoOpLogHandler() })
        /// Measure each chunk's loudness on the pass that records it (gating
        /// blocks, true peak, limiter survey). Off for `loudness: off`, where
        /// nothing uses it: a later build with a target measures the cached file.
        package var measuresLoudness = true

        /// - Parameter retry: nil takes the policy from `TTSSettings`.
        package init(retry: RetryPolicy? = nil) { self.retry = retry }
    }

    /// Splits a chunk the server refused as too long; nil when it cannot be split.
    package typealias Splitter = @Sendable (Chunk) -> [Chunk]?

    /// Internal, not private: the tests look at what it has started.
    let core: SynthesisClient
    private let splitter: Splitter?

    /// - Parameters:
    ///   - settings: the pipeline's `tts` section: dialect, endpoint, limits and retries.
    ///   - apiKey: read by the caller from the variable `settings.apiKeyEnv` names; nil sends no key.
    ///   - splitter: the chunker's re-split, used on "longer than the limit".
    ///   - options: retries, timeouts and the largest answer accepted.
    package init(settings: TTSSettings, apiKey: String?, splitter: Splitter? = nil, options: Options = Options()) throws {
        let dialect = try Self.dialect(for: settings)
        var signing: AWSSigning?
        if case .sigV4(let service) = settings.api.provider.credentials {
            let name = settings.api.provider.name
            for (field, variable, value) in [
                ("accessKeyEnv", settings.accessKeyEnv, settings.accessKey), ("secretKeyEnv", settings.secretKeyEnv, settings.secretKey),
            ] where value == nil {
                throw TourpackError.invalidInput(
                    "tts.\(field): the environment variable \(variable ?? "(unnamed)") is not set; \(name)'s requests are signed with it")
            }
            guard let region = settings.region, let access = settings.accessKey, let secret = settings.secretKey else {
                throw TourpackError.invalidInput("tts.region: api \(settings.api.rawValue) needs the signing region")
            }
            signing = AWSSigning(region: region, service: service, accessKey: access.value, secretKey: secret.value)
        }
        core = SynthesisClient(
            settings: settings, key: APIKey(apiKey), dialect: dialect, transport: HTTPTransport(maxConnections: settings.concurrency),
            options: options,
            retry: options.retry ?? RetryPolicy(settings: settings), signing: signing)
        self.splitter = splitter
    }

    /// The wire format of the provider's API (its descriptor's); every one
    /// goes through the same client.
    static func dialect(for settings: TTSSettings) throws -> any TTSDialect {
        guard let provider = settings.api.provider as? any HTTPSpeechProvider else {
            throw TourpackError.invalidInput("tts.api: \(settings.api.rawValue) is not a provider tourpack speaks to over HTTP")
        }
        return provider.dialect(for: settings)
    }

    /// Takes the key the pipeline's loader read (`settings.apiKey`). A
    /// variable named in `apiKeyEnv` that was unset or empty is a
    /// configuration error (exit 2) that names the variable, never a value.
    package init(settings: TTSSettings, splitter: Splitter? = nil, options: Options = Options()) throws {
        if let variable = settings.apiKeyEnv, settings.apiKey == nil {
            throw TourpackError.invalidInput("tts.apiKeyEnv: the environment variable \(variable) is not set")
        }
        try self.init(settings: settings, apiKey: settings.apiKey?.value, splitter: splitter, options: options)
    }

    /// For settings made by hand rather than loaded: reads the key from
    /// `environment`, then as `init(settings:splitter:options:)`.
    package init(settings: TTSSettings, environment: [String: String], splitter: Splitter? = nil, options: Options = Options()) throws {
        var settings = settings
        settings.apiKey = settings.apiKey ?? settings.apiKeyEnv.flatMap { Secret(environment[$0]) }
        try self.init(settings: settings, splitter: splitter, options: options)
    }

    /// Counters since this synthesizer was made, shared by all its copies.
    package var stats: SynthesisStats { core.counters.snapshot }

    package func synthesize(_ request: SynthesisRequest, to destination: URL) async throws -> ChunkShape {
        do {
            return try await core.synthesize(request, to: destination)
        } catch let refusal as InputTooLong {
            guard let splitter, let parts = splitter(request.chunk), parts.count > 1 else {
                core.counters.update { $0.failures += 1 }
                throw TourpackError.audioGenerationFailed(item: request.itemLabel, status: refusal.status, message: refusal.message)
            }
            core.counters.update { $0.splits += 1 }
            core.options.logger.notice(
                "tts chunk split",
                metadata: [
                    "item": "\(request.itemLabel)", "parts": "\(parts.count)", "characters": "\(request.chunk.characters)",
                ])
            // Each part into a file of its own, then the parts, in order, into the chunk's file.
            let files = parts.indices.map { destination.appendingPathExtension("part\($0)") }
            defer { for file in files { try? FileManager.default.removeItem(at: file) } }
            var shapes: [ChunkShape] = []
            for (part, file) in zip(parts, files) {
                // The boundaries name places in the whole chunk: the parts
                // ask for no timings, and the joined chunk has none.
                var partRequest = request
                partRequest.chunk = part
                partRequest.sentenceBoundaries = nil
                do {
                    shapes.append(try await core.synthesize(partRequest, to: file))
                } catch let again as InputTooLong {
                    core.counters.update { $0.failures += 1 }
                    throw TourpackError.audioGenerationFailed(
                        item: request.itemLabel, status: again.status, message: "\(again.message) (even after splitting)")
                }
            }
            let (rate, measured, measuresLoudness) = (request.sampleRateHz, shapes, core.options.measuresLoudness)
            return try await core.pool.value.runIfActive {
                let recorder = ChunkRecorder(destination: destination, rate: rate, measuresLoudness: measuresLoudness)
                do {
                    for (shape, file) in zip(measured, files) where shape.samples > 0 {
                        try FLACFile.stream(file) { try recorder.take($0, inputRate: rate) }
                    }
                    return try recorder.finish()
                } catch {
                    recorder.discard()
                    throw TourpackError.stateFailed(path: destination.path, message: "cannot join the split chunk's parts: \(error)")
                }
            }
        }
    }

    package var description: String {
        let settings = core.settings
        return "HTTPSpeechSynthesizer(api: \(settings.api.rawValue), endpoint: \(Secret.redacting(url: settings.endpoint)), "
            + "key: \(core.key == nil && core.signing == nil ? "none" : "<redacted>"), concurrency: \(settings.concurrency), "
            + "requestsPerMinute: \(settings.requestsPerMinute))"
    }

    package var debugDescription: String { description }

    package var customMirror: Mirror {
        Mirror(self, children: ["description": description], displayStyle: .struct)
    }
}

/// The 400 that asks for a split; never leaves `HTTPSpeechSynthesizer`.
struct InputTooLong: Error {
    var status: Int
    var message: String
}

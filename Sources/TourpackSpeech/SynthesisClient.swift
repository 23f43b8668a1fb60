import Foundation
import Logging
import NIOPosix
import TourpackAudio
import TourpackCore
import TourpackHTTP

/// The shared state behind every copy of an `HTTPSpeechSynthesizer`, and
/// the try-wait-retry loop for one chunk.
final class SynthesisClient: Sendable {
    let settings: TTSSettings
    let key: APIKey?
    let dialect: any TTSDialect
    let transport: HTTPTransport
    let options: HTTPSpeechSynthesizer.Options
    let retry: RetryPolicy
    let counters = SynthesisCounters(SynthesisStats())
    /// Where answers are decoded and written: never the cooperative pool.
    /// Started by the first answer, so a build that sends no request starts
    /// no threads for it.
    let pool: OnFirstUse<NIOThreadPool>
    private let inFlight: ConcurrencyLimit
    private let rateLimiter: RequestRateLimiter<ContinuousClock>?
    /// The endpoint's base URL, without a trailing slash; the dialect adds the path.
    private let base: String
    /// Polly's SigV4 signer (libcurl signs with it); nil for the key-header dialects.
    let signing: AWSSigning?

    init(
        settings: TTSSettings, key: APIKey?, dialect: any TTSDialect, transport: HTTPTransport,
        options: HTTPSpeechSynthesizer.Options, retry: RetryPolicy, signing: AWSSigning? = nil
    ) {
        self.settings = settings
        self.key = key
        self.signing = signing
        self.dialect = dialect
        self.transport = transport
        self.options = options
        self.retry = retry
        pool = OnFirstUse {
            let pool = NIOThreadPool(numberOfThreads: max(1, min(2, ProcessInfo.processInfo.activeProcessorCount)))
            pool.start()
            return pool
        }
        inFlight = ConcurrencyLimit(limit: settings.concurrency)
        if settings.requestsPerMinute > 0 {
            let burst = min(max(1, settings.concurrency), max(1, settings.requestsPerMinute / 60))
            rateLimiter = RequestRateLimiter(requestsPerMinute: settings.requestsPerMinute, burst: burst, clock: ContinuousClock())
        } else {
            rateLimiter = nil
        }
        var base = settings.endpoint
        while base.hasSuffix("/") { base.removeLast() }
        self.base = base
    }

    /// The variables that hold this dialect's credentials, for an auth error's message.
    private var credentialVariables: String {
        if settings.api.provider.credentials != .apiKey {
            return [settings.accessKeyEnv, settings.secretKeyEnv].compactMap { $0 }.joined(separator: " and ")
        }
        return settings.apiKeyEnv ?? "(no apiKeyEnv set)"
    }

    /// What one request costs in the provider's unit: what its dialect
    /// counts as sent, else the billing rule's (Polly's speech marks request
    /// costs what its audio request does).
    private func billed(_ request: SynthesisRequest) -> Int {
        dialect.billedUnits(for: request)
            ?? BillingRule(api: settings.api, voice: request.voice).requestUnits(for: request.chunk)
    }

    deinit { pool.made?.shutdownGracefully { _ in } }

    /// What one try came to: `Value` is the chunk's audio, or a follow-up's timings.
    private enum Outcome<Value> {
        case answered(Value)
        /// Worth another try: `status` is nil for a transport failure. `reason`
        /// never repeats the status: the final error adds "HTTP <status>: " once.
        case retryable(status: Int?, reason: String, retryAfter: Double?, transport: TransportFailure?)
        case tooLong(status: Int, message: String)
        case final(TourpackError)
    }

    /// Speaks one chunk with retries into a FLAC file at `destination`.
    /// Throws `TourpackError`, or `InputTooLong` for the caller to split.
    /// A dialect that times sentences with a second request (Polly) sends
    /// it once the audio is in; its failure leaves the chunk untimed.
    func synthesize(_ request: SynthesisRequest, to destination: URL) async throws -> ChunkShape {
        let body: [UInt8]
        do { body = try dialect.body(for: request, settings: settings) } catch {
            throw TourpackError.audioGenerationFailed(
                item: request.itemLabel, status: nil, message: "could not encode the request: \(error)")
        }
        let (dialect, spool) = (dialect, destination.appendingPathExtension("answer"))
        var shape = try await withRetries(request, countsFailures: true) { attempt, timeout in
            await self.attemptOnce(
                request, body: body, attempt: attempt, timeout: timeout, spool: spool,
                accepts: { dialect.accepts(contentType: $0, for: request) },
                answered: { response in await self.decodeOutcome(response, request: request, spool: spool, into: destination) })
        }
        if let followUp = dialect as? any TimingFollowUp, shape.samples > 0 {
            shape.sentenceTimes = try await followUpTimings(followUp, request: request, beside: destination)
        }
        if !shape.timesFit(rate: request.sampleRateHz) {
            options.logger.notice(
                "tts sentence times do not fit the audio; the audio is kept and its captions estimated",
                metadata: ["item": "\(request.itemLabel)", "chunk": "\(request.chunkLabel)", "samples": "\(shape.samples)"])
            shape.sentenceTimes = nil
        }
        return shape
    }

    /// The second request for the chunk's timings (Polly's sentence speech
    /// marks), with the same retries, counted and billed as the first; nil
    /// when none is asked or it failed for good (logged: the captions then
    /// estimate). Only cancellation and a ledger that cannot be written stop it.
    private func followUpTimings(_ followUp: any TimingFollowUp, request: SynthesisRequest, beside destination: URL) async throws
        -> [Double]?
    {
        guard let body = try? followUp.timingBody(for: request, settings: settings) else { return nil }
        let spool = destination.appendingPathExtension("marks")
        do {
            return try await withRetries(request, countsFailures: false) { attempt, timeout in
                await self.attemptOnce(
                    request, body: body, attempt: attempt, timeout: timeout, spool: spool, accepts: followUp.acceptsTiming(contentType:),
                    answered: { response -> Outcome<[Double]?> in
                        let bytes = response.spooled ? (try? Array(Data(contentsOf: spool))) : response.body
                        guard let bytes else { return .answered(nil) }
                        do {
                            return .answered(try followUp.sentenceTimes(fromTimingAnswer: bytes, for: request))
                        } catch {
                            // Damaged in transit or by the provider: billed, and asked again like a corrupt audio body.
                            return .retryable(status: response.status, reason: "\(error)", retryAfter: nil, transport: nil)
                        }
                    })
            }
        } catch let error as TourpackError where error.kind == .audioGenerationFailed || error.kind == .networkUnavailable {
            options.logger.notice(
                "tts sentence timings failed; the audio is kept and its captions estimated",
                metadata: ["item": "\(request.itemLabel)", "reason": "\(error.message)"])
            return nil
        } catch let refusal as InputTooLong {
            options.logger.notice(
                "tts sentence timings failed; the audio is kept and its captions estimated",
                metadata: ["item": "\(request.itemLabel)", "reason": "\(refusal.message)"])
            return nil
        }
    }

    /// Sends one request until it is answered, with waits, limits and the
    /// deadline; `countsFailures`: a request whose failure fails the chunk.
    private func withRetries<Value>(
        _ request: SynthesisRequest, countsFailures: Bool, attemptOnce: (_ attempt: Int, _ timeout: Double) async -> Outcome<Value>
    ) async throws -> Value {
        let clock = ContinuousClock()
        var deadline: ContinuousClock.Instant?
        var attempt = 0
        while true {
            attempt += 1
            let outcome: Outcome<Value>
            do {
                try await inFlight.acquire()
                do {
                    try await rateLimiter?.acquire()
                } catch {
                    await inFlight.release()
                    throw error
                }
                do {
                    try await BilledCharacters.current?.willSend()
                } catch {
                    await inFlight.release()
                    throw error
                }
                let start = clock.now
                let due = deadline ?? start.advanced(by: Duration.clamped(seconds: retry.deadlineSeconds))
                deadline = due
                let remaining = start.duration(to: due).seconds
                outcome = await attemptOnce(attempt, max(0.001, min(settings.timeoutSeconds, remaining)))
                await inFlight.release()
            } catch let known as TourpackError {
                throw known
            } catch {
                throw TourpackError.cancelled
            }

            switch outcome {
            case .answered(let value):
                counters.update { $0.charactersSynthesized += billed(request) }
                return value
            case .tooLong(let status, let message):
                throw InputTooLong(status: status, message: message)
            case .final(let error):
                if countsFailures { counters.update { $0.failures += 1 } }
                throw error
            case .retryable(let status, let reason, let retryAfter, let transport):
                let wait = retry.delay(afterFailedAttempts: attempt, retryAfter: retryAfter)
                let outOfTime = deadline.map { clock.now.advanced(by: Duration.clamped(seconds: wait)) > $0 } ?? false
                if attempt >= retry.maxAttempts || outOfTime {
                    if countsFailures { counters.update { $0.failures += 1 } }
                    // A build's request knows its place: the error names the chunk that failed.
                    let chunk = request.chunkIndex == nil ? "" : " on \(request.chunkLabel)"
                    let why =
                        outOfTime
                        ? "gave up at the \(Self.format(retry.deadlineSeconds)) s deadline after \(attempt) tries\(chunk)"
                        : "gave up after \(attempt) tries\(chunk)"
                    options.logger.notice(
                        "tts request failed",
                        metadata: [
                            "item": "\(request.itemLabel)", "attempts": "\(attempt)", "status": "\(status.map(String.init) ?? "none")",
                            "reason": "\(reason)",
                        ])
                    if let transport, status == nil {
                        throw TourpackError.networkUnavailable(
                            endpoint: Secret.redacting(url: base + dialect.path(for: request)), reason: "\(transport.reason); \(why)")
                    }
                    throw TourpackError.audioGenerationFailed(item: request.itemLabel, status: status, message: "\(reason); \(why)")
                }
                counters.update { $0.retries += 1 }
                options.logger.notice(
                    "tts retry",
                    metadata: [
                        "item": "\(request.itemLabel)", "attempt": "\(attempt)", "status": "\(status.map(String.init) ?? "none")",
                        "reason": "\(reason)",
                        "wait_ms": "\(Int(wait * 1000))",
                    ])
                do { try await options.sleep(Duration.clamped(seconds: wait)) } catch { throw TourpackError.cancelled }
            }
        }
    }

    /// One try: sends `body`, and hands a 2xx answer whose content type
    /// `accepts` takes to `answered`.
    private func attemptOnce<Value>(
        _ request: SynthesisRequest, body: [UInt8], attempt: Int, timeout: Double, spool: URL, accepts: (String?) -> Bool,
        answered: (HTTPResponse) async -> Outcome<Value>
    ) async -> Outcome<Value> {
        defer { try? FileManager.default.removeItem(at: spool) }
        let spec = HTTPRequestSpec(
            url: base + dialect.path(for: request), headers: dialect.headers(apiKey: key), body: body, totalTimeoutSeconds: timeout,
            connectTimeoutSeconds: options.connectTimeoutSeconds, stallTimeoutSeconds: min(options.stallTimeoutSeconds, timeout),
            maxResponseBytes: options.maxResponseBytes, spool: spool, signing: signing)
        let units = billed(request)
        counters.update {
            $0.requests += 1
            $0.charactersSent += units
        }
        let started = ContinuousClock.now
        let result = await transport.perform(spec)
        let elapsedMs = Int(started.duration(to: .now).seconds * 1000)

        let response: HTTPResponse
        switch result {
        case .failure(.cancelled):
            return .final(.cancelled)
        case .failure(let failure):
            let reason = scrub(failure.reason)
            options.logger.debug(
                "tts request",
                metadata: ["item": "\(request.itemLabel)", "attempt": "\(attempt)", "error": "\(reason)", "ms": "\(elapsedMs)"])
            // Every 2xx answer is billed once, whatever became of its body:
            // cut short, over the cap, unwritable, or abandoned by a cancel.
            if let status = failure.answeredStatus, (200..<300).contains(status) {
                BilledCharacters.current?.add(units)
            }
            switch failure {
            case .cancelledAfterAnswer:
                return .final(.cancelled)
            case .spoolFailed(let path, let reason, _) where reason == errnoDescription(ENOSPC) || reason == errnoDescription(EDQUOT):
                // A full disk is storageFailed naming the file, as every write that finds no room is.
                return .final(
                    .storageFailed(
                        path: path, errno: reason == errnoDescription(ENOSPC) ? ENOSPC : EDQUOT, operation: "keep the endpoint's answer"))
            case .spoolFailed(let path, let reason, _):
                return .final(.stateFailed(path: path, message: "cannot keep the endpoint's answer: \(reason)"))
            case .responseTooLarge(_, let status?) where (200..<300).contains(status):
                // The endpoint is up and answered; only the body was refused at the cap.
                return .retryable(status: status, reason: reason, retryAfter: nil, transport: nil)
            case .cutShort(let status, _):
                // The endpoint answered: a fault of this request, never "network unavailable".
                return .retryable(status: status, reason: reason, retryAfter: nil, transport: nil)
            default:
                guard failure.isRetryable else {
                    return .final(.audioGenerationFailed(item: request.itemLabel, status: nil, message: reason))
                }
                return .retryable(status: nil, reason: reason, retryAfter: nil, transport: failure)
            }
        case .success(let answer):
            response = answer
        }
        counters.update {
            $0.connectionsOpened += response.newConnections
            $0.bytesReceived += response.bodyBytes
        }
        options.logger.debug(
            "tts request",
            metadata: [
                "item": "\(request.itemLabel)", "attempt": "\(attempt)", "status": "\(response.status)",
                "bytes": "\(response.bodyBytes)", "ms": "\(elapsedMs)",
            ])

        switch response.status {
        case 200..<300:
            // Answered: the provider bills it whether or not the body is whole.
            BilledCharacters.current?.add(units)
            guard accepts(response.headers["content-type"]) else {
                let type = scrub(response.headers["content-type"] ?? "")
                return .retryable(
                    status: response.status, reason: "undecodable response: a \(type) body where audio was expected", retryAfter: nil,
                    transport: nil)
            }
            return await answered(response)
        default:
            switch dialect.classify(status: response.status, headers: response.headers, body: response.body, scrub: scrub) {
            case .retry(let message):
                let retryAfter = RetryPolicy.retryAfterSeconds(response.headers["retry-after"])
                return .retryable(status: response.status, reason: scrub(message), retryAfter: retryAfter, transport: nil)
            case .tooLong(let message):
                return .tooLong(status: response.status, message: scrub(message))
            case .auth(let message):
                return .final(
                    .audioGenerationFailed(
                        item: request.itemLabel, status: response.status,
                        message: "\(scrub(message)); the endpoint refused the credentials in \(credentialVariables)"))
            case .final(let message):
                return .final(.audioGenerationFailed(item: request.itemLabel, status: response.status, message: scrub(message)))
            }
        }
    }

    /// Decodes a 2xx audio answer into the chunk's file, as an outcome.
    private func decodeOutcome(_ response: HTTPResponse, request: SynthesisRequest, spool: URL, into destination: URL) async
        -> Outcome<ChunkShape>
    {
        switch await decode(response, request: request, spool: spool, into: destination) {
        case .success(let shape):
            // Too little audio for the words sent (SpeechLength): billed like a corrupt body, retried, never kept.
            if let shortfall = request.shortfall(of: shape) {
                try? FileManager.default.removeItem(at: destination)
                return .retryable(status: response.status, reason: shortfall, retryAfter: nil, transport: nil)
            }
            return .answered(shape)
        case .failure(let undecodable as UndecodableBody):
            return .retryable(
                status: response.status, reason: "undecodable response: \(scrub(undecodable.reason))", retryAfter: nil, transport: nil)
        case .failure(let error as TourpackError):
            return .final(error)
        case .failure(let error as FFmpegError) where [-ENOSPC, -EDQUOT].contains(error.code):
            // The FLAC writer found no room: a full disk, as every write that finds none.
            return .final(
                .storageFailed(path: error.path ?? destination.path, errno: -error.code, operation: "keep the endpoint's answer"))
        case .failure(let error):
            return .final(.stateFailed(path: destination.path, message: "cannot keep the endpoint's answer: \(error)"))
        }
    }

    /// Decodes a 2xx answer (spooled, or in memory when it was empty or
    /// short) into the FLAC file at `destination`, on the client's thread pool.
    private func decode(_ response: HTTPResponse, request: SynthesisRequest, spool: URL, into destination: URL) async -> Result<
        ChunkShape, any Error
    > {
        let (dialect, measuresLoudness, settings, rate) = (dialect, options.measuresLoudness, settings, request.sampleRateHz)
        do {
            return try await pool.value.runIfActive {
                let recorder = ChunkRecorder(destination: destination, rate: rate, measuresLoudness: measuresLoudness)
                var decoder = dialect.answerDecoder(for: request, settings: settings)
                do {
                    var shape: ChunkShape
                    if response.spooled {
                        shape = try recorder.decode(spool: spool, with: &decoder)
                    } else {
                        try response.body.withUnsafeBytes { bytes in
                            try decoder.feed(bytes) { samples, inputRate in try recorder.take(samples, inputRate: inputRate) }
                        }
                        try decoder.finish()
                        shape = try recorder.finish()
                    }
                    shape.sentenceTimes = decoder.sentenceTimes
                    return .success(shape)
                } catch {
                    recorder.discard()
                    return .failure(error)
                }
            }
        } catch {
            return .failure(TourpackError.cancelled)
        }
    }

    private func scrub(_ text: String) -> String {
        let scrubbed = key?.scrub(text) ?? text
        return signing?.scrub(scrubbed) ?? scrubbed
    }

    private static func format(_ seconds: Double) -> String { String(format: "%g", seconds) }
}

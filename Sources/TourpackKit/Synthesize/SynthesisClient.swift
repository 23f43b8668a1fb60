import Foundation
import Logging

/// The shared state behind every copy of an `HTTPSpeechSynthesizer`, and
/// the try-wait-retry loop for one chunk.
final class SynthesisClient: Sendable {
    let settings: TTSSettings
    let key: APIKey?
    let dialect: any TTSDialect
    let transport: HTTPTransport
    let options: HTTPSpeechSynthesizer.Options
    let retry: RetryPolicy
    let counters = SynthesisCounters()
    private let inFlight: ConcurrencyLimit
    private let rateLimiter: RequestRateLimiter<ContinuousClock>?
    private let url: String

    init(settings: TTSSettings, key: APIKey?, dialect: any TTSDialect, transport: HTTPTransport,
         options: HTTPSpeechSynthesizer.Options, retry: RetryPolicy) {
        self.settings = settings
        self.key = key
        self.dialect = dialect
        self.transport = transport
        self.options = options
        self.retry = retry
        inFlight = ConcurrencyLimit(limit: settings.concurrency)
        if settings.requestsPerMinute > 0 {
            let burst = min(max(1, settings.concurrency), max(1, settings.requestsPerMinute / 60))
            rateLimiter = RequestRateLimiter(requestsPerMinute: settings.requestsPerMinute, burst: burst, clock: ContinuousClock())
        } else {
            rateLimiter = nil
        }
        var base = settings.endpoint
        while base.hasSuffix("/") { base.removeLast() }
        url = base + dialect.path
    }

    /// What one try came to.
    private enum Outcome {
        case audio(PCMAudio)
        /// Worth another try: `status` is nil for a transport failure. `reason`
        /// never repeats the status: the final error adds "HTTP <status>: " once.
        case retryable(status: Int?, reason: String, retryAfter: Double?, transport: TransportFailure?)
        case tooLong(status: Int, message: String)
        case final(TourpackError)
    }

    /// Speaks one chunk with retries. Throws `TourpackError`, or `InputTooLong` for the caller to split.
    func synthesize(_ request: SynthesisRequest) async throws -> PCMAudio {
        let body: [UInt8]
        do { body = try dialect.body(for: request, settings: settings) } catch {
            throw TourpackError.audioGenerationFailed(item: request.itemLabel, status: nil, message: "could not encode the request: \(error)")
        }
        let clock = ContinuousClock()
        var deadline: ContinuousClock.Instant?
        var attempt = 0
        while true {
            attempt += 1
            let outcome: Outcome
            do {
                try await inFlight.acquire()
                do {
                    try await rateLimiter?.acquire()
                } catch {
                    await inFlight.release()
                    throw error
                }
                let start = clock.now
                let due = deadline ?? start.advanced(by: Self.duration(retry.deadlineSeconds))
                deadline = due
                let remaining = start.duration(to: due).seconds
                outcome = await attemptOnce(request, body: body, attempt: attempt, timeout: max(0.001, min(settings.timeoutSeconds, remaining)))
                await inFlight.release()
            } catch {
                throw TourpackError.cancelled
            }

            switch outcome {
            case .audio(let pcm):
                counters.update { $0.charactersSynthesized += request.chunk.characters }
                return pcm
            case .tooLong(let status, let message):
                throw InputTooLong(status: status, message: message)
            case .final(let error):
                counters.update { $0.failures += 1 }
                throw error
            case .retryable(let status, let reason, let retryAfter, let transport):
                let wait = retry.delay(afterFailedAttempts: attempt, retryAfter: retryAfter)
                let outOfTime = deadline.map { clock.now.advanced(by: Self.duration(wait)) > $0 } ?? false
                if attempt >= retry.maxAttempts || outOfTime {
                    counters.update { $0.failures += 1 }
                    let why = outOfTime ? "gave up at the \(Self.format(retry.deadlineSeconds)) s deadline after \(attempt) tries"
                                        : "gave up after \(attempt) tries"
                    options.logger.notice("tts request failed", metadata: [
                        "item": "\(request.itemLabel)", "attempts": "\(attempt)", "status": "\(status.map(String.init) ?? "none")",
                        "reason": "\(reason)",
                    ])
                    if let transport, status == nil {
                        throw TourpackError.networkUnavailable(endpoint: HTTPRequestSpec.redactedURL(url), reason: "\(transport.reason); \(why)")
                    }
                    throw TourpackError.audioGenerationFailed(item: request.itemLabel, status: status, message: "\(reason); \(why)")
                }
                counters.update { $0.retries += 1 }
                options.logger.notice("tts retry", metadata: [
                    "item": "\(request.itemLabel)", "attempt": "\(attempt)", "status": "\(status.map(String.init) ?? "none")",
                    "reason": "\(reason)",
                    "wait_ms": "\(Int(wait * 1000))",
                ])
                do { try await options.sleep(Self.duration(wait)) } catch { throw TourpackError.cancelled }
            }
        }
    }

    private func attemptOnce(_ request: SynthesisRequest, body: [UInt8], attempt: Int, timeout: Double) async -> Outcome {
        let spec = HTTPRequestSpec(
            url: url, headers: dialect.headers(apiKey: key), body: body, totalTimeoutSeconds: timeout,
            connectTimeoutSeconds: options.connectTimeoutSeconds, stallTimeoutSeconds: min(options.stallTimeoutSeconds, timeout),
            maxResponseBytes: options.maxResponseBytes)
        counters.update {
            $0.requests += 1
            $0.charactersSent += request.chunk.characters
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
            options.logger.debug("tts request", metadata: ["item": "\(request.itemLabel)", "attempt": "\(attempt)", "error": "\(reason)", "ms": "\(elapsedMs)"])
            if case .responseTooLarge(_, let status?) = failure, (200..<300).contains(status) {
                // The endpoint answered 2xx and only its body was refused, at
                // the cap: billed like any 2xx answer, and worth another try,
                // since the endpoint is up.
                BilledCharacters.current?.add(request.chunk.characters)
                return .retryable(status: status, reason: reason, retryAfter: nil, transport: nil)
            }
            guard failure.isRetryable else {
                return .final(.audioGenerationFailed(item: request.itemLabel, status: nil, message: reason))
            }
            return .retryable(status: nil, reason: reason, retryAfter: nil, transport: failure)
        case .success(let answer):
            response = answer
        }
        counters.update {
            $0.connectionsOpened += response.newConnections
            $0.bytesReceived += response.body.count
        }
        options.logger.debug("tts request", metadata: [
            "item": "\(request.itemLabel)", "attempt": "\(attempt)", "status": "\(response.status)",
            "bytes": "\(response.body.count)", "ms": "\(elapsedMs)",
        ])

        switch response.status {
        case 200..<300:
            // Answered: the provider bills it whether or not the body is whole.
            BilledCharacters.current?.add(request.chunk.characters)
            do {
                let pcm = try dialect.audio(from: response.body)
                guard pcm.sampleRate != request.sampleRateHz else { return .audio(pcm) }
                return .audio(try pcm.resampled(to: request.sampleRateHz))
            } catch let undecodable as UndecodableBody {
                return .retryable(status: response.status, reason: "undecodable response: \(scrub(undecodable.reason))", retryAfter: nil, transport: nil)
            } catch {
                return .final(.audioGenerationFailed(item: request.itemLabel, status: response.status, message: "resampling failed: \(error)"))
            }
        case 429, 500, 502, 503, 504:
            let message = scrub(TTSErrorBody.message(from: response.body))
            let retryAfter = RetryPolicy.retryAfterSeconds(response.headers["retry-after"])
            return .retryable(status: response.status, reason: message, retryAfter: retryAfter, transport: nil)
        default:
            let message = scrub(TTSErrorBody.message(from: response.body))
            if TTSErrorBody.isInputTooLong(status: response.status, message: message) {
                return .tooLong(status: response.status, message: message)
            }
            return .final(.audioGenerationFailed(item: request.itemLabel, status: response.status, message: message))
        }
    }

    private func scrub(_ text: String) -> String { key?.scrub(text) ?? text }

    static func duration(_ seconds: Double) -> Duration {
        .nanoseconds(Int64((max(0, min(seconds, 1e9)) * 1e9).rounded()))
    }

    private static func format(_ seconds: Double) -> String { String(format: "%g", seconds) }
}

package import Foundation
package import TourpackCore
package import TourpackHTTP

/// What a tile server answered for one tile, after retries.
package enum TileAnswer: Sendable {
    /// A tile, checked against the format's magic number.
    case tile(bytes: [UInt8], validators: TileValidators, freshUntil: Double)
    /// 304 to a conditional request: what the cache holds is still right.
    case notModified(validators: TileValidators, freshUntil: Double)
    /// 404 or 204: the source has no data here.
    case empty(freshUntil: Double)
}

/// The server's `ETag` and `Last-Modified`, sent back as `If-None-Match` and `If-Modified-Since`.
package struct TileValidators: Sendable, Hashable {
    package var etag: String?
    package var lastModified: String?

    package init(etag: String? = nil, lastModified: String? = nil) {
        self.etag = etag
        self.lastModified = lastModified
    }
    package var isEmpty: Bool { etag == nil && lastModified == nil }
}

/// Counts of a build's tile traffic, shared by every task that fetches.
package struct TileFetchStats: Sendable, Hashable, Codable {
    /// HTTP requests sent, retries included.
    package var requests = 0
    package var retries = 0
    /// Tiles downloaded (200 with a tile).
    package var downloaded = 0
    /// Conditional requests answered 304: renewed without a download.
    package var notModified = 0
    /// 404 or 204: no data there.
    package var empty = 0
    package var bytesReceived = 0
    package init() {}
}

/// Fetches map tiles from an XYZ URL template over the project's libcurl
/// transport, politely: at most `concurrency` requests in flight, at most
/// `requestsPerSecond` started, the pipeline's `User-Agent`, conditional
/// requests for stale tiles, and the TTS retry policy (429 with
/// `Retry-After`, 5xx, timeouts, cut-short bodies, and a 200 whose body is
/// not a tile of the format, such as an HTML error page).
///
/// The key goes in the query parameter or header the source names and
/// nowhere else: every URL in a message is built without it, and every
/// message from the server is scrubbed of it.
package final class TileFetcher: Sendable {
    let source: TileSource
    private let template: String
    private let key: APIKey?
    private let transport: HTTPTransport
    private let retry: RetryPolicy
    private let timeoutSeconds: Double
    private let inFlight: ConcurrencyLimit
    private let rateLimiter: RequestRateLimiter<ContinuousClock>?
    private let clock: @Sendable () -> Date
    private let sleep: @Sendable (Duration) async throws -> Void
    private let counters = LockedCounts(TileFetchStats())

    package init(
        source: TileSource, template: String, apiKey: String?, retry: RetryPolicy, timeoutSeconds: Double,
        clock: @escaping @Sendable () -> Date,
        sleep: @escaping @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) }
    ) throws {
        self.source = source
        self.template = template
        self.key = APIKey(apiKey)
        self.retry = retry
        self.timeoutSeconds = timeoutSeconds
        self.clock = clock
        self.sleep = sleep
        transport = HTTPTransport(maxConnections: source.concurrency)
        inFlight = ConcurrencyLimit(limit: source.concurrency)
        if source.requestsPerSecond > 0 {
            let perMinute = max(1, Int((source.requestsPerSecond * 60).rounded()))
            rateLimiter = RequestRateLimiter(
                requestsPerMinute: perMinute, burst: max(1, min(source.concurrency, perMinute)), clock: ContinuousClock())
        } else {
            rateLimiter = nil
        }
    }

    package var stats: TileFetchStats { counters.snapshot }

    /// The tile's URL as messages show it: never with the key.
    func displayURL(_ tile: TileID) -> String {
        template.replacingOccurrences(of: "{z}", with: "\(tile.z)").replacingOccurrences(of: "{x}", with: "\(tile.x)")
            .replacingOccurrences(of: "{y}", with: "\(tile.y)")
    }

    private func requestURL(_ tile: TileID) -> String {
        let url = displayURL(tile)
        guard let key, source.apiKeyHeader == nil else { return url }
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        let value = key.value.addingPercentEncoding(withAllowedCharacters: allowed) ?? key.value
        let name = source.apiKeyParam
        return url + (url.contains("?") ? "&" : "?") + "\(name)=\(value)"
    }

    private func headers(conditional: TileValidators?) -> [(name: String, value: String)] {
        var headers: [(name: String, value: String)] = [("User-Agent", source.userAgent), ("Accept", "*/*")]
        if let key, let header = source.apiKeyHeader { headers.append((header, key.value)) }
        if let etag = conditional?.etag { headers.append(("If-None-Match", etag)) }
        if let modified = conditional?.lastModified { headers.append(("If-Modified-Since", modified)) }
        return headers
    }

    private enum Outcome {
        case answer(TileAnswer)
        case retryable(status: Int?, reason: String, retryAfter: Double?)
        case final(status: Int?, reason: String)
        case cancelled
    }

    /// Fetches one tile, retrying what is worth retrying.
    ///
    /// - Parameter conditional: the validators of a stale cached copy; a 304 then renews it.
    /// - Throws: `TourpackError.mapDownloadFailed` naming z/x/y, the URL without
    ///   the key and the status, or `.cancelled`.
    package func fetch(_ tile: TileID, conditional: TileValidators?) async throws(TourpackError) -> TileAnswer {
        let started = ContinuousClock.now
        var attempt = 0
        while true {
            attempt += 1
            let outcome: Outcome
            do {
                try await inFlight.acquire()
                do { try await rateLimiter?.acquire() } catch {
                    await inFlight.release()
                    throw error
                }
                outcome = await attemptOnce(tile, conditional: conditional)
                await inFlight.release()
            } catch {
                throw .cancelled
            }
            switch outcome {
            case .answer(let answer):
                return answer
            case .cancelled:
                throw .cancelled
            case .final(let status, let reason):
                throw .mapDownloadFailed(tile: "\(tile)", url: displayURL(tile), status: status, message: reason)
            case .retryable(let status, let reason, let retryAfter):
                let wait = retry.delay(afterFailedAttempts: attempt, retryAfter: retryAfter)
                let elapsed = started.duration(to: .now).seconds
                if attempt >= retry.maxAttempts || elapsed + wait > retry.deadlineSeconds {
                    throw .mapDownloadFailed(
                        tile: "\(tile)", url: displayURL(tile), status: status, message: "\(reason); gave up after \(attempt) tries")
                }
                counters.update { $0.retries += 1 }
                do { try await sleep(Duration.clamped(seconds: wait)) } catch { throw .cancelled }
            }
        }
    }

    private func attemptOnce(_ tile: TileID, conditional: TileValidators?) async -> Outcome {
        let spec = HTTPRequestSpec(
            method: .get, url: requestURL(tile), headers: headers(conditional: conditional), body: [],
            totalTimeoutSeconds: timeoutSeconds, connectTimeoutSeconds: min(10, timeoutSeconds),
            stallTimeoutSeconds: min(20, timeoutSeconds), maxResponseBytes: 16 * 1024 * 1024)
        counters.update { $0.requests += 1 }
        let response: HTTPResponse
        switch await transport.perform(spec) {
        case .failure(.cancelled), .failure(.cancelledAfterAnswer):
            return .cancelled
        case .failure(let failure):
            let reason = scrub(failure.reason)
            return failure.isRetryable ? .retryable(status: nil, reason: reason, retryAfter: nil) : .final(status: nil, reason: reason)
        case .success(let answer):
            response = answer
        }
        counters.update { $0.bytesReceived += response.body.count }
        let validators = TileValidators(etag: response.headers["etag"], lastModified: response.headers["last-modified"])
        switch response.status {
        case 200:
            guard source.format.matches(response.body) else {
                let type = response.headers["content-type"].map { ", Content-Type \(scrub($0))" } ?? ""
                return .retryable(
                    status: 200,
                    reason:
                        "the body is not a \(source.format.rawValue) tile (\(response.body.count) bytes\(type): \(Self.preview(response.body, scrub: scrub)))",
                    retryAfter: nil)
            }
            counters.update { $0.downloaded += 1 }
            return .answer(.tile(bytes: response.body, validators: validators, freshUntil: freshUntil(response.headers)))
        case 304 where conditional != nil:
            counters.update { $0.notModified += 1 }
            return .answer(.notModified(validators: validators, freshUntil: freshUntil(response.headers)))
        case 204, 404:
            counters.update { $0.empty += 1 }
            return .answer(.empty(freshUntil: freshUntil(response.headers)))
        case 408, 429, 500, 502, 503, 504:
            return .retryable(
                status: response.status, reason: serverMessage(response),
                retryAfter: RetryPolicy.retryAfterSeconds(response.headers["retry-after"]))
        default:
            return .final(status: response.status, reason: serverMessage(response))
        }
    }

    /// Until when an answer is fresh: `Cache-Control: max-age`, else
    /// `Expires`, else the source's `maxAgeDays`. `no-store`/`no-cache` make
    /// it stale at once (the next build asks again, conditionally).
    func freshUntil(_ headers: [String: String]) -> Double {
        let now = clock().timeIntervalSince1970
        if let control = headers["cache-control"]?.lowercased() {
            let directives = control.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            if directives.contains(where: { $0 == "no-store" || $0 == "no-cache" }) { return now }
            if let maxAge = directives.first(where: { $0.hasPrefix("max-age=") }) {
                let value = maxAge.dropFirst("max-age=".count).trimmingCharacters(in: CharacterSet(charactersIn: "\""))
                if let seconds = Double(value), seconds.isFinite { return now + max(0, seconds) }
            }
        }
        if let expires = headers["expires"] {
            guard let seconds = RetryPolicy.retryAfterSeconds(expires, now: Date(timeIntervalSince1970: now)),
                Double(expires) == nil
            else { return now }  // an unreadable Expires means already expired
            return now + seconds
        }
        return now + Double(source.maxAgeDays) * 86_400
    }

    /// The server's own words, short and without the key.
    private func serverMessage(_ response: HTTPResponse) -> String {
        let text = Self.preview(response.body, scrub: scrub)
        return text.isEmpty ? "no message" : text
    }

    /// Up to 200 printable characters of a body, for messages, scrubbed of
    /// the key before it is cut short (a cut must not leave half a key).
    static func preview(_ body: [UInt8], scrub: (String) -> String = { $0 }) -> String {
        let text = scrub(String(decoding: body.prefix(4096), as: UTF8.self))
        let cleaned = String(text.unicodeScalars.map { $0.properties.generalCategory == .control ? " " : Character($0) })
            .split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ")
        return cleaned.count > 200 ? String(cleaned.prefix(200)) + "…" : cleaned
    }

    private func scrub(_ text: String) -> String { key?.scrub(text) ?? text }

}

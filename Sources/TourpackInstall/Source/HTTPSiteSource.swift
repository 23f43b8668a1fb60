package import Foundation
package import TourpackClient
import TourpackCore
import TourpackHTTP

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A site served over HTTP(S): a CDN, a bucket's website, `make tour`'s
/// `build/site` behind any web server. Every exchange goes through the
/// project's libcurl transport, on its own thread, never the cooperative pool.
///
/// - The catalogue is read with `If-None-Match` on the ETag remembered from
///   the last read; a 304 costs one small exchange and nothing else.
/// - A file downloads straight to disk (the transport's spool file) and
///   resumes by the rules every transport shares (`ResumableDownload`): a
///   file that holds N bytes is asked for with `Range: bytes=N-` and
///   `If-Range`; the answer's head is judged before its body (a wrong
///   `Content-Range` writes nothing and is a failed try); a 200 starts the
///   file over; the answer is bounded by the size the signed package.json names.
/// - Each try of a file is bounded by the file's deadline
///   (`CURLOPT_TIMEOUT_MS`, the seconds left of
///   `TransferPolicy.fileDeadlineSeconds`) and by the rate floor
///   (`CURLOPT_LOW_SPEED_LIMIT` and `_TIME`: `minimumBytesPerSecond` over
///   `rateWindowSeconds`); either ends the try as a failed one.
/// - 408, 429, 5xx, timeouts and connections cut short are tried again with
///   `TransferPolicy`'s full-jitter backoff, honouring `Retry-After`; the
///   count starts afresh only after bytes that could be kept, and after
///   `maximumAttempts` (or the deadline) the key is `unreachable`.
///
/// The base URL may carry a query (a CDN token): it is kept on every
/// request and left out of every message, as is any user info.
package final class HTTPSiteSource: SiteSource {
    /// The base without a trailing slash or its query.
    private let base: String
    private let query: String?
    private let transport: HTTPTransport
    package let policy: TransferPolicy
    private let sleep: @Sendable (Duration) async throws -> Void

    /// The largest catalogue or package.json read into memory (as `URLSessionSiteSource.objectCap`).
    package static let objectCap = URLSessionSiteSource.objectCap

    package init(
        base url: String, policy: TransferPolicy = TransferPolicy(), connections: Int = 4,
        sleep: @escaping @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) }
    ) throws {
        let (base, query) = SiteLayout.address(url)
        self.base = base
        self.query = query
        self.policy = policy
        self.sleep = sleep
        transport = HTTPTransport(maxConnections: max(1, connections))
    }

    package var location: String { Secret.redacting(url: base) }

    private func url(_ key: String) -> String {
        base + "/" + key + (query.map { "?" + $0 } ?? "")
    }

    private func shown(_ key: String) -> String { Secret.redacting(url: url(key)) }

    // MARK: Whole objects

    package func catalog(unlessStill version: CatalogVersion?) async throws -> CatalogRead {
        let key = SiteLayout.catalog
        var headers: [(name: String, value: String)] = []
        if let etag = version?.etag {
            headers.append((name: "If-None-Match", value: etag))
        } else if let lastModified = version?.lastModified {
            headers.append((name: "If-Modified-Since", value: lastModified))
        }
        let response = try await exchange(key, headers: headers, expecting: [200, 304])
        if response.status == 304 { return .notModified }
        return .fetched(
            bytes: response.body, version: CatalogVersion(etag: response.headers["etag"], lastModified: response.headers["last-modified"]))
    }

    package func object(_ key: String) async throws -> [UInt8]? {
        do {
            return try await exchange(key, headers: [], expecting: [200]).body
        } catch let failure as SiteSourceFailure where failure.kind == .missing {
            return nil
        }
    }

    /// One GET tried until it answers with one of `expecting`; 404 and 410
    /// are `missing`, other final statuses `refused`.
    private func exchange(_ key: String, headers: [(name: String, value: String)], expecting: Set<Int>) async throws -> HTTPResponse {
        let spec = HTTPRequestSpec(
            method: .get, url: url(key), headers: headers, body: [], totalTimeoutSeconds: min(120, policy.fileDeadlineSeconds),
            connectTimeoutSeconds: 15, stallTimeoutSeconds: 30, maxResponseBytes: Self.objectCap)
        var tries = TransferTries(policy)
        while true {
            let outcome = await transport.perform(spec)
            switch try classify(outcome, key: key) {
            case .answer(let response) where expecting.contains(response.status):
                return response
            case .answer(let response):
                throw final(response, key: key)
            case .retry(let status, let reason, let retryAfter):
                let wait = try tries.delay(status: status, reason: reason, retryAfter: retryAfter, url: shown(key))
                try await sleep(Duration.clamped(seconds: wait))
            }
        }
    }

    // MARK: Files

    package func download(
        _ key: String, into file: URL, size: Int64, observe: @escaping @Sendable (DownloadObservation) -> Void
    ) async throws {
        var resumable = ResumableDownload(file: file, size: size, policy: policy, url: shown(key))
        while let attempt = try resumable.nextTry() {
            observe(.bytes(attempt.have))
            // The size is the package.json's, data: the bound saturates where `+` would trap.
            let bound = Int(clamping: size).addingReportingOverflow(64 * 1024)
            var spec = HTTPRequestSpec(
                method: .get, url: url(key), headers: attempt.headers, body: [], totalTimeoutSeconds: max(0.001, resumable.secondsLeft),
                connectTimeoutSeconds: 15, stallTimeoutSeconds: policy.rateWindowSeconds,
                maxResponseBytes: bound.overflow ? Int.max : bound.partialValue, spool: file)
            // The file never passes the size its signed package.json names; an error's message may be 64 KiB.
            spec.spoolLimit = size
            spec.minimumBytesPerSecond = Int(clamping: policy.minimumBytesPerSecond)
            spec.spoolAppendsPartialContent = attempt.have > 0
            // The head is judged before the body: a wrong Content-Range writes nothing.
            spec.onResponseHead = { status, headers in
                switch attempt.accept(status: status, headers: headers) {
                case .message, .fromStart, .continuing: return nil
                case .refused(let reason): return reason
                case .unwritable(let path, let reason): return "cannot prepare \(path): \(reason)"
                }
            }
            let request = spec
            let outcome = try await withProgress(of: file, observe) { await self.transport.perform(request) }
            let ending: ResumableDownload.Ending
            switch try classify(outcome, key: key, file: file) {
            case .answer(let response) where (200..<300).contains(response.status):
                ending = .ended(status: response.status)
            case .answer(let response) where response.status == 416:
                ending = .unsatisfiable
            case .answer(let response):
                throw final(response, key: key)
            case .retry(let status, let reason, let retryAfter):
                ending = .failed(status: status, reason: reason, retryAfter: retryAfter)
            }
            guard let retry = try resumable.settle(ending) else { return }
            observe(.retrying(afterSeconds: retry.seconds, reason: retry.reason))
            try await sleep(Duration.clamped(seconds: retry.seconds))
            observe(.bytes(Self.size(of: file)))
        }
    }

    /// Runs `body` while reporting the file's size four times a second.
    private func withProgress<T: Sendable>(
        of file: URL, _ observe: @escaping @Sendable (DownloadObservation) -> Void, _ body: @escaping @Sendable () async -> T
    ) async throws -> T {
        try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { await body() }
            group.addTask {
                while !Task.isCancelled {
                    try? await Task.sleep(for: .milliseconds(250))
                    observe(.bytes(Self.size(of: file)))
                }
                return nil
            }
            defer { group.cancelAll() }
            while let result = try await group.next() {
                if let result { return result }
            }
            throw CancellationError()
        }
    }

    // MARK: Answers

    private enum Classified {
        case answer(HTTPResponse)
        case retry(status: Int?, reason: String, retryAfter: Double?)
    }

    private func classify(_ outcome: Result<HTTPResponse, TransportFailure>, key: String, file: URL? = nil) throws -> Classified {
        switch outcome {
        case .success(let response):
            switch response.status {
            case 408, 429, 500, 502, 503, 504:
                return .retry(
                    status: response.status, reason: Self.message(response),
                    retryAfter: RetryPolicy.retryAfterSeconds(response.headers["retry-after"]))
            default:
                return .answer(response)
            }
        case .failure(.cancelled), .failure(.cancelledAfterAnswer):
            throw CancellationError()
        case .failure(.spoolFailed(let path, let reason, let status)):
            throw SiteSourceFailure(.storage(path: path, reason: reason), url: shown(key), status: status, reason: reason)
        case .failure(.responseTooLarge(let limit, let status)):
            // A file is bounded by the size its package.json names; the
            // catalogue and a package.json by the cap on whole objects.
            let reason =
                file != nil
                ? "the answer is longer than the file the manifest names"
                : key == SiteLayout.catalog
                    ? "the catalogue is over its cap of \(limit) bytes" : "the answer is over the cap of \(limit) bytes on \(key)"
            throw SiteSourceFailure(.refused, url: shown(key), status: status, reason: reason)
        case .failure(let failure) where failure.isRetryable:
            return .retry(status: failure.answeredStatus, reason: failure.reason, retryAfter: nil)
        case .failure(let failure):
            throw SiteSourceFailure(.refused, url: shown(key), status: failure.answeredStatus, reason: failure.reason)
        }
    }

    private func final(_ response: HTTPResponse, key: String) -> SiteSourceFailure {
        let kind: SiteSourceFailure.Kind = response.status == 404 || response.status == 410 ? .missing : .refused
        return SiteSourceFailure(kind, url: shown(key), status: response.status, reason: Self.message(response))
    }

    /// Up to 200 printable characters of an error body.
    private static func message(_ response: HTTPResponse) -> String {
        let text = String(decoding: response.body.prefix(400), as: UTF8.self)
        let cleaned = String(text.unicodeScalars.map { $0.properties.generalCategory == .control ? " " : Character($0) })
            .split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ")
        if cleaned.isEmpty { return "no message" }
        return cleaned.count > 200 ? String(cleaned.prefix(200)) + "…" : cleaned
    }

    static func size(of file: URL) -> Int64 { InstallFolder.size(of: file) }
}

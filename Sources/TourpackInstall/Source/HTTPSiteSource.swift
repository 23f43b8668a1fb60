package import Foundation
package import TourpackClient
import TourpackCore
package import TourpackHTTP

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
///   resumes: a file that already holds N bytes is asked for with
///   `Range: bytes=N-` and `If-Range` on the validator (`ETag`, else
///   `Last-Modified`) its first bytes came with, so a 206 continues it and a
///   server that ignores the range (or a changed object) sends a 200 that
///   starts the file over from byte 0.
/// - 408, 429, 5xx, timeouts and connections cut short are tried again with
///   `RetryPolicy`'s backoff, honouring `Retry-After`; a try that brought
///   new bytes starts the count afresh, so a slow, flaky link still finishes.
///
/// The base URL may carry a query (a CDN token): it is kept on every
/// request and left out of every message, as is any user info.
package final class HTTPSiteSource: SiteSource {
    /// The base without a trailing slash or its query.
    private let base: String
    private let query: String?
    private let transport: HTTPTransport
    private let retry: RetryPolicy
    private let sleep: @Sendable (Duration) async throws -> Void

    /// Six tries, backoff from half a second up to 20 s, at most five minutes
    /// without progress on one key.
    package static let defaultRetry = RetryPolicy(
        maxAttempts: 6, initialBackoffSeconds: 0.5, maxBackoffSeconds: 20, deadlineSeconds: 300)

    package init(
        base url: String, retry: RetryPolicy = HTTPSiteSource.defaultRetry, connections: Int = 4,
        sleep: @escaping @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) }
    ) throws {
        var text = url
        var query: String?
        if let mark = text.firstIndex(where: { $0 == "?" || $0 == "#" }) {
            if text[mark] == "?" { query = String(text[text.index(after: mark)...].prefix { $0 != "#" }) }
            text = String(text[..<mark])
        }
        while text.hasSuffix("/") { text.removeLast() }
        // The catalogue's own URL names its site too.
        if text.hasSuffix("/" + SiteLayout.catalog) { text.removeLast(SiteLayout.catalog.count + 1) }
        base = text
        self.query = query.flatMap { $0.isEmpty ? nil : $0 }
        self.retry = retry
        self.sleep = sleep
        do { transport = try HTTPTransport(maxConnections: max(1, connections)) } catch {
            throw TourpackError.networkUnavailable(endpoint: HTTPRequestSpec.redactedURL(text), reason: error.reason)
        }
    }

    package var location: String { HTTPRequestSpec.redactedURL(base) }

    private func url(_ key: String) -> String {
        base + "/" + key + (query.map { "?" + $0 } ?? "")
    }

    private func shown(_ key: String) -> String { HTTPRequestSpec.redactedURL(url(key)) }

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
            method: .get, url: url(key), headers: headers, body: [], totalTimeoutSeconds: 120, connectTimeoutSeconds: 15,
            stallTimeoutSeconds: 30)
        var tries = Tries(retry)
        while true {
            let outcome = await transport.perform(spec)
            switch try classify(outcome, key: key) {
            case .answer(let response) where expecting.contains(response.status):
                return response
            case .answer(let response):
                throw final(response, key: key)
            case .retry(let status, let reason, let retryAfter):
                try await tries.wait(status: status, reason: reason, retryAfter: retryAfter, url: shown(key), sleep: sleep)
            }
        }
    }

    // MARK: Files

    package func download(
        _ key: String, into file: URL, size: Int64, observe: @escaping @Sendable (DownloadObservation) -> Void
    ) async throws {
        let validatorFile = file.appendingPathExtension("validator")
        var tries = Tries(retry)
        while true {
            var have = Self.size(of: file)
            let validator = (try? String(contentsOf: validatorFile, encoding: .utf8)).flatMap { $0.isEmpty ? nil : $0 }
            if have > size || (have > 0 && validator == nil) {
                // Bytes of unknown origin, or more than the file has: start over.
                try Self.startOver(file, validatorFile)
                have = 0
            }
            if have == size, size > 0 { return }
            observe(.bytes(have))
            var headers: [(name: String, value: String)] = [(name: "Accept-Encoding", value: "identity")]
            if have > 0, let validator {
                headers.append((name: "Range", value: "bytes=\(have)-"))
                headers.append((name: "If-Range", value: validator))
            }
            var spec = HTTPRequestSpec(
                method: .get, url: url(key), headers: headers, body: [], totalTimeoutSeconds: 24 * 3600, connectTimeoutSeconds: 15,
                stallTimeoutSeconds: 30, maxResponseBytes: Int(max(size, 0)) + 64 * 1024, spool: file)
            spec.spoolAppendsPartialContent = have > 0
            // The validator is kept as soon as the head is in, so a body cut short can be resumed.
            spec.onResponseHead = { status, headers in
                guard (200..<300).contains(status), let tag = headers["etag"] ?? headers["last-modified"] else { return }
                try? Data(tag.utf8).write(to: validatorFile)
            }
            let request = spec
            let outcome = try await withProgress(of: file, observe) { await self.transport.perform(request) }
            let now = Self.size(of: file)
            if now > have { tries.progressed() }
            switch try classify(outcome, key: key, file: file) {
            case .answer(let response) where response.status == 206:
                guard Self.continues(response.headers["content-range"], from: have, total: size) else {
                    // A range we did not ask for was appended: what is there is unusable.
                    try Self.startOver(file, validatorFile)
                    continue
                }
                if Self.size(of: file) >= size { return }
                try await shortAnswer(&tries, response, had: have, file: file, size: size, key: key, observe)
            case .answer(let response) where (200..<300).contains(response.status):
                if !response.spooled, response.bodyBytes == 0 {
                    // An empty body never opens the spool file.
                    try Self.startOver(file, validatorFile)
                    FileManager.default.createFile(atPath: file.path, contents: nil)
                }
                if Self.size(of: file) >= size { return }
                try await shortAnswer(&tries, response, had: have, file: file, size: size, key: key, observe)
            case .answer(let response) where response.status == 416:
                // The bytes held are not a prefix the server can continue.
                try Self.startOver(file, validatorFile)
            case .answer(let response):
                throw final(response, key: key)
            case .retry(let status, let reason, let retryAfter):
                let wait = try tries.delay(status: status, reason: reason, retryAfter: retryAfter, url: shown(key))
                observe(.retrying(afterSeconds: wait, reason: reason))
                try await sleep(Duration.clamped(seconds: wait))
            }
            observe(.bytes(Self.size(of: file)))
        }
    }

    /// A complete answer that left the file short: the next try continues
    /// it, and an answer that brought nothing new counts as a failed try.
    private func shortAnswer(
        _ tries: inout Tries, _ response: HTTPResponse, had: Int64, file: URL, size: Int64, key: String,
        _ observe: @Sendable (DownloadObservation) -> Void
    ) async throws {
        let now = Self.size(of: file)
        guard now <= had else { return }
        let reason = "the answer ended at byte \(now) of \(size)"
        let wait = try tries.delay(status: response.status, reason: reason, retryAfter: nil, url: shown(key))
        observe(.retrying(afterSeconds: wait, reason: reason))
        try await sleep(Duration.clamped(seconds: wait))
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

    /// Whether `Content-Range: bytes a-b/total` continues a file of `have` bytes of `total`.
    static func continues(_ header: String?, from have: Int64, total: Int64) -> Bool {
        guard let header, header.lowercased().hasPrefix("bytes ") else { return false }
        let spec = header.dropFirst("bytes ".count)
        let parts = spec.split(separator: "/")
        guard parts.count == 2, let dash = parts[0].firstIndex(of: "-"),
            let start = Int64(parts[0][..<dash].trimmingCharacters(in: .whitespaces))
        else { return false }
        let whole = parts[1].trimmingCharacters(in: .whitespaces)
        return start == have && (whole == "*" || Int64(whole) == total)
    }

    static func size(of file: URL) -> Int64 { InstallFolder.size(of: file) }

    static func startOver(_ file: URL, _ validatorFile: URL) throws {
        try AtomicFile.remove(file)
        try AtomicFile.remove(validatorFile)
    }
}

/// The tries of one key: how many failed since the last progress, and when the count began.
struct Tries {
    let retry: RetryPolicy
    private var failures = 0
    private var since = ContinuousClock.now

    init(_ retry: RetryPolicy) { self.retry = retry }

    /// A try brought new bytes: the next failure is the first again.
    mutating func progressed() {
        failures = 0
        since = .now
    }

    /// How long to wait before the next try; `unreachable` when the tries or the deadline are spent.
    mutating func delay(status: Int?, reason: String, retryAfter: Double?, url: String) throws -> Double {
        failures += 1
        let wait = retry.delay(afterFailedAttempts: failures, retryAfter: retryAfter)
        if failures >= retry.maxAttempts || since.duration(to: .now).seconds + wait > retry.deadlineSeconds {
            throw SiteSourceFailure(
                .unreachable, url: url, status: status, reason: "\(reason); gave up after \(failures) tr\(failures == 1 ? "y" : "ies")")
        }
        return wait
    }

    mutating func wait(
        status: Int?, reason: String, retryAfter: Double?, url: String, sleep: @Sendable (Duration) async throws -> Void
    ) async throws {
        let wait = try delay(status: status, reason: reason, retryAfter: retryAfter, url: url)
        try await sleep(Duration.clamped(seconds: wait))
    }
}

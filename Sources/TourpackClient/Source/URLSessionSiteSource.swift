package import Foundation
import TourpackPackage

#if canImport(FoundationNetworking)
package import FoundationNetworking
#endif

/// A site served over HTTP(S), read with `URLSession`, as the app reads it.
///
/// - The catalogue is asked for with `If-None-Match` (or
///   `If-Modified-Since`); a 304 costs one small exchange.
/// - A file streams straight to disk, one chunk at a time, so memory does
///   not grow with its size. It resumes: a file that holds N bytes is asked
///   for with `Range: bytes=N-` and `If-Range` on the validator its first
///   bytes came with. A 206 must continue exactly at N (`Content-Range`);
///   a 200 starts the file over.
/// - Every answer is bounded: a file by the size its signed package.json
///   names, the catalogue and a package.json by `objectCap`.
/// - 408, 429, 5xx, a connection cut short, a wrong `Content-Range`, a try
///   slower than `minimumBytesPerSecond` over its window: each is a failed
///   try, tried again with full-jitter backoff (honouring `Retry-After`).
///   The count starts afresh only after bytes that could be kept, and the
///   file fails after `maximumAttempts` or its deadline.
///
/// The base URL may carry a query (a CDN token): it is kept on every
/// request and left out of every message, as is any user info.
package final class URLSessionSiteSource: SiteSource, @unchecked Sendable {
    private let base: String
    private let query: String?
    private let session: URLSession
    private let router: TaskRouter
    package let policy: TransferPolicy

    /// The largest catalogue or package.json read into memory.
    /// The most a whole object (the catalogue, a root, a package.json) may
    /// send before the transfer is stopped: the catalogue's cap, the largest of them.
    package static let objectCap = CatalogReader.maximumCatalogBytes

    /// - Parameter configuration: the app's (its tests may serve a site in
    ///   process through `protocolClasses`); a copy is used, with the
    ///   library's caching, timeouts and connection limit. Which network a
    ///   download may use is the app's library's decision (`NetworkMonitoring`),
    ///   so the session itself may use any.
    package init(base url: URL, policy: TransferPolicy = TransferPolicy(), configuration given: URLSessionConfiguration? = nil) {
        (base, query) = SiteLayout.address(url.absoluteString)
        self.policy = policy
        let configuration = (given?.copy() as? URLSessionConfiguration) ?? URLSessionConfiguration.ephemeral
        configuration.allowsCellularAccess = true
        #if canImport(Darwin)
        configuration.allowsExpensiveNetworkAccess = true
        configuration.allowsConstrainedNetworkAccess = true
        configuration.waitsForConnectivity = false
        #endif
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.urlCache = nil
        configuration.timeoutIntervalForRequest = max(policy.rateWindowSeconds, 15)
        configuration.httpMaximumConnectionsPerHost = 4
        router = TaskRouter()
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        queue.name = "tourpack.client.session"
        session = URLSession(configuration: configuration, delegate: router, delegateQueue: queue)
    }

    deinit { session.invalidateAndCancel() }

    package var location: String { Secret.redacting(url: base) }

    private func url(_ key: String) -> URL? {
        let encoded = key.split(separator: "/", omittingEmptySubsequences: false).map {
            String($0).addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(CharacterSet(charactersIn: "/?#")))
                ?? String($0)
        }.joined(separator: "/")
        return URL(string: base + "/" + encoded + (query.map { "?" + $0 } ?? ""))
    }

    private func shown(_ key: String) -> String { Secret.redacting(url: base + "/" + key) }

    // MARK: Whole objects

    package func catalog(unlessStill version: CatalogVersion?) async throws -> CatalogRead {
        var headers: [String: String] = [:]
        if let etag = version?.etag {
            headers["If-None-Match"] = etag
        } else if let lastModified = version?.lastModified {
            headers["If-Modified-Since"] = lastModified
        }
        let answer = try await whole(SiteLayout.catalog, headers: headers, expecting: [200, 304], cap: Self.objectCap, what: "catalogue")
        if answer.status == 304 { return .notModified }
        return .fetched(
            bytes: answer.body, version: CatalogVersion(etag: answer.headers["etag"], lastModified: answer.headers["last-modified"]))
    }

    package func object(_ key: String) async throws -> [UInt8]? {
        do {
            return try await whole(key, headers: [:], expecting: [200], cap: Self.objectCap, what: "object").body
        } catch let failure as SiteSourceFailure where failure.kind == .missing {
            return nil
        }
    }

    private func whole(_ key: String, headers: [String: String], expecting: Set<Int>, cap: Int, what: String) async throws -> Answer {
        var tries = TransferTries(policy)
        while true {
            let outcome = try await perform(key, headers: headers, sink: .memory(cap: cap, what: what))
            switch try classify(outcome, key: key) {
            case .answer(let answer) where expecting.contains(answer.status):
                return answer
            case .answer(let answer):
                throw final(answer, key: key)
            case .retry(let status, let reason, let retryAfter):
                let wait = try tries.delay(status: status, reason: reason, retryAfter: retryAfter, url: shown(key))
                try await Task.sleep(for: .seconds(wait))
            }
        }
    }

    // MARK: Files

    package func download(
        _ key: String, into file: URL, size: Int64, observe: @escaping @Sendable (DownloadObservation) -> Void
    ) async throws {
        // The file's bookkeeping (sizes, the validator, a start over) is file
        // work: each step of it runs on `Blocking`'s queue, off the cooperative pool.
        let (policy, shown) = (self.policy, self.shown(key))
        var resumable = try await Blocking.run { ResumableDownload(file: file, size: size, policy: policy, url: shown) }
        while let attempt = try await Self.next(&resumable) {
            observe(.bytes(attempt.have))
            let sink = Sink.file(attempt, observe: observe)
            let outcome = try await perform(
                key, headers: Dictionary(attempt.headers.map { ($0.name, $0.value) }) { $1 }, sink: sink, deadline: resumable.secondsLeft)
            let ending: ResumableDownload.Ending
            switch try classify(outcome, key: key) {
            case .answer(let answer) where (200..<300).contains(answer.status):
                ending = .ended(status: answer.status)
            case .answer(let answer) where answer.status == 416:
                ending = .unsatisfiable
            case .answer(let answer):
                throw final(answer, key: key)
            case .retry(let status, let reason, let retryAfter):
                ending = .failed(status: status, reason: reason, retryAfter: retryAfter)
            }
            guard let retry = try await Self.settle(&resumable, ending) else { return }
            observe(.retrying(afterSeconds: retry.seconds, reason: retry.reason))
            try await Task.sleep(for: .seconds(retry.seconds))
            observe(.bytes(try await Blocking.run { InstallFolder.size(of: file) }))
        }
    }

    private static func next(_ resumable: inout ResumableDownload) async throws -> ResumeTry? {
        let held = resumable
        let (after, attempt) = try await Blocking.run {
            var copy = held
            let attempt = try copy.nextTry()
            return (copy, attempt)
        }
        resumable = after
        return attempt
    }

    private static func settle(_ resumable: inout ResumableDownload, _ ending: ResumableDownload.Ending) async throws
        -> ResumableDownload.Retry?
    {
        let held = resumable
        let (after, retry) = try await Blocking.run {
            var copy = held
            let retry = try copy.settle(ending)
            return (copy, retry)
        }
        resumable = after
        return retry
    }

    // MARK: One exchange

    /// Where an answer's body goes.
    enum Sink: Sendable {
        /// Into memory, refusing more than `cap` bytes.
        case memory(cap: Int, what: String)
        /// The file of one try: appended to when the answer continues it,
        /// from byte 0 when it is a 200 (`ResumeTry.accept`); never past its size.
        case file(ResumeTry, observe: @Sendable (DownloadObservation) -> Void)
    }

    /// A server's answer: its status, headers (lowercased names), the body
    /// when it went to memory (or an error's first bytes), and whether the
    /// bytes written to a file belong there.
    struct Answer: Sendable {
        var status: Int
        var headers: [String: String]
        var body: [UInt8]
        var sinkAccepted: Bool
    }

    enum Outcome: Sendable {
        case answered(Answer)
        case failed(Failure)
    }

    struct Failure: Error, Sendable {
        enum Kind: Sendable {
            /// Worth another try: a connection cut, a stall, a wrong range.
            case retryable
            /// An answer longer than its bound.
            case tooLong
            case storage(path: String)
        }
        var kind: Kind
        var reason: String
        var status: Int?
        var sinkAccepted: Bool
    }

    private func perform(_ key: String, headers: [String: String], sink: Sink, deadline: Double? = nil) async throws -> Outcome {
        guard let url = url(key) else {
            throw SiteSourceFailure(.refused, url: shown(key), reason: "not a URL this device can ask for")
        }
        var request = URLRequest(url: url)
        request.httpMethod = "GET"
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let receiver = Receiver(sink: sink, policy: policy, deadline: deadline ?? policy.fileDeadlineSeconds)
        let task = session.dataTask(with: request)
        router.register(receiver, for: task.taskIdentifier)
        return try await withTaskCancellationHandler {
            let outcome = await withCheckedContinuation { continuation in
                receiver.start(task: task, continuation: continuation)
            }
            router.remove(task.taskIdentifier)
            try Task.checkCancellation()
            return outcome
        } onCancel: {
            task.cancel()
        }
    }

    // MARK: Answers

    private enum Classified {
        case answer(Answer)
        case retry(status: Int?, reason: String, retryAfter: Double?)
    }

    private func classify(_ outcome: Outcome, key: String) throws -> Classified {
        switch outcome {
        case .answered(let answer):
            switch answer.status {
            case 408, 429, 500, 502, 503, 504:
                return .retry(
                    status: answer.status, reason: Self.message(answer.body), retryAfter: Self.retryAfter(answer.headers["retry-after"]))
            default:
                return .answer(answer)
            }
        case .failed(let failure):
            switch failure.kind {
            case .retryable:
                return .retry(status: failure.status, reason: failure.reason, retryAfter: nil)
            case .tooLong:
                throw SiteSourceFailure(.refused, url: shown(key), status: failure.status, reason: failure.reason)
            case .storage(let path):
                throw SiteSourceFailure(
                    .storage(path: path, reason: failure.reason), url: shown(key), status: failure.status, reason: failure.reason)
            }
        }
    }

    private func final(_ answer: Answer, key: String) -> SiteSourceFailure {
        let kind: SiteSourceFailure.Kind = answer.status == 404 || answer.status == 410 ? .missing : .refused
        return SiteSourceFailure(kind, url: shown(key), status: answer.status, reason: Self.message(answer.body))
    }

    /// Up to 200 printable characters of an error body.
    static func message(_ body: [UInt8]) -> String {
        let text = String(decoding: body.prefix(400), as: UTF8.self)
        let cleaned = String(text.unicodeScalars.map { $0.properties.generalCategory == .control ? " " : Character($0) })
            .split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ")
        if cleaned.isEmpty { return "no message" }
        return cleaned.count > 200 ? String(cleaned.prefix(200)) + "…" : cleaned
    }

    /// `Retry-After` in seconds (a number; an HTTP date is taken as absent).
    static func retryAfter(_ header: String?) -> Double? {
        header.flatMap { Double($0.trimmingCharacters(in: .whitespaces)) }.flatMap { $0 >= 0 && $0.isFinite ? $0 : nil }
    }
}

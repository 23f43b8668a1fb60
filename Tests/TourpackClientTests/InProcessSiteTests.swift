import Foundation
import Testing
import TourpackClient
import TourpackClientTesting
import TourpackTesting

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// An app's tests of its offline screens, as an app writes them: the
/// library's public API, a network set by hand, and a published site
/// served in process (`InProcessSite`): no server, no port. The second
/// half checks the site itself through a URLSession of the test's own
/// (a delegate-based data task, as the library's), so that what
/// swift-corelibs-foundation does with a custom `URLProtocol` is seen,
/// not assumed.
@Suite(.offThePool) struct InProcessSiteTests {
    /// A site published from what `add` puts in a new fixture, served in process.
    static func published<Tours>(_ add: (SiteFixture) throws -> Tours) async throws -> (SiteFixture, InProcessSite, Tours) {
        let fixture = try SiteFixture()
        let tours = try add(fixture)
        try await fixture.publish()
        return (fixture, InProcessSite(folder: fixture.site), tours)
    }

    static func library(
        _ fixture: SiteFixture, _ site: InProcessSite, network: ManualNetworkMonitor = ManualNetworkMonitor(.wifi),
        policy: DownloadPolicy = DownloadPolicy()
    ) throws -> OfflineLibrary {
        OfflineLibrary(
            documents: fixture.documents(), site: site.url, trust: try .publicKey(base64: fixture.publicKeyBase64), policy: policy,
            network: network, configuration: site.configuration)
    }

    /// The site's key of the blob that holds `data`.
    static func blob(_ data: Data) -> String {
        let digest = SiteFixture.sha256(data)
        return "/blobs/sha256/\(digest.prefix(2))/\(digest)"
    }

    static func size(_ fixture: SiteFixture, _ path: String) throws -> Int64 {
        Int64(try Data(contentsOf: fixture.site.appendingPathComponent(String(path.dropFirst()))).count)
    }

    // MARK: The app's tests

    @Test func refreshDownloadPlayAndA304ThenNoSignal() async throws {
        let (fixture, site, alps) = try await Self.published {
            try $0.addTour(name: "Alps", formats: [.aac], files: 3, bytes: 90_000, pack: 50_000, captions: true)[0]
        }
        let tour = try #require(UUID(uuidString: alps.tourId))
        // Two tries per request, so that no signal fails in one backoff.
        let library = try Self.library(fixture, site, policy: DownloadPolicy(maximumAttempts: 2))

        let first = try await library.refreshCatalog()
        #expect(first.tours.map(\.name) == ["Alps"] && !first.notModified)
        let catalogSize = try Self.size(fixture, "/catalog.json")
        let fetchedCatalog = try #require(site.requests.first)
        #expect(fetchedCatalog.method == "GET" && fetchedCatalog.path == "/catalog.json")
        #expect(fetchedCatalog.status == 200 && fetchedCatalog.bytesSent == catalogSize)

        site.resetLog()
        var last: DownloadJob?
        for try await job in library.download(tourId: tour) { last = job }
        #expect(last?.status == .completed)
        guard case .downloaded(let installed) = await library.state(of: tour) else { Issue.record("not downloaded"); return }
        #expect(installed.damagedFiles == 0)
        // Every narration plays, byte for byte the one published.
        let published = try fixture.files(of: alps)
        for (poi, path) in zip(alps.poiIds, alps.audioPaths) {
            let poi = try #require(UUID(uuidString: poi))
            let audio = try #require(await library.audioFile(tourId: tour, poiId: poi, phase: .detailed))
            #expect(try Data(contentsOf: audio) == published[path], "\(path)")
        }
        // Each blob once, whole, and nothing asked twice.
        let blobs = site.requests.filter { $0.path.hasPrefix("/blobs/") }
        #expect(blobs.allSatisfy { $0.status == 200 }, "\(blobs.map { ($0.path, $0.status) })")
        for blob in blobs { #expect(blob.bytesSent == (try Self.size(fixture, blob.path)), "\(blob.path)") }
        #expect(blobs.reduce(0) { $0 + $1.bytesSent } == Int64(try fixture.payloadBytes(of: alps)))
        #expect(Set(site.requests.map(\.path)).count == site.requests.count, "\(site.requests.map(\.path))")

        // The second refresh is a 304 on the catalogue's ETag.
        site.resetLog()
        let second = try await library.refreshCatalog()
        #expect(second.notModified && second.generation == first.generation)
        let conditional = try #require(site.requests.first)
        #expect(site.requests.count == 1 && conditional.path == "/catalog.json")
        #expect(conditional.status == 304 && conditional.bytesSent == 0)
        #expect(conditional.headers["if-none-match"]?.isEmpty == false)

        // No signal: the refresh fails, the catalogue and the installed tour stay.
        site.resetLog()
        site.isReachable = false
        do {
            _ = try await library.refreshCatalog()
            Issue.record("a refresh with the site unreachable succeeded")
        } catch let error as OfflineError {
            #expect(error.kind == .networkUnavailable, "\(error)")
        }
        #expect(site.requests.count == 2 && site.requests.allSatisfy { $0.status == nil && $0.bytesSent == 0 })
        #expect(await library.catalog == second)
        let poi = try #require(UUID(uuidString: alps.poiIds[0]))
        #expect(await library.audioFile(tourId: tour, poiId: poi, phase: .detailed) != nil)
        guard case .downloaded = await library.state(of: tour) else { Issue.record("the installed tour was lost offline"); return }

        // Back in reach: a 304 again.
        site.isReachable = true
        #expect(try await library.refreshCatalog().notModified)
    }

    @Test func aBlobMadeToFailLeavesTheTourFailedUntilRetried() async throws {
        let (fixture, site, lakes) = try await Self.published {
            try $0.addTour(name: "Lakes", formats: [.opus], files: 3, bytes: 20_000)[0]
        }
        let tour = try #require(UUID(uuidString: lakes.tourId))
        let library = try Self.library(fixture, site)
        _ = try await library.refreshCatalog()
        let broken = Self.blob(try #require(try fixture.files(of: lakes)[lakes.audioPaths[1]]))
        site.fail(path: broken, status: 404)
        do {
            for try await _ in library.download(tourId: tour) {}
            Issue.record("a download with a missing blob completed")
        } catch let error as OfflineError {
            #expect(error.recoverySuggestion?.isEmpty == false)
        }
        guard case .failed(let job, _) = await library.state(of: tour) else { Issue.record("not failed"); return }
        #expect(job.status == .failed)
        let failed = site.requests.filter { $0.path == broken }
        #expect(!failed.isEmpty && failed.allSatisfy { $0.status == 404 }, "\(site.requests.map { ($0.path, $0.status) })")
        #expect(site.requests.filter { $0.path.hasPrefix("/blobs/") && $0.path != broken }.allSatisfy { $0.status == 200 })

        // The blob is back: the download is asked for again and completes.
        site.restore(path: broken)
        await library.dismissFailure(tourId: tour)
        var last: DownloadJob?
        for try await job in library.download(tourId: tour) { last = job }
        #expect(last?.status == .completed)
        #expect(site.requests.last { $0.path == broken }?.status == 200)
    }

    @Test func aCutAnswerResumesWithRangeAndIfRange() async throws {
        let (fixture, site, alps) = try await Self.published {
            try $0.addTour(name: "Alps", formats: [.aac], files: 2, bytes: 150_000)[0]
        }
        let tour = try #require(UUID(uuidString: alps.tourId))
        let library = try Self.library(fixture, site)
        _ = try await library.refreshCatalog()
        site.resetLog()
        site.cut(path: "blobs/", afterBytes: 64_000)
        var last: DownloadJob?
        for try await job in library.download(tourId: tour) { last = job }
        #expect(last?.status == .completed)
        let published = try fixture.files(of: alps)
        for (poi, path) in zip(alps.poiIds, alps.audioPaths) {
            let poi = try #require(UUID(uuidString: poi))
            let audio = try #require(await library.audioFile(tourId: tour, poiId: poi, phase: .detailed))
            #expect(try Data(contentsOf: audio) == published[path])
        }
        // Each blob: a 200 cut at 64,000 bytes, then 206s from where it stopped, on its ETag.
        let blob = Self.blob(try #require(published[alps.audioPaths[0]]))
        let tries = site.requests.filter { $0.path == blob }
        let size = try Self.size(fixture, blob)
        #expect(tries.first?.status == 200 && tries.first?.headers["range"] == nil)
        #expect(tries.count == Int((size + 63_999) / 64_000), "\(tries.map { ($0.status, $0.bytesSent) })")
        var offset: Int64 = 0
        for (index, exchange) in tries.enumerated() {
            if index > 0 { #expect(exchange.status == 206 && exchange.headers["range"] == "bytes=\(offset)-") }
            #expect(exchange.bytesSent == min(64_000, size - offset))
            offset += exchange.bytesSent
        }
        #expect(offset == size)
        let etag = try #require(try await Exchange.run(site, blob).header("ETag"))
        #expect(tries.dropFirst().allSatisfy { $0.headers["if-range"] == etag }, "\(tries.map(\.headers))")
    }

    // MARK: The site, through a URLSession of the test's own

    @Test func aDelegateSessionGetsTheHeadThePiecesAndTheEnd() async throws {
        let (fixture, site, big) = try await Self.published {
            try $0.addTour(name: "Big", formats: [.opus], files: 1, bytes: 1_000_000)[0]
        }
        let body = try #require(try fixture.files(of: big)[big.audioPaths[0]])
        let blob = Self.blob(body)

        let whole = try await Exchange.run(site, blob)
        #expect(whole.error == nil && whole.status == 200 && !whole.outOfOrder)
        #expect(whole.body == body)
        // In pieces of 64 KiB at most, never the file at once.
        #expect(whole.pieces.count >= body.count / 65_536 && whole.pieces.max() ?? 0 <= 65_536, "\(whole.pieces)")
        #expect(whole.header("Content-Length") == "\(body.count)" && whole.header("Accept-Ranges") == "bytes")
        let etag = try #require(whole.header("ETag"))
        #expect(try await Exchange.run(site, blob).header("ETag") == etag, "the ETag is not stable")

        let resumed = try await Exchange.run(site, blob, ["Range": "bytes=400000-", "If-Range": etag])
        #expect(resumed.status == 206 && resumed.body == body.dropFirst(400_000))
        #expect(resumed.header("Content-Range") == "bytes 400000-\(body.count - 1)/\(body.count)")
        let unconditional = try await Exchange.run(site, blob, ["Range": "bytes=10-19"])
        #expect(unconditional.status == 206 && unconditional.body == body[10..<20])
        let stale = try await Exchange.run(site, blob, ["Range": "bytes=400000-", "If-Range": "\"another\""])
        #expect(stale.status == 200 && stale.body == body)
        let past = try await Exchange.run(site, blob, ["Range": "bytes=\(body.count)-", "If-Range": etag])
        #expect(past.status == 416 && past.header("Content-Range") == "bytes */\(body.count)")

        let unchanged = try await Exchange.run(site, blob, ["If-None-Match": etag])
        #expect(unchanged.status == 304 && unchanged.body.isEmpty)
        #expect(try await Exchange.run(site, blob, ["If-None-Match": "\"another\""]).status == 200)

        let missing = try await Exchange.run(site, "/blobs/sha256/00/nothing")
        #expect(missing.status == 404 && String(decoding: missing.body, as: UTF8.self).contains("not found"))
        #expect(try await Exchange.run(site, "/../etc/passwd").status == 404)

        site.fail(path: "/catalog.json", status: 503)
        let unavailable = try await Exchange.run(site, "/catalog.json")
        #expect(unavailable.status == 503 && !unavailable.body.isEmpty)
        site.restoreAll()
        #expect(
            try await Exchange.run(site, "/catalog.json").body
                == (try Data(contentsOf: fixture.site.appendingPathComponent("catalog.json"))))

        site.isReachable = false
        let offline = try await Exchange.run(site, "/catalog.json")
        #expect(
            offline.status == nil && (offline.error as? URLError)?.code == .notConnectedToInternet, "\(String(describing: offline.error))")
    }

    @Test func aSuspendedTaskContinuesWhereItWas() async throws {
        let (fixture, site, big) = try await Self.published {
            try $0.addTour(name: "Big", formats: [.opus], files: 1, bytes: 2_000_000)[0]
        }
        let body = try #require(try fixture.files(of: big)[big.audioPaths[0]])
        // Suspended after its first piece, resumed 200 ms later: the body whole, once.
        let exchange = try await Exchange.run(site, Self.blob(body), suspendAfterFirstPiece: true)
        #expect(exchange.error == nil && exchange.status == 200 && !exchange.outOfOrder)
        #expect(exchange.body.count == body.count && exchange.body == body)
        #expect(site.requests.count == 1 && site.requests[0].bytesSent == Int64(body.count))
    }

    @Test func aSiteThatIsGoneIsAHostNotFoundAndTwoSitesNeverMix() async throws {
        let (fixture, site, _) = try await Self.published { try $0.addTour(name: "One", formats: [.opus], files: 1, bytes: 1_000) }
        let other = InProcessSite(folder: fixture.work)
        #expect(site.url.host != other.url.host)
        #expect(try await Exchange.run(other, "/catalog.json").status == 404)
        #expect(site.requests.isEmpty && other.requests.count == 1)

        var gone: InProcessSite? = InProcessSite(folder: fixture.site)
        let configuration = try #require(gone).configuration
        let url = try #require(gone).url
        gone = nil
        let answer = try await Exchange.run(configuration, url.appendingPathComponent("catalog.json"), [:], suspendAfterFirstPiece: false)
        #expect((answer.error as? URLError)?.code == .cannotFindHost, "\(String(describing: answer.error))")
    }
}

/// One request through a URLSession of the test's own with a delegate, as
/// the library's sessions have: what the delegate was told, in order.
final class Exchange: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    private let lock = NSLock()
    private var response: HTTPURLResponse?
    private(set) var pieces: [Int] = []
    private(set) var body = Data()
    private(set) var error: (any Error)?
    /// A head after the body, a piece before the head or after the end, or two ends.
    private(set) var outOfOrder = false
    private var finished = false
    private var continuation: CheckedContinuation<Void, Never>?
    private let suspends: Bool

    private init(suspends: Bool) { self.suspends = suspends }

    var status: Int? { lock.withLock { response?.statusCode } }
    func header(_ name: String) -> String? { lock.withLock { response?.value(forHTTPHeaderField: name) } }

    static func run(
        _ site: InProcessSite, _ path: String, _ headers: [String: String] = [:], suspendAfterFirstPiece: Bool = false
    ) async throws -> Exchange {
        let url = try #require(URL(string: site.url.absoluteString + path))
        return try await run(site.configuration, url, headers, suspendAfterFirstPiece: suspendAfterFirstPiece)
    }

    static func run(
        _ configuration: URLSessionConfiguration, _ url: URL, _ headers: [String: String], suspendAfterFirstPiece: Bool
    ) async throws -> Exchange {
        let exchange = Exchange(suspends: suspendAfterFirstPiece)
        let session = URLSession(configuration: configuration, delegate: exchange, delegateQueue: nil)
        defer { session.finishTasksAndInvalidate() }
        var request = URLRequest(url: url)
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let task = session.dataTask(with: request)
        await withCheckedContinuation { continuation in
            exchange.lock.withLock { exchange.continuation = continuation }
            task.resume()
            // An exchange that never ends fails the test (cancelled), rather than hanging it.
            let running = Suspended(task: task)
            DispatchQueue.global().asyncAfter(deadline: .now() + 20) { running.task.cancel() }
        }
        return exchange
    }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping (URLSession.ResponseDisposition) -> Void
    ) {
        lock.withLock {
            if self.response != nil || !pieces.isEmpty { outOfOrder = true }
            self.response = response as? HTTPURLResponse
        }
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        let first = lock.withLock {
            if response == nil || self.error != nil || finished { outOfOrder = true }
            pieces.append(data.count)
            body.append(data)
            return pieces.count == 1
        }
        if first, suspends {
            dataTask.suspend()
            let task = Suspended(task: dataTask)
            DispatchQueue.global().asyncAfter(deadline: .now() + 0.2) { task.task.resume() }
        }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let continuation = lock.withLock {
            if finished { outOfOrder = true }
            finished = true
            self.error = error
            defer { self.continuation = nil }
            return self.continuation
        }
        continuation?.resume()
    }
}

/// A task resumed or cancelled from another queue (corelibs' tasks are not `Sendable`).
private struct Suspended: @unchecked Sendable {
    let task: URLSessionTask
}

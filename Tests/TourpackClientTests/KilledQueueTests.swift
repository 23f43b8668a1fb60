import Foundation
import Testing
import TourpackTesting

#if canImport(Glibc)
import Glibc
#endif

/// An app killed at random instants mid-download, as a phone's OS kills
/// one, and started again by a background task that only calls
/// `resumeDownloads()`: the download completes, with at most 1.1× the
/// package's bytes fetched in all (what was verified, or merely written,
/// before each kill is never fetched again).
@Suite(.serialized, .offThePool) struct KilledQueueTests {
    @Test func killedAtRandomInstantsAndResumedByABackgroundTaskFetchesAtMost1Point1Times() async throws {
        let (fixture, server, package) = try await OfflineLibraryTests.served {
            try $0.addTour(name: "Alps", formats: [.aac], files: 6, bytes: 400_000, captions: true)[0]
        }
        defer { server.stop() }
        let documents = fixture.documents()
        let site = [server.base, documents.path, fixture.publicKeyBase64]
        // About four seconds of download (four files at a time, 150 kB/s each), so the kills land in it.
        server.inject { _, _, path, _ in path.hasPrefix("/blobs/") ? .throttle(bytesPerSecond: 150_000) : nil }
        server.resetLog()
        var seeds = SystemRandomNumberGenerator()
        // The app starts the download; then background tasks resume it; each is killed.
        var process = try KilledLibraryTests.runExample(site + [package.tourId])
        for round in 1...3 {
            try await Task.sleep(for: .milliseconds(Int.random(in: 200...1_000, using: &seeds)))
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            let seen = SiteFixture.appView(documents, manifestPath: "OfflineTours/\(package.packageId)/package.json")
            if !seen.isEmpty {
                #expect(seen == (try fixture.files(of: package)), "round \(round): a package half installed")
                break
            }
            if round < 3 { process = try KilledLibraryTests.runExample(["--resume"] + site) }
        }
        let said = fixture.work.appendingPathComponent("last-start.txt")
        let last = try KilledLibraryTests.runExample(["--resume"] + site, output: said)
        last.waitUntilExit()
        #expect(last.terminationStatus == 0, "\((try? String(contentsOf: said, encoding: .utf8)) ?? "")")
        #expect(
            SiteFixture.appView(documents, manifestPath: "OfflineTours/\(package.packageId)/package.json")
                == (try fixture.files(of: package)),
            "the package, whole, after the background task")
        let whole = try fixture.payloadBytes(of: package)
        let fetched = server.bodyBytesDelivered
        #expect(fetched >= whole, "fewer bytes than the package: the count proves nothing")
        print("KilledQueueTests: fetched \(fetched) bytes in all for a package of \(whole) (\(Double(fetched) / Double(whole))×)")
        let log = server.requests.map { "\($0.path.suffix(12)) \($0.headers["range"] ?? "-") \($0.status) \($0.bodyBytes)" }
        #expect(Double(fetched) <= 1.1 * Double(whole), "fetched \(fetched) bytes in all for a package of \(whole): \(log)")
    }
}

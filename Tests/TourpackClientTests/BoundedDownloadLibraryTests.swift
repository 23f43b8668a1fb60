import Foundation
import Testing
import TourpackClient
import TourpackTesting

/// The library's downloads (URLSession) against a hostile or slow site over
/// loopback, through the public API only: a wrong `Content-Range` and cut
/// answers, and a 1 B/s trickle, each end in `networkUnavailable` within the
/// policy's tries or deadline; the lock is released (the next download
/// works), `downloads` holds only files a plan names, and `validate` passes.
@Suite(.serialized, .offThePool) struct BoundedDownloadLibraryTests {
    static func names(in documents: URL) -> [String] {
        let folder = documents.appendingPathComponent(".tourpack-install/downloads")
        return (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
    }

    /// The names in downloads that are not a file of `package` (whole, `.part`, or a part's `.validator`).
    static func unnamed(_ documents: URL, _ fixture: SiteFixture, _ package: SiteFixture.Package) throws -> [String] {
        let named = Set(try fixture.files(of: package).values.map { SiteFixture.sha256($0) })
        return names(in: documents).filter { name in
            !named.contains { name == $0 || name == "\($0).part" || name == "\($0).part.validator" }
        }
    }

    /// `validate` finds what it found on the package installed before, and nothing more (`ValidateFindings`).
    static func expectValid(_ documents: URL, as before: [String]) throws {
        let found = try ValidateFindings.of(documents)
        #expect(found == before, "validate: new findings \(Set(found).subtracting(before).sorted())")
        #expect(!found.contains { $0.contains(".tourpack-install") || $0.contains(".part") }, "\(found)")
    }

    /// A library with `package`'s tour downloaded, then an update of two of its files published:
    /// the library, the updated package, and what validate finds on the installed one.
    static func installedThenUpdated(
        _ fixture: SiteFixture, _ server: SiteServer, _ package: SiteFixture.Package, policy: DownloadPolicy
    ) async throws -> (OfflineLibrary, SiteFixture.Package, [String]) {
        let library = try OfflineLibraryTests.library(fixture, server, policy: policy)
        _ = try await library.refreshCatalog()
        let first = try await OfflineLibraryTests.download(library, OfflineLibraryTests.tourId(package))
        try #require(first.last?.status == .completed)
        let findings = try ValidateFindings.of(fixture.documents())
        for index in 0..<2 { _ = try fixture.changeFile(of: fixture.package(package.packageId), index: index) }
        try await fixture.publish()
        _ = try await library.refreshCatalog()
        return (library, fixture.package(package.packageId), findings)
    }

    @Test(arguments: ["wrongRange", "ignoredRange"])
    func cutAnswersAndAWrongContentRangeFailWithinTheTriesAndReleaseTheLock(_ hostile: String) async throws {
        let fault: SiteServer.Fault = hostile == "wrongRange" ? .wrongRange : .ignoreRangeAndCut(fraction: 0.3)
        let (fixture, server, original) = try await OfflineLibraryTests.served {
            try $0.addTour(name: "Alps", formats: [.aac], files: 3, bytes: 60_000)[0]
        }
        defer { server.stop() }
        let (library, package, findings) = try await Self.installedThenUpdated(
            fixture, server, original, policy: DownloadPolicy(maximumAttempts: 3))
        let tour = OfflineLibraryTests.tourId(package)
        let documents = fixture.documents()
        let stray = documents.appendingPathComponent(".tourpack-install/downloads/\(String(repeating: "cd", count: 32))")
        try Data("left over".utf8).write(to: stray)

        server.inject { _, _, path, headers in
            guard path.hasPrefix("/blobs/") else { return nil }
            return headers["range"] != nil ? fault : .cut(fraction: 0.5)
        }
        server.resetLog()
        do {
            _ = try await OfflineLibraryTests.download(library, tour)
            Issue.record("a download from a hostile site succeeded")
        } catch let error as OfflineError {
            #expect(error.kind == .networkUnavailable, "\(error)")
            if fault == .wrongRange { #expect(error.message.contains("Content-Range"), "\(error)") }
        }
        let blobs = server.requests.filter { $0.path.hasPrefix("/blobs/") }
        let perFile = Dictionary(grouping: blobs, by: \.path).mapValues(\.count)
        #expect(!perFile.isEmpty && perFile.values.allSatisfy { $0 <= 3 }, "requests per file: \(perFile)")
        #expect(blobs.contains { $0.fault == fault }, "no range was asked for: the test proved nothing")
        #expect(!FileManager.default.fileExists(atPath: stray.path), "a download no plan names was not swept")
        #expect(try Self.unnamed(documents, fixture, package).isEmpty, "\(Self.names(in: documents))")
        try Self.expectValid(documents, as: findings)

        // The lock is free: the same library downloads the update once the site behaves.
        server.inject { _, _, _, _ in nil }
        let jobs = try await OfflineLibraryTests.download(library, tour)
        #expect(jobs.last?.status == .completed)
        #expect(Self.names(in: documents).isEmpty, "\(Self.names(in: documents))")
    }

    @Test func aOneByteASecondTrickleIsGivenUpByTheFilesDeadline() async throws {
        let (fixture, server, original) = try await OfflineLibraryTests.served {
            try $0.addTour(name: "Lakes", formats: [.opus], files: 2, bytes: 30_000)[0]
        }
        defer { server.stop() }
        let policy = DownloadPolicy(minimumBytesPerSecond: 0, fileDeadline: 5, maximumAttempts: 50)
        let (library, package, findings) = try await Self.installedThenUpdated(fixture, server, original, policy: policy)
        let tour = OfflineLibraryTests.tourId(package)
        server.inject { _, _, path, _ in path.hasPrefix("/blobs/") ? .trickle(interval: 1) : nil }
        let started = ContinuousClock.now
        do {
            _ = try await OfflineLibraryTests.download(library, tour)
            Issue.record("a trickled download succeeded")
        } catch let error as OfflineError {
            #expect(error.kind == .networkUnavailable, "\(error)")
            #expect(error.message.contains("deadline"), "\(error)")
        }
        let elapsed = started.duration(to: .now)
        #expect(elapsed < .seconds(90), "gave up after \(elapsed)")
        let documents = fixture.documents()
        #expect(try Self.unnamed(documents, fixture, package).isEmpty, "\(Self.names(in: documents))")
        try Self.expectValid(documents, as: findings)
        server.inject { _, _, _, _ in nil }
        let jobs = try await OfflineLibraryTests.download(library, tour)
        #expect(jobs.last?.status == .completed)
    }
}

import Foundation
import Testing
import TourpackClient
import TourpackTesting

#if canImport(Glibc)
import Glibc
#endif

/// Playing before the download ends, through the public API: what a
/// killed download verified plays in the next process and is not fetched
/// again; an update never shows a mix of versions; the POIs the app names
/// go first.
@Suite(.serialized, .offThePool) struct EarlyPlayTests {
    static func sha256(_ data: Data) -> String { SiteFixture.sha256(data) }

    /// Each narration of the package: its POI and the file's SHA-256, in route order.
    static func narrations(_ package: SiteFixture.Package) -> [(poi: UUID, sha256: String)] {
        ((package.json["audio"] as? [[String: Any]]) ?? []).map {
            (UUID(uuidString: $0["poiId"] as! String)!, $0["sha256"] as! String)
        }
    }

    @Test func aKilledFirstDownloadsVerifiedNarrationsPlayInTheNextProcessAndAreNotFetchedAgain() async throws {
        let (fixture, server, package) = try await OfflineLibraryTests.served {
            try $0.addTour(name: "Alps", formats: [.aac], files: 8, bytes: 150_000, captions: true)[0]
        }
        defer { server.stop() }
        let documents = fixture.documents()
        let narrations = Self.narrations(package)
        let tour = OfflineLibraryTests.tourId(package)
        // About 1.2 MB at 400 kB/s: a kill after a second lands with some narrations verified and others not.
        server.inject { _, _, path, _ in path.hasPrefix("/blobs/") ? .link(bytesPerSecond: 400_000) : nil }
        let downloads = documents.appendingPathComponent(".tourpack-install/downloads")
        let process = try KilledLibraryTests.runExample([server.base, documents.path, fixture.publicKeyBase64, package.tourId])
        var verified: [(poi: UUID, sha256: String)] = []
        // Up to 15 s: the example's start-up is slow on a loaded machine.
        for _ in 0..<600 {
            try await Task.sleep(for: .milliseconds(25))
            verified = narrations.filter { FileManager.default.fileExists(atPath: downloads.appendingPathComponent($0.sha256).path) }
            if verified.count >= 2 { break }
        }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        verified = narrations.filter { FileManager.default.fileExists(atPath: downloads.appendingPathComponent($0.sha256).path) }
        try #require(verified.count >= 2 && verified.count < narrations.count, "verified \(verified.count) of \(narrations.count)")

        // A new process (this one): the verified narrations play before any resume, and nothing else does.
        let library = try OfflineLibraryTests.library(fixture, server)
        for narration in narrations {
            let url = await library.audioFile(tourId: tour, poiId: narration.poi, phase: .detailed)
            if verified.contains(where: { $0.sha256 == narration.sha256 }) {
                let file = try #require(url, "a narration verified before the kill does not play")
                #expect(Self.sha256(try Data(contentsOf: file)) == narration.sha256)
            } else if let url {
                // Arrived after the listing above, in the killed process's last instant: it must be whole and right.
                #expect(Self.sha256(try Data(contentsOf: url)) == narration.sha256)
            }
        }
        guard case .queued = await library.state(of: tour) else { Issue.record("the queue forgot the download"); return }

        try await server.quiesce()
        server.inject { _, _, _, _ in nil }
        server.resetLog()
        #expect(await library.resumeDownloads() == [tour])
        let state = try await PhoneLifeTests.until(library, tour) { if case .downloaded = $0 { return true } else { return false } }
        guard case .downloaded = state else { Issue.record("not downloaded: \(state)"); return }
        let asked = Set(server.requests.map { String($0.path.split(separator: "/").last ?? "") })
        for narration in verified { #expect(!asked.contains(narration.sha256), "a verified narration was fetched again") }
        #expect(
            SiteFixture.appView(documents, manifestPath: "OfflineTours/\(package.packageId)/package.json")
                == (try fixture.files(of: package)))
    }

    @Test func duringAnUpdateTheInstalledVersionPlaysUntilTheNewOneIsCommittedWhole() async throws {
        let (fixture, server, package) = try await OfflineLibraryTests.served {
            try $0.addTour(name: "Lakes", formats: [.aac], files: 6, bytes: 100_000)[0]
        }
        defer { server.stop() }
        let library = try OfflineLibraryTests.library(fixture, server)
        let tour = OfflineLibraryTests.tourId(package)
        _ = try await library.refreshCatalog()
        _ = try await OfflineLibraryTests.download(library, tour)
        let old = Self.narrations(package)
        for index in 0..<6 { _ = try fixture.changeFile(of: fixture.package(package.packageId), index: index) }
        try await fixture.publish()
        let new = Self.narrations(fixture.package(package.packageId))
        _ = try await library.refreshCatalog()

        server.inject { _, _, path, _ in path.hasPrefix("/blobs/") ? .link(bytesPerSecond: 600_000) : nil }
        let update = Task { try await OfflineLibraryTests.download(library, tour) }
        // Each poll reads every narration; a narration never goes back from new to old, and
        // until the update completes, no narration of the new version plays beside one of the old.
        var sawNew = Array(repeating: false, count: old.count)
        var pollsBeforeCommit = 0
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            var versions: [String] = []
            for (index, narration) in old.enumerated() {
                guard let url = await library.audioFile(tourId: tour, poiId: narration.poi, phase: .detailed) else {
                    Issue.record("narration \(index) did not play during the update")
                    continue
                }
                let digest = Self.sha256(try Data(contentsOf: url))
                let version = digest == narration.sha256 ? "old" : (digest == new[index].sha256 ? "new" : "neither")
                #expect(version != "neither", "narration \(index) is neither version")
                #expect(!(sawNew[index] && version == "old"), "narration \(index) went back to the old version")
                if version == "new" { sawNew[index] = true }
                versions.append(version)
            }
            if versions.allSatisfy({ $0 == "old" }) { pollsBeforeCommit += 1 }
            if sawNew.allSatisfy({ $0 }) { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        let jobs = try await update.value
        #expect(jobs.last?.status == .completed)
        #expect(pollsBeforeCommit > 3, "the update was never seen before its commit: the test proved nothing")
        #expect(jobs.allSatisfy { $0.playable.isEmpty }, "an update's narrations are not playable before its commit")
    }

    @Test func prioritizedPOIsGoFirst() async throws {
        let (fixture, server, package) = try await OfflineLibraryTests.served {
            // Narrations of 140 kB or more: large enough that the first goes alone.
            try $0.addTour(name: "Coast", formats: [.opus], files: 10, bytes: 140_000, pack: 50_000)[0]
        }
        defer { server.stop() }
        let library = try OfflineLibraryTests.library(fixture, server)
        let tour = OfflineLibraryTests.tourId(package)
        let narrations = Self.narrations(package)
        _ = try await library.refreshCatalog()
        server.inject { _, _, path, _ in path.hasPrefix("/blobs/") ? .link(bytesPerSecond: 1_000_000) : nil }
        // The traveller is nearest the last two POIs, the ninth first.
        let wanted = [narrations[8].poi, narrations[9].poi]
        await library.prioritize(tourId: tour, poiIds: wanted)
        let jobs = try await OfflineLibraryTests.download(library, tour)
        #expect(jobs.last?.status == .completed)
        let blobs = server.requests.filter { $0.path.hasPrefix("/blobs/") }.map { String($0.path.split(separator: "/").last ?? "") }
        let order = narrations.map(\.sha256)
        // The ninth POI's narration goes first, alone; the tenth in the next four (fetched together),
        // with the route's first POI and the map; the route's eighth POI not before them.
        #expect(blobs.first == order[8], "\(blobs)")
        let next = Set(blobs.dropFirst().prefix(4))
        let map = (package.json["mapTiles"] as? [String: Any])?["sha256"] as? String
        #expect(next == Set([order[9], order[0], order[1]] + [map].compactMap { $0 }), "\(blobs)")
        let playable = jobs.last?.playable.map(\.poiId) ?? []
        #expect(playable.count == 10 && playable.first == narrations[8].poi, "\(playable)")
    }
}

import Foundation
import Testing
import TourpackClient
import TourpackPackage
import TourpackTesting

/// A commit killed among its renames (the journal written, the tour's audio
/// folder swapped, package.json not yet renamed) is what the disk holds
/// until an install replays it. The app's library, asked for a file then,
/// finishes that commit under the root's lock and hands out the new
/// version, whole: never the old package.json's view of new files.
@Suite(.offThePool) struct KilledCommitLibraryTests {
    @Test func aFileAskedForAfterAKillMidCommitFinishesTheCommitAndIsTheNewVersion() async throws {
        let fixture = try SiteFixture()
        let package = try fixture.addTour(name: "Alps", formats: [.aac], files: 3, bytes: 30_000)[0]
        try await fixture.publish()
        let server = try SiteServer(root: fixture.site)
        defer { server.stop() }
        let documents = fixture.documents()
        let tour = try #require(UUID(uuidString: package.tourId))
        let site = try #require(URL(string: server.base))
        func library() throws -> OfflineLibrary {
            OfflineLibrary(documents: documents, site: site, trust: try .publicKey(base64: fixture.publicKeyBase64))
        }
        do {
            let first = try library()
            _ = try await first.refreshCatalog()
            for try await _ in first.download(tourId: tour) {}
        }

        // Version 2: every narration changes, and its size with it.
        for index in 0..<3 { _ = try fixture.changeFile(of: fixture.package(package.packageId), index: index) }
        try await fixture.publish()
        let new = fixture.package(package.packageId)
        let audio = try #require(new.json["audio"] as? [[String: Any]])

        // The commit as a kill leaves it: next folder made, journal written, folders exchanged.
        let live = documents.appendingPathComponent("AudioCache/\(package.tourId)", isDirectory: true)
        let next = documents.appendingPathComponent("AudioCache/.\(package.tourId).next-1", isDirectory: true)
        try FileManager.default.createDirectory(at: next, withIntermediateDirectories: false)
        for path in new.audioPaths {
            try FileManager.default.copyItem(
                at: fixture.source.appendingPathComponent(path), to: next.appendingPathComponent((path as NSString).lastPathComponent))
        }
        let state = documents.appendingPathComponent(".tourpack-install")
        let manifestPath = "OfflineTours/\(package.packageId)/package.json"
        let temp = state.appendingPathComponent("staging/.package.json.tmp-killed")
        try FileManager.default.createDirectory(at: temp.deletingLastPathComponent(), withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: fixture.source.appendingPathComponent(manifestPath), to: temp)
        let attributes = try FileManager.default.attributesOfItem(atPath: live.path)
        let inode = try #require(attributes[.systemFileNumber] as? Int)
        let journal = CommitJournal(
            tourId: package.tourId,
            moves: [CommitJournal.Move(from: temp.path, to: documents.appendingPathComponent(manifestPath).path)], removals: [],
            swap: CommitJournal.FolderSwap(live: live.path, next: next.path, liveInode: UInt64(inode)))
        let journals = CommitJournal.folder(state: state)
        try FileManager.default.createDirectory(at: journals, withIntermediateDirectories: true)
        try JSONEncoder().encode(journal).write(to: journals.appendingPathComponent("\(package.tourId).json"))
        #expect(try AtomicFile.exchange(next, with: live, under: documents), "this file system has no exchange")

        let relaunched = try library()
        for entry in audio {
            let poiId = try #require(entry["poiId"] as? String)
            let poi = try #require(UUID(uuidString: poiId))
            let url = try #require(
                await relaunched.audioFile(tourId: tour, poiId: poi, phase: .detailed), "narration \(poi) was not handed out")
            #expect(PackageFiles.sha256(try Data(contentsOf: url)) == entry["sha256"] as? String, "\(url.lastPathComponent)")
        }
        #expect(
            SiteFixture.appView(documents, manifestPath: manifestPath) == (try fixture.files(of: new)),
            "the commit was not finished whole")
        #expect(try FileManager.default.contentsOfDirectory(atPath: journals.path).isEmpty, "the journal is still there")
    }
}

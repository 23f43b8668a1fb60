import Foundation
import Testing
import TourpackClient
import TourpackCore
import TourpackTesting

#if canImport(Glibc)
import Glibc
#endif

/// The phone's storage seam (`DeviceStorage`: backup exclusion, file
/// protection) is called for every folder and file the library creates. On
/// Linux it does nothing, so a recording one stands in for it here; the
/// library's `package` initializer takes it.
@Suite(.offThePool) struct DeviceStorageTests {
    /// The inodes handed to the seam, taken when each call is made.
    final class Recorder: @unchecked Sendable {
        private let lock = NSLock()
        private(set) var protected: Set<UInt64> = []
        private(set) var excluded: [String] = []

        static func inode(_ url: URL) -> UInt64? {
            var info = stat()
            return lstat(url.path, &info) == 0 ? UInt64(info.st_ino) : nil
        }

        var storage: DeviceStorage {
            DeviceStorage(
                excludeFromBackup: { url in self.lock.withLock { self.excluded.append(url.standardizedFileURL.path) } },
                protect: { url in
                    guard let inode = Self.inode(url) else { return }
                    _ = self.lock.withLock { self.protected.insert(inode) }
                },
                availableBytes: { _ in 10_000_000_000 })
        }

        var protectedInodes: Set<UInt64> { lock.withLock { protected } }
        var excludedPaths: [String] { lock.withLock { excluded } }
    }

    /// Every folder and file under `root`, as paths relative to it.
    static func tree(_ root: URL) -> [String] {
        guard let walker = FileManager.default.enumerator(atPath: root.path) else { return [] }
        return walker.compactMap { $0 as? String }.sorted()
    }

    @Test func everyFolderAndFileTheLibraryCreatesGoesThroughTheSeam() async throws {
        let fixture = try SiteFixture()
        let package = try fixture.addTour(name: "Alps", formats: [.aac], files: 3, bytes: 20_000, pack: 30_000, captions: true)[0]
        try await fixture.publish()
        let server = try SiteServer(root: fixture.site)
        defer { server.stop() }
        let recorder = Recorder()
        let documents = fixture.documents()
        let library = OfflineLibrary(
            documents: documents, site: URL(string: server.base)!, trust: try .publicKey(base64: fixture.publicKeyBase64),
            policy: DownloadPolicy(), network: SystemNetworkMonitor(), configuration: nil, storage: recorder.storage, now: { Date() })
        _ = try await library.refreshCatalog()
        let tour = UUID(uuidString: package.tourId)!
        for try await _ in library.download(tourId: tour) {}
        // A download kept as failed: the queue is written.
        let missing = UUID()
        await #expect(throws: OfflineError.self) { for try await _ in library.download(tourId: missing) {} }
        await library.markAccessed(tourId: tour)
        // Plays are written a moment later: wait for the access log.
        let access = documents.appendingPathComponent(".tourpack-install/access.json")
        for _ in 0..<100 where !FileManager.default.fileExists(atPath: access.path) { try await Task.sleep(for: .milliseconds(50)) }
        try await Task.sleep(for: .milliseconds(200))

        let tree = Self.tree(documents)
        #expect(tree.contains { $0.hasPrefix("AudioCache/") } && tree.contains { $0.hasSuffix(".vtt") })
        #expect(tree.contains(".tourpack-install/access.json") && tree.contains(".tourpack-install/queue.json"), "\(tree)")
        let protected = recorder.protectedInodes
        let missed = tree.filter { path in
            guard let inode = Recorder.inode(documents.appendingPathComponent(path)) else { return false }
            return !protected.contains(inode)
        }
        #expect(missed.isEmpty, "not handed to the seam: \(missed)")
        let excluded = Set(recorder.excludedPaths)
        for folder in ["AudioCache", "OfflineTours", ".tourpack-install"] {
            #expect(
                excluded.contains(documents.appendingPathComponent(folder).standardizedFileURL.path), "\(folder) not excluded from backup")
        }

        // Again at open: a new library on the folder excludes the three once more.
        let before = recorder.excludedPaths.count
        let reopened = OfflineLibrary(
            documents: documents, site: URL(string: server.base)!, trust: try .publicKey(base64: fixture.publicKeyBase64),
            policy: DownloadPolicy(), network: SystemNetworkMonitor(), configuration: nil, storage: recorder.storage, now: { Date() })
        _ = await reopened.state(of: tour)
        #expect(recorder.excludedPaths.count == before + 3)
    }
}

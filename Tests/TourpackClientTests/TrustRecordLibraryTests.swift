import Foundation
import Testing
import TourpackClient
import TourpackTesting

/// Issue 48's three findings through the app's library (`import
/// TourpackClient`, never `@testable`), over loopback HTTP and URLSession:
/// the same answers as `tourpack install` gives (`TrustRecordAttackTests`).
@Suite(.offThePool) struct TrustRecordLibraryTests {
    /// The refusal `body` throws, as the app sees it.
    static func refusal(_ body: () async throws -> Void) async -> OfflineError? {
        do {
            try await body()
            return nil
        } catch {
            return error as? OfflineError
        }
    }

    static func download(_ library: OfflineLibrary, _ package: SiteFixture.Package) async throws -> DownloadJob? {
        var last: DownloadJob?
        for try await job in library.download(tourId: UUID(uuidString: package.tourId)!) { last = job }
        return last
    }

    @Test("A leaked key rotated out loses the generation it pushed 10,000 ahead, without a signedBy")
    func aRevokedKeysFarAheadGenerationIsForgotten() async throws {
        let fixture = try SiteFixture()
        let tour = try fixture.addTour(name: "Alps", formats: [.aac], files: 2, bytes: 6_000)
        let trust = try await TrustSite(fixture)
        try await fixture.publish()
        let server = try SiteServer(root: fixture.site)
        defer { server.stop() }
        let library = OfflineLibrary(
            documents: fixture.documents(), site: URL(string: server.base)!, trust: try TrustAnchor(rootJSON: try trust.pinnedBytes))
        #expect(try await library.refreshCatalog().generation == 1)

        let honest = try trust.live()
        try trust.forge(generation: 10_001, key: fixture.key, signedBy: nil)
        #expect(try await library.refreshCatalog().generation == 10_001)

        try trust.restore(honest)
        let newKey = TrustSite.newCatalogKey()
        try await trust.rotate(to: [newKey])
        try fixture.changeFile(of: tour[0])
        try await trust.publish(signedWith: newKey)
        try fixture.changeFile(of: fixture.package(tour[0].packageId))
        #expect(try await trust.publish(signedWith: newKey) == 3)
        #expect(try await library.refreshCatalog().generation == 3)
        #expect(try await Self.download(library, tour[0])?.status == .completed)

        // A replay of generation 2 is still a replay.
        try fixture.replay(generation: 2)
        let replayed = await Self.refusal { _ = try await library.refreshCatalog() }
        #expect(replayed?.kind == .rollbackRefused, "\(String(describing: replayed))")
    }

    @Test("Int.max in trust.json, in a catalogue and in the app's root: numbers, never a trap")
    func intMaxIsANumber() async throws {
        let fixture = try SiteFixture()
        try fixture.addTour(name: "Lakes", formats: [.aac], files: 2, bytes: 5_000)
        let trust = try await TrustSite(fixture)
        try await fixture.publish()
        let server = try SiteServer(root: fixture.site)
        defer { server.stop() }
        let site = URL(string: server.base)!

        let documents = fixture.documents()
        let library = OfflineLibrary(documents: documents, site: site, trust: try TrustAnchor(rootJSON: try trust.pinnedBytes))
        _ = try await library.refreshCatalog()
        let honest = try trust.live()
        try TrustSite.setRememberedGeneration(Int.max, in: documents)
        try trust.forge(generation: Int.max, key: fixture.key, signedBy: fixture.key.keyId)
        #expect(try await library.refreshCatalog().generation == Int.max)
        try trust.restore(honest)
        #expect(await Self.refusal { _ = try await library.refreshCatalog() }?.kind == .rollbackRefused)

        // The app pins a root of version Int.max: no root follows it, and its catalogue key signs.
        let pinned = OfflineLibrary(
            documents: fixture.documents("Pinned"), site: site, trust: try TrustAnchor(rootJSON: try trust.pinnableRoot(version: Int.max)))
        #expect(try await pinned.refreshCatalog().generation == 1)
    }

    @Test("A damaged trust.json refuses refreshes and downloads, the replay too, until the app resets it")
    func aDamagedRecordRefusesUntilReset() async throws {
        let fixture = try SiteFixture()
        let tour = try fixture.addTour(name: "Lakes", formats: [.aac], files: 2, bytes: 5_000)
        try await fixture.publish()
        try fixture.changeFile(of: tour[0])
        try await fixture.publish()
        let server = try SiteServer(root: fixture.site)
        defer { server.stop() }
        let documents = fixture.documents()
        let anchor = try TrustAnchor.publicKey(base64: fixture.publicKeyBase64)
        let library = OfflineLibrary(documents: documents, site: URL(string: server.base)!, trust: anchor)
        #expect(try await library.refreshCatalog().generation == 2)

        try Data([0xFF, 0x00, 0x7B]).write(to: TrustSite.trustFile(documents))
        try fixture.replay(generation: 1)
        for attempt in ["refresh", "download", "a second library's refresh"] {
            let refused = await Self.refusal {
                switch attempt {
                case "refresh": _ = try await library.refreshCatalog()
                case "download": _ = try await Self.download(library, fixture.package(tour[0].packageId))
                default:
                    let second = OfflineLibrary(documents: documents, site: URL(string: server.base)!, trust: anchor)
                    _ = try await second.refreshCatalog()
                }
            }
            #expect(refused?.kind == .integrityFailed, "\(attempt): \(String(describing: refused))")
            #expect(refused?.file == ".tourpack-install/trust.json", "\(attempt)")
            #expect(
                refused?.description.contains(".tourpack-install/trust.json is damaged") == true,
                "\(attempt): \(String(describing: refused))")
            #expect(refused?.description.contains("resetTrust()") == true)
            #expect(try Data(contentsOf: TrustSite.trustFile(documents)) == Data([0xFF, 0x00, 0x7B]), "\(attempt) rewrote it")
        }
        #expect(await library.installed().isEmpty)

        // The user confirms: the site's catalogue is taken as a new device takes it, and protection is back.
        try await library.resetTrust()
        #expect(try await library.refreshCatalog().generation == 1)
        try fixture.replay(generation: 2)
        #expect(try await library.refreshCatalog().generation == 2)
        #expect(try await Self.download(library, fixture.package(tour[0].packageId))?.status == .completed)
        try fixture.replay(generation: 1)
        #expect(await Self.refusal { _ = try await library.refreshCatalog() }?.kind == .rollbackRefused)
    }
}

import Foundation
import Testing
import TourpackCore
import TourpackTesting

/// Issue 48's three findings, replayed from outside against `tourpack
/// install` over loopback HTTP: a leaked key rotated out that still froze
/// a device, numbers near `Int.max` that trapped the process, and a
/// damaged `trust.json` that silently switched rollback protection off.
/// `TrustRecordLibraryTests` replays them through the library.
@Suite(.serialized, .offThePool) struct TrustRecordAttackTests {
    static func run(_ arguments: [String]) throws -> Executable.Result {
        try Executable.run(arguments, environment: ["TOURPACK_NOW": ""])
    }

    /// Whether the catalogue line names `generation` as the one installed from.
    static func installed(from generation: Int, _ result: Executable.Result) -> Bool {
        (result.stdout + result.stderr).contains("catalogue generation \(generation) ")
    }

    /// What the leaked key's catalogue says of its signer.
    enum Claim: String, CaseIterable, CustomTestStringConvertible, Sendable {
        /// No `signedBy` at all.
        case absent
        /// `signedBy` names the new key, which a mirror that hid the rotation let it know.
        case theNewKey

        var testDescription: String { rawValue }
    }

    @Test("A leaked key rotated out loses what it signed far ahead, whatever its catalogue claims", arguments: Claim.allCases)
    func revokedKeysFarAheadGenerationIsForgotten(_ claim: Claim) async throws {
        let fixture = try SiteFixture()
        let tour = try fixture.addTour(name: "Alps", formats: [.aac], files: 2, bytes: 6_000)
        let trust = try await TrustSite(fixture)
        try await fixture.publish()
        let server = try SiteServer(root: fixture.site)
        defer { server.stop() }
        let device = fixture.documents()
        var result = try Self.run(["install", server.base, "--into", device.path, "--all", "--root", trust.pinned.path])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        let honest = try trust.live()
        let newKey = SigningKey.generate()

        // The leaked key signs generation 1 + 10,000. For the claim of the new key, the
        // publisher has rotated already, and the mirror hides roots/2.json from the device.
        if claim == .theNewKey {
            try await trust.rotate(to: [newKey])
            try trust.hideRoot(2)
        }
        try trust.forge(generation: 10_001, key: fixture.key, signedBy: claim == .theNewKey ? newKey.keyId : nil)
        result = try Self.run(["install", server.base, "--into", device.path, "--all"])
        #expect(result.status == 0 && Self.installed(from: 10_001, result), "the device took the leak: \(result.stdout)\(result.stderr)")

        // The real site: the key rotated out (root 2 names only the new key), then two publishes with the new key.
        try trust.restore(honest)
        if claim == .theNewKey { try trust.hideRoot(2, hidden: false) } else { try await trust.rotate(to: [newKey]) }
        try fixture.changeFile(of: tour[0])
        #expect(try await trust.publish(signedWith: newKey) == 2)
        try fixture.changeFile(of: fixture.package(tour[0].packageId))
        #expect(try await trust.publish(signedWith: newKey) == 3)
        result = try Self.run(["install", server.base, "--into", device.path, "--all"])
        #expect(!result.signalled)
        #expect(result.status == 0, "the revoked key's generation 10,001 still counts: \(result.stdout)\(result.stderr)")
        #expect(Self.installed(from: 3, result), "\(result.stdout)\(result.stderr)")

        // The record keeps the key that verified generation 3, and a replay of generation 2 is still refused.
        let record = try String(contentsOf: TrustSite.trustFile(device), encoding: .utf8)
        #expect(record.contains(newKey.keyId) && !record.contains("signedBy"), "\(record)")
        try trust.replay(generation: 2)
        result = try Self.run(["install", server.base, "--into", device.path, "--all"])
        #expect(result.status == 1 && result.stderr.contains("rollbackRefused"), "\(result.stdout)\(result.stderr)")
        try await TrustAttackTests.expectValid(device)
    }

    @Test("A trust.json an older tourpack wrote still reads; its signedBy claim is not believed")
    func anOldRecordIsMigratedWithoutItsClaim() async throws {
        let fixture = try SiteFixture()
        let tour = try fixture.addTour(name: "Alps", formats: [.aac], files: 2, bytes: 6_000)
        let trust = try await TrustSite(fixture)
        try await fixture.publish()
        let server = try SiteServer(root: fixture.site)
        defer { server.stop() }
        let device = fixture.documents()
        var result = try Self.run(["install", server.base, "--into", device.path, "--all", "--root", trust.pinned.path])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        let honest = try trust.live()
        try trust.forge(generation: 10_001, key: fixture.key, signedBy: nil)
        result = try Self.run(["install", server.base, "--into", device.path, "--all"])
        #expect(result.status == 0 && Self.installed(from: 10_001, result), "\(result.stdout)\(result.stderr)")

        // As the first trust work wrote it: schema 1, the catalogue's signedBy (here none), no verifiedBy.
        let file = TrustSite.trustFile(device)
        var record = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: file)) as? [String: Any])
        record["schemaVersion"] = 1
        record["verifiedBy"] = nil
        record["signedBy"] = nil
        try JSONSerialization.data(withJSONObject: record, options: [.sortedKeys, .prettyPrinted]).write(to: file)

        // It reads: the remembered anchor still installs, and a replay below 10,001 is refused.
        try trust.restore(honest)
        result = try Self.run(["install", server.base, "--into", device.path, "--all"])
        #expect(result.status == 1 && result.stderr.contains("older than generation 10001"), "\(result.stdout)\(result.stderr)")
        // Read as verified by root 1's catalogue keys: once root 2 names none of them, 10,001 is forgotten.
        let newKey = SigningKey.generate()
        try await trust.rotate(to: [newKey])
        try fixture.changeFile(of: tour[0])
        #expect(try await trust.publish(signedWith: newKey) == 2)
        result = try Self.run(["install", server.base, "--into", device.path, "--all"])
        #expect(result.status == 0 && Self.installed(from: 2, result), "\(result.stdout)\(result.stderr)")
        let rewritten = try String(contentsOf: file, encoding: .utf8)
        #expect(rewritten.contains("\"schemaVersion\" : 2") && rewritten.contains(newKey.keyId), "\(rewritten)")
    }

    @Test("A generation or a root version at Int.max is a number, not a trap")
    func intMaxNeverTraps() async throws {
        let fixture = try SiteFixture()
        try fixture.addTour(name: "Lakes", formats: [.aac], files: 2, bytes: 5_000)
        let trust = try await TrustSite(fixture)
        try await fixture.publish()
        let server = try SiteServer(root: fixture.site)
        defer { server.stop() }

        // trust.json holds Int.max, and a validly signed catalogue at Int.max arrives.
        let device = fixture.documents()
        var result = try Self.run(["install", server.base, "--into", device.path, "--all", "--root", trust.pinned.path])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        try TrustSite.setRememberedGeneration(Int.max, in: device)
        let honest = try trust.live()
        try trust.forge(generation: Int.max, key: fixture.key, signedBy: fixture.key.keyId)
        result = try Self.run(["install", server.base, "--into", device.path, "--all"])
        #expect(!result.signalled, "signal \(result.status): \(result.stderr)")
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        // One past it is no generation at all; below it, a replay.
        try trust.restore(honest)
        result = try Self.run(["install", server.base, "--into", device.path, "--all"])
        #expect(!result.signalled && result.status == 1 && result.stderr.contains("rollbackRefused"), "\(result.stdout)\(result.stderr)")

        // A pinned root of version Int.max: there is no root after it to fetch.
        let pinned = fixture.work.appendingPathComponent("max-root.json")
        try trust.pinnableRoot(version: Int.max).write(to: pinned)
        let other = fixture.documents("Pinned")
        result = try Self.run(["install", server.base, "--into", other.path, "--all", "--root", pinned.path])
        #expect(!result.signalled, "signal \(result.status): \(result.stderr)")
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        result = try Self.run(["install", server.base, "--into", other.path, "--all"])
        #expect(!result.signalled && result.status == 0, "\(result.stdout)\(result.stderr)")

        // A catalogue of generation 0, or a package of Int64.max bytes: integrityFailed, naming the field.
        var catalog = try Catalog.decode(honest.catalog)
        catalog.generation = 0
        var bytes = try catalog.encoded()
        try trust.restore((bytes, try fixture.key.sign(bytes)))
        let fresh = fixture.documents("Fresh")
        result = try Self.run(["install", server.base, "--into", fresh.path, "--all", "--root", trust.pinned.path])
        #expect(!result.signalled && result.status == 1 && result.stderr.contains("generation 0"), "\(result.stderr)")
        // (As text: canonical JSON writes numbers past 2^53 as doubles, and whoever forges writes what it likes.)
        bytes = try SiteFixture.setting("sizeBytes", to: "\(Int64.max)", in: honest.catalog)
        try trust.restore((bytes, try fixture.key.sign(bytes)))
        result = try Self.run(["install", server.base, "--into", fresh.path, "--all", "--root", trust.pinned.path])
        #expect(!result.signalled && result.status == 1, "\(result.stdout)\(result.stderr)")
        #expect(result.stderr.contains("tours[0].packages[0].sizeBytes is \(Int64.max)"), "\(result.stderr)")
    }

    @Test("A damaged trust.json refuses every install, the replay too, until --reset-trust forgets it deliberately")
    func damagedRecordRefusesTheReplay() async throws {
        let fixture = try SiteFixture()
        let tour = try fixture.addTour(name: "Lakes", formats: [.aac], files: 2, bytes: 5_000)
        try await fixture.publish()
        try fixture.changeFile(of: tour[0])
        try await fixture.publish()
        let server = try SiteServer(root: fixture.site)
        defer { server.stop() }
        let device = fixture.documents()
        let key = fixture.publicKeyBase64
        var result = try Self.run(["install", server.base, "--into", device.path, "--all", "--public-key", key])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")

        // The disk damages trust.json; a mirror replays generation 1.
        try Data("{\"anchor\": \"publicKey\", \"generation\": ".utf8).write(to: TrustSite.trustFile(device))
        try fixture.replay(generation: 1)
        let before = try TrustAttackTests.tree(device)
        for anchor in [["--public-key", key], []] {
            result = try Self.run(["install", server.base, "--into", device.path, "--all"] + anchor)
            #expect(!result.signalled && result.status == 1, "\(anchor): \(result.stdout)\(result.stderr)")
            #expect(result.stderr.contains(".tourpack-install/trust.json is damaged"), "\(result.stderr)")
            #expect(result.stderr.contains("--reset-trust"), "\(result.stderr)")
            #expect(try TrustAttackTests.tree(device) == before, "a refused install changed the device")
        }
        result = try Self.run(["install", server.base, "--into", device.path, "--all", "--public-key", key, "--json"])
        #expect(result.stdout.contains("integrityFailed") && result.stdout.contains("trust.json is damaged"), "\(result.stdout)")
        result = try Self.run(["install", server.base, "--into", device.path, "--check", "--public-key", key])
        #expect(result.status == 1 && result.stderr.contains("trust.json is damaged"), "\(result.stdout)\(result.stderr)")

        // The recovery is deliberate, and names its anchor.
        result = try Self.run(["install", server.base, "--into", device.path, "--all", "--reset-trust"])
        #expect(result.status == 2 && result.stderr.contains("--public-key KEY or --root FILE"), "\(result.stderr)")
        #expect(try TrustAttackTests.tree(device) == before)
        result = try Self.run(["install", server.base, "--into", device.path, "--all", "--reset-trust", "--public-key", key])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        #expect(result.stderr.contains("warning: --reset-trust"), "\(result.stderr)")
        #expect(Self.installed(from: 1, result), "\(result.stdout)\(result.stderr)")
        // Protection is back: generation 2 is taken, then a replay of 1 refused, with the remembered anchor.
        try fixture.replay(generation: 2)
        result = try Self.run(["install", server.base, "--into", device.path, "--all"])
        #expect(result.status == 0 && Self.installed(from: 2, result), "\(result.stdout)\(result.stderr)")
        try fixture.replay(generation: 1)
        result = try Self.run(["install", server.base, "--into", device.path, "--all"])
        #expect(result.status == 1 && result.stderr.contains("rollbackRefused"), "\(result.stdout)\(result.stderr)")
        try await TrustAttackTests.expectValid(device)
    }
}

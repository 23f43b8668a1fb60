import Foundation
import Testing
import TourpackClient
import TourpackCore
import TourpackKit
import TourpackPublish
import TourpackTesting

/// The Update Framework's attacks on the catalogue, replayed against a
/// site served over loopback HTTP and `tourpack install` run as a device
/// would run it. After each, the Documents folder passes `validate`, and a
/// refused catalogue leaves every byte of it as it was.
@Suite(.serialized, .offThePool) struct TrustAttackTests {
    static func run(_ arguments: [String], now: Date? = nil, environment: [String: String] = [:]) throws -> Executable.Result {
        var environment = environment
        environment["TOURPACK_NOW"] = now.map(PackageManifest.timestamp) ?? ""
        return try Executable.run(arguments, environment: environment)
    }

    /// Every file under `documents` (the install folder included): path → bytes.
    static func tree(_ documents: URL) throws -> [String: Data] {
        var files: [String: Data] = [:]
        let enumerator = FileManager.default.enumerator(at: documents, includingPropertiesForKeys: [.isRegularFileKey])
        while let url = enumerator?.nextObject() as? URL {
            guard (try url.resourceValues(forKeys: [.isRegularFileKey])).isRegularFile == true else { continue }
            files[String(url.path.dropFirst(documents.path.count))] = try Data(contentsOf: url)
        }
        return files
    }

    /// `validate` on the Documents folder: the layout's checks pass (every
    /// file where and what its package.json says, no stray, temp or link)
    /// and nothing of `.tourpack-install` is reported. The fixture's files
    /// are random bytes, so the audio and schema checks are not asked.
    static func expectValid(_ documents: URL, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let report = try await BundleValidator(options: ValidationOptions(strict: true, limits: nil)).validate(root: documents)
        let layout: Set<ValidationCheck> = [.json, .path, .exists, .size, .sha256, .stray, .temporary, .symlink, .packages]
        let problems = report.findings.filter {
            $0.severity == .error && layout.contains($0.check) || $0.path.contains(Layout.installFolder)
        }
        #expect(problems.isEmpty, "\(report.text())", sourceLocation: sourceLocation)
    }

    /// The installed package.json's contentHash of `packageId`.
    static func installedHash(_ documents: URL, _ packageId: String) throws -> String? {
        let url = documents.appendingPathComponent("OfflineTours/\(packageId)/package.json")
        guard let data = FileManager.default.contents(atPath: url.path) else { return nil }
        return (try JSONSerialization.jsonObject(with: data) as? [String: Any])?["contentHash"] as? String
    }

    /// The contentHash the site's catalogue file `name` gives `packageId`.
    static func catalogued(_ fixture: SiteFixture, _ name: String, _ packageId: String) throws -> String? {
        try Catalog.decode(Data(contentsOf: fixture.site.appendingPathComponent(name))).entries
            .first { $0.package.packageId == packageId }?.package.contentHash
    }

    @Test("Rollback: an older signed catalogue is refused with nothing changed; publish --rollback is followed")
    func rollback() async throws {
        let fixture = try SiteFixture()
        let tour = try fixture.addTour(name: "Alps", formats: [.aac], files: 3, bytes: 10_000)
        try await fixture.publish()
        let firstHash = try Self.catalogued(fixture, "catalog.json", tour[0].packageId)
        try fixture.changeFile(of: fixture.package(tour[0].packageId))
        try await fixture.publish()
        let server = try SiteServer(root: fixture.site)
        defer { server.stop() }
        let documents = fixture.documents()
        let key = fixture.publicKeyBase64

        var result = try Self.run(["install", server.base, "--into", documents.path, "--all", "--public-key", key])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        #expect(try Self.installedHash(documents, tour[0].packageId) != firstHash)
        let before = try Self.tree(documents)

        // The mirror replays generation 1 and its own valid signature.
        for name in ["json", "json.sig"] {
            let old = fixture.site.appendingPathComponent("generations/1.\(name)")
            let live = fixture.site.appendingPathComponent("catalog.\(name)")
            try FileManager.default.removeItem(at: live)
            try FileManager.default.copyItem(at: old, to: live)
        }
        result = try Self.run(["install", server.base, "--into", documents.path, "--all", "--public-key", key])
        #expect(result.status == 1, "\(result.stdout)\(result.stderr)")
        #expect(result.stderr.contains("rollbackRefused"), "\(result.stderr)")
        #expect(result.stderr.contains("generation 1, older than generation 2"), "\(result.stderr)")
        #expect(try Self.tree(documents) == before, "a refused catalogue changed the device")
        try await Self.expectValid(documents)

        // Fast-forward: a validly signed catalogue absurdly far ahead is refused too.
        var ahead = try Catalog.decode(Data(contentsOf: fixture.site.appendingPathComponent("generations/2.json")))
        ahead.generation = 2 + CatalogReader.maximumGenerationStep + 1
        let aheadBytes = try ahead.encoded()
        try aheadBytes.write(to: fixture.site.appendingPathComponent("catalog.json"))
        try fixture.key.sign(aheadBytes).write(to: fixture.site.appendingPathComponent("catalog.json.sig"))
        result = try Self.run(["install", server.base, "--into", documents.path, "--all", "--public-key", key])
        #expect(result.status == 1, "\(result.stdout)\(result.stderr)")
        #expect(result.stderr.contains("rollbackRefused") && result.stderr.contains("fast-forward"), "\(result.stderr)")
        #expect(try Self.tree(documents) == before)

        // The mirror is put right (generation 2 in force), then the publisher's deliberate
        // rollback is a new, higher generation: the device follows it.
        for name in ["json", "json.sig"] {
            let live = fixture.site.appendingPathComponent("catalog.\(name)")
            try FileManager.default.removeItem(at: live)
            try FileManager.default.copyItem(at: fixture.site.appendingPathComponent("generations/2.\(name)"), to: live)
        }
        let generation = try await fixture.publisher().rollback(to: 1)
        #expect(generation == 3)
        result = try Self.run(["install", server.base, "--into", documents.path, "--all"])
        #expect(result.status == 0, "remembered anchor, rolled-back content: \(result.stdout)\(result.stderr)")
        #expect(
            result.stderr.contains("catalogue generation \(generation)") || result.stdout.contains("catalogue generation \(generation)"))
        #expect(try Self.installedHash(documents, tour[0].packageId) == firstHash)
        try await Self.expectValid(documents)
    }

    @Test("Freeze: an expired catalogue is refused for downloads while installed packages play; --refresh revives it")
    func expiredCatalogue() async throws {
        let fixture = try SiteFixture()
        let tour = try fixture.addTour(name: "Lakes", formats: [.aac], files: 2, bytes: 8_000)
        let other = try fixture.addTour(name: "Hills", formats: [.mp3], files: 2, bytes: 8_000)
        try await fixture.publish()
        let server = try SiteServer(root: fixture.site)
        defer { server.stop() }
        let documents = fixture.documents()
        let key = fixture.publicKeyBase64

        var result = try Self.run(["install", server.base, "--into", documents.path, "--tour", tour[0].tourId, "--public-key", key])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        let before = try Self.tree(documents)

        // Eight days on, the mirror still serves the same (now expired) catalogue.
        let later = Date().addingTimeInterval(8 * 86_400)
        result = try Self.run(["install", server.base, "--into", documents.path, "--tour", other[0].tourId], now: later)
        #expect(result.status == 1, "\(result.stdout)\(result.stderr)")
        #expect(result.stderr.contains("catalogExpired"), "\(result.stderr)")
        #expect(try Self.tree(documents) == before)
        #expect(
            FileManager.default.fileExists(atPath: documents.appendingPathComponent("OfflineTours/\(other[0].packageId)").path) == false)

        // The installed package keeps playing, and the state says the catalogue is stale.
        let installed = try Self.run(["installed", documents.path, "--json"], now: later)
        let state = try JSONSerialization.jsonObject(with: Data(installed.stdout.utf8)) as? [String: Any]
        #expect((state?["catalog"] as? [String: Any])?["stale"] as? Bool == true, "\(installed.stdout)")
        #expect(try Self.run(["installed", documents.path], now: later).stdout.contains("STALE"))
        let library = OfflineLibrary(
            documents: documents, site: URL(string: server.base)!, trust: try .publicKey(base64: key), now: { later })
        await #expect(throws: OfflineError.self) { try await library.refreshCatalog() }
        do { _ = try await library.refreshCatalog() } catch let error as OfflineError { #expect(error.kind == .catalogExpired) }
        #expect(await library.catalog?.isStale == true)
        let poi = UUID(uuidString: tour[0].poiIds[0])!
        #expect(await library.audioFile(tourId: UUID(uuidString: tour[0].tourId)!, poiId: poi, phase: .detailed) != nil)
        if case .downloaded = await library.state(of: UUID(uuidString: tour[0].tourId)!) {
        } else {
            Issue.record("an installed package of a stale catalogue is still downloaded")
        }
        try await Self.expectValid(documents)

        // The daily job re-signs it with a new expiry: the same generation, accepted.
        let refreshed = try await fixture.publisher(now: later).refresh()
        #expect(refreshed.generation == 1)
        result = try Self.run(["install", server.base, "--into", documents.path, "--tour", other[0].tourId], now: later)
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        try await Self.expectValid(documents)
    }

    @Test("A package past its own expiresAt is never installed")
    func expiredPackage() async throws {
        let fixture = try SiteFixture()
        let tour = try fixture.addTour(name: "Lakes", formats: [.aac], files: 2, bytes: 8_000)
        try await fixture.publish()
        let documents = fixture.documents()
        // 91 days on the package (90 days) has expired; the catalogue is refreshed, so it is fresh.
        let later = Date().addingTimeInterval(91 * 86_400)
        var publisher = fixture.publisher(now: Date())
        publisher.now = { later }
        _ = try await publisher.refresh()
        let result = try Self.run(
            ["install", fixture.site.path, "--into", documents.path, "--tour", tour[0].tourId, "--public-key", fixture.publicKeyBase64],
            now: later)
        #expect(result.status == 1, "\(result.stdout)\(result.stderr)")
        #expect(result.stderr.contains("catalogExpired") && result.stderr.contains("expired at"), "\(result.stderr)")
        #expect(FileManager.default.fileExists(atPath: documents.appendingPathComponent("OfflineTours/\(tour[0].packageId)").path) == false)
    }

    @Test("Key compromise: after a rotation, a catalogue signed by the revoked key is refused; the new key's is accepted from root 1")
    func rotation() async throws {
        let fixture = try SiteFixture()
        let tour = try fixture.addTour(name: "Alps", formats: [.aac], files: 2, bytes: 9_000)
        // `tourpack keys root` writes roots/1.json, and the app's copy.
        let rootKey = SigningKey.generate()
        let secrets = ["TRUST_ROOT_KEY": rootKey.exportBase64()]
        let pinned = fixture.work.appendingPathComponent("root.json")
        var result = try Self.run(
            [
                "keys", "root", "--site", fixture.site.path, "--root-key-env", "TRUST_ROOT_KEY", "--catalog-key", fixture.publicKeyBase64,
                "--out", pinned.path,
            ], environment: secrets)
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        #expect(result.stdout.contains("root of trust version 1") && !result.stdout.contains(rootKey.exportBase64()))
        #expect(try Data(contentsOf: pinned) == Data(contentsOf: fixture.site.appendingPathComponent("roots/1.json")))
        try await fixture.publish()
        let server = try SiteServer(root: fixture.site)
        defer { server.stop() }
        let device = fixture.documents("Device")
        result = try Self.run(["install", server.base, "--into", device.path, "--all", "--root", pinned.path])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")

        // The catalogue key leaks: `tourpack keys rotate` writes root 2 without it.
        let newKey = SigningKey.generate()
        result = try Self.run(
            [
                "keys", "rotate", "--site", fixture.site.path, "--sign-with-env", "TRUST_ROOT_KEY", "--catalog-key",
                newKey.verifyingKey.base64,
            ], environment: secrets)
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        let rootV2 = try RootOfTrust.decode(Data(contentsOf: fixture.site.appendingPathComponent("roots/2.json")))
        #expect(rootV2.version == 2 && rootV2.roles.catalog.keyIds == [newKey.keyId])
        // The publisher refuses to sign with the revoked key…
        await #expect(throws: TourpackError.self) { try await fixture.publisher().refresh() }
        // …but whoever holds it writes a newer catalogue signed by it.
        let live = try Catalog.decode(Data(contentsOf: fixture.site.appendingPathComponent("catalog.json")))
        var forged = live
        forged.generation = 2
        forged.previousGeneration = 1
        forged.expiresAt = Date().addingTimeInterval(30 * 86_400)
        let forgedBytes = try forged.encoded()
        try forgedBytes.write(to: fixture.site.appendingPathComponent("catalog.json"))
        try fixture.key.sign(forgedBytes).write(to: fixture.site.appendingPathComponent("catalog.json.sig"))
        let before = try Self.tree(device)
        result = try Self.run(["install", server.base, "--into", device.path, "--all"])
        #expect(result.status == 1, "\(result.stdout)\(result.stderr)")
        #expect(result.stderr.contains("root version 2 needs 1 valid signature"), "\(result.stderr)")
        #expect(try Self.tree(device).filter { !$0.key.hasSuffix("root.json") } == before.filter { !$0.key.hasSuffix("root.json") })
        try await Self.expectValid(device)

        // The publisher publishes with the new key: a device that only ever held root 1 accepts it, as does the first.
        try fixture.changeFile(of: fixture.package(tour[0].packageId))
        _ = try await fixture.publisher(signingKey: newKey).publish(root: fixture.source)
        let fresh = fixture.documents("Fresh")
        for documents in [device, fresh] {
            result = try Self.run(["install", server.base, "--into", documents.path, "--all", "--root", pinned.path])
            #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
            #expect(try Self.installedHash(documents, tour[0].packageId) == Self.catalogued(fixture, "catalog.json", tour[0].packageId))
            try await Self.expectValid(documents)
        }
        // Python's cryptography checks every root and the catalogue, walking from root 1 as a device does.
        let verdict = try await Tool.runOffThePool("python3", ["-c", Self.pythonWalk, fixture.site.path, pinned.path])
        #expect(verdict.status == 0, "\(verdict.stdout)\(verdict.stderr)")
        #expect(verdict.stdout.contains("root 2 ok") && verdict.stdout.contains("catalog ok \(newKey.keyId)"), "\(verdict.stdout)")
    }

    @Test("Fast-forward recovery: a generation pushed far ahead by a leaked key is forgotten once a rotation revokes that key")
    func fastForwardRecovery() async throws {
        let fixture = try SiteFixture()
        try fixture.addTour(name: "Alps", formats: [.aac], files: 2, bytes: 6_000)
        let rootKey = SigningKey.generate()
        let site = FolderSite(root: fixture.site)
        let root = try await RootPublisher(site: site).create(
            rootKeys: [rootKey], rootThreshold: 1, catalogKeys: [fixture.key.verifyingKey], catalogThreshold: 1)
        let pinned = fixture.work.appendingPathComponent("root.json")
        try root.encoded().write(to: pinned)
        try await fixture.publish()
        let server = try SiteServer(root: fixture.site)
        defer { server.stop() }
        let device = fixture.documents()
        let live = fixture.site.appendingPathComponent("catalog.json")
        let honest = try (Data(contentsOf: live), Data(contentsOf: live.appendingPathExtension("sig")))

        // With the leaked key, a mirror serves generation 5,000: within the step, so the device takes it.
        var ahead = try Catalog.decode(honest.0)
        ahead.generation = 5_000
        let aheadBytes = try ahead.encoded()
        try aheadBytes.write(to: live)
        try fixture.key.sign(aheadBytes).write(to: live.appendingPathExtension("sig"))
        var result = try Self.run(["install", server.base, "--into", device.path, "--all", "--root", pinned.path])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")

        // The real site: generation 1 again, then the key is rotated out and generation 2 published with the new one.
        try honest.0.write(to: live)
        try honest.1.write(to: live.appendingPathExtension("sig"))
        let newKey = SigningKey.generate()
        _ = try await RootPublisher(site: site).rotate(
            signers: [rootKey], rootKeys: nil, rootThreshold: nil, catalogKeys: [newKey.verifyingKey], catalogThreshold: 1)
        try fixture.changeFile(of: fixture.packages[0])
        let outcome = try await fixture.publisher(signingKey: newKey).publish(root: fixture.source)
        #expect(outcome.generation == 2)
        result = try Self.run(["install", server.base, "--into", device.path, "--all"])
        #expect(result.status == 0, "the revoked key's generation 5,000 no longer counts: \(result.stdout)\(result.stderr)")
        try await Self.expectValid(device)
    }

    /// A device's walk, in Python: from the pinned root, each roots/<n>.json
    /// signed by a threshold of the previous root's root keys and of its own;
    /// then catalog.json by a threshold of the last root's catalogue keys.
    static let pythonWalk = """
        import base64, hashlib, json, os, sys
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
        site, pinned = sys.argv[1], sys.argv[2]
        def signers(root, role, data, document):
            sigs = document.get("signatures", [document])
            good = set()
            for s in sigs:
                kid = s["keyId"]
                if kid not in root["roles"][role]["keyIds"]: continue
                raw = base64.b64decode(root["keys"][kid]["publicKey"])
                assert hashlib.sha256(raw).hexdigest()[:16] == kid
                try:
                    Ed25519PublicKey.from_public_bytes(raw).verify(base64.b64decode(s["signature"]), data); good.add(kid)
                except InvalidSignature: pass
            return good
        root = json.load(open(pinned))
        while os.path.exists(f"{site}/roots/{root['version'] + 1}.json"):
            path = f"{site}/roots/{root['version'] + 1}.json"
            data = open(path, "rb").read(); doc = json.load(open(path + ".sig")); new = json.loads(data)
            assert new["version"] == root["version"] + 1
            assert len(signers(root, "root", data, doc)) >= root["roles"]["root"]["threshold"], "old root keys"
            assert len(signers(new, "root", data, doc)) >= new["roles"]["root"]["threshold"], "own root keys"
            print(f"root {new['version']} ok"); root = new
        data = open(f"{site}/catalog.json", "rb").read(); doc = json.load(open(f"{site}/catalog.json.sig"))
        good = signers(root, "catalog", data, doc)
        assert len(good) >= root["roles"]["catalog"]["threshold"], "catalogue"
        print("catalog ok " + " ".join(sorted(good)))
        """

    @Test("No key: refused unless --insecure-unsigned, which warns; the first anchor is remembered")
    func noKey() async throws {
        let fixture = try SiteFixture()
        let tour = try fixture.addTour(name: "Lakes", formats: [.aac], files: 2, bytes: 8_000)
        try await fixture.publish()
        let server = try SiteServer(root: fixture.site)
        defer { server.stop() }
        let documents = fixture.documents()

        var result = try Self.run(["install", server.base, "--into", documents.path, "--all"])
        #expect(result.status == 2, "\(result.stdout)\(result.stderr)")
        #expect(result.stderr.contains("no trust anchor"), "\(result.stderr)")
        #expect(FileManager.default.fileExists(atPath: documents.appendingPathComponent("OfflineTours").path) == false)

        let unchecked = fixture.documents("Unchecked")
        result = try Self.run(["install", server.base, "--into", unchecked.path, "--all", "--insecure-unsigned"])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        #expect(result.stderr.contains("warning: --insecure-unsigned"), "\(result.stderr)")
        result = try Self.run(["install", server.base, "--into", unchecked.path, "--all", "--insecure-unsigned", "--json"])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        let warnings = result.stdout.split(separator: "\n").filter { $0.contains("\"warning\"") && $0.contains("--insecure-unsigned") }
        #expect(!warnings.isEmpty, "\(result.stdout)")
        try await Self.expectValid(unchecked)

        // Installed once with a key, the folder remembers it: a tampered catalogue is refused without --public-key.
        result = try Self.run(["install", server.base, "--into", documents.path, "--all", "--public-key", fixture.publicKeyBase64])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        var catalog = try Data(contentsOf: fixture.site.appendingPathComponent("catalog.json"))
        catalog[catalog.count / 2] ^= 0x01
        try catalog.write(to: fixture.site.appendingPathComponent("catalog.json"))
        let before = try Self.tree(documents)
        result = try Self.run(["install", server.base, "--into", documents.path, "--tour", tour[0].tourId, "--insecure-unsigned"])
        #expect(result.status == 1, "\(result.stdout)\(result.stderr)")
        #expect(result.stderr.contains("integrity check failed"), "\(result.stderr)")
        #expect(try Self.tree(documents) == before)
        try await Self.expectValid(documents)
    }
}

import Foundation
import Testing
import TourpackCore
import TourpackKit
import TourpackPublish
import TourpackTesting

/// Roots of trust (`keys root`, `keys rotate`), `publish --refresh` and
/// `publish --rollback`, on a folder site; every root checked by Python's
/// `cryptography` and `schemas/root.schema.json`, not only by `RootOfTrust`.
@Suite(.offThePool) struct RootOfTrustTests {
    /// For each roots/<n>.json: the schema's findings, and Python's count of
    /// valid signatures by the previous root's root keys and by its own.
    static let pythonRoots = """
        import base64, glob, json, os, sys
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
        site = sys.argv[1]
        def valid(root, role, data, document):
            good = set()
            for s in document["signatures"]:
                if s["keyId"] not in root["roles"][role]["keyIds"]: continue
                raw = base64.b64decode(root["keys"][s["keyId"]]["publicKey"])
                try:
                    Ed25519PublicKey.from_public_bytes(raw).verify(base64.b64decode(s["signature"]), data); good.add(s["keyId"])
                except InvalidSignature: pass
            return len(good)
        previous = None
        n = 1
        while os.path.exists(f"{site}/roots/{n}.json"):
            data = open(f"{site}/roots/{n}.json", "rb").read(); root = json.loads(data)
            document = json.load(open(f"{site}/roots/{n}.json.sig"))
            signer = previous or root
            print(n, valid(signer, "root", data, document), valid(root, "root", data, document))
            previous = root; n += 1
        """

    @Test("keys root and keys rotate: each root verifies in Python, passes the schema, and a wrong signer is refused")
    func rotateTwice() async throws {
        let folder = try TemporaryFolder.make("tourpack-publish")
        defer { TemporaryFolder.remove(folder) }
        let site = FolderSite(root: folder)
        let (a, b, c) = (SigningKey.generate(), SigningKey.generate(), SigningKey.generate())
        let catalogue = [SigningKey.generate(), SigningKey.generate()]
        let publisher = RootPublisher(site: site)
        let first = try await publisher.create(
            rootKeys: [a, b], rootThreshold: 2, catalogKeys: [catalogue[0].verifyingKey], catalogThreshold: 1)
        #expect(first.version == 1 && first.roles.root.threshold == 2)
        // One of two root keys is not a threshold: refused, nothing written.
        await #expect(throws: TourpackError.self) {
            try await publisher.rotate(
                signers: [a], rootKeys: nil, rootThreshold: nil, catalogKeys: [catalogue[1].verifyingKey], catalogThreshold: 1)
        }
        #expect(!FileManager.default.fileExists(atPath: folder.appendingPathComponent("roots/2.json").path))
        // Root keys a and b sign version 2; version 3 moves the root role to c alone (signed by a, b and c).
        let second = try await publisher.rotate(
            signers: [a, b], rootKeys: nil, rootThreshold: nil, catalogKeys: [catalogue[1].verifyingKey], catalogThreshold: 1)
        let third = try await publisher.rotate(
            signers: [a, b, c], rootKeys: [c.verifyingKey], rootThreshold: 1, catalogKeys: [catalogue[1].verifyingKey],
            catalogThreshold: 1)
        #expect(second.version == 2 && third.version == 3 && third.roles.root.keyIds == [c.keyId])

        // A device's walk, in Swift: 1 → 2 → 3.
        var held = first
        for version in 2...3 {
            let bytes = try Data(contentsOf: folder.appendingPathComponent("roots/\(version).json"))
            let signature = try Data(contentsOf: folder.appendingPathComponent("roots/\(version).json.sig"))
            held = try held.verifyNext(bytes, signatureDocument: signature)
        }
        #expect(held == third)
        // …and in Python.
        let result = try Tool.run("python3", ["-c", Self.pythonRoots, folder.path])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.split(separator: "\n") == ["1 2 2", "2 2 2", "3 2 1"], "\(result.stdout)")
        for version in 1...3 {
            let file = folder.appendingPathComponent("roots/\(version).json")
            #expect(try JSONSchemaCheck.errors(in: file, schema: JSONSchemaCheck.schema("root.schema.json")).isEmpty)
        }
        // A root with a threshold past its keys fails the schema's sibling check in decode.
        var broken = third
        broken.roles.catalog.threshold = 5
        #expect(throws: TourpackError.self) { try RootOfTrust.decode(try broken.encoded()) }
        // Version 3 swapped for a copy signed by a (no longer a root key) alone is refused.
        let forged = try SignatureSet.sign(try third.encoded(), with: [a])
        #expect(throws: TourpackError.self) { try second.verifyNext(try third.encoded(), signatureDocument: forged) }
    }

    @Test("publish --refresh changes expiresAt and the signature only; --rollback publishes an old generation as a new one")
    func refreshAndRollback() async throws {
        let fixture = try SiteFixture()
        let tour = try fixture.addTour(name: "Alps", formats: [.aac], files: 2, bytes: 5_000)
        let start = Date()
        _ = try await fixture.publisher(now: start).publish(root: fixture.source)
        let catalogFile = fixture.site.appendingPathComponent("catalog.json")
        let original = try Catalog.decode(Data(contentsOf: catalogFile))
        #expect(original.expiresAt == Date(timeIntervalSince1970: (start.timeIntervalSince1970 + 7 * 86_400).rounded(.down)))

        let later = start.addingTimeInterval(3 * 86_400)
        let refreshed = try await fixture.publisher(now: later).refresh()
        var read = try Catalog.decode(Data(contentsOf: catalogFile))
        #expect(refreshed.generation == 1 && read.generation == 1)
        #expect(read.expiresAt == Date(timeIntervalSince1970: (later.timeIntervalSince1970 + 7 * 86_400).rounded(.down)))
        read.expiresAt = original.expiresAt
        #expect(read == original, "a refresh changed more than expiresAt")
        let signature = try Data(contentsOf: fixture.site.appendingPathComponent("catalog.json.sig"))
        try CatalogSignature.verify(bytes: Data(contentsOf: catalogFile), signatureDocument: signature, publicKey: fixture.key.verifyingKey)
        #expect(
            try await SignatureTests.pythonVerdict(
                catalog: Data(contentsOf: catalogFile), signature: signature, publicKey: fixture.publicKeyBase64)
                == "ok \(fixture.key.keyId)")

        // A new build (generation 2), then rolled back: generation 3 names generation 1's packages.
        try fixture.changeFile(of: fixture.package(tour[0].packageId))
        _ = try await fixture.publisher(now: later).publish(root: fixture.source)
        let rolled = try await fixture.publisher(now: later).rollback(to: 1)
        #expect(rolled == 3)
        let current = try Catalog.decode(Data(contentsOf: catalogFile))
        #expect(current.generation == 3 && current.previousGeneration == 2)
        #expect(current.tours == original.tours)
        #expect(FileManager.default.fileExists(atPath: fixture.site.appendingPathComponent("generations/3.json").path))
        // The fixture's synthetic packages are not the schema's concern here; the catalogue's own fields are.
        let errors = try await PublishFixture.schemaErrors(Data(contentsOf: catalogFile))
        #expect(errors.filter { !$0.hasPrefix("tours/") }.isEmpty, "\(errors)")
    }

    @Test("a publish with nothing new renews the catalogue in force once half its time has passed, and leaves it alone before")
    func anUnchangedPublishRenewsAHalfSpentCatalogue() async throws {
        let fixture = try SiteFixture()
        _ = try fixture.addTour(name: "Alps", formats: [.aac], files: 2, bytes: 5_000)
        let start = Date()
        _ = try await fixture.publisher(now: start).publish(root: fixture.source)
        let catalogFile = fixture.site.appendingPathComponent("catalog.json")
        let original = try Data(contentsOf: catalogFile)

        let early = try await fixture.publisher(now: start.addingTimeInterval(3 * 86_400)).publish(root: fixture.source)
        #expect(!early.published && early.renewedUntil == nil)
        #expect(try Data(contentsOf: catalogFile) == original, "renewed with more than half its time left")

        let late = start.addingTimeInterval(4 * 86_400)
        let renewed = try await fixture.publisher(now: late).publish(root: fixture.source)
        let read = try Catalog.decode(Data(contentsOf: catalogFile))
        let expected = Date(timeIntervalSince1970: (late.timeIntervalSince1970 + 7 * 86_400).rounded(.down))
        #expect(!renewed.published && renewed.renewedUntil == expected)
        #expect(read.generation == 1 && read.expiresAt == expected)
        let signature = try Data(contentsOf: fixture.site.appendingPathComponent("catalog.json.sig"))
        try CatalogSignature.verify(bytes: Data(contentsOf: catalogFile), signatureDocument: signature, publicKey: fixture.key.verifyingKey)
    }
}

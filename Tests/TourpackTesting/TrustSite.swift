package import Foundation
package import TourpackCore
import TourpackPublish

/// A `SiteFixture`'s site with a root of trust, and the documents an
/// attacker holding a key (or a mirror) would forge on it: the trust
/// tests' one way to make, rotate, forge and replay. Roots are written by
/// the real `RootPublisher`, catalogues by the real `Catalog` encoding and
/// `SigningKey`, exactly as a publisher would write them.
package struct TrustSite {
    package let fixture: SiteFixture
    /// Signs root rotations (kept offline by a real publisher).
    package let rootKey: SigningKey
    /// The `root.json` the app ships: root version 1, its exact bytes.
    package let pinned: URL

    /// A new catalogue key, for a rotation (the app's tests, which import
    /// the client alone, never name the package's signing type).
    package static func newCatalogKey() -> SigningKey { SigningKey.generate() }

    /// Root 1 on `fixture`'s site, naming the fixture's key (and `standby`
    /// keys) for the catalogue, threshold 1; the app's copy in `pinned`.
    package init(_ fixture: SiteFixture, standby: [SigningKey] = []) async throws {
        self.fixture = fixture
        rootKey = SigningKey.generate()
        let root = try await RootPublisher(site: FolderSite(root: fixture.site)).create(
            rootKeys: [rootKey], rootThreshold: 1, catalogKeys: [fixture.key.verifyingKey] + standby.map(\.verifyingKey),
            catalogThreshold: 1)
        pinned = fixture.work.appendingPathComponent("root.json")
        try root.encoded().write(to: pinned)
    }

    /// The pinned root's bytes, as `TrustAnchor(rootJSON:)` takes them.
    package var pinnedBytes: Data { get throws { try Data(contentsOf: pinned) } }

    /// `tourpack keys rotate`'s work: the next root, naming only `catalogKeys` for the catalogue.
    @discardableResult
    package func rotate(to catalogKeys: [SigningKey]) async throws -> RootOfTrust {
        try await RootPublisher(site: FolderSite(root: fixture.site)).rotate(
            signers: [rootKey], rootKeys: nil, rootThreshold: nil, catalogKeys: catalogKeys.map(\.verifyingKey), catalogThreshold: 1)
    }

    /// Publishes the fixture's source root as the real publisher does,
    /// signed by `key` (which the newest root must authorise); the generation published.
    @discardableResult
    package func publish(signedWith key: SigningKey) async throws -> Int {
        try await fixture.publisher(signingKey: key).publish(root: fixture.source).generation
    }

    /// The live catalogue and signature (`SiteFixture.liveCatalog()`).
    package func live() throws -> (catalog: Data, signature: Data) { try fixture.liveCatalog() }

    /// Puts them back (`SiteFixture.restoreCatalog(_:)`).
    package func restore(_ documents: (catalog: Data, signature: Data)) throws { try fixture.restoreCatalog(documents) }

    /// A replay of generation `number` (`SiteFixture.replay(generation:)`).
    package func replay(generation number: Int) throws { try fixture.replay(generation: number) }

    /// A catalogue forged with `key` (`SiteFixture.forge(generation:key:signedBy:now:)`).
    package func forge(generation: Int, key: SigningKey, signedBy: String?, now: Date = Date()) throws {
        try fixture.forge(generation: generation, key: key, signedBy: signedBy, now: now)
    }

    /// Moves `roots/<version>.json` and its signature aside (a mirror that
    /// hides the rotation), or back with `hidden: false`.
    package func hideRoot(_ version: Int, hidden: Bool = true) throws {
        for name in [SiteLayout.root(version), SiteLayout.signature(of: SiteLayout.root(version))] {
            let live = fixture.site.appendingPathComponent(name)
            let aside = fixture.work.appendingPathComponent("hidden-\(name.replacingOccurrences(of: "/", with: "-"))")
            if hidden {
                try FileManager.default.moveItem(at: live, to: aside)
            } else {
                try FileManager.default.moveItem(at: aside, to: live)
            }
        }
    }

    /// A root of trust of version `version` (any number, even `Int.max`)
    /// naming the fixture's key for the catalogue: what an app could pin.
    package func pinnableRoot(version: Int) throws -> Data {
        let root = try RootOfTrust(
            version: 1, publishedAt: Date(), rootKeys: [rootKey.verifyingKey], rootThreshold: 1,
            catalogKeys: [fixture.key.verifyingKey], catalogThreshold: 1
        ).encoded()
        return try SiteFixture.setting("version", to: "\(version)", in: root)
    }

    /// `.tourpack-install/trust.json` of `documents`.
    package static func trustFile(_ documents: URL) -> URL {
        documents.appendingPathComponent(".tourpack-install/trust.json")
    }

    /// Sets the generation `trust.json` of `documents` remembers, editing
    /// its text only (whichever schema wrote it): what a damaged or hostile
    /// disk might hold, or a device that once verified generation `number`.
    package static func setRememberedGeneration(_ number: Int, in documents: URL) throws {
        let url = trustFile(documents)
        let text = try String(contentsOf: url, encoding: .utf8)
        guard let match = text.range(of: #""generation"\s*:\s*-?[0-9]+"#, options: .regularExpression) else {
            throw TourpackError.invalidInput("\(url.path): no generation to set")
        }
        try text.replacingCharacters(in: match, with: "\"generation\" : \(number)").write(to: url, atomically: true, encoding: .utf8)
    }
}

/// The catalogue documents a mirror replays or whoever holds a key forges.
extension SiteFixture {
    /// The live `catalog.json` and its `.sig`, to put back with `restore`.
    package func liveCatalog() throws -> (catalog: Data, signature: Data) {
        let url = site.appendingPathComponent(SiteLayout.catalog)
        return (try Data(contentsOf: url), try Data(contentsOf: url.appendingPathExtension("sig")))
    }

    /// Puts `documents` back as the live catalogue and signature.
    package func restoreCatalog(_ documents: (catalog: Data, signature: Data)) throws {
        let url = site.appendingPathComponent(SiteLayout.catalog)
        try documents.catalog.write(to: url)
        try documents.signature.write(to: url.appendingPathExtension("sig"))
    }

    /// Serves generation `number`'s own catalogue and signature again (`generations/<n>.json`): a replay.
    package func replay(generation number: Int) throws {
        let old = site.appendingPathComponent(SiteLayout.generation(number))
        try restoreCatalog((try Data(contentsOf: old), try Data(contentsOf: old.appendingPathExtension("sig"))))
    }

    /// Writes a catalogue as whoever holds `key` would: the live one's
    /// packages at `generation`, claiming `signedBy` (nil: no claim at
    /// all), fresh for 30 days from `now`, signed by `key`.
    package func forge(generation: Int, key: SigningKey, signedBy: String?, now: Date = Date()) throws {
        var catalog = try Catalog.decode(try liveCatalog().catalog)
        catalog.generation = 1
        catalog.previousGeneration = nil
        catalog.expiresAt = Date(timeIntervalSince1970: (now.timeIntervalSince1970 + 30 * 86_400).rounded(.down))
        catalog.signedBy = signedBy
        catalog.unsigned = nil
        // The number as text: canonical JSON writes integers past 2^53 as doubles; whoever forges writes what it likes.
        let bytes = try Self.setting("generation", to: "\(generation)", in: try catalog.encoded())
        try restoreCatalog((bytes, try key.sign(bytes)))
    }

    /// `bytes` (JSON) with the first number of `field` replaced by `value`, as text.
    package static func setting(_ field: String, to value: String, in bytes: Data) throws -> Data {
        let text = String(decoding: bytes, as: UTF8.self)
        guard let match = text.range(of: #""\#(field)"\s*:\s*-?[0-9]+"#, options: .regularExpression) else {
            throw TourpackError.invalidInput("no \(field) to set")
        }
        return Data(text.replacingCharacters(in: match, with: "\"\(field)\": \(value)").utf8)
    }
}

import Foundation
package import TourpackPackage

/// The catalogue an install works from, read conditionally and checked.
///
/// The catalogue last accepted from a site is remembered in the install
/// folder with its ETag; the next read sends `If-None-Match` (or, from a
/// server without ETags, `If-Modified-Since`), and a 304
/// means the remembered bytes (and signature) are still the ones in force,
/// so an install with nothing new costs that one exchange.
///
/// With a public key, the catalogue must carry a valid Ed25519 signature
/// by it (`CatalogSignature.verify`). Publishing writes `catalog.json`
/// before `catalog.json.sig`, so a reader may catch the new catalogue with
/// the old signature for a moment: a signature that fails is read again,
/// with the catalogue, once, before the catalogue is refused.
package struct CatalogReader: Sendable {
    package let source: any SiteSource
    package let folder: InstallFolder
    package let publicKey: VerifyingKey?

    package init(source: any SiteSource, folder: InstallFolder, publicKey: VerifyingKey?) {
        self.source = source
        self.folder = folder
        self.publicKey = publicKey
    }

    package static let catalogKey = SiteLayout.catalog
    package static let signatureKey = SiteLayout.signature(of: SiteLayout.catalog)

    /// The catalogue in force, checked, and what the install reports of it.
    package func read() async throws -> (catalog: Catalog, summary: CatalogSummary) {
        let remembered = folder.rememberedCatalog(site: source.location)
        var bytes: [UInt8]
        var signature: [UInt8]?
        var version: CatalogVersion
        var notModified = false
        switch try await fetchCatalog(unlessStill: remembered.flatMap { $0.version.isUsable ? $0.version : nil }) {
        case .notModified where remembered != nil:
            bytes = remembered!.bytes
            signature = remembered!.signature
            version = remembered!.version
            notModified = true
        case .notModified:
            (bytes, version) = try await fetchWhole()
            signature = try await fetchSignature()
        case .fetched(let fetched, let tag):
            (bytes, version) = (fetched, tag)
            signature = try await fetchSignature()
        }
        if let publicKey, (try? verify(bytes, signature, publicKey)) == nil {
            // Perhaps caught between the catalogue's write and its signature's: both once more.
            (bytes, version) = try await fetchWhole()
            signature = try await fetchSignature()
            notModified = false
            try verify(bytes, signature, publicKey)
        }
        let catalog = try Self.decode(bytes, site: source.location)
        if !notModified { try folder.remember(site: source.location, bytes: bytes, signature: signature, version: version) }
        let summary = CatalogSummary(
            site: source.location, generation: catalog.generation, notModified: notModified, verifiedBy: publicKey?.keyId,
            tours: catalog.tours.count, packages: catalog.tours.reduce(0) { $0 + $1.packages.count })
        return (catalog, summary)
    }

    private func fetchCatalog(unlessStill version: CatalogVersion?) async throws -> CatalogRead {
        do {
            return try await source.catalog(unlessStill: version)
        } catch let failure as SiteSourceFailure {
            if failure.kind == .missing {
                throw TourpackError.invalidInput("\(source.location): no \(Self.catalogKey) (\(failure)); is this a published site?")
            }
            throw failure.installError(package: nil, file: Self.catalogKey)
        }
    }

    private func fetchWhole() async throws -> ([UInt8], CatalogVersion) {
        guard case .fetched(let bytes, let version) = try await fetchCatalog(unlessStill: nil) else {
            throw TourpackError.integrityFailed(
                package: nil, file: Self.catalogKey, message: "the site answered 304 to a request without If-None-Match",
                url: source.location)
        }
        return (bytes, version)
    }

    /// The signature, when a key will check it; nil when the site has none.
    private func fetchSignature() async throws -> [UInt8]? {
        guard publicKey != nil else { return nil }
        do {
            return try await source.object(Self.signatureKey)
        } catch let failure as SiteSourceFailure {
            throw failure.installError(package: nil, file: Self.signatureKey)
        }
    }

    /// A remembered catalogue checked again, as it was when accepted: its
    /// signature by `key` (when there is a key) and its decoding.
    package static func check(_ bytes: [UInt8], signature: [UInt8]?, key: VerifyingKey?, site: String) throws -> Catalog {
        if let key { try verify(bytes, signature, key, site: site) }
        return try decode(bytes, site: site)
    }

    private static func decode(_ bytes: [UInt8], site: String) throws -> Catalog {
        do { return try Catalog.decode(Data(bytes)) } catch let error as TourpackError where error.kind == .invalidInput {
            throw error
        } catch {
            throw TourpackError.integrityFailed(
                package: nil, file: catalogKey, message: "not a catalogue tourpack can read: \(error)", url: site)
        }
    }

    private func verify(_ bytes: [UInt8], _ signature: [UInt8]?, _ key: VerifyingKey) throws {
        try Self.verify(bytes, signature, key, site: source.location)
    }

    private static func verify(_ bytes: [UInt8], _ signature: [UInt8]?, _ key: VerifyingKey, site: String) throws {
        guard let signature else {
            throw TourpackError.integrityFailed(
                package: nil, file: catalogKey,
                message: "the site has no \(signatureKey): the catalogue is unsigned, and \(key) is required", url: site)
        }
        do {
            try CatalogSignature.verify(bytes: Data(bytes), signatureDocument: Data(signature), publicKey: key)
        } catch {
            throw TourpackError.integrityFailed(package: nil, file: catalogKey, message: "\(error)", url: site)
        }
    }
}

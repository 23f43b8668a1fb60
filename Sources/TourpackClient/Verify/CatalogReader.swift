package import Foundation
package import TourpackPackage

/// The catalogue an install works from, read conditionally and checked.
///
/// The catalogue last accepted from a site is remembered in the install
/// folder with its ETag; the next read sends `If-None-Match` (or, from a
/// server without ETags, `If-Modified-Since`), and a 304
/// means the remembered bytes (and signature) are still the ones in force,
/// so an install with nothing new costs that one exchange.
///
/// With a trust anchor (`CatalogTrust`), before a catalogue is accepted:
///
/// 1. a root anchor walks `roots/<n+1>.json` forward from the newest root
///    held, each signed by a threshold of the root keys of the version
///    before and of its own (`RootOfTrust.verifyNext`);
/// 2. the catalogue must carry a valid Ed25519 signature by the key, or by
///    a threshold of the catalogue keys the root authorises;
/// 3. its generation must not be lower than the highest this folder
///    verified from the site (at the same generation, its `expiresAt` must
///    not be earlier), else `rollbackRefused`, and not more than
///    `maximumGenerationStep` above it (a fast-forward), else `rollbackRefused` too.
///    That generation counts only while the newest root authorises at
///    least one of the keys whose signatures verified it
///    (`TrustRecord.verifiedBy`, from the signature check, never the
///    catalogue's own `signedBy`): a rotation that revokes them all
///    forgets it, however far ahead a leaked key pushed it;
/// 4. it must not be past its `expiresAt` (`catalogExpired`).
///
/// The folder's `trust.json` is read first: one that cannot be read is
/// `integrityFailed` (`InstallFolder.damagedTrust`), and nothing is
/// fetched. Every number a document brings (a generation, a root version,
/// a package's size) is checked arithmetic: one out of range is
/// `integrityFailed` or `rollbackRefused`, never a trap.
///
/// A refused catalogue changes nothing on the device. The catalogue is read
/// at most `maximumCatalogBytes`, a root or signature document at most
/// `RootOfTrust.maximumBytes`. Publishing writes `catalog.json` before
/// `catalog.json.sig`, so a reader may catch the new catalogue with the old
/// signature for a moment: a signature that fails is read again, with the
/// catalogue, once, before the catalogue is refused.
package struct CatalogReader: Sendable {
    package let source: any SiteSource
    package let folder: InstallFolder
    package let trust: CatalogTrust?
    package var now: @Sendable () -> Date = { Date() }

    /// The largest catalogue a device accepts: 32 MiB (about 40,000 packages).
    package static let maximumCatalogBytes = 32 * 1024 * 1024
    /// How far past the highest generation verified a catalogue may be:
    /// 10,000 publications (a publish an hour for a year). Further is a fast-forward.
    package static let maximumGenerationStep = 10_000
    /// The most roots one read walks.
    package static let maximumRootSteps = 1_000

    package init(source: any SiteSource, folder: InstallFolder, trust: CatalogTrust?, now: @escaping @Sendable () -> Date = { Date() }) {
        self.source = source
        self.folder = folder
        self.trust = trust
        self.now = now
    }

    package init(source: any SiteSource, folder: InstallFolder, publicKey: VerifyingKey?) {
        self.init(source: source, folder: folder, trust: publicKey.map(CatalogTrust.key))
    }

    package static let catalogKey = SiteLayout.catalog
    package static let signatureKey = SiteLayout.signature(of: SiteLayout.catalog)

    /// The catalogue in force, checked, and what the install reports of it.
    package func read() async throws -> (catalog: Catalog, summary: CatalogSummary) {
        // What the folder holds is read, and what it learns written (fsynced), off the cooperative pool.
        let (folder, site, trust) = (self.folder, source.location, self.trust)
        // Without an anchor nothing is checked, so no record is read; with one, a damaged record refuses the read.
        let (record, remembered) = try await Blocking.run {
            (trust == nil ? nil : try folder.readTrustRecord(), folder.rememberedCatalog(site: site))
        }
        var walked: (RootOfTrust, [UInt8])?
        var verifier: Verifier?
        switch trust {
        case .key(let key): verifier = .key(key)
        case .root(let pinned, let pinnedBytes):
            let (root, bytes) = try await walkRoots(from: pinned, bytes: pinnedBytes, record: record)
            walked = (root, bytes)
            verifier = .root(root)
        case nil: verifier = nil
        }
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
        try checkSize(bytes)
        // The keys whose signatures verified it: what the record keeps, never the catalogue's `signedBy`.
        var verifiedBy: [String] = []
        if let verifier {
            if let keys = try? verifier.verify(bytes, signature, site: source.location) {
                verifiedBy = keys
            } else {
                // Perhaps caught between the catalogue's write and its signature's: both once more.
                (bytes, version) = try await fetchWhole()
                signature = try await fetchSignature()
                notModified = false
                try checkSize(bytes)
                verifiedBy = try verifier.verify(bytes, signature, site: source.location)
            }
        }
        let catalog = try Self.decode(bytes, site: source.location)
        var accepted = record
        if let trust, let verifier {
            accepted = try checkFreshness(catalog, record: record, trust: trust, verifier: verifier, verifiedBy: verifiedBy)
        }
        try await Blocking.run { [bytes, signature, version, notModified, accepted, walked, trust] in
            if !notModified { try folder.remember(site: site, bytes: bytes, signature: signature, version: version) }
            if let trust, let accepted { try folder.remember(accepted, anchor: trust, root: walked) }
        }
        let summary = CatalogSummary(
            catalog, site: source.location, notModified: notModified,
            verifiedBy: verifier.map { verifiedBy.isEmpty ? $0.description : verifiedBy.joined(separator: ", ") })
        return (catalog, summary)
    }

    /// Rules 3 and 4 above; the record to keep once the catalogue is accepted.
    private func checkFreshness(
        _ catalog: Catalog, record: TrustRecord?, trust: CatalogTrust, verifier: Verifier, verifiedBy: [String]
    ) throws -> TrustRecord {
        let site = source.location
        var floor: (generation: Int, expiresAt: Date?)?
        if let record, record.site == site, let generation = record.generation {
            floor = (generation, record.catalogExpiresAt)
            // A root that authorises none of the keys whose signatures verified the
            // remembered generation revoked them all: what they signed (perhaps far
            // ahead) no longer counts. Keys unknown (an old record): it still counts.
            if case .root(let root) = verifier, let keys = record.verifiedBy, Set(keys).isDisjoint(with: root.roles.catalog.keyIds) {
                floor = nil
            }
        }
        if let floor {
            if catalog.generation < floor.generation {
                throw TourpackError(
                    .rollbackRefused,
                    "the site's catalogue is generation \(catalog.generation), older than generation \(floor.generation) this device "
                        + "verified: a mirror may be replaying an old catalogue; nothing was changed",
                    context: TourpackError.Context(path: Self.catalogKey, url: site))
            }
            if catalog.generation == floor.generation, let held = floor.expiresAt, (catalog.expiresAt ?? .distantPast) < held {
                throw TourpackError(
                    .rollbackRefused,
                    "the site's catalogue is generation \(catalog.generation) with an earlier expiry than the copy this device verified "
                        + "(\(catalog.expiresAt.map(PackageManifest.timestamp) ?? "none") < \(PackageManifest.timestamp(held))): "
                        + "an older signing of it; nothing was changed",
                    context: TourpackError.Context(path: Self.catalogKey, url: site))
            }
            // Both numbers are data (trust.json's may be near Int.max): no ceiling past Int.max, no trap.
            let ceiling = floor.generation.addingReportingOverflow(Self.maximumGenerationStep)
            if !ceiling.overflow, catalog.generation > ceiling.partialValue {
                throw TourpackError(
                    .rollbackRefused,
                    "the site's catalogue is generation \(catalog.generation), more than \(Self.maximumGenerationStep) past generation "
                        + "\(floor.generation) this device verified: refused as a fast-forward; nothing was changed",
                    context: TourpackError.Context(path: Self.catalogKey, url: site))
            }
        } else if catalog.generation > Self.maximumGenerationStep {
            throw TourpackError(
                .rollbackRefused,
                "the site's catalogue is generation \(catalog.generation); a device that verified none accepts at most "
                    + "\(Self.maximumGenerationStep): refused as a fast-forward; nothing was changed",
                context: TourpackError.Context(path: Self.catalogKey, url: site))
        }
        try Self.checkExpiry(catalog, at: now(), site: site)
        var next = record ?? TrustRecord(anchor: .publicKey)
        if record == nil {
            switch trust {
            case .key(let key):
                next.anchor = .publicKey
                next.publicKey = key.base64
            case .root: next.anchor = .root
            }
        }
        next.schemaVersion = TrustRecord.currentSchemaVersion
        next.site = site
        next.generation = catalog.generation
        next.catalogExpiresAt = catalog.expiresAt
        next.verifiedBy = verifiedBy
        if case .root(let root) = verifier { next.rootVersion = root.version }
        return next
    }

    /// Rule 4 above: `catalogExpired` for a catalogue past its `expiresAt` (or without one).
    package static func checkExpiry(_ catalog: Catalog, at moment: Date, site: String) throws {
        guard catalog.isExpired(at: moment) else { return }
        let when = catalog.expiresAt.map { "expired at \(PackageManifest.timestamp($0))" } ?? "has no expiresAt"
        throw TourpackError(
            .catalogExpired,
            "the site's catalogue (generation \(catalog.generation)) \(when), and it is \(PackageManifest.timestamp(moment)): "
                + "a mirror may be serving a frozen copy, or the publisher has not run `tourpack publish --refresh`; "
                + "installed packages keep playing, nothing new is downloaded",
            context: TourpackError.Context(path: catalogKey, url: site))
    }

    /// The newest root the site holds past the one this device holds
    /// (the pinned one, or the newest it walked to from it before).
    private func walkRoots(from pinned: RootOfTrust, bytes pinnedBytes: [UInt8], record: TrustRecord?) async throws -> (
        RootOfTrust, [UInt8]
    ) {
        var current = (pinned, pinnedBytes)
        let folder = self.folder
        if record?.anchor == .root,
            let (held, bytes) = try await Blocking.run({
                folder.heldRoot().flatMap { held in FileManager.default.contents(atPath: folder.heldRootFile.path).map { (held, Array($0)) }
                }
            }), held.version > pinned.version
        {
            current = (held, bytes)
        }
        for _ in 0..<Self.maximumRootSteps {
            // A root at Int.max has no successor to fetch: the walk ends there.
            guard let next = current.0.nextVersion else { return current }
            let key = SiteLayout.root(next)
            guard let bytes = try await fetchObject(key) else { return current }
            guard let signature = try await fetchObject(SiteLayout.signature(of: key)) else {
                throw TourpackError.integrityFailed(
                    package: nil, file: key, message: "the site has no \(SiteLayout.signature(of: key)) for it", url: source.location)
            }
            do {
                current = (try current.0.verifyNext(Data(bytes), signatureDocument: Data(signature)), bytes)
            } catch let error as TourpackError {
                throw TourpackError(error.kind, error.message, context: TourpackError.Context(path: key, url: source.location))
            }
        }
        return current
    }

    /// A root or signature document, at most `RootOfTrust.maximumBytes`; nil when the site has none.
    private func fetchObject(_ key: String) async throws -> [UInt8]? {
        let bytes: [UInt8]?
        do { bytes = try await source.object(key) } catch let failure as SiteSourceFailure {
            if failure.kind == .missing { return nil }
            throw failure.installError(package: nil, file: key)
        }
        if let bytes, bytes.count > RootOfTrust.maximumBytes {
            throw TourpackError.integrityFailed(
                package: nil, file: key, message: "\(bytes.count) bytes, more than the \(RootOfTrust.maximumBytes) a device reads",
                url: source.location)
        }
        return bytes
    }

    private func checkSize(_ bytes: [UInt8]) throws {
        guard bytes.count <= Self.maximumCatalogBytes else {
            throw TourpackError.integrityFailed(
                package: nil, file: Self.catalogKey,
                message: "\(bytes.count) bytes, more than the \(Self.maximumCatalogBytes) a device reads", url: source.location)
        }
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
        guard trust != nil else { return nil }
        return try await fetchObject(Self.signatureKey)
    }

    /// A remembered catalogue checked again, as it was when accepted: its
    /// signature (by the key, or the catalogue keys of the newest root the
    /// folder holds) when there is an anchor, and its decoding.
    package static func check(_ bytes: [UInt8], signature: [UInt8]?, trust: CatalogTrust?, folder: InstallFolder, site: String) throws
        -> Catalog
    {
        switch trust {
        case .key(let key): try Verifier.key(key).verify(bytes, signature, site: site)
        case .root(let pinned, _):
            let held = folder.heldRoot().flatMap { $0.version > pinned.version ? $0 : nil } ?? pinned
            try Verifier.root(held).verify(bytes, signature, site: site)
        case nil: break
        }
        return try decode(bytes, site: site)
    }

    private static func decode(_ bytes: [UInt8], site: String) throws -> Catalog {
        let catalog: Catalog
        do { catalog = try Catalog.decode(Data(bytes)) } catch let error as TourpackError where error.kind == .invalidInput {
            throw error
        } catch {
            throw TourpackError.integrityFailed(
                package: nil, file: catalogKey, message: "not a catalogue tourpack can read: \(error)", url: site)
        }
        try checkNumbers(catalog, site: site)
        return catalog
    }

    /// The catalogue's numbers that a device adds up or compares, in range:
    /// a generation of 1 or more, and each package's sizes from 0 to
    /// `PackageFiles.maximumPackageBytes`, so that no sum over them (a
    /// budget, a download's total) can overflow. Else `integrityFailed`,
    /// naming the field.
    static func checkNumbers(_ catalog: Catalog, site: String) throws {
        guard catalog.generation >= 1 else {
            throw TourpackError.integrityFailed(
                package: nil, file: catalogKey, message: "generation \(catalog.generation): generations start at 1", url: site)
        }
        let range = 0...PackageFiles.maximumPackageBytes
        for (t, tour) in catalog.tours.enumerated() {
            for (p, package) in tour.packages.enumerated() {
                for (field, value) in [
                    ("sizeBytes", package.sizeBytes), ("audioBytes", package.audioBytes), ("mapBytes", package.mapBytes),
                ]
                where !range.contains(value) {
                    throw TourpackError.integrityFailed(
                        package: TourpackError.packageName(package.packageId, tourName: tour.tourName), file: catalogKey,
                        message: "tours[\(t)].packages[\(p)].\(field) is \(value); a package weighs 0 to \(range.upperBound) bytes",
                        url: site)
                }
            }
        }
    }

    /// What checks the catalogue's signature: the key, or a root's catalogue role.
    enum Verifier: Sendable {
        case key(VerifyingKey)
        case root(RootOfTrust)

        var description: String {
            switch self {
            case .key(let key): return key.keyId
            case .root(let root): return "root version \(root.version)"
            }
        }

        /// Checks the signature; the ids of the keys whose signatures verified, sorted.
        @discardableResult
        func verify(_ bytes: [UInt8], _ signature: [UInt8]?, site: String) throws -> [String] {
            guard let signature else {
                throw TourpackError.integrityFailed(
                    package: nil, file: catalogKey,
                    message: "the site has no \(signatureKey): the catalogue is unsigned, and a signature by \(description) is required",
                    url: site)
            }
            switch self {
            case .key(let key):
                do {
                    try CatalogSignature.verify(bytes: Data(bytes), signatureDocument: Data(signature), publicKey: key)
                } catch {
                    throw TourpackError.integrityFailed(package: nil, file: catalogKey, message: "\(error)", url: site)
                }
                return [key.keyId]
            case .root(let root):
                do { return try root.verifyCatalog(Data(bytes), signatureDocument: Data(signature)).sorted() } catch let error
                    as TourpackError
                {
                    throw TourpackError(error.kind, error.message, context: TourpackError.Context(path: catalogKey, url: site))
                }
            }
        }
    }
}

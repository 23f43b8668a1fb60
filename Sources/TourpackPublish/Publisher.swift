package import Foundation
import NIOPosix
package import TourpackCore
import TourpackHTTP
import TourpackKit

/// `tourpack publish`: puts a Documents root's packages on a site (`Site`)
/// and a new catalogue generation in force.
///
/// ```
///  root ─▶ packages ─▶ blobs ─▶ manifests ─▶ generations/<n>.json ─▶ catalog.json ─▶ catalog.json.sig
///                      (absent only)  (absent only)  (absent only)    (if still the one read)
/// ```
///
/// Safe at every instant: nothing the catalogue in force names is ever
/// written or removed, and `catalog.json` changes last, in one write. A
/// publish killed anywhere leaves the previous catalogue in force with every
/// object it names, and leftovers the next publish reuses (or `--gc`
/// removes once they are old). Two publishers never lose each other's
/// packages: the catalogue is replaced only if it is still the one read,
/// else the loser reads it again, merges, and tries once more.
package struct Publisher: Sendable {
    package let site: any Site
    package let signingKey: SigningKey?
    package let settings: PublishSettings
    /// How many uploads run at once.
    package var uploads = 4
    package var now: @Sendable () -> Date = { Date() }
    package var report: @Sendable (PublishEvent) -> Void = { _ in }

    package init(site: any Site, signingKey: SigningKey?, settings: PublishSettings) {
        self.site = site
        self.signingKey = signingKey
        self.settings = settings
    }

    // MARK: Publish

    /// What a publish did (or, dry, would do).
    package struct Outcome: Sendable, Equatable {
        /// The generation in force afterwards (for a dry run: the one that would be).
        package var generation: Int
        /// Whether this publish put a new generation in force.
        package var published: Bool
        package var packages: Int
        /// Packages left out because they had expired.
        package var expired: [String] = []
        /// Objects written (or to write), and their bytes.
        package var uploads: [String] = []
        package var uploadedBytes: Int64 = 0
        /// Blobs that were there already.
        package var reused = 0
        /// When nothing changed but the catalogue in force was renewed (`needsRenewal`): its new expiry.
        package var renewedUntil: Date?
    }

    /// Publishes every unexpired package under `root`.
    package func publish(root: URL, dryRun: Bool = false) async throws -> Outcome {
        try await publish(roots: [root], dryRun: dryRun)
    }

    /// Publishes every unexpired package under `roots` in one catalogue:
    /// a pipeline with a quality ladder builds one Documents root per quality.
    package func publish(roots: [URL], dryRun: Bool = false) async throws -> Outcome {
        // Every package.json read and hashed on NIO's thread pool, never the cooperative pool.
        let local = try await NIOThreadPool.singleton.runIfActive { try roots.flatMap { try LocalPackage.read(root: $0) } }
        let moment = now()
        var outcome = Outcome(generation: 0, published: false, packages: 0)
        let live = local.filter { package in
            guard package.manifest.isExpired(at: moment) else { return true }
            outcome.expired.append(package.manifest.packageId)
            report(
                .warning(
                    "\(package.manifest.packageId) (\(package.manifest.tourName)) expired at \(package.manifest.expiresAt); left out of the catalogue"
                ))
            return false
        }
        outcome.packages = live.count
        return try await site.exclusively { [self, outcome] in
            var outcome = outcome
            var current = try await readCatalog()
            // A package the catalogue in force names has every object in place.
            let named = Dictionary(
                (current?.catalog.entries ?? []).map { ($0.package.manifest.sha256, $0.package.manifest.path) },
                uniquingKeysWith: { a, _ in a })
            var entries: [CatalogEntry] = []
            for package in live {
                if let key = named[package.manifestSHA256] {
                    entries.append(package.entry(manifestKey: key))
                } else {
                    entries.append(package.entry(manifestKey: try await upload(package, dryRun: dryRun, into: &outcome)))
                }
            }
            while true {
                let merged = merge(entries, into: current?.catalog, at: moment)
                if let current, try isUnchanged(current, by: merged) {
                    outcome.generation = current.catalog.generation
                    if !dryRun { try await repairSignature(of: current) }
                    report(.unchanged(generation: current.catalog.generation))
                    // A scheduled publish with nothing new still keeps devices current.
                    if needsRenewal(current.catalog, at: moment) {
                        outcome.renewedUntil = try await resign(current, at: moment, dryRun: dryRun).expiresAt
                    }
                    return outcome
                }
                if dryRun {
                    outcome.generation = try Catalog.generation(after: current?.catalog.generation ?? 0, file: SiteLayout.catalog)
                    outcome.published = true
                    return outcome
                }
                if let generation = try await commit(CatalogTour.grouping(merged), replacing: current, at: moment, outcome: &outcome) {
                    outcome.generation = generation
                    outcome.published = true
                    return outcome
                }
                // Another publisher put a catalogue in force since we read it: take theirs, keep ours on top.
                current = try await readCatalog()
                entries = merged.filter { entry in live.contains { $0.manifest.packageId == entry.package.packageId } }
                report(.raced)
            }
        }
    }

    /// The catalogue in force, with the tag `replace` needs; nil when the site has none yet.
    package func readCatalog() async throws -> (catalog: Catalog, bytes: [UInt8], etag: String)? {
        guard let read = try await site.read(SiteLayout.catalog) else { return nil }
        do {
            return (try Catalog.decode(Data(read.bytes)), read.bytes, read.etag)
        } catch {
            throw TourpackError.invalidInput("\(site.locate(SiteLayout.catalog)): not a catalogue tourpack can read: \(error)")
        }
    }

    /// Uploads a package's blobs (those not there yet), then its package.json;
    /// the package.json's key.
    private func upload(_ package: LocalPackage, dryRun: Bool, into outcome: inout Outcome) async throws -> String {
        var missing: [LocalPackage.File] = []
        var seen: Set<String> = []
        for file in package.files where seen.insert(file.sha256).inserted {
            if try await site.contains(SiteLayout.blob(sha256: file.sha256)) { outcome.reused += 1 } else { missing.append(file) }
        }
        if !dryRun {
            try await withThrowingTaskGroup(of: Void.self) { group in
                var running = 0
                for file in missing {
                    if running == uploads {
                        try await group.next()
                        running -= 1
                    }
                    group.addTask { [site, report] in
                        let key = SiteLayout.blob(sha256: file.sha256)
                        if try await site.create(key, from: file.url, contentType: file.contentType, cacheControl: SiteLayout.immutable) {
                            report(.uploaded(key: key, bytes: file.sizeBytes, what: file.path))
                        }
                    }
                    running += 1
                }
                try await group.waitForAll()
            }
        }
        for file in missing {
            outcome.uploads.append(SiteLayout.blob(sha256: file.sha256))
            outcome.uploadedBytes += file.sizeBytes
        }
        // The manifest is named by its content hash. A rebuild of the same
        // content (`--refresh-expiring`, a new expiry) has other bytes under
        // the same name: it goes beside it, named by its own SHA-256 too.
        var key = package.manifestKey
        if dryRun {
            if try await !site.contains(key) { outcome.uploads.append(key) }
            return key
        }
        if try await !createManifest(package, as: key, into: &outcome),
            let existing = try await site.read(key), LocalPackage.sha256(existing.bytes) != package.manifestSHA256
        {
            key = package.alternateManifestKey
            _ = try await createManifest(package, as: key, into: &outcome)
        }
        return key
    }

    /// Writes the package.json as `key` unless it is there; whether it wrote.
    private func createManifest(_ package: LocalPackage, as key: String, into outcome: inout Outcome) async throws -> Bool {
        let bytes = package.manifestBytes
        guard try await site.create(key, bytes: bytes, contentType: SiteLayout.jsonContentType, cacheControl: SiteLayout.immutable) else {
            return false
        }
        outcome.uploads.append(key)
        outcome.uploadedBytes += Int64(bytes.count)
        report(.uploaded(key: key, bytes: Int64(bytes.count), what: "package.json"))
        return true
    }

    /// The catalogue's packages after this publish: the one in force, with
    /// ours in place of theirs where both have a package ID (the newer
    /// wins, as every publisher decides alike), and no expired package.
    func merge(_ ours: [CatalogEntry], into current: Catalog?, at moment: Date) -> [CatalogEntry] {
        let mine = Catalog(generation: 0, previousGeneration: nil, publishedAt: moment, entries: ours)
        let theirs = current ?? Catalog(generation: 0, previousGeneration: nil, publishedAt: moment, entries: [])
        return Catalog(generation: 0, previousGeneration: nil, publishedAt: moment, tours: mine.mergingPackages(with: theirs))
            .entries.filter { entry in
                guard entry.package.expiresAt > moment else {
                    if !ours.contains(entry) {
                        report(.warning("\(entry.package.packageId) expired at \(entry.package.expiresAt); left out of the catalogue"))
                    }
                    return false
                }
                return true
            }
    }

    /// Whether `entries` are the catalogue in force's, byte for byte.
    func isUnchanged(_ current: (catalog: Catalog, bytes: [UInt8], etag: String), by entries: [CatalogEntry]) throws -> Bool {
        var same = Catalog(
            generation: current.catalog.generation, previousGeneration: current.catalog.previousGeneration,
            publishedAt: current.catalog.publishedAt, expiresAt: current.catalog.expiresAt, entries: entries)
        // Signing with another key (or none) is a change too.
        same.sign(by: signingKey?.keyId)
        return try same.encoded() == Data(current.bytes)
    }

    /// Writes the next generation and puts it in force; nil when another
    /// publisher replaced the catalogue first (nothing of ours is in force then).
    func commit(
        _ tours: [CatalogTour], replacing current: (catalog: Catalog, bytes: [UInt8], etag: String)?, at moment: Date,
        outcome: inout Outcome
    ) async throws -> Int? {
        try await checkAuthorised()
        let listed = try await site.list(prefix: SiteLayout.generationsFolder).compactMap { SiteLayout.generationNumber($0.key) }
        var number = try Catalog.generation(after: max(current?.catalog.generation ?? 0, listed.max() ?? 0), file: SiteLayout.catalog)
        while true {
            var catalog = Catalog(
                generation: number, previousGeneration: current?.catalog.generation, publishedAt: moment,
                expiresAt: expiry(from: moment), tours: tours)
            catalog.sign(by: signingKey?.keyId)
            let bytes = Array(try catalog.encoded())
            let signature = try signingKey.map { Array(try $0.sign(Data(bytes))) }
            let key = SiteLayout.generation(number)
            guard try await site.create(key, bytes: bytes, contentType: SiteLayout.jsonContentType, cacheControl: SiteLayout.immutable)
            else {
                // Another publisher took this number: take the next.
                number = try Catalog.generation(after: number, file: key)
                continue
            }
            outcome.uploads.append(key)
            outcome.uploadedBytes += Int64(bytes.count)
            if let signature {
                try await site.overwrite(
                    SiteLayout.signature(of: key), bytes: signature, contentType: SiteLayout.jsonContentType,
                    cacheControl: SiteLayout.immutable)
            }
            guard
                try await site.replace(
                    SiteLayout.catalog, bytes: bytes, contentType: SiteLayout.jsonContentType,
                    cacheControl: SiteLayout.catalogCacheControl, expecting: current?.etag)
            else { return nil }
            outcome.uploads.append(SiteLayout.catalog)
            outcome.uploadedBytes += Int64(bytes.count)
            try await writeCatalogSignature(signature)
            report(.published(generation: number, packages: tours.reduce(0) { $0 + $1.packages.count }))
            return number
        }
    }

    /// When a catalogue published or refreshed at `moment` expires: `publish.catalogTTLDays` later.
    func expiry(from moment: Date) -> Date {
        moment.addingTimeInterval(Double(settings.catalogTTLDays) * 86_400)
    }

    /// `catalog.json.sig` for the catalogue just put in force; without a key,
    /// none (a signature of another catalogue must not stay beside it).
    func writeCatalogSignature(_ signature: [UInt8]?) async throws {
        let key = SiteLayout.signature(of: SiteLayout.catalog)
        if let signature {
            try await site.overwrite(
                key, bytes: signature, contentType: SiteLayout.jsonContentType, cacheControl: SiteLayout.catalogCacheControl)
        } else {
            try await site.delete(key)
        }
    }

    // MARK: Refresh

    /// `publish --refresh`: the catalogue in force, signed again with a new
    /// `expiresAt` (now plus `publish.catalogTTLDays`). Its generation,
    /// packages and every other field stay as they are; only `signedBy`
    /// follows the key, so a refresh after `keys rotate` re-signs with the
    /// new one. `generations/<n>.json` keeps the bytes first published.
    /// What a daily job runs, so that devices never see a catalogue expire.
    package func refresh(dryRun: Bool = false) async throws -> (generation: Int, expiresAt: Date) {
        try await site.exclusively { [self] in
            guard let current = try await readCatalog() else {
                throw TourpackError.invalidInput(
                    "publish --refresh: \(site.locate(SiteLayout.catalog)) does not exist; publish a catalogue first")
            }
            return try await resign(current, at: now(), dryRun: dryRun)
        }
    }

    /// Whether a publish that changes nothing renews the catalogue in force
    /// as `--refresh` would: when it has no `expiresAt` (published before
    /// catalogues expired, so every device refuses it), or has used half its
    /// time. So a daily rebuild and publish keeps devices current without a
    /// separate `--refresh`, and a weekly one before the catalogue expires.
    func needsRenewal(_ catalog: Catalog, at moment: Date) -> Bool {
        guard let expiresAt = catalog.expiresAt else { return true }
        return expiresAt.timeIntervalSince(moment) < Double(settings.catalogTTLDays) * 86_400 / 2
    }

    /// The catalogue in force, signed again with a new expiry (the site held exclusively).
    private func resign(
        _ current: (catalog: Catalog, bytes: [UInt8], etag: String), at moment: Date, dryRun: Bool
    ) async throws -> (generation: Int, expiresAt: Date) {
        try await checkAuthorised()
        var catalog = current.catalog
        catalog.expiresAt = Date(timeIntervalSince1970: expiry(from: moment).timeIntervalSince1970.rounded(.down))
        catalog.sign(by: signingKey?.keyId)
        if dryRun { return (catalog.generation, catalog.expiresAt!) }
        let bytes = Array(try catalog.encoded())
        let signature = try signingKey.map { Array(try $0.sign(Data(bytes))) }
        guard
            try await site.replace(
                SiteLayout.catalog, bytes: bytes, contentType: SiteLayout.jsonContentType,
                cacheControl: SiteLayout.catalogCacheControl, expecting: current.etag)
        else {
            throw TourpackError.invalidInput("publish --refresh: another publisher changed the catalogue meanwhile; run it again")
        }
        try await writeCatalogSignature(signature)
        report(.refreshed(generation: catalog.generation, expiresAt: catalog.expiresAt!))
        return (catalog.generation, catalog.expiresAt!)
    }

    /// Refuses to sign with a key the site's newest root (`roots/<n>.json`)
    /// does not authorise for the catalogue: devices would refuse it.
    func checkAuthorised() async throws {
        guard let signingKey, let root = try await RootPublisher(site: site).newest() else { return }
        guard root.root.roles.catalog.keyIds.contains(signingKey.keyId) else {
            throw TourpackError.invalidInput(
                "publish: signing key \(signingKey.keyId) is not one root version \(root.root.version) authorises for the catalogue "
                    + "(\(root.root.roles.catalog.keyIds.joined(separator: ", "))); devices would refuse it. "
                    + "Sign with an authorised key, or `tourpack keys rotate` to authorise this one")
        }
    }

    /// A publish killed between `catalog.json` and its signature leaves the
    /// old signature beside the new catalogue: the next publish mends it.
    private func repairSignature(of current: (catalog: Catalog, bytes: [UInt8], etag: String)) async throws {
        guard let signingKey else { return }
        let key = SiteLayout.signature(of: SiteLayout.catalog)
        if let document = try await site.read(key),
            (try? CatalogSignature.verify(
                bytes: Data(current.bytes), signatureDocument: Data(document.bytes), publicKey: signingKey.verifyingKey))
                != nil
        {
            return
        }
        try await writeCatalogSignature(Array(try signingKey.sign(Data(current.bytes))))
        report(.warning("\(SiteLayout.catalog)'s signature did not match it (a publish stopped before it was written); signed it again"))
    }
}

/// What a publish tells whoever watches it (`--json` prints each as a line).
package enum PublishEvent: Sendable, Equatable {
    case uploaded(key: String, bytes: Int64, what: String)
    case published(generation: Int, packages: Int)
    case unchanged(generation: Int)
    /// Another publisher put a catalogue in force first; merging and trying again.
    case raced
    /// Generation `from`'s packages are in force again, as the new generation `generation`.
    case rolledBack(from: Int, generation: Int)
    /// The catalogue in force was signed again with a new expiry.
    case refreshed(generation: Int, expiresAt: Date)
    case deleted(key: String)
    case warning(String)
}

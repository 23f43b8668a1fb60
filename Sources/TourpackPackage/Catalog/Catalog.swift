package import Foundation

/// `catalog.json`: every package published to devices, grouped by tour.
///
/// The app downloads this one file (and its signature, `CatalogSignature`)
/// to learn what it can install and what changed: a package whose
/// `contentHash` differs from the installed one is an update. Each
/// publication is a new `generation` that names the one it replaced, so a
/// publisher can tell when another publisher got there first.
///
/// The bytes are deterministic (`encoded()`): keys sorted by their UTF-8
/// bytes, tours by `tourId`, packages by `packageId`, `/` not escaped,
/// timestamps in ISO-8601 UTC whole seconds, a final newline; decoding the
/// bytes and encoding again gives the same bytes. The signature covers
/// exactly these bytes. `schemas/catalog.schema.json` describes them field by field.
package struct Catalog: Sendable, Hashable, Codable {
    /// The version of this layout of catalog.json; bump it on any incompatible change.
    package static let currentSchemaVersion = 1

    package var schemaVersion: Int
    /// This publication's number: 1 for the first, then greater than every
    /// generation published before it (a rollback puts an older one back in force).
    package var generation: Int
    /// The generation this one replaced; nil (absent from the JSON) for the first.
    package var previousGeneration: Int?
    /// When this generation was published, UTC, whole seconds.
    package var publishedAt: Date
    /// When devices stop trusting this catalogue for downloads and updates,
    /// UTC, whole seconds: `publishedAt` (or the last `publish --refresh`)
    /// plus `publish.catalogTTLDays`. A mirror that freezes the site can
    /// serve it only until then. Nil (absent) only in catalogues written
    /// before it existed; a device that checks signatures treats those as expired.
    package var expiresAt: Date?
    /// Sorted by `tourId`, each tour's packages by `packageId`.
    package var tours: [CatalogTour]
    /// The `keyId` of the key whose signature is in `catalog.json.sig`; nil
    /// when the catalogue was published without a key.
    package var signedBy: String?
    /// True (and present) only for a catalogue published without a signing
    /// key, so that nobody mistakes a missing signature for a lost one.
    package var unsigned: Bool?

    /// Marks the catalogue as signed by `keyId`, or, with nil, as unsigned.
    package mutating func sign(by keyId: String?) {
        signedBy = keyId
        unsigned = keyId == nil ? true : nil
    }

    /// A catalogue of `tours`, put in their canonical order, unsigned until
    /// `sign(by:)`; `publishedAt` loses any fraction of a second, as the JSON would.
    package init(generation: Int, previousGeneration: Int?, publishedAt: Date, expiresAt: Date? = nil, tours: [CatalogTour]) {
        self.schemaVersion = Catalog.currentSchemaVersion
        self.generation = generation
        self.previousGeneration = previousGeneration
        self.publishedAt = Date(timeIntervalSince1970: publishedAt.timeIntervalSince1970.rounded(.down))
        self.expiresAt = expiresAt.map { Date(timeIntervalSince1970: $0.timeIntervalSince1970.rounded(.down)) }
        self.tours = CatalogTour.sorted(tours)
        self.unsigned = true
    }

    /// A catalogue of these packages, grouped by tour (`CatalogTour.grouping(_:)`).
    package init(generation: Int, previousGeneration: Int?, publishedAt: Date, expiresAt: Date? = nil, entries: [CatalogEntry]) {
        self.init(
            generation: generation, previousGeneration: previousGeneration, publishedAt: publishedAt, expiresAt: expiresAt,
            tours: CatalogTour.grouping(entries))
    }

    /// The generation numbered after `generation`. Generations are data a
    /// site (or a leaked key) wrote: at `Int.max` there is no next one, and
    /// this says so (`integrityFailed` naming `file`) where `+ 1` would trap.
    package static func generation(after generation: Int, file: String) throws -> Int {
        let (next, overflow) = max(0, generation).addingReportingOverflow(1)
        guard !overflow else {
            throw TourpackError.integrityFailed(
                package: nil, file: file, message: "generation \(generation) is the last there can be; no generation can follow it")
        }
        return next
    }

    /// Whether a device must refuse this catalogue for downloads at `moment`:
    /// past its `expiresAt`, or without one.
    package func isExpired(at moment: Date) -> Bool {
        guard let expiresAt else { return true }
        return expiresAt <= moment
    }

    /// Every package with its tour, in catalogue order.
    package var entries: [CatalogEntry] {
        tours.flatMap { tour in tour.packages.map { CatalogEntry(tour: tour.info, package: $0) } }
    }

    /// The union of this catalogue's packages and `other`'s, for a publisher
    /// that finds another one published first: one package per `packageId`,
    /// the newer where both have it (`CatalogEntry.isNewer(than:)`). The
    /// result does not depend on which catalogue is which, and carries no
    /// generation: the publisher numbers the catalogue it builds from it.
    package func mergingPackages(with other: Catalog) -> [CatalogTour] {
        CatalogTour.grouping(entries + other.entries)
    }

    // MARK: Bytes

    /// The catalogue's canonical bytes: what is uploaded and signed. Throws
    /// only for a number JSON cannot hold (a non-finite duration or bound).
    package func encoded() throws -> Data {
        var canonical = self
        canonical.tours = CatalogTour.sorted(tours)
        return try CanonicalCoding.encode(canonical)
    }

    /// Reads catalog.json. Unknown keys are ignored (the JSON Schema is the
    /// strict check), but another `schemaVersion` is refused: a publisher
    /// that rewrote a newer layout it does not know would drop its fields.
    package static func decode(_ bytes: Data) throws -> Catalog {
        let catalog = try CanonicalCoding.decode(Catalog.self, from: bytes)
        guard catalog.schemaVersion == currentSchemaVersion else {
            throw TourpackError.invalidInput(
                "catalog.json: schemaVersion \(catalog.schemaVersion); this tourpack reads version \(currentSchemaVersion) only")
        }
        return catalog
    }
}

/// One tour and its published packages (one per voice and format).
package struct CatalogTour: Sendable, Hashable, Codable {
    package var tourId: String
    package var tourName: String
    package var tourVersion: Int
    /// The tour's BCP-47 language, e.g. `en-US`.
    package var language: String
    /// Sorted by `packageId`.
    package var packages: [CatalogPackage]

    /// What the catalogue says of a tour, as package.json carries it.
    package struct Info: Sendable, Hashable {
        package var tourId: String
        package var tourName: String
        package var tourVersion: Int
        package var language: String

        package init(tourId: String, tourName: String, tourVersion: Int, language: String) {
            self.tourId = tourId
            self.tourName = tourName
            self.tourVersion = tourVersion
            self.language = language
        }

        package init(manifest: PackageManifest) {
            self.init(
                tourId: manifest.tourId, tourName: manifest.tourName, tourVersion: manifest.tourVersion, language: manifest.language)
        }
    }

    package init(info: Info, packages: [CatalogPackage]) {
        self.tourId = info.tourId
        self.tourName = info.tourName
        self.tourVersion = info.tourVersion
        self.language = info.language
        self.packages = packages.sorted { $0.packageId.utf8.lexicographicallyPrecedes($1.packageId.utf8) }
    }

    package var info: Info {
        Info(tourId: tourId, tourName: tourName, tourVersion: tourVersion, language: language)
    }

    /// `Catalog.tours` from a list of packages: one package per `packageId`
    /// (the newer where one appears twice), grouped by `tourId`, tours
    /// sorted by `tourId` and packages by `packageId`.
    ///
    /// A tour's name, version and language are those of its newest package:
    /// while a tour is rebuilt format by format, the catalogue names the new
    /// version, and each package still says which `tourVersion` it was built from.
    package static func grouping(_ entries: [CatalogEntry]) -> [CatalogTour] {
        var newest: [String: CatalogEntry] = [:]
        for entry in entries {
            let id = entry.package.packageId
            if let held = newest[id], !entry.isNewer(than: held) { continue }
            newest[id] = entry
        }
        var byTour: [String: [CatalogEntry]] = [:]
        for entry in newest.values { byTour[entry.tour.tourId, default: []].append(entry) }
        let tours = byTour.values.map { group in
            let info = group.max { $1.isNewer(than: $0) }!.tour
            return CatalogTour(info: info, packages: group.map(\.package))
        }
        return sorted(tours)
    }

    /// Tours by `tourId`, each one's packages by `packageId`, comparing UTF-8 bytes.
    static func sorted(_ tours: [CatalogTour]) -> [CatalogTour] {
        tours.map { CatalogTour(info: $0.info, packages: $0.packages) }
            .sorted { $0.tourId.utf8.lexicographicallyPrecedes($1.tourId.utf8) }
    }
}

/// One published package: what the app shows before downloading it, and
/// where its package.json is.
package struct CatalogPackage: Sendable, Hashable, Codable {
    /// `OfflineTours/<packageId>` on the device; the same for every build of one tour, voice, format and bit rate.
    package var packageId: String
    /// The tour version this package was built from (the tour's own
    /// `tourVersion` names the newest of its packages).
    package var tourVersion: Int
    package var voice: PackageManifest.Voice
    package var format: AudioFormat
    /// The codec as FFmpeg names it (`aac`, `mp3`, `opus`).
    package var codec: String
    /// The nominal bit rate: the contract's for the format, or a quality ladder's rung.
    package var bitrateKbps: Int
    /// The option the app offers it as: package.json's `quality`, `high` where it has none.
    package var quality: AudioQuality
    /// package.json's `contentHash`: the app's "update available" signal.
    package var contentHash: String
    /// The package's package.json as published.
    package var manifest: ManifestReference
    /// What the download takes on the device: `audioBytes` + `mapBytes`.
    package var sizeBytes: Int64
    /// The sum of the audio files' sizes.
    package var audioBytes: Int64
    /// The tile pack's size; 0 without one.
    package var mapBytes: Int64
    /// All audio files together, to the millisecond.
    package var durationSeconds: Double
    package var poiCount: Int
    /// The map's buffered bounds, as package.json's `mapTiles.bounds`.
    package var bounds: MapBounds
    package var createdAt: Date
    package var expiresAt: Date

    /// Where a package's package.json is published, relative to the catalogue, and its SHA-256.
    package struct ManifestReference: Sendable, Hashable, Codable {
        /// `packages/<packageId>/<contentHash>.json`, or beside it for a rebuild of the same content
        /// (`CatalogPackage.manifestPath(packageId:contentHash:)`, `alternateManifestPath`).
        package var path: String
        /// Lowercase hex SHA-256 of the published package.json bytes.
        package var sha256: String

        package init(path: String, sha256: String) {
            self.path = path
            self.sha256 = sha256.lowercased()
        }
    }

    /// The catalogue's entry for a package.json published at `manifestPath`
    /// with the SHA-256 `manifestSHA256`.
    package init(manifest: PackageManifest, manifestPath: String, manifestSHA256: String) {
        let audioBytes = manifest.audio.reduce(Int64(0)) { $0 + $1.sizeBytes }
        let mapBytes = manifest.mapTiles.sizeBytes ?? 0
        let duration = manifest.audio.reduce(0.0) { $0 + $1.durationSeconds }
        self.packageId = manifest.packageId
        self.tourVersion = manifest.tourVersion
        self.voice = manifest.voice
        self.format = manifest.audio.first?.format ?? .aac
        self.codec = manifest.audio.first?.codec ?? format.codecName
        self.bitrateKbps = manifest.audio.first?.bitrateKbps ?? format.bitrateKbps
        self.quality = manifest.quality ?? .high
        self.contentHash = manifest.contentHash
        self.manifest = ManifestReference(path: manifestPath, sha256: manifestSHA256)
        self.sizeBytes = audioBytes + mapBytes
        self.audioBytes = audioBytes
        self.mapBytes = mapBytes
        self.durationSeconds = (duration * 1000).rounded() / 1000
        self.poiCount = manifest.pois.count
        self.bounds = manifest.mapTiles.bounds
        self.createdAt = manifest.createdAt
        self.expiresAt = manifest.expiresAt
    }

    /// `packages/<packageId>/<contentHash>.json`: content-addressed, so a
    /// new build never overwrites a package.json a device may be reading.
    package static func manifestPath(packageId: String, contentHash: String) -> String {
        "packages/\(packageId)/\(contentHash).json"
    }

    /// Where a rebuild of the same content with new bytes (another expiry)
    /// goes when `manifestPath` is taken: beside it, named by the first 12
    /// hex digits of its own SHA-256 too,
    /// `packages/<packageId>/<contentHash>.<sha256 prefix>.json`.
    package static func alternateManifestPath(packageId: String, contentHash: String, sha256: String) -> String {
        "packages/\(packageId)/\(contentHash).\(sha256.prefix(12)).json"
    }

    /// Whether the catalogue names this package's package.json where a
    /// publisher puts it: one of the two paths above, and no other.
    package var namesItsManifestWhereItBelongs: Bool {
        manifest.path == Self.manifestPath(packageId: packageId, contentHash: contentHash)
            || manifest.path == Self.alternateManifestPath(packageId: packageId, contentHash: contentHash, sha256: manifest.sha256)
    }
}

/// A package with the tour it belongs to: what a publisher collects before
/// grouping (`CatalogTour.grouping(_:)`), and what `Catalog.entries` flattens to.
package struct CatalogEntry: Sendable, Hashable {
    package var tour: CatalogTour.Info
    package var package: CatalogPackage

    package init(tour: CatalogTour.Info, package: CatalogPackage) {
        self.tour = tour
        self.package = package
    }

    /// The entry for a package.json published at `manifestPath`.
    package init(manifest: PackageManifest, manifestPath: String, manifestSHA256: String) {
        self.init(
            tour: CatalogTour.Info(manifest: manifest),
            package: CatalogPackage(manifest: manifest, manifestPath: manifestPath, manifestSHA256: manifestSHA256))
    }

    /// Whether this entry's package replaces `other`'s: built later
    /// (`createdAt`), else from a later tour version, else (two builds in
    /// the same second) the greater manifest SHA-256, and last the tour's
    /// own facts, so that every publisher picks the same one whichever
    /// order it sees them in.
    package func isNewer(than other: CatalogEntry) -> Bool {
        let (a, b) = (package, other.package)
        if a.createdAt != b.createdAt { return a.createdAt > b.createdAt }
        if a.tourVersion != b.tourVersion { return a.tourVersion > b.tourVersion }
        if a.manifest.sha256 != b.manifest.sha256 { return Self.precedes(b.manifest.sha256, a.manifest.sha256) }
        if tour.tourVersion != other.tour.tourVersion { return tour.tourVersion > other.tour.tourVersion }
        if tour.tourName != other.tour.tourName { return Self.precedes(other.tour.tourName, tour.tourName) }
        return Self.precedes(other.tour.language, tour.language)
    }

    private static func precedes(_ a: String, _ b: String) -> Bool {
        a.utf8.lexicographicallyPrecedes(b.utf8)
    }
}

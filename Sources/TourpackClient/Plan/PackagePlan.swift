package import Foundation
package import TourpackPackage

/// One package's work, decided before a byte of its files is downloaded.
package struct PackagePlan: Sendable {
    package enum Action: String, Sendable, Hashable, Codable {
        /// Not installed: every file not already in place, then package.json.
        case install
        /// Installed at another `contentHash`: the files whose SHA-256 changed.
        case update
        /// The same content under a new package.json (a rebuild renewed
        /// `createdAt` and `expiresAt`): no file, only package.json.
        case refresh
        /// The installed package.json is the one the catalogue names, and
        /// every file it lists is there at its size: nothing to do.
        case upToDate
    }

    package var entry: CatalogEntry
    package var action: Action
    package var installed: PackageOnDisk?
    /// package.json as published, checked against the catalogue (empty when up to date).
    package var manifestBytes: [UInt8] = []
    package var manifest: PackageManifest?
    /// Every file the new package.json names.
    package var files: [PackageFile] = []
    /// The files not already in place at their path with their SHA-256.
    package var placements: [PackageFile] = []
    /// What to download for them: one file per SHA-256.
    package var downloads: [PackageFile] = []
    /// Other packages of the tour whose files the new one replaces at the
    /// same paths (another voice in the same format): removed with the commit.
    package var superseded: [PackageOnDisk] = []
    /// Paths the old version (or a superseded package) lists that nothing
    /// installed will list afterwards: removed with the commit.
    package var obsolete: [String] = []

    package var packageId: String { entry.package.packageId }
    /// `package <id> (<tour name>)`, for messages.
    package var name: String { TourpackError.packageName(packageId, tourName: entry.tour.tourName) }
    package var downloadBytes: Int64 { downloads.reduce(0) { $0 + $1.sizeBytes } }

    /// The narrations each downloaded audio file makes playable, by its
    /// SHA-256, for a first download; none for an update, whose installed
    /// version plays until the new one is committed whole.
    var playableNarrations: [String: [NarrationID]] {
        guard action == .install, let manifest else { return [:] }
        let wanted = Set(downloads.map(\.sha256))
        var named: [String: [NarrationID]] = [:]
        for entry in manifest.audio where wanted.contains(entry.sha256) {
            named[entry.sha256, default: []].append(NarrationID(poiId: UUID(tourKey: entry.poiId), phase: NarrationPhase(entry.phase)))
        }
        return named
    }
}

/// Decides each package's `PackagePlan`: whether it is up to date (from
/// the installed package.json alone, so an up-to-date package costs no
/// request), else its new package.json, fetched and checked against the
/// catalogue, and the files that differ.
package struct PackagePlanner: Sendable {
    package let source: any SiteSource
    package let documents: URL

    package init(source: any SiteSource, documents: URL) {
        self.source = source
        self.documents = documents
    }

    /// The plan for `entry`, given every package installed now.
    package func plan(_ entry: CatalogEntry, installed all: [PackageOnDisk]) async throws -> PackagePlan {
        let installed = all.first { $0.packageId == entry.package.packageId }
        var plan = PackagePlan(entry: entry, action: .install, installed: installed)
        if let installed, installed.manifestSHA256 == entry.package.manifest.sha256, installed.damagedPaths(in: documents).isEmpty {
            plan.action = .upToDate
            return plan
        }
        let (bytes, manifest) = try await fetchManifest(entry)
        plan.manifestBytes = bytes
        plan.manifest = manifest
        plan.files = try PackageFiles.of(manifest, file: entry.package.manifest.path)
        // A package's files lie under its tour's audio folder and its own
        // folder (`PackageFiles.of`, which every installed package passed), so
        // only packages of this tour, or this package as installed, can share
        // a path with it: the others are not looked into, and a plan costs
        // the same however many packages are installed.
        let related = all.filter { $0.manifest.tourId == manifest.tourId || $0.packageId == entry.package.packageId }
        plan.superseded = related.filter { other in
            other.packageId != entry.package.packageId && other.manifest.tourId == manifest.tourId
                && !Set(other.files.map(\.path)).isDisjoint(with: plan.files.map(\.path))
        }
        // In place: a path installed packages list with this SHA-256 alone, at its size.
        // Two packages claiming one path with two digests leave it in doubt: fetched again.
        // Only the new package's paths are looked at on disk.
        let newPaths = Set(plan.files.map(\.path))
        var claims: [String: Set<String>] = [:]
        for package in related where package.files.contains(where: { newPaths.contains($0.path) }) {
            let damaged = package.damagedPaths(in: documents, among: newPaths)
            for file in package.files where newPaths.contains(file.path) {
                claims[file.path, default: []].insert(damaged.contains(file.path) ? "" : file.sha256)
            }
        }
        plan.placements = plan.files.filter { claims[$0.path] != [$0.sha256] }
        var seen: Set<String> = []
        plan.downloads = plan.placements.filter { seen.insert($0.sha256).inserted }
        // Paths the leaving packages list that nothing installed will: looked for only
        // among those paths (none for a first install), not across every package.
        let leaving = Set(([installed].compactMap { $0 } + plan.superseded).map(\.packageId))
        let candidates = Set(([installed].compactMap { $0 } + plan.superseded).flatMap { $0.files.map(\.path) }).subtracting(newPaths)
        var kept: Set<String> = []
        if !candidates.isEmpty {
            for package in related where !leaving.contains(package.packageId) {
                for file in package.files where candidates.contains(file.path) { kept.insert(file.path) }
            }
        }
        plan.obsolete = candidates.subtracting(kept).sorted()
        if installed == nil {
            plan.action = .install
        } else if plan.placements.isEmpty, plan.obsolete.isEmpty, installed?.manifest.contentHash == manifest.contentHash {
            plan.action = .refresh
        } else {
            plan.action = .update
        }
        return plan
    }

    /// The package.json the catalogue names, checked: its SHA-256, then that
    /// it is the package and content the catalogue says.
    package func fetchManifest(_ entry: CatalogEntry) async throws -> ([UInt8], PackageManifest) {
        let package = entry.package
        let name = TourpackError.packageName(package.packageId, tourName: entry.tour.tourName)
        let path = package.manifest.path
        guard package.namesItsManifestWhereItBelongs else {
            throw TourpackError.integrityFailed(
                package: name, file: path,
                message: "the catalogue names a package.json outside packages/<packageId>/<contentHash>[.<sha256 prefix>].json")
        }
        // An install that stopped before its commit (killed, paused, the
        // network gone) left this package.json waiting in `downloads` under
        // the catalogue's SHA-256: checked below like a fetched one, it is
        // not asked for again.
        let waiting = InstallFolder(documents: documents).verified(package.manifest.sha256)
        let kept = try? await Blocking.run { FileManager.default.contents(atPath: waiting.path).map { [UInt8]($0) } }
        let fetched: [UInt8]?
        if let bytes = kept, PackageFiles.sha256(bytes) == package.manifest.sha256 {
            fetched = bytes
        } else {
            do { fetched = try await source.object(path) } catch let failure as SiteSourceFailure {
                throw failure.installError(package: name, file: path)
            }
        }
        guard let bytes = fetched else {
            throw TourpackError.integrityFailed(
                package: name, file: path, message: "the site has no \(path), though the catalogue names it")
        }
        let digest = PackageFiles.sha256(bytes)
        guard digest == package.manifest.sha256 else {
            throw TourpackError.integrityFailed(
                package: name, file: path, message: "SHA-256 \(digest), but the catalogue names \(package.manifest.sha256)")
        }
        let manifest: PackageManifest
        do { manifest = try PackageManifest.decode(bytes) } catch {
            throw TourpackError.integrityFailed(package: name, file: path, message: "not a package.json: \(error)")
        }
        guard manifest.packageId == package.packageId, manifest.tourId == entry.tour.tourId,
            manifest.contentHash == package.contentHash
        else {
            throw TourpackError.integrityFailed(
                package: name, file: path, message: "its packageId, tourId or contentHash is not the catalogue's")
        }
        return (bytes, manifest)
    }
}

package import Foundation
import TourpackPackage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// `tourpack installed DOCUMENTS`: what the installed packages take, and
/// `--remove`, which deletes one with its files.
package struct InstalledInventory: Sendable {
    package let documents: URL

    package init(documents: URL) { self.documents = documents.standardizedFileURL }

    /// One installed package.
    package struct Package: Sendable, Hashable, Codable {
        package var packageId: String
        package var format: String
        package var bitrateKbps: Int
        /// The quality it was offered as (high where package.json names none).
        package var quality: AudioQuality
        package var voice: String
        package var contentHash: String
        package var createdAt: Date
        package var expiresAt: Date
        package var expired: Bool
        /// Its files (and package.json) as they are on disk.
        package var bytes: Int64
        package var files: Int
        /// Files package.json names that are missing or not at their size.
        package var damagedFiles: Int
    }

    package struct Tour: Sendable, Hashable, Codable {
        package var tourId: String
        package var tourName: String
        /// On disk, each shared file once.
        package var bytes: Int64
        /// When the app last used the tour (`OfflineLibrary.markAccessed`); nil if never.
        package var lastAccessed: Date?
        package var packages: [Package]
    }

    package struct Statistics: Sendable, Hashable, Codable {
        package var documents: String
        package var packages: Int
        /// Every file the packages name, each once, and their package.json files.
        package var bytes: Int64
        package var expired: Int
        package var tours: [Tour]
        /// package.json files that do not read (left alone).
        package var unreadable: [String]
        /// The newest catalogue this folder verified (`.tourpack-install/trust.json`); nil when none was.
        package var catalog: CatalogState? = nil
    }

    /// The catalogue a Documents folder last verified, and whether it is stale.
    package struct CatalogState: Sendable, Hashable, Codable {
        package var site: String?
        package var generation: Int?
        package var expiresAt: Date?
        /// Past `expiresAt` (or without one): downloads and updates are refused
        /// (`catalogExpired`) until the site serves a fresh catalogue; installed packages keep playing.
        package var stale: Bool
    }

    /// The statistics at `now` (expiry is judged against it).
    package func statistics(now: Date) throws -> Statistics {
        guard OutputTree.kind(documents) == .folder else {
            throw TourpackError.invalidInput("\(documents.path): no such folder; is this a Documents root?")
        }
        let (installed, unreadable) = PackageOnDisk.read(documents: documents)
        let accessed = AccessLog.read(InstallFolder(documents: documents))
        var tours: [String: Tour] = [:]
        var counted: Set<String> = []
        var total: Int64 = 0
        for package in installed {
            let damaged = package.damagedPaths(in: documents)
            var bytes = Int64(package.manifestBytes.count)
            var tourBytes = bytes
            for file in package.files where !damaged.contains(file.path) {
                bytes += file.sizeBytes
                if counted.insert(file.path).inserted { tourBytes += file.sizeBytes }
            }
            total += tourBytes
            let manifest = package.manifest
            let entry = Package(
                packageId: manifest.packageId, format: manifest.audio.first?.format.rawValue ?? "?",
                bitrateKbps: manifest.audio.first?.bitrateKbps ?? 0, quality: manifest.quality ?? .high, voice: manifest.voice.name,
                contentHash: manifest.contentHash, createdAt: manifest.createdAt, expiresAt: manifest.expiresAt,
                expired: manifest.isExpired(at: now), bytes: bytes, files: package.files.count, damagedFiles: damaged.count)
            tours[
                manifest.tourId,
                default: Tour(
                    tourId: manifest.tourId, tourName: manifest.tourName, bytes: 0, lastAccessed: accessed[manifest.tourId], packages: [])
            ]
            .packages.append(entry)
            tours[manifest.tourId]!.bytes += tourBytes
        }
        let sorted = tours.values.sorted { $0.tourId < $1.tourId }
        let catalog = InstallFolder(documents: documents).trustRecord().map { record in
            CatalogState(
                site: record.site, generation: record.generation, expiresAt: record.catalogExpiresAt,
                stale: record.catalogExpiresAt.map { $0 <= now } ?? true)
        }
        return Statistics(
            documents: documents.path, packages: installed.count, bytes: total,
            expired: sorted.flatMap(\.packages).filter(\.expired).count, tours: sorted, unreadable: unreadable, catalog: catalog)
    }

    /// Removes the least recently accessed packages until what is installed
    /// fits `budget` (`installed --max-storage`), sparing its protected
    /// tours; throws `storageFailed` when those alone pass it.
    package func enforce(_ budget: StorageBudget) throws -> Removal {
        let installed = PackageOnDisk.read(documents: documents).packages
        guard let evict = budget.evictions(from: installed, accessed: AccessLog.read(InstallFolder(documents: documents))) else {
            throw TourpackError.storageFailed(
                path: documents.path, operation: "keep \(budget.maxBytes) bytes",
                reason:
                    "the pinned packages alone take \(StorageBudget.bytes(of: installed.filter { budget.protected.contains($0.manifest.tourId) })) bytes"
            )
        }
        var total = Removal(packages: [], files: 0, bytes: 0)
        for package in evict {
            let removal = try remove(package.packageId)
            total.packages += removal.packages
            total.files += removal.files
            total.bytes += removal.bytes
        }
        return total
    }

    /// What a removal deleted.
    package struct Removal: Sendable, Hashable, Codable {
        package var packages: [String]
        package var files: Int
        package var bytes: Int64
    }

    /// Deletes the package `id` (or every package of the tour `id`) with its
    /// files, under the install lock: package.json first, so the app stops
    /// seeing the package at once, then its tile pack, captions and folder,
    /// then the audio files no other installed package lists.
    package func remove(_ id: String, waitingUpTo seconds: Double = 0) throws -> Removal {
        guard OutputTree.kind(documents) == .folder else {
            throw TourpackError.invalidInput("\(documents.path): no such folder; is this a Documents root?")
        }
        let lock = try InstallLock.acquire(documents: documents, waitingUpTo: seconds)
        defer { lock.release() }
        let wanted = id.lowercased()
        let (installed, _) = PackageOnDisk.read(documents: documents)
        let leaving = installed.filter { $0.packageId == wanted || $0.manifest.tourId == wanted }
        guard !leaving.isEmpty else {
            let known = installed.map { "\($0.packageId) (\($0.manifest.tourName))" }.joined(separator: ", ")
            throw TourpackError.invalidInput(
                "--remove \(id): no installed package or tour has that ID; installed: \(known.isEmpty ? "none" : known)")
        }
        let layout = Layout(root: documents)
        let leavingIDs = Set(leaving.map(\.packageId))
        let kept = Set(installed.filter { !leavingIDs.contains($0.packageId) }.flatMap { $0.files.map(\.path) })
        var removal = Removal(packages: [], files: 0, bytes: 0)
        for package in leaving {
            guard let packageID = SafeID(validating: package.packageId) else { continue }
            let folder = layout.packageFolder(packageID: packageID).url
            // The files in the package's own folder (tile pack, captions) go with it.
            let own = try package.files.filter { $0.kind != .audio }.map { try layout.resolve(relativePath: $0.path) }
            let sizes = own.map(Self.size)
            try Layout.removePackage(at: folder)
            for (url, bytes) in zip(own, sizes) where bytes > 0 && OutputTree.kind(url) == .absent {
                removal.files += 1
                removal.bytes += bytes
            }
            removal.bytes += Int64(package.manifestBytes.count)
            removal.packages.append(package.packageId)
        }
        var folders: Set<URL> = []
        for path in Set(leaving.flatMap { $0.files.filter { $0.kind == .audio }.map(\.path) }).subtracting(kept).sorted() {
            let url = try layout.resolve(relativePath: path)
            let bytes = Self.size(url)
            if try AtomicFile.remove(url, under: documents) {
                removal.files += 1
                removal.bytes += bytes
                folders.insert(url.deletingLastPathComponent())
            }
        }
        for folder in folders.sorted(by: { $0.path < $1.path }) {
            try AtomicFile.syncFolder(folder)
            try AtomicFile.removeFolderIfEmpty(folder)
        }
        if !folders.isEmpty { try AtomicFile.syncFolder(documents.appendingPathComponent(Layout.audioCacheFolder)) }
        return removal
    }

    private static func size(_ url: URL) -> Int64 {
        var info = stat()
        return lstat(url.path, &info) == 0 && info.st_mode & S_IFMT == S_IFREG ? Int64(info.st_size) : 0
    }
}

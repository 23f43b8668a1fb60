package import Foundation
package import TourpackCore
package import TourpackState
import TourpackValidate

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// What an output root holds, package by package and file by file: the
/// ground truth behind `tourpack cache stats` and `cache prune`.
package struct CacheInventory: Sendable {
    package struct Package: Sendable, Hashable {
        package var packageID: String
        package var tourID: String
        package var tourName: String
        package var format: AudioFormat?
        package var expiresAt: Date
        package var isExpired: Bool
        /// Root-relative audio paths the package lists.
        package var audioPaths: [String]
    }

    package struct File: Sendable, Hashable {
        /// Root-relative, e.g. `AudioCache/<tourId>/<poiId>_Detailed.m4a`.
        package var path: String
        package var size: Int64
        /// Last written: a file is rewritten whenever it is rebuilt.
        package var modified: Date
    }

    package private(set) var packages: [Package] = []
    /// `OfflineTours/<name>` folders whose package.json cannot be read.
    package private(set) var unreadablePackages: [String] = []
    package private(set) var files: [File] = []
    package private(set) var temporaries: [String] = []

    /// Reads the root once: every package.json and every AudioCache file.
    package static func scan(_ layout: Layout, now: Date) throws -> CacheInventory {
        try scan(layout, bundle: BundleInventory(root: layout.root), now: now)
    }

    /// The inventory of a root already listed as `bundle`.
    static func scan(_ layout: Layout, bundle: BundleInventory, now: Date) throws -> CacheInventory {
        var inventory = CacheInventory()
        inventory.temporaries = bundle.temporaries
        for name in bundle.packageFolders {
            // A folder without a package.json is as unreadable as one whose package.json does not decode.
            guard let manifest = (try? PackageFolders.read(documents: layout.root, folder: name))?.manifest else {
                inventory.unreadablePackages.append("\(Layout.offlineToursFolder)/\(name)")
                continue
            }
            inventory.packages.append(
                Package(
                    packageID: name, tourID: manifest.tourId, tourName: manifest.tourName, format: manifest.audio.first?.format,
                    expiresAt: manifest.expiresAt, isExpired: manifest.isExpired(at: now), audioPaths: manifest.audio.map(\.path)))
        }
        for entry in bundle.audioCacheFiles where !entry.isSymlink {
            let status = FileStatus(path: layout.root.appendingPathComponent(entry.path).path)
            let modified = status.map { Date(timeIntervalSince1970: Double($0.modifiedSeconds)) } ?? now
            inventory.files.append(File(path: entry.path, size: entry.size, modified: modified))
        }
        return inventory
    }

    package var bytes: Int64 { files.reduce(0) { $0 + $1.size } }

    /// Paths listed by packages that have not expired: what the app may play.
    package var livePaths: Set<String> {
        Set(packages.filter { !$0.isExpired }.flatMap(\.audioPaths))
    }

    /// Paths listed by any package on disk, expired or not.
    package var listedPaths: Set<String> {
        Set(packages.flatMap(\.audioPaths))
    }
}

/// `tourpack cache stats`: the storage statistics of one pipeline's root and state.
package struct CacheStatistics: Sendable, Hashable, Codable {
    package struct Tour: Sendable, Hashable, Codable {
        package var tourId: String
        /// From its packages; nil when no package names the tour.
        package var tourName: String?
        package var files: Int
        package var bytes: Int64
    }

    package var version = 1
    package var output: String
    package var packages: Int
    package var expiredPackages: Int
    package var unreadablePackages: Int
    package var files: Int
    package var bytes: Int64
    package var budgetBytes: Int64
    /// Files no current (unexpired) package lists.
    package var unreferencedFiles: Int
    package var unreferencedBytes: Int64
    /// Audio older than `audioMaxAgeDays`: not reused by a build, removed by prune when unreferenced.
    package var expiredAudioFiles: Int
    package var temporaries: Int
    /// Bytes of the state folder's synthesis cache (0 until one exists).
    package var synthesisCacheBytes: Int64
    /// Chunks in the synthesis cache, and its budget (`synthesisCacheMaxMB`).
    package var synthesisCacheEntries = 0
    package var synthesisBudgetBytes: Int64 = 0
    /// Map tiles in the state's tile cache, the bytes of their files, and its budget (`tileCacheMaxMB`).
    package var tileCacheEntries = 0
    package var tileCacheBytes: Int64 = 0
    package var tileBudgetBytes: Int64 = 0
    /// Tile packs (`OfflineTours/*/tiles.mbtiles`) and their bytes: they ship
    /// with the packages, outside the AudioCache budget.
    package var tilePacks = 0
    package var tilePackBytes: Int64 = 0
    /// Tours of this root whose latest build attempt failed, from the build records.
    package var failedTours = 0
    /// The failed tours by id, with the reason their last attempt gave.
    package var failedTourReasons: [String: String] = [:]
    /// Builds of this root per status (queued, running, completed, failed, cancelled).
    package var builds: [String: Int] = [:]
    /// The most recent build of this root.
    package var lastBuild: BuildRecord?
    package var tours: [Tour]

    package init(inventory: CacheInventory, config: PipelineConfig, now: Date) {
        let live = inventory.livePaths
        let audioCutoff = now.addingTimeInterval(-Double(config.budgets.audioMaxAgeDays) * 86_400)
        output = config.output.path
        packages = inventory.packages.count
        expiredPackages = inventory.packages.filter(\.isExpired).count
        unreadablePackages = inventory.unreadablePackages.count
        files = inventory.files.count
        bytes = inventory.bytes
        budgetBytes = config.budgets.cacheMaxBytes
        let unreferenced = inventory.files.filter { !live.contains($0.path) }
        unreferencedFiles = unreferenced.count
        unreferencedBytes = unreferenced.reduce(0) { $0 + $1.size }
        expiredAudioFiles = inventory.files.filter { $0.modified < audioCutoff }.count
        temporaries = inventory.temporaries.count
        synthesisCacheBytes = Self.folderBytes(config.state.appendingPathComponent("synthesis", isDirectory: true))
        synthesisBudgetBytes = config.budgets.synthesisCacheMaxBytes
        tileBudgetBytes = config.budgets.tileCacheMaxBytes
        let packages = config.output.appendingPathComponent(Layout.offlineToursFolder, isDirectory: true)
        for name in (try? FileManager.default.contentsOfDirectory(atPath: packages.path)) ?? [] {
            let pack = packages.appendingPathComponent(name).appendingPathComponent(Layout.tilePackFileName)
            guard let size = (try? FileManager.default.attributesOfItem(atPath: pack.path))?[.size] as? NSNumber else { continue }
            tilePacks += 1
            tilePackBytes += size.int64Value
        }
        var byTour: [String: Tour] = [:]
        for file in inventory.files {
            let tourID = file.path.split(separator: "/").dropFirst().first.map(String.init) ?? "?"
            var tour =
                byTour[tourID]
                ?? Tour(tourId: tourID, tourName: inventory.packages.first { $0.tourID == tourID }?.tourName, files: 0, bytes: 0)
            tour.files += 1
            tour.bytes += file.size
            byTour[tourID] = tour
        }
        tours = byTour.values.sorted { $0.tourId < $1.tourId }
    }

    /// Adds what the state database knows: the synthesis cache's entries and
    /// the build records of this root. `state` is nil when nothing was ever built.
    package mutating func add(_ state: BuildState?) throws {
        guard let state else { return }
        let output = URL(fileURLWithPath: self.output)
        synthesisCacheEntries = try state.synthesis.totals().entries
        (tileCacheEntries, tileCacheBytes) = try state.tiles.totals()
        let failed = try state.records.failedTours(output: output)
        failedTours = failed.count
        failedTourReasons = Dictionary(failed.map { ($0.tourId, $0.message ?? "") }, uniquingKeysWith: { first, _ in first })
        builds = Dictionary(uniqueKeysWithValues: try state.records.counts(output: output).map { ($0.key.rawValue, $0.value) })
        lastBuild = try state.records.recent(limit: 1, output: output).first
    }

    static func folderBytes(_ folder: URL) -> Int64 {
        guard let walker = FileManager.default.enumerator(at: folder, includingPropertiesForKeys: [.fileSizeKey]) else { return 0 }
        var total: Int64 = 0
        for case let url as URL in walker {
            total += Int64((try? url.resourceValues(forKeys: [.fileSizeKey]).fileSize) ?? 0)
        }
        return total
    }
}

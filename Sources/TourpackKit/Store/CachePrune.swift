public import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// What `tourpack cache prune` removes, decided before anything is touched.
///
/// In order:
/// 1. expired packages (their `expiresAt` has passed): the app must not
///    offer them, and `validate` fails them;
/// 2. audio no live package lists that is older than `audioMaxAgeDays`: a
///    build would not reuse it anyway;
/// 3. while the AudioCache is still over `cacheMaxMB`, the remaining
///    unlisted audio, least recently written first.
///
/// Audio a live package lists is never removed, so every package left
/// still matches its files.
public struct CachePrunePlan: Sendable, Hashable, Codable {
    public struct Removal: Sendable, Hashable, Codable {
        public var path: String
        public var bytes: Int64
        /// `expired package`, `expired audio` or `over budget`.
        public var reason: String
    }

    public var removals: [Removal] = []
    public var bytesBefore: Int64 = 0
    public var budgetBytes: Int64 = 0

    public var freedBytes: Int64 { removals.reduce(0) { $0 + $1.bytes } }
    public var bytesAfter: Int64 { bytesBefore - removals.filter { $0.path.hasPrefix(Layout.audioCacheFolder + "/") }.reduce(0) { $0 + $1.bytes } }

    public init(inventory: CacheInventory, budgets: Budgets, now: Date) {
        bytesBefore = inventory.bytes
        budgetBytes = Int64(budgets.cacheMaxMB) * 1_048_576
        for package in inventory.packages where package.isExpired {
            removals.append(Removal(path: "\(Layout.offlineToursFolder)/\(package.packageID)", bytes: 0, reason: "expired package"))
        }
        let live = inventory.livePaths
        let cutoff = now.addingTimeInterval(-Double(budgets.audioMaxAgeDays) * 86_400)
        var remaining = inventory.bytes
        var unlisted: [CacheInventory.File] = []
        for file in inventory.files where !live.contains(file.path) {
            if file.modified < cutoff {
                removals.append(Removal(path: file.path, bytes: file.size, reason: "expired audio"))
                remaining -= file.size
            } else {
                unlisted.append(file)
            }
        }
        for file in unlisted.sorted(by: { ($0.modified, $0.path) < ($1.modified, $1.path) }) where remaining > budgetBytes {
            removals.append(Removal(path: file.path, bytes: file.size, reason: "over budget"))
            remaining -= file.size
        }
    }

    /// Removes what the plan lists. A file already gone counts as removed.
    /// Call it only while holding the `BuildLock`.
    public func apply(to layout: Layout) throws {
        var touched: Set<String> = []
        for removal in removals {
            let url = layout.root.appendingPathComponent(removal.path)
            if removal.reason == "expired package" {
                try Layout.removePackage(at: url)
            } else {
                try AtomicFile.remove(url)
                touched.insert(url.deletingLastPathComponent().path)
            }
        }
        for folder in touched.sorted() where FileManager.default.fileExists(atPath: folder) {
            try AtomicFile.syncFolder(URL(fileURLWithPath: folder, isDirectory: true))
        }
    }
}

/// `tourpack cache clear --yes`: everything the pipeline wrote, output and
/// state alike, except the lock file (deleting a lock file under a waiter
/// would let two builds run).
public enum CacheClearing {
    /// Removes `AudioCache`, `OfflineTours`, and every state entry but the
    /// lock; returns the bytes freed. Call it only while holding the `BuildLock`.
    public static func clear(output: URL, state: URL) throws -> Int64 {
        var freed: Int64 = 0
        for folder in [Layout.audioCacheFolder, Layout.offlineToursFolder].map({ output.appendingPathComponent($0, isDirectory: true) }) {
            freed += CacheStatistics.folderBytes(folder)
            try remove(folder)
        }
        for name in ((try? FileManager.default.contentsOfDirectory(atPath: state.path)) ?? []) where name != BuildLock.fileName {
            let url = state.appendingPathComponent(name)
            freed += CacheStatistics.folderBytes(url) + ((try? FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int64) ?? 0)
            try remove(url)
        }
        return freed
    }

    private static func remove(_ url: URL) throws {
        guard FileManager.default.fileExists(atPath: url.path) else { return }
        do { try FileManager.default.removeItem(at: url) } catch {
            throw TourpackError.storageFailed(path: url.path, errno: EIO, operation: "remove")
        }
    }
}

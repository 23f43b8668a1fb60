package import Foundation
package import TourpackCore
import TourpackState
import TourpackValidate

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
///    unlisted audio, least recently used first (when the output cache
///    last made or reused it; its modification time when it has no record).
///
/// After every build only step 3 runs (`overBudgetOnly`): the contract's eviction.
///
/// Audio a live package lists is never removed, so every package left
/// still matches its files.
package struct CachePrunePlan: Sendable, Hashable, Codable {
    package struct Removal: Sendable, Hashable, Codable {
        package var path: String
        package var bytes: Int64
        /// `expired package`, `expired audio` or `over budget`.
        package var reason: String
    }

    package var removals: [Removal] = []
    package var bytesBefore: Int64 = 0
    package var budgetBytes: Int64 = 0

    /// A plan that removes nothing.
    init() {}

    package var freedBytes: Int64 { removals.reduce(0) { $0 + $1.bytes } }
    package var bytesAfter: Int64 {
        bytesBefore - removals.filter { $0.path.hasPrefix(Layout.audioCacheFolder + "/") }.reduce(0) { $0 + $1.bytes }
    }

    /// - Parameters:
    ///   - inventory: what the root holds now.
    ///   - budgets: `cacheMaxMB` and the ages past which packages and audio expire.
    ///   - now: the clock the ages are measured against.
    ///   - lastUsed: when the build last made or reused each file, by root-relative path.
    ///   - overBudgetOnly: only evict over the budget; leave expired packages and old audio.
    ///   - scope: a shard's build evicts only its own tours' unlisted audio
    ///     (`OutputScope`); the budget still counts the whole AudioCache.
    package init(
        inventory: CacheInventory, budgets: Budgets, now: Date, lastUsed: [String: Date] = [:], overBudgetOnly: Bool = false,
        scope: OutputScope? = nil
    ) {
        bytesBefore = inventory.bytes
        budgetBytes = budgets.cacheMaxBytes
        for package in inventory.packages
        where package.isExpired && !overBudgetOnly && scope?.packageIDs.contains(package.packageID) ?? true {
            removals.append(Removal(path: "\(Layout.offlineToursFolder)/\(package.packageID)", bytes: 0, reason: "expired package"))
        }
        // After a build, every package on disk pins its audio, expired or
        // not: eviction must never leave a package.json without its files.
        // Prune removes expired packages first, so it can free their audio.
        let live = overBudgetOnly ? inventory.listedPaths : inventory.livePaths
        let cutoff = now.addingTimeInterval(-Double(budgets.audioMaxAgeDays) * 86_400)
        var remaining = inventory.bytes
        var unlisted: [CacheInventory.File] = []
        for file in inventory.files where !live.contains(file.path) && scope?.ownsAudio(at: file.path) ?? true {
            if file.modified < cutoff, !overBudgetOnly {
                removals.append(Removal(path: file.path, bytes: file.size, reason: "expired audio"))
                remaining -= file.size
            } else {
                unlisted.append(file)
            }
        }
        func used(_ file: CacheInventory.File) -> Date { lastUsed[file.path] ?? file.modified }
        for file in unlisted.sorted(by: { (used($0), $0.path) < (used($1), $1.path) }) where remaining > budgetBytes {
            removals.append(Removal(path: file.path, bytes: file.size, reason: "over budget"))
            remaining -= file.size
        }
    }

    /// Removes what the plan lists. A file already gone counts as removed.
    /// Call it only while holding the `BuildLock`.
    package func apply(to layout: Layout) throws {
        var touched: Set<String> = []
        for removal in removals {
            let url = layout.root.appendingPathComponent(removal.path)
            if removal.reason == "expired package" {
                try Layout.removePackage(at: url)
            } else {
                // Reached from the root through real folders only: a symlink swapped in is refused, never followed out of the root.
                try AtomicFile.remove(url, under: layout.root)
                touched.insert(url.deletingLastPathComponent().path)
            }
        }
        for folder in touched.sorted() where FileManager.default.fileExists(atPath: folder) {
            try AtomicFile.syncFolder(URL(fileURLWithPath: folder, isDirectory: true))
        }
    }
}

/// The one scan → plan → prune → evict sequence, for the eviction after
/// every build and for `tourpack cache prune`: the AudioCache is scanned,
/// the plan drops unlisted audio (least recently used first; with
/// `overBudgetOnly`, only until it fits in `cacheMaxMB`, as a build does;
/// otherwise also expired packages and old audio, as `cache prune` does),
/// the output cache forgets what went, and the synthesis and tile caches
/// evict to their own budgets. Audio that a current package lists is never
/// removed. Blocking; call it with the root's lock held.
package enum CacheMaintenance {
    /// - Parameters:
    ///   - layout: the output root.
    ///   - budgets: the cache budgets and ages to hold the root and the caches to.
    ///   - state: the state whose output, synthesis and tile caches are kept
    ///     in step; nil prunes the root alone.
    ///   - now: the clock ages are measured against.
    ///   - overBudgetOnly: evict only until the root fits in `cacheMaxMB`, as a build does.
    ///   - dryRun: report what would go, and remove nothing.
    ///   - scope: a shard's build (`OutputScope`): only its own tours' audio is evicted.
    @discardableResult
    package static func run(
        layout: Layout, budgets: Budgets, state: BuildState?, now: Date, overBudgetOnly: Bool, dryRun: Bool = false,
        scope: OutputScope? = nil
    ) throws -> CachePrunePlan {
        try run(
            layout: layout, budgets: budgets, outputs: state?.outputs, synthesis: state?.synthesis, tiles: state?.tiles, now: now,
            overBudgetOnly: overBudgetOnly, dryRun: dryRun, scope: scope)
    }

    static func run(
        layout: Layout, budgets: Budgets, outputs: OutputCache?, synthesis: SynthesisCache? = nil, tiles: TileCache? = nil, now: Date,
        overBudgetOnly: Bool, dryRun: Bool = false, scope: OutputScope? = nil
    ) throws -> CachePrunePlan {
        let bundle = try BundleInventory(root: layout.root)
        // Under the budget, a build's eviction removes nothing: the listing's
        // sizes say so without reading a package.json, a file's times or the
        // output cache's rows.
        let listedBytes = bundle.audioCacheFiles.reduce(Int64(0)) { $0 + ($1.isSymlink ? 0 : $1.size) }
        if overBudgetOnly, listedBytes <= budgets.cacheMaxBytes {
            var plan = CachePrunePlan()
            plan.bytesBefore = listedBytes
            plan.budgetBytes = budgets.cacheMaxBytes
            guard !dryRun else { return plan }
            _ = try synthesis?.evict(toFit: budgets.synthesisCacheMaxBytes)
            _ = try tiles?.evict(toFit: budgets.tileCacheMaxBytes)
            return plan
        }
        let inventory = try CacheInventory.scan(layout, bundle: bundle, now: now)
        let lastUsed = try outputs.map { try $0.lastUsed(relativeTo: layout.root) } ?? [:]
        let plan = CachePrunePlan(
            inventory: inventory, budgets: budgets, now: now, lastUsed: lastUsed, overBudgetOnly: overBudgetOnly, scope: scope)
        guard !dryRun else { return plan }
        try plan.apply(to: layout)
        try outputs?.forget(plan.removals.map { layout.root.appendingPathComponent($0.path) })
        // The synthesis cache keeps its own budget, and drops chunks too old to reuse.
        _ = try synthesis?.evict(toFit: budgets.synthesisCacheMaxBytes)
        // So does the tile cache, least recently used tiles first.
        _ = try tiles?.evict(toFit: budgets.tileCacheMaxBytes)
        return plan
    }
}

/// `tourpack cache clear --yes`: everything the pipeline wrote, except the
/// quota ledger and the lock files.
///
/// The ledger records characters already paid for this month; clearing it
/// would let the next jobs pass the quota. A lock file is never deleted:
/// deleting one under a waiter would let two builds run.
package enum CacheClearing {
    /// Removes `AudioCache`, `OfflineTours`, this root's staging and
    /// journals, the synthesis and tile caches, the kept plans (not their
    /// lock file: a lock file is never deleted), and the output-cache rows and build
    /// records of this root; returns the bytes freed. Call it only while
    /// holding the root's `BuildLock`.
    package static func clear(_ config: PipelineConfig, state: BuildState?) throws -> Int64 {
        let layout = StateLayout(config)
        var freed: Int64 = 0
        let folders =
            [Layout.audioCacheFolder, Layout.offlineToursFolder].map { config.output.appendingPathComponent($0, isDirectory: true) }
            + [
                layout.stagingFolder, layout.journalFolder, layout.synthesisFolder,
                layout.tileFolder, layout.keptPlansFile,
            ]
        for folder in folders {
            freed += CacheStatistics.folderBytes(folder)
            try remove(folder)
        }
        if let state {
            try state.synthesis.forgetAll()
            try state.tiles.forgetAll()
            try state.outputs.forgetAll(under: config.output)
            try state.records.forgetAll(output: config.output)
        }
        return freed
    }

    private static func remove(_ url: URL) throws {
        guard FileManager.default.fileExists(atPath: url.path) else { return }
        do { try FileManager.default.removeItem(at: url) } catch {
            throw TourpackError.storageFailed(path: url.path, operation: "remove", reason: "\(error)")
        }
    }
}

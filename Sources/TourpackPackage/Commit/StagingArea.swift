public import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Where a build's files wait between the encoder and their final paths.
///
/// A tour's files may only appear together, once every item of the tour has
/// succeeded, so they wait as temps until then. When the state folder is on
/// the output's file system, they wait in the root's `staging` folder (`StateLayout`): the output root
/// then never holds a temp at all, so even a run killed with SIGKILL leaves a
/// root that `validate` accepts. Otherwise (another file system, where a
/// rename would not be atomic) they wait beside their final paths as hidden
/// `.<name>.tmp-<hex>` files, which the next run removes.
///
/// Every temp handed out is remembered until it is committed or discarded,
/// so a cancelled build can remove all of its own.
public final class StagingArea: @unchecked Sendable {
    /// The root's `staging` folder, or nil when temps sit beside their final paths.
    public let folder: URL?
    /// The root's `staging` folder in the state, used or not: swept of a killed run's temps either way.
    let stagingFolder: URL
    /// The output root: folders under it are created through real folders only.
    public let output: URL
    private let lock = NSLock()
    private var pending: Set<URL> = []

    /// Picks the staging place for a build writing to `output`. Both folders are created.
    public init(state: URL, output: URL) throws {
        let staging = CommitFolders.staging(in: state)
        try AtomicFile.createFolder(staging)
        try AtomicFile.createFolder(output)
        self.output = output
        stagingFolder = staging
        folder = try Self.device(of: staging) == Self.device(of: output) ? staging : nil
    }

    /// A fresh temp for `finalURL`; the encoder writes it, a commit moves it.
    /// The final path's folder is made (or found) from the root through real
    /// folders only, so a symlinked `AudioCache` or tour folder is refused
    /// before any temp is written beside it.
    public func temporaryURL(for finalURL: URL) throws -> URL {
        try AtomicFile.createFolder(finalURL.deletingLastPathComponent(), under: output)
        let temp = try AtomicFile.temporaryURL(for: finalURL, in: folder)
        lock.withLock { _ = pending.insert(temp) }
        return temp
    }

    /// A temp for a file that waits long before it is published (a tile
    /// pack, made while the audio is still being spoken): in the staging
    /// folder, its final folder is made only when the tour is published
    /// (by its package.json's temp), so a run killed meanwhile leaves no
    /// empty package folder in the root.
    public func temporaryURL(deferringFolderOf finalURL: URL) throws -> URL {
        guard let folder else { return try temporaryURL(for: finalURL) }
        let temp = try AtomicFile.temporaryURL(for: finalURL, in: folder, creatingFinalFolder: false)
        lock.withLock { _ = pending.insert(temp) }
        return temp
    }

    /// Forgets a temp that has been renamed to its final path.
    public func committed(_ temp: URL) {
        lock.withLock { _ = pending.remove(temp) }
    }

    /// Removes temps that will not be committed.
    public func discard(_ temps: some Sequence<URL>) {
        lock.withLock {
            for temp in temps {
                AtomicFile.discard(temp: temp)
                pending.remove(temp)
            }
        }
    }

    /// Removes every temp this build still holds (cancellation, a fatal error).
    public func discardAll() {
        let all = lock.withLock { pending }
        discard(all)
    }

    /// Deletes what a killed run left: everything in the staging folder, and
    /// stray temps in the output's audio and package folders. Call it only
    /// while holding the `BuildLock`, after the journal has been replayed.
    /// Returns how many files were removed.
    ///
    /// - Parameter layout: the output root whose leftovers go.
    /// - Parameter scope: with `--shards`, the folders this shard's build
    ///   owns. Other workers publish into the same root at the same time
    ///   (their builds hold the root's lock shared), so their temps and
    ///   next-folders are in flight, not left over: only the scope's tour and
    ///   package folders are swept. Nil sweeps the whole root.
    public func removeLeftovers(in layout: Layout, scope: (any SweepScope)? = nil) throws -> Int {
        var removed = 0
        if let folder {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
            for name in names {
                try AtomicFile.remove(folder.appendingPathComponent(name))
                removed += 1
            }
        } else if scope == nil {
            // Unused on this output's file system, but a run with the output
            // elsewhere (or a crash) may have left temps in it: they never
            // become anything, so they go.
            removed += try AtomicFile.removeStaleTemporaries(in: stagingFolder).count
        }
        for top in [Layout.audioCacheFolder, Layout.offlineToursFolder] {
            let parent = layout.root.appendingPathComponent(top, isDirectory: true)
            // Never through a symlink: the preflight refuses one, and a sweep must not reach out of the root.
            guard OutputTree.kind(parent) == .folder else { continue }
            if scope == nil { removed += try AtomicFile.removeStaleTemporaries(in: parent).count }
            let children = (try? FileManager.default.contentsOfDirectory(atPath: parent.path)) ?? []
            for child in children.sorted() where OutputTree.kind(parent.appendingPathComponent(child)) == .folder {
                guard scope?.owns(child, in: top) ?? true else { continue }
                let folder = parent.appendingPathComponent(child, isDirectory: true)
                if top == Layout.audioCacheFolder, child.hasPrefix("."), child.contains(Layout.nextFolderMarker) {
                    // A tour's next audio folder from a run killed before its journal: never published.
                    try AtomicFile.removeFolder(folder, under: layout.root)
                    removed += 1
                    continue
                }
                removed += try AtomicFile.removeStaleTemporaries(in: folder).count
                // A package's next captions folder from a run killed before its journal: never committed.
                if top == Layout.offlineToursFolder {
                    let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
                    for name in names where name.hasPrefix(CaptionsFolder.nextMarker) {
                        try AtomicFile.removeFolder(folder.appendingPathComponent(name, isDirectory: true), under: layout.root)
                        removed += 1
                    }
                }
            }
        }
        return removed
    }

    private static func device(of url: URL) throws -> UInt64 {
        var info = stat()
        guard stat(url.path, &info) == 0 else {
            throw TourpackError.storageFailed(path: url.path, errno: errno, operation: "stat")
        }
        return UInt64(info.st_dev)
    }
}

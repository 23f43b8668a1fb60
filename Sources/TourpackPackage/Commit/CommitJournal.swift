public import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The renames that publish one tour, written down before the first of them.
///
/// A tour's audio files keep their names from build to build
/// (`<poiId>_<Phase>.<ext>`). So the tour's new audio folder is made whole
/// beside the old one first (`AudioCache/.<tourId>.next-…`: the new files,
/// and hard links to every old file that did not change), every file and the
/// folder fsynced. Then this journal is written atomically to
/// `journal/<tourId>.json` in the root's state folder, the two folders are
/// swapped with one `renameat2(RENAME_EXCHANGE)`, then each changed
/// package's `captions` folder with its complete new one the same way
/// (`captionSwaps`), the tile packs and the package.json files are renamed
/// into place, each folder is fsynced once, the old audio and caption
/// folders are deleted, and the journal too. Between the journal
/// and the last package.json there are only a few renames, no fsync and no
/// walk of a tour's files, so a kill leaves an old package naming new audio
/// for microseconds at most. A run killed with the journal behind has it
/// replayed by the next build (`replayAll`) before anything else, rolling the
/// tour forward: the journal records the old folder's inode, so the replay
/// knows whether the swap happened. A run killed before the journal exists
/// leaves the old package untouched, and a `.next` folder and temps that the
/// next build removes. Where the file system has no exchange, the new
/// folder's files are renamed into the old one instead, as before, and the
/// build says so once.
///
/// Every rename and deletion under an output root reaches its folder from the
/// root through real folders only (`AtomicFile.move(_:to:under:)`), so a
/// symlink swapped in for `AudioCache` or a tour or package folder after the
/// build's preflight is refused, not followed.
public struct CommitJournal: Sendable, Hashable, Codable {
    /// A finished temp and the final path it becomes; both absolute.
    public struct Move: Sendable, Hashable, Codable {
        public var from: String
        public var to: String

        /// For `install`, which commits packages the way a build does.
        package init(from: String, to: String) {
            self.from = from
            self.to = to
        }
    }

    public var tourId: String
    /// Audio first, package.json files last.
    public var moves: [Move]
    /// Package folders to delete after the moves: packages of the same tour
    /// and format under another voice, whose audio the moves replace.
    public var removals: [String]
    /// Files to delete after the moves: a tile pack that the new package.json
    /// no longer names (the pipeline dropped its tile source). Optional, so
    /// journals written before it existed still replay.
    public var deletions: [String]?
    /// The tour's audio folder and the complete new one beside it, swapped
    /// before the moves. Optional, so journals written before it existed still replay.
    public var swap: FolderSwap?
    /// Each changed package's `captions` folder and its complete new one
    /// (`CaptionsFolder.prepare`), swapped right after `swap`, so an old
    /// package.json never names a new caption file for longer than the
    /// audio swap lets it. Optional, so journals written before it still replay.
    public var captionSwaps: [FolderSwap]?

    /// `next` takes `live`'s place; `liveInode` is the old folder's inode
    /// (nil: there was none), by which a replay tells whether the swap happened.
    public struct FolderSwap: Sendable, Hashable, Codable {
        public var live: String
        public var next: String
        public var liveInode: UInt64?

        package init(live: String, next: String, liveInode: UInt64?) {
            self.live = live
            self.next = next
            self.liveInode = liveInode
        }
    }

    public init(
        tourId: String, moves: [Move], removals: [String], deletions: [String] = [], swap: FolderSwap? = nil,
        captionSwaps: [FolderSwap] = []
    ) {
        self.tourId = tourId
        self.moves = moves
        self.removals = removals
        self.deletions = deletions.isEmpty ? nil : deletions
        self.swap = swap
        self.captionSwaps = captionSwaps.isEmpty ? nil : captionSwaps
    }

    /// Set once a commit had to fall back to renaming file by file: the build says so, once.
    public static var fellBackToRenames: Bool { fallbackFlag.snapshot }
    private static let fallbackFlag = LockedCounts(false)

    /// `journal` in the given state folder (the output root's, see `StateLayout`).
    public static func folder(state: URL) -> URL {
        CommitFolders.journal(in: state)
    }

    /// Writes the journal, applies it, and deletes it.
    public func commit(state: URL) throws {
        let url = Self.folder(state: state).appendingPathComponent("\(tourId).json")
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        let bytes: Data
        do { bytes = try encoder.encode(self) } catch {
            throw TourpackError.internalInvariant("\(url.path): the commit journal could not be encoded: \(error)")
        }
        try AtomicFile.write(bytes, to: url)
        try apply()
        try Self.remove(url)
    }

    /// Finishes every commit a killed run left half done; returns how many.
    /// Call it only while holding the `BuildLock`, before removing leftovers.
    /// A journal is a file anyone with the state folder can edit: one that
    /// names a path outside `root`'s `AudioCache` and `OfflineTours` (or,
    /// for a move's temp, `state`'s staging) is refused before anything moves.
    /// - Parameters:
    ///   - state: the state folder whose `roots/<root>/journal` holds the journals.
    ///   - root: the output root the journals were written for.
    ///   - publishing: runs one tour's replay as that tour's publish runs
    ///     (`StateBackend.publishing`: under its advisory lock when workers on
    ///     other machines share the root).
    /// - Returns: how many journals were replayed.
    public static func replayAll(
        state: URL, root: URL, publishing: (_ tourId: String, _ replay: () throws -> Void) throws -> Void = { try $1() }
    ) throws -> Int {
        let folder = folder(state: state)
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []).sorted()
        var replayed = 0
        for name in names where name.hasSuffix(".json") && !AtomicFile.isTemporaryName(name) {
            let url = folder.appendingPathComponent(name)
            let journal: CommitJournal
            do {
                journal = try JSONDecoder().decode(CommitJournal.self, from: Data(contentsOf: url))
            } catch {
                // Journals are written atomically, so this one is not ours to act on.
                throw TourpackError.invalidInput("\(url.path): unreadable commit journal (\(error)); move it away and run again")
            }
            let confinement = JournalConfinement(root: root, staging: CommitFolders.staging(in: state))
            if let outside = confinement.firstOutside(journal) {
                throw TourpackError.invalidInput(
                    "\(url.path): the commit journal names \(outside), outside the output root's AudioCache and OfflineTours; nothing was replayed. Move it away and run again"
                )
            }
            try publishing(journal.tourId) { try journal.apply() }
            try remove(url)
            replayed += 1
        }
        return replayed
    }

    /// Renames what is still waiting, syncs each folder once, then removes
    /// superseded packages. Idempotent: a move whose temp is gone was done.
    func apply() throws {
        var folders: [String] = []
        // Every destination folder is opened first, so that the swap and the
        // renames that follow it are bare system calls, one after another:
        // the moment an old package.json could name new audio is as short as it can be.
        var opened: [String: AtomicFile.OpenedFolder] = [:]
        for move in moves where access(move.from, F_OK) == 0 {
            let to = URL(fileURLWithPath: move.to)
            let folder = to.deletingLastPathComponent()
            if opened[folder.path] == nil, let root = Layout.root(of: to) {
                opened[folder.path] = try AtomicFile.openForRenames(folder, under: root)
            }
        }
        if let swap {
            let live = URL(fileURLWithPath: swap.live, isDirectory: true)
            let next = URL(fileURLWithPath: swap.next, isDirectory: true)
            try Self.swapFolders(live: live, next: next, liveInode: swap.liveInode)
            folders.append(live.deletingLastPathComponent().path)
        }
        for captions in captionSwaps ?? [] {
            let live = URL(fileURLWithPath: captions.live, isDirectory: true)
            try Self.swapFolders(live: live, next: URL(fileURLWithPath: captions.next, isDirectory: true), liveInode: captions.liveInode)
            if !folders.contains(live.deletingLastPathComponent().path) { folders.append(live.deletingLastPathComponent().path) }
        }
        for move in moves {
            let from = URL(fileURLWithPath: move.from)
            let to = URL(fileURLWithPath: move.to)
            guard access(move.from, F_OK) == 0 else { continue }
            // Into the output, the folder is reached from the root through real folders only.
            if let folder = opened[to.deletingLastPathComponent().path] {
                try AtomicFile.move(from, into: folder, as: to.lastPathComponent)
            } else if let root = Layout.root(of: to) {
                try AtomicFile.move(from, to: to, under: root)
            } else {
                try AtomicFile.move(from, to: to)
            }
            let folder = to.deletingLastPathComponent().path
            if !folders.contains(folder) { folders.append(folder) }
        }
        for folder in folders { try AtomicFile.syncFolder(URL(fileURLWithPath: folder, isDirectory: true)) }
        if let swap {
            // What is left at the `.next` name is the old folder: nothing names it any more.
            let next = URL(fileURLWithPath: swap.next, isDirectory: true)
            if let inode = AtomicFile.inode(of: next), inode == swap.liveInode,
                let root = Layout.root(of: next.appendingPathComponent("file"))
            {
                try AtomicFile.removeFolder(next, under: root)
            }
        }
        for captions in captionSwaps ?? [] {
            // The old captions folder, at the `.next` name; reached from the root through the live one's path.
            let next = URL(fileURLWithPath: captions.next, isDirectory: true)
            let live = URL(fileURLWithPath: captions.live, isDirectory: true)
            if let inode = AtomicFile.inode(of: next), inode == captions.liveInode,
                let root = Layout.root(of: live.appendingPathComponent("file"))
            {
                try AtomicFile.removeFolder(next, under: root)
            }
            // A package whose captions went (`captions: off`) keeps no empty folder.
            try? AtomicFile.removeFolderIfEmpty(live)
        }
        for removal in removals {
            try Layout.removePackage(at: URL(fileURLWithPath: removal, isDirectory: true))
        }
        var deletedFrom: [String] = []
        for deletion in deletions ?? [] where try Self.remove(output: URL(fileURLWithPath: deletion)) {
            let folder = URL(fileURLWithPath: deletion).deletingLastPathComponent().path
            if !deletedFrom.contains(folder) { deletedFrom.append(folder) }
        }
        for folder in deletedFrom { try AtomicFile.syncFolder(URL(fileURLWithPath: folder, isDirectory: true)) }
    }

    /// Puts the folder at `next` in `live`'s place: one exchange, unless the
    /// swap already happened (the folder at `live` is no longer the one whose
    /// inode was recorded) or there was no old folder.
    private static func swapFolders(live: URL, next: URL, liveInode: UInt64?) throws {
        guard let root = Layout.root(of: live.appendingPathComponent("file")) else {
            throw TourpackError.internalInvariant("\(live.path): a commit journal swaps a folder outside any output root")
        }
        guard let nextInode = AtomicFile.inode(of: next) else { return }  // renamed into place already
        guard let current = AtomicFile.inode(of: live) else {
            try AtomicFile.move(next, to: live, under: root)  // the tour's first package
            return
        }
        guard current == liveInode, current != nextInode else { return }  // swapped already
        if try AtomicFile.exchange(next, with: live, under: root) { return }
        // No exchange here: rename the new files over the old ones, the window this journal covers.
        fallbackFlag.update { $0 = true }
        for name in ((try? FileManager.default.contentsOfDirectory(atPath: next.path)) ?? []).sorted() {
            try AtomicFile.move(next.appendingPathComponent(name), to: live.appendingPathComponent(name), under: root)
        }
        try AtomicFile.syncFolder(live)
        try AtomicFile.removeFolder(next, under: root)
    }

    /// Deletes an output file, its folder reached from the root through real folders only.
    private static func remove(output url: URL) throws -> Bool {
        if let root = Layout.root(of: url) { return try AtomicFile.remove(url, under: root) }
        return try AtomicFile.remove(url)
    }

    private static func remove(_ url: URL) throws {
        if try AtomicFile.remove(url) { try AtomicFile.syncFolder(url.deletingLastPathComponent()) }
    }
}

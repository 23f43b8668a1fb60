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
/// (`<poiId>_<Phase>.<ext>`), so its old package.json and its new audio can
/// never be swapped in one atomic step. The commit therefore goes: every temp
/// fsynced, then this journal written atomically to
/// `journal/<tourId>.json` in the root's state folder, then the renames (audio first,
/// package.json last), one fsync per folder, and the journal deleted. A run
/// killed between the first rename and the last leaves the journal behind,
/// and the next build replays it (`replayAll`) before anything else, rolling
/// the tour forward to the new package. A run killed before the journal
/// exists leaves the old package untouched and only temps, which are removed.
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

    public init(tourId: String, moves: [Move], removals: [String], deletions: [String] = []) {
        self.tourId = tourId
        self.moves = moves
        self.removals = removals
        self.deletions = deletions.isEmpty ? nil : deletions
    }

    /// `journal` in the given state folder (the output root's, see `StateLayout`).
    public static func folder(state: URL) -> URL {
        state.appendingPathComponent("journal", isDirectory: true)
    }

    /// Writes the journal, applies it, and deletes it.
    public func commit(state: URL) throws {
        let url = Self.folder(state: state).appendingPathComponent("\(tourId).json")
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        let bytes: Data
        do { bytes = try encoder.encode(self) } catch {
            throw TourpackError.storageFailed(path: url.path, errno: EINVAL, operation: "encode journal")
        }
        try AtomicFile.write(bytes, to: url)
        try apply()
        try Self.remove(url)
    }

    /// Finishes every commit a killed run left half done; returns how many.
    /// Call it only while holding the `BuildLock`, before removing leftovers.
    public static func replayAll(state: URL) throws -> Int {
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
            try journal.apply()
            try remove(url)
            replayed += 1
        }
        return replayed
    }

    /// Renames what is still waiting, syncs each folder once, then removes
    /// superseded packages. Idempotent: a move whose temp is gone was done.
    func apply() throws {
        var folders: [String] = []
        for move in moves {
            let from = URL(fileURLWithPath: move.from)
            let to = URL(fileURLWithPath: move.to)
            guard access(move.from, F_OK) == 0 else { continue }
            // Into the output, the folder is reached from the root through real folders only.
            if let root = Layout.root(of: to) { try AtomicFile.move(from, to: to, under: root) } else { try AtomicFile.move(from, to: to) }
            let folder = to.deletingLastPathComponent().path
            if !folders.contains(folder) { folders.append(folder) }
        }
        for folder in folders { try AtomicFile.syncFolder(URL(fileURLWithPath: folder, isDirectory: true)) }
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

    /// Deletes an output file, its folder reached from the root through real folders only.
    private static func remove(output url: URL) throws -> Bool {
        if let root = Layout.root(of: url) { return try AtomicFile.remove(url, under: root) }
        return try AtomicFile.remove(url)
    }

    private static func remove(_ url: URL) throws {
        if try AtomicFile.remove(url) { try AtomicFile.syncFolder(url.deletingLastPathComponent()) }
    }
}

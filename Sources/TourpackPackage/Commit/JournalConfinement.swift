import Foundation

/// Where a commit journal may reach: the output root's `AudioCache` and
/// `OfflineTours`, and the staging folder its moves come from.
///
/// A journal is replayed as written, so a garbled or hostile one could
/// otherwise rename or delete any file the build can reach. The check is on
/// the paths' text, before anything moves: absolute, no `.` or `..` and no
/// NUL, and under one of the allowed folders. Symlinked folders under the
/// root are refused later, by the renames themselves
/// (`AtomicFile.move(_:to:under:)`).
struct JournalConfinement: Sendable {
    private let audioCache: [String]
    private let offlineTours: [String]
    private let staging: [String]

    init(root: URL, staging: URL) {
        let root = root.standardizedFileURL.pathComponents
        audioCache = root + [Layout.audioCacheFolder]
        offlineTours = root + [Layout.offlineToursFolder]
        self.staging = staging.standardizedFileURL.pathComponents
    }

    /// The first path of `journal` that is out of bounds, shown as written
    /// (escaped and cut), or nil when every path is where it belongs.
    func firstOutside(_ journal: CommitJournal) -> String? {
        var checks: [(path: String, allowed: Bool)] = []
        for move in journal.moves {
            checks.append((move.from, isInside(move.from, [audioCache, offlineTours, staging])))
            checks.append((move.to, isInside(move.to, [audioCache, offlineTours])))
        }
        // A removal is a package folder, a swap's two folders a tour's audio folders: one level down.
        for removal in journal.removals { checks.append((removal, isInside(removal, [offlineTours], depth: 1))) }
        for deletion in journal.deletions ?? [] { checks.append((deletion, isInside(deletion, [audioCache, offlineTours]))) }
        // A captions swap's two folders: in a package folder, two levels down.
        for captions in journal.captionSwaps ?? [] {
            checks.append((captions.live, isInside(captions.live, [offlineTours], depth: 2)))
            checks.append((captions.next, isInside(captions.next, [offlineTours], depth: 2)))
        }
        if let swap = journal.swap {
            checks.append((swap.live, isInside(swap.live, [audioCache], depth: 1)))
            checks.append((swap.next, isInside(swap.next, [audioCache], depth: 1)))
        }
        return checks.first { !$0.allowed }.map { "\"\(PrintableText.of($0.path, limit: 200))\"" }
    }

    /// Whether `path` lies strictly below one of `folders` (exactly `depth`
    /// levels below, when given).
    private func isInside(_ path: String, _ folders: [[String]], depth: Int? = nil) -> Bool {
        guard path.hasPrefix("/"), !path.contains("\0") else { return false }
        let parts = path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        guard !parts.contains(where: { $0 == "." || $0 == ".." }) else { return false }
        let components = ["/"] + parts
        return folders.contains { folder in
            guard components.count > folder.count, Array(components.prefix(folder.count)) == folder else { return false }
            return depth.map { components.count == folder.count + $0 } ?? true
        }
    }
}

package import Foundation

/// A package's `captions` folder is replaced whole, as a tour's audio
/// folder is: the complete new folder is made beside it
/// (`OfflineTours/<packageId>/.captions.next-<random>`: new files, and hard
/// links to those that stay), synced, and the commit journal swaps the two
/// with one exchange right after the audio folder's (`CommitJournal.captionSwaps`).
/// So a package.json in force never names a caption file of another
/// version for longer than the audio swap lets it. Used by a build and by
/// `install` alike.
package enum CaptionsFolder {
    /// In the name of a package's next captions folder; a build's preflight
    /// removes any that a run killed before its journal left.
    package static let nextMarker = ".captions.next-"

    /// The package's next captions folder, filled by `fill` (given the
    /// folder) and synced, with the swap that puts it in place. Removes
    /// what it made when `fill` throws. Blocking.
    package static func prepare(packageFolder: URL, root: URL, fill: (URL) throws -> Void) throws -> CommitJournal.FolderSwap {
        let live = packageFolder.appendingPathComponent(Layout.captionsFolderName, isDirectory: true)
        let next = packageFolder.appendingPathComponent("\(nextMarker)\(UInt32.random(in: .min ... .max))", isDirectory: true)
        try AtomicFile.createFolder(next, under: root)
        do {
            try fill(next)
            try AtomicFile.syncFolder(next)
        } catch {
            try? AtomicFile.removeFolder(next, under: root)
            throw error
        }
        return CommitJournal.FolderSwap(live: live.path, next: next.path, liveInode: AtomicFile.inode(of: live))
    }

    /// Removes a prepared folder that will not be committed.
    package static func discard(_ swaps: [CommitJournal.FolderSwap], root: URL) {
        for swap in swaps { try? AtomicFile.removeFolder(URL(fileURLWithPath: swap.next, isDirectory: true), under: root) }
    }
}

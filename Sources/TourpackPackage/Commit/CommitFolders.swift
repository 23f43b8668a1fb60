package import Foundation

/// The two folders a commit works from, beside the output root's state
/// (a build's state folder, or an install's `.tourpack-install`).
package enum CommitFolders {
    package static let stagingName = "staging"
    package static let journalName = "journal"

    /// `<state>/staging`: temps and links waiting for their tour's commit.
    package static func staging(in state: URL) -> URL { state.appendingPathComponent(stagingName, isDirectory: true) }
    /// `<state>/journal`: commit journals a killed run left to replay.
    package static func journal(in state: URL) -> URL { state.appendingPathComponent(journalName, isDirectory: true) }
}

/// The part of an output root that one run may sweep on its own judgement:
/// with `--shards`, one worker's tour and package folders (other workers
/// publish into the same root at the same time).
public protocol SweepScope: Sendable {
    /// Whether `name`, a folder right under `top` (`AudioCache` or `OfflineTours`), is this scope's.
    func owns(_ name: String, in top: String) -> Bool
}

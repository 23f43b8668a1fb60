import Crypto
package import Foundation
package import TourpackCore

/// Where things live in a pipeline's state folder.
///
/// ```
/// <state>/state.sqlite                  caches, quota ledger, build records (shared)
/// <state>/synthesis/<ab>/<key>.flac     the synthesis cache (shared)
/// <state>/tiles/<ab>/<sha256>           the map tile cache (shared), and tiles/locks/
/// <state>/plans.kept                    each narration's plan, kept between builds (`KeptPlans`)
/// <state>/roots/<name>-<hash>/          one folder per output root:
///     build.lock  staging/  journal/      its lock, staged temps, commit journals
/// ```
///
/// Several pipelines may name one state folder, so that their jobs share one
/// quota ledger and one synthesis cache. What belongs to one output root (the
/// lock that allows one build at a time, the staged temps and the commit
/// journals) sits in that root's own folder, so jobs on different roots run
/// side by side and never touch each other's temps. The folder's name is the
/// output folder's name plus 16 hex digits of a SHA-256 of its real path
/// relative to the folder that holds `roots/`: a project moved with `mv`,
/// its state and output together, keeps its root's folder.
///
/// With `state.scratch` (a worker's local disk), the `roots/` folders live
/// under the scratch folder instead: the staged temps and the commit
/// journals are written, fsynced and renamed on every publish, which local
/// disk does fast and a shared volume does not, and the lock that guards
/// them goes with them. The caches and the database stay in the state folder.
/// ```
/// <scratch>/roots/<name>-<hash>/  build.lock  staging/  journal/
/// ```
package struct StateLayout: Sendable, Hashable {
    package let state: URL
    package let output: URL
    /// `state.scratch`: where the per-root folders go; nil keeps them in `state`.
    package let scratch: URL?

    package init(state: URL, output: URL, scratch: URL? = nil) {
        self.state = state
        self.output = output
        self.scratch = scratch
    }

    package init(_ config: PipelineConfig) {
        self.init(state: config.state, output: config.output, scratch: config.shared.scratch)
    }

    /// The lock, staging and journal folder of this output root: under the
    /// scratch folder when there is one, else under the state folder.
    package var rootFolder: URL {
        let holder = OutputTree.realPath(scratch ?? state).pathComponents
        let real = OutputTree.realPath(output).pathComponents
        let shared = zip(holder, real).prefix { $0 == $1 }.count
        let relative = (Array(repeating: "..", count: holder.count - shared) + real.dropFirst(shared)).joined(separator: "/")
        return rootFolder(keyedBy: relative)
    }

    /// Where an older tourpack kept this root's folder: keyed by the
    /// output's absolute path.
    var formerRootFolder: URL {
        rootFolder(keyedBy: output.standardizedFileURL.resolvingSymlinksInPath().path)
    }

    private func rootFolder(keyedBy key: String) -> URL {
        let digest = SHA256.hash(data: Data(key.utf8)).prefix(8).lowercaseHex
        let name = output.lastPathComponent.filter { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }
        return (scratch ?? state).appendingPathComponent("roots", isDirectory: true)
            .appendingPathComponent("\(name.isEmpty ? "root" : String(name.prefix(40)))-\(digest)", isDirectory: true)
    }

    /// Moves the folder an older tourpack kept for this root, keyed by its
    /// absolute path, to `rootFolder`, with its lock, staged temps and
    /// journals, when there is no such folder yet. Before the lock is
    /// taken: a build of the older kind holding it keeps it, since the lock
    /// file moves with its folder. Another process doing the same first wins.
    package func adoptFormerRootFolder() {
        let (former, current) = (formerRootFolder, rootFolder)
        guard former.path != current.path, FileManager.default.fileExists(atPath: former.path),
            !FileManager.default.fileExists(atPath: current.path)
        else { return }
        _ = rename(former.path, current.path)
    }

    /// The synthesis cache's FLAC files.
    package var synthesisFolder: URL { state.appendingPathComponent("synthesis", isDirectory: true) }

    /// Each narration's plan (its chunks, their keys and counts), kept
    /// between builds in one file read at once (TourpackKit's `KeptPlans`).
    package var keptPlansFile: URL { state.appendingPathComponent("plans.kept") }

    /// The map tile cache's files (content-addressed) and its fetch locks.
    package var tileFolder: URL { state.appendingPathComponent("tiles", isDirectory: true) }

    /// Refuses (exit 2) a state folder inside the output root, or an output
    /// root inside the state folder, compared by their real paths.
    ///
    /// The loader compares the paths as written; a `--state` reached through a
    /// symlink into the output passes that and would put state.sqlite, the
    /// caches and the staged temps inside the bundle that ships to phones.
    /// So the build checks again, after `realpath` of the deepest existing
    /// ancestor of each, before it opens or creates anything in the state.
    package func checkApart() throws {
        let (realState, realOutput) = (OutputTree.realPath(state), OutputTree.realPath(output))
        if OutputTree.isSameOrInside(state, output) {
            throw TourpackError.invalidInput(
                "the state folder \(state.path) lies inside the output \(output.path) (really \(realState.path) inside \(realOutput.path)); "
                    + "state.sqlite and the caches would ship in the bundle; choose a state folder outside the output")
        }
        if OutputTree.isSameOrInside(output, state) {
            throw TourpackError.invalidInput(
                "the output \(output.path) lies inside the state folder \(state.path) (really \(realOutput.path) inside \(realState.path)); "
                    + "choose an output outside the state folder")
        }
        if let scratch, OutputTree.isSameOrInside(scratch, output) {
            throw TourpackError.invalidInput(
                "state.scratch \(scratch.path) lies inside the output \(output.path) (really \(OutputTree.realPath(scratch).path) inside \(realOutput.path)); "
                    + "staged temps and journals would ship in the bundle; choose a scratch folder outside the output")
        }
    }

    /// The lock file a build on this root holds.
    package var lockFile: URL { rootFolder.appendingPathComponent(BuildLock.fileName) }

    /// Names of the per-root folders, the one place they are spelled.
    package static let stagingFolderName = CommitFolders.stagingName
    package static let journalFolderName = CommitFolders.journalName

    /// `<root folder>/staging`: encoded temps waiting for their tour's commit.
    package var stagingFolder: URL { Self.stagingFolder(in: rootFolder) }
    /// `<root folder>/journal`: commit journals a killed run left to replay.
    package var journalFolder: URL { Self.journalFolder(in: rootFolder) }

    package static func stagingFolder(in rootFolder: URL) -> URL { CommitFolders.staging(in: rootFolder) }
    package static func journalFolder(in rootFolder: URL) -> URL { CommitFolders.journal(in: rootFolder) }
}

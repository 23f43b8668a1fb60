import Crypto
public import Foundation

/// Where things live in a pipeline's state folder.
///
/// ```
/// <state>/state.sqlite                  caches, quota ledger, build records (shared)
/// <state>/synthesis/<ab>/<key>.flac     the synthesis cache (shared)
/// <state>/tiles/<ab>/<sha256>           the map tile cache (shared), and tiles/locks/
/// <state>/roots/<name>-<hash>/          one folder per output root:
///     build.lock  staging/  journal/      its lock, staged temps, commit journals
/// ```
///
/// Several pipelines may name one state folder, so that their jobs share one
/// quota ledger and one synthesis cache. What belongs to one output root (the
/// lock that allows one build at a time, the staged temps and the commit
/// journals) sits in that root's own folder, so jobs on different roots run
/// side by side and never touch each other's temps. The folder's name is the
/// output folder's name plus 16 hex digits of a SHA-256 of its resolved path.
public struct StateLayout: Sendable, Hashable {
    public let state: URL
    public let output: URL

    public init(state: URL, output: URL) {
        self.state = state
        self.output = output
    }

    public init(_ config: PipelineConfig) {
        self.init(state: config.state, output: config.output)
    }

    /// The lock, staging and journal folder of this output root.
    public var rootFolder: URL {
        let resolved = output.standardizedFileURL.resolvingSymlinksInPath().path
        let digest = SHA256.hash(data: Data(resolved.utf8)).prefix(8).lowercaseHex
        let name = output.lastPathComponent.filter { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }
        return state.appendingPathComponent("roots", isDirectory: true)
            .appendingPathComponent("\(name.isEmpty ? "root" : String(name.prefix(40)))-\(digest)", isDirectory: true)
    }

    /// The synthesis cache's FLAC files.
    public var synthesisFolder: URL { state.appendingPathComponent("synthesis", isDirectory: true) }

    /// The map tile cache's files (content-addressed) and its fetch locks.
    public var tileFolder: URL { state.appendingPathComponent("tiles", isDirectory: true) }

    /// The lock file a build on this root holds.
    public var lockFile: URL { rootFolder.appendingPathComponent(BuildLock.fileName) }
}

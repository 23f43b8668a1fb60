import Foundation
import GRDB
import TourpackCore

/// What builds found of the package.json files they left in place: a
/// file's `lstat` signature (`FileSignature`) when its bytes were exactly
/// those the store writes for what they say. While `lstat` says the same,
/// nothing has written the file since, so a rebuild that finds the
/// package's content unchanged keeps it without encoding the package again
/// to compare bytes (`TourPublisher`).
///
/// One row per file, by absolute path, in this machine's state only, like
/// the tile packs': a signature says nothing on another machine.
public struct ManifestSignatures: Sendable {
    /// Part of every signature kept: it changes when the bytes the store
    /// writes for the same content do (package.json's schema, or canonical
    /// JSON's rules), and older signatures then match nothing.
    static let revision = "package.json v\(PackageManifest.currentSchemaVersion), canonical JSON 1"

    public let database: StateDatabase

    package init(database: StateDatabase) {
        self.database = database
    }

    /// A package.json as `lstat` found it, before its bytes were read.
    public struct Look: Sendable {
        public let path: String
        fileprivate let signature: FileSignature?
        /// Whether a build found the file sound as it is now.
        public let isSound: Bool
    }

    /// Looks at the package.json at `path`; take the look before reading the
    /// file, so that a write after it is never taken for what was read.
    public func look(at path: String) -> Look {
        let signature = FileSignature(path: path)
        guard let signature else { return Look(path: path, signature: nil, isSound: false) }
        let kept = try? database.read { db in
            try String.fetchOne(db, sql: "SELECT signature FROM packageFile WHERE path = ?", arguments: [path])
        }
        return Look(path: path, signature: signature, isSound: kept == Self.text(signature))
    }

    /// Notes that the file `look` saw holds exactly the bytes the store
    /// would write for them: kept once its change time has settled.
    public func noteSound(_ look: Look) {
        guard !look.isSound, let signature = look.signature, signature.isSettled() else { return }
        try? database.write { db in
            try db.execute(
                sql: "INSERT OR REPLACE INTO packageFile (path, signature) VALUES (?, ?)", arguments: [look.path, Self.text(signature)])
        }
    }

    private static func text(_ signature: FileSignature) -> String { "\(revision) \(signature.text)" }
}

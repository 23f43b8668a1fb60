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
/// A row names its file by its output root and its path under that root
/// (`OfflineTours/<packageId>/package.json`), in this machine's state
/// only, like the tile packs': a signature says nothing on another
/// machine. A root with no row for a file takes another root's row for the
/// same path when its signature matches: `mv` of a project keeps each
/// file's device, inode and change time, so the moved files are still
/// known sound, and the row moves to the new root when the old one is gone.
package struct ManifestSignatures: Sendable {
    /// Part of every signature kept: it changes when the bytes the store
    /// writes for the same content do (package.json's schema, or canonical
    /// JSON's rules), and older signatures then match nothing.
    static let revision = "package.json v\(PackageManifest.currentSchemaVersion), canonical JSON 1"

    package let database: StateDatabase

    package init(database: StateDatabase) {
        self.database = database
    }

    /// A package.json as `lstat` found it, before its bytes were read.
    package struct Look: Sendable {
        package let path: String
        fileprivate let signature: FileSignature?
        /// Whether a build found the file sound as it is now.
        package let isSound: Bool
    }

    /// Looks at the package.json at `path`; take the look before reading the
    /// file, so that a write after it is never taken for what was read.
    package func look(at path: String) -> Look {
        let signature = FileSignature(path: path)
        guard let signature else { return Look(path: path, signature: nil, isSound: false) }
        let place = Self.place(of: path)
        let expected = Self.text(signature)
        let rows = try? database.read { db in
            try Row.fetchAll(db, sql: "SELECT root, signature FROM packageFile WHERE path = ?", arguments: [place.path]).map {
                (root: $0["root"] as String, signature: $0["signature"] as String)
            }
        }
        let own = rows?.first { $0.root == place.root }
        guard own == nil, let other = rows?.first(where: { $0.signature == expected }) else {
            return Look(path: path, signature: signature, isSound: own?.signature == expected)
        }
        // Another root's row vouches for this very file (moved with its
        // project, or mounted elsewhere): adopted when that root is gone.
        if !FileManager.default.fileExists(atPath: other.root) {
            try? database.write { db in
                try db.execute(
                    sql: "UPDATE packageFile SET root = ? WHERE root = ? AND path = ?", arguments: [place.root, other.root, place.path])
            }
        }
        return Look(path: path, signature: signature, isSound: true)
    }

    /// Notes that the file `look` saw holds exactly the bytes the store
    /// would write for them: kept once its change time has settled.
    package func noteSound(_ look: Look) {
        guard !look.isSound, let signature = look.signature, signature.isSettled() else { return }
        let place = Self.place(of: look.path)
        try? database.write { db in
            try db.execute(
                sql: "INSERT OR REPLACE INTO packageFile (root, path, signature) VALUES (?, ?, ?)",
                arguments: [place.root, place.path, Self.text(signature)])
        }
    }

    /// Where a row places the package.json at the absolute `path`: its
    /// output root and `OfflineTours/<packageId>/package.json`; a path of
    /// another shape is its own place, under no root.
    static func place(of path: String) -> (root: String, path: String) {
        OutputCache.splitRecordedPath(path, under: Layout.offlineToursFolder) ?? (root: "", path: path)
    }

    private static func text(_ signature: FileSignature) -> String { "\(revision) \(signature.text)" }
}

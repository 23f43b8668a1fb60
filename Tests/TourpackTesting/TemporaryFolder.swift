package import Foundation

/// Scratch space for the tests and benches: a name of its own under the
/// system's temporary directory, `<prefix>-<UUID>`, so parallel tests and
/// processes never meet. The caller removes it (`remove`, in a `defer`).
package enum TemporaryFolder {
    /// A new, empty folder.
    package static func make(_ prefix: String) throws -> URL {
        let url = path(prefix)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// A path where nothing is yet (`suffix` ends the name: ".json"), for
    /// a file the test writes or a folder the code under test makes.
    package static func path(_ prefix: String, suffix: String = "") -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)\(suffix)")
    }

    /// Removes `url` and everything under it; nothing there is not an error.
    package static func remove(_ url: URL) { try? FileManager.default.removeItem(at: url) }
}

package import Foundation
import Testing

/// What `tourpack validate --strict` finds in a Documents root, one line per
/// finding (`path: error: …`), sorted.
///
/// A `SiteFixture` package's audio is stand-in bytes, not audio, and its
/// package.json a template's, so validate's content checks fail on every
/// fixture package. A test that an install left the root as valid as it was
/// compares these lines before and after: any new one (a stray, a partial
/// file at a final path, a missing file) is the install's doing.
package enum ValidateFindings {
    package static func of(_ documents: URL) throws -> [String] {
        let result = try Executable.run(["validate", documents.path, "--strict"])
        return (result.stdout + "\n" + result.stderr).split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { $0.contains(": error: ") || $0.contains(": warning: ") }.sorted()
    }
}

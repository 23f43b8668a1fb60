package import Foundation
package import TourpackCore

/// Loads tour JSON files, refusing hostile input before parsing it, and
/// reports every problem of every file in one `DiagnosticsError`.
package struct TourLoader: Sendable {
    /// Files over this are refused unread.
    package var maxFileBytes: Int
    package var maxDepth: Int

    package init(maxFileBytes: Int = 8 * 1024 * 1024, maxDepth: Int = 64) {
        self.maxFileBytes = maxFileBytes
        self.maxDepth = maxDepth
    }

    /// Loads one file. `displayName` is how messages name it (the path as the user wrote it).
    package func load(_ url: URL, displayName: String? = nil, into diagnostics: inout DiagnosticCollector) -> Tour? {
        let name = displayName ?? url.path
        let bytes: [UInt8]
        do {
            guard let size = try FileReading.size(of: url) else {
                diagnostics.error(name, "", "not a regular file")
                return nil
            }
            guard size <= maxFileBytes else {
                diagnostics.error(name, "", "file is \(size) bytes, more than the \(maxFileBytes) allowed")
                return nil
            }
            bytes = try FileReading.bytes(of: url, limit: maxFileBytes)
        } catch {
            diagnostics.error(name, "", "cannot read: \(error)")
            return nil
        }
        return parse(bytes, displayName: name, into: &diagnostics)
    }

    package func parse(_ bytes: [UInt8], displayName: String, into diagnostics: inout DiagnosticCollector) -> Tour? {
        guard bytes.count <= maxFileBytes else {
            diagnostics.error(displayName, "", "file is \(bytes.count) bytes, more than the \(maxFileBytes) allowed")
            return nil
        }
        let root: JSONValue
        do {
            root = try StrictJSONReader(maxDepth: maxDepth).read(bytes)
        } catch {
            diagnostics.error(displayName, "", "invalid JSON: \(error)")
            return nil
        }
        var validator = TourValidator(file: displayName)
        let tour = validator.validate(root)
        diagnostics.append(contentsOf: validator.diagnostics.diagnostics)
        return tour
    }

    /// Loads every tour the globs match, in sorted path order, and checks
    /// that tour IDs are unique across files. Throws all problems at once.
    ///
    /// - Parameters:
    ///   - globs: file patterns (`*`, `?`, `[…]`), as the pipeline's `tours` lists them.
    ///   - base: the folder relative patterns start from; the working directory when nil.
    ///   - pipelineFile: the pipeline the globs came from, as shown: a
    ///     pattern that matches nothing is its error, at `tours[i]`.
    package func loadAll(globs: [String], relativeTo base: URL? = nil, pipelineFile: String? = nil) throws(DiagnosticsError) -> [Tour] {
        var diagnostics = DiagnosticCollector()
        var tours: [Tour] = []
        var firstFile: [SafeID: String] = [:]
        for (index, pattern) in globs.enumerated() {
            var undecodable: [String] = []
            let matches = Glob.expand(pattern, undecodable: &undecodable)
            for name in undecodable.sorted() {
                diagnostics.error(name, "", "the file name is not UTF-8; rename the file (tourpack names every file it reads in UTF-8)")
            }
            if matches.isEmpty && undecodable.isEmpty {
                if let pipelineFile {
                    diagnostics.error(pipelineFile, "tours[\(index)]", "no tour file matches \(pattern)")
                } else {
                    diagnostics.error(pattern, "", "no tour file matches this pattern (tours[\(index)])")
                }
            }
            for path in matches {
                let url = URL(fileURLWithPath: path)
                let shown = base.map { Self.relativePath(of: url, to: $0) } ?? path
                guard let tour = load(url, displayName: shown, into: &diagnostics) else { continue }
                if let other = firstFile[tour.id] {
                    diagnostics.error(shown, "id", "duplicate tour id \(tour.id), also used by \(other)")
                    continue
                }
                firstFile[tour.id] = shown
                tours.append(tour)
            }
        }
        try diagnostics.throwIfErrors()
        return tours
    }

    /// `path` relative to `base` when it lies inside it, else absolute.
    static func relativePath(of url: URL, to base: URL) -> String {
        let path = url.standardizedFileURL.path
        let root = base.standardizedFileURL.path
        let prefix = root.hasSuffix("/") ? root : root + "/"
        return path.hasPrefix(prefix) ? String(path.dropFirst(prefix.count)) : path
    }
}

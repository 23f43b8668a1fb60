/// One problem found in an input, pointing at where a person must look.
///
/// Modeled on swift-openapi-generator's `Diagnostic`: a severity, a message
/// and a location. The location of a tour problem is its file and JSON path
/// (`tours/alps.json: pois[3].narrations.detaild: unknown phase`).
package struct Diagnostic: Sendable, Hashable, CustomStringConvertible {
    package enum Severity: String, Sendable, Hashable, Codable {
        case warning
        case error
    }

    package var severity: Severity
    /// The file the problem is in, as the user named it.
    package var file: String
    /// A JSON/YAML path inside the file, such as `pois[3].narrations.detaild`; empty for the whole file.
    package var path: String
    package var message: String

    package init(_ severity: Severity = .error, file: String, path: String = "", message: String) {
        self.severity = severity
        self.file = file
        self.path = path
        self.message = message
    }

    package var description: String {
        let prefix = severity == .warning ? "warning: " : ""
        if path.isEmpty { return "\(file): \(prefix)\(message)" }
        return "\(file): \(path): \(prefix)\(message)"
    }
}

/// Collects diagnostics across a whole run and fails once at the end.
///
/// Loading never stops at the first problem: every stage records into the
/// collector and the caller throws `DiagnosticsError` when it holds errors.
package struct DiagnosticCollector: Sendable {
    package private(set) var diagnostics: [Diagnostic] = []

    package init() {}

    package var hasErrors: Bool { diagnostics.contains { $0.severity == .error } }

    package mutating func error(_ file: String, _ path: String, _ message: String) {
        diagnostics.append(Diagnostic(.error, file: file, path: path, message: message))
    }

    package mutating func warning(_ file: String, _ path: String, _ message: String) {
        diagnostics.append(Diagnostic(.warning, file: file, path: path, message: message))
    }

    package mutating func append(contentsOf other: [Diagnostic]) {
        diagnostics.append(contentsOf: other)
    }

    /// Throws every error collected so far, as one `DiagnosticsError`.
    package func throwIfErrors() throws(DiagnosticsError) {
        if hasErrors { throw DiagnosticsError(diagnostics: diagnostics) }
    }
}

/// Bad input: every problem found, each with its file and path. Exit code 2.
package struct DiagnosticsError: Error, Sendable, CustomStringConvertible {
    package var diagnostics: [Diagnostic]

    package init(diagnostics: [Diagnostic]) { self.diagnostics = diagnostics }

    package var errors: [Diagnostic] { diagnostics.filter { $0.severity == .error } }

    package var description: String {
        let lines = diagnostics.map(\.description)
        let count = errors.count
        return (lines + ["\(count) error\(count == 1 ? "" : "s") found"]).joined(separator: "\n")
    }
}

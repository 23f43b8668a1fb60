package import Foundation
import Testing

/// Checks documents against the project's JSON Schemas (`schemas/`) with
/// Python's `jsonschema` (Draft 2020-12), a validator that shares no code
/// with the project's own checks: what CI or the app team would run.
package enum JSONSchemaCheck {
    /// `schemas/<name>` in the repository.
    package static func schema(_ name: String) -> URL {
        Executable.packageRoot.appendingPathComponent("schemas").appendingPathComponent(name)
    }

    /// The validator's findings for the document in `file`, one line each
    /// (`json/path: message`), sorted by path; empty when it is valid.
    /// Blocks: for `.offThePool` suites.
    package static func errors(in file: URL, schema: URL) throws -> [String] {
        let script = """
            import json, sys
            try:
                import jsonschema
            except ImportError:
                print("MISSING: python3 cannot import jsonschema; install it (pip install jsonschema, or make setup-test)")
                sys.exit(3)
            schema = json.load(open(sys.argv[1]))
            jsonschema.Draft202012Validator.check_schema(schema)
            validator = jsonschema.Draft202012Validator(schema)
            errors = sorted(validator.iter_errors(json.load(open(sys.argv[2]))), key=lambda e: list(map(str, e.absolute_path)))
            for e in errors:
                print("/".join(str(p) for p in e.absolute_path) + ": " + e.message)
            sys.exit(1 if errors else 0)
            """
        let result = try Tool.run("python3", ["-c", script, schema.path, file.path])
        guard result.status == 0 || result.status == 1 else {
            throw Unavailable(description: "the schema check could not run (exit \(result.status)): \(result.stdout)\(result.stderr)")
        }
        return result.stdout.split(separator: "\n").map(String.init)
    }

    /// The findings for `document`'s bytes.
    package static func errors(in document: some DataProtocol, schema: URL) throws -> [String] {
        let file = TemporaryFolder.path("schema-check", suffix: ".json")
        try Data(document).write(to: file)
        defer { TemporaryFolder.remove(file) }
        return try errors(in: file, schema: schema)
    }

    package struct Unavailable: Error, CustomStringConvertible {
        package var description: String
    }
}

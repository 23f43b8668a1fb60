import Foundation
import TourpackCore

// The JSON report: a stable shape for jobs that read it.
extension ValidationReport {
    /// Pretty JSON with sorted keys and explicit nulls:
    ///
    ///     {
    ///       "findings": [{"check": "sha256", "message": "...", "package": "5b0e...", "path": "AudioCache/...", "severity": "error"}],
    ///       "packages": [{"audioFiles": 3, "errors": 1, "format": "aac", "manifest": "OfflineTours/5b0e.../package.json",
    ///                     "name": "5b0e...", "tourId": "...", "tourName": "Test Road", "warnings": 0}],
    ///       "passed": false, "root": "/abs/Documents", "strict": false,
    ///       "summary": {"audioFiles": 9, "checks": 87, "errors": 1, "failedChecks": 1, "packages": 3, "warnings": 0},
    ///       "version": 1
    ///     }
    ///
    /// `package` is null for findings about the bundle as a whole. Findings are in report order.
    package func json() throws -> String {
        let document = Document(
            version: Self.formatVersion, root: root, strict: strict, passed: passed,
            summary: Summary(
                packages: packages.count, audioFiles: audioFileCount, checks: outcomes.count,
                failedChecks: outcomes.filter(\.hasErrors).count, errors: errorCount, warnings: warningCount),
            packages: packages.map { package in
                let found = findings(package: package.name)
                return Package(
                    name: package.name, manifest: package.manifest, tourId: package.tourId, tourName: package.tourName,
                    format: package.format, audioFiles: package.audioFiles,
                    errors: found.filter { $0.severity == .error }.count, warnings: found.filter { $0.severity == .warning }.count)
            },
            findings: findings.map {
                Finding(severity: $0.severity.rawValue, package: $0.package, path: $0.path, check: $0.check.rawValue, message: $0.message)
            }
        )
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(document), as: UTF8.self)
    }

    private struct Document: Encodable {
        var version: Int
        var root: String
        var strict: Bool
        var passed: Bool
        var summary: Summary
        var packages: [Package]
        var findings: [Finding]
    }

    private struct Summary: Encodable {
        var packages, audioFiles, checks, failedChecks, errors, warnings: Int
    }

    private struct Package: Encodable {
        var name, manifest: String
        var tourId, tourName, format: String?
        var audioFiles, errors, warnings: Int

        // Nulls are written out, so a job can tell "unreadable package.json" from a missing key.
        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(name, forKey: .name)
            try c.encode(manifest, forKey: .manifest)
            try c.encode(tourId, forKey: .tourId)
            try c.encode(tourName, forKey: .tourName)
            try c.encode(format, forKey: .format)
            try c.encode(audioFiles, forKey: .audioFiles)
            try c.encode(errors, forKey: .errors)
            try c.encode(warnings, forKey: .warnings)
        }

        enum CodingKeys: String, CodingKey { case name, manifest, tourId, tourName, format, audioFiles, errors, warnings }
    }

    private struct Finding: Encodable {
        var severity: String
        var package: String?
        var path, check, message: String

        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(severity, forKey: .severity)
            try c.encode(package, forKey: .package)
            try c.encode(path, forKey: .path)
            try c.encode(check, forKey: .check)
            try c.encode(message, forKey: .message)
        }

        enum CodingKeys: String, CodingKey { case severity, package, path, check, message }
    }
}

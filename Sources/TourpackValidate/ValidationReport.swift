import TourpackCore

/// Everything one `validate` run found, in a fixed order, ready to print as
/// text, JSON or JUnit XML.
///
/// The order is packages by folder name (each package.json's checks, then
/// its audio files in list order), then the bundle's own checks (temps,
/// strays, the cache budget). The same bundle always gives the same report,
/// so CI diffs stay quiet.
package struct ValidationReport: Sendable {
    /// The version of the JSON report's shape; bump it on any incompatible change.
    package static let formatVersion = 1

    /// One package as the report shows it; the tour fields are nil when package.json could not be read.
    package struct PackageSummary: Sendable, Hashable {
        /// The folder's name under OfflineTours (normally the packageId).
        package var name: String
        /// `OfflineTours/<name>/package.json`.
        package var manifest: String
        package var tourId: String?
        package var tourName: String?
        package var format: String?
        /// Distinct audio files the package lists.
        package var audioFiles: Int

        package init(
            name: String, manifest: String, tourId: String? = nil, tourName: String? = nil, format: String? = nil, audioFiles: Int = 0
        ) {
            self.name = name
            self.manifest = manifest
            self.tourId = tourId
            self.tourName = tourName
            self.format = format
            self.audioFiles = audioFiles
        }
    }

    /// The validated root, absolute.
    package var root: String
    package var strict: Bool
    package var packages: [PackageSummary]
    /// Every check that ran, with what it found, in report order.
    package var outcomes: [CheckOutcome]

    package init(root: String, strict: Bool, packages: [PackageSummary], outcomes: [CheckOutcome]) {
        self.root = root
        self.strict = strict
        self.packages = packages
        self.outcomes = outcomes
    }

    /// Every finding, in report order.
    package var findings: [ValidationFinding] { outcomes.flatMap(\.findings) }
    package var errorCount: Int { findings.filter { $0.severity == .error }.count }
    package var warningCount: Int { findings.filter { $0.severity == .warning }.count }
    package var audioFileCount: Int { packages.reduce(0) { $0 + $1.audioFiles } }
    /// No error (with `--strict`, warnings are errors already).
    package var passed: Bool { errorCount == 0 }
    /// the contract's exit code: 0 clean, 1 when anything failed.
    package var exitCode: Int32 { passed ? ExitStatus.ok : ExitStatus.failure }

    /// The findings of one package (by folder name), or of the bundle as a whole for nil.
    package func findings(package: String?) -> [ValidationFinding] {
        findings.filter { $0.package == package }
    }

    /// The last line of the text report: counts, and whether it passed.
    package var summaryLine: String {
        let counts =
            "\(Self.plural(packages.count, "package")), \(Self.plural(audioFileCount, "audio file")), \(Self.plural(outcomes.count, "check"))"
        let verdict = passed ? "passed" : "FAILED"
        return
            "validate \(verdict): \(counts); \(Self.plural(errorCount, "error")), \(Self.plural(warningCount, "warning"))\(strict ? " (strict)" : "")"
    }

    /// Findings grouped by package, one line each, then the summary line:
    ///
    ///     package 5b0e…  Test Road (aac, 3 files): 2 errors
    ///       AudioCache/…/…_Detailed.m4a: error: 2048 bytes, package.json says 4096 (truncated?) [size]
    ///     bundle: ok
    ///     validate FAILED: 3 packages, 9 audio files, 87 checks; 2 errors, 0 warnings
    package func text() -> String {
        var lines: [String] = ["validate \(root)"]
        for package in packages {
            let found = findings(package: package.name)
            var title = "package \(ValidationFinding.printable(package.name))"
            if let tourName = package.tourName {
                title +=
                    "  \(ValidationFinding.printable(tourName, limit: 80)) (\(package.format ?? "?"), \(Self.plural(package.audioFiles, "file")))"
            }
            lines.append("\(title): \(Self.verdict(found))")
            lines += found.map { "  \($0)" }
        }
        let bundle = findings(package: nil)
        lines.append("bundle: \(Self.verdict(bundle))")
        lines += bundle.map { "  \($0)" }
        lines.append(summaryLine)
        return lines.joined(separator: "\n")
    }

    static func verdict(_ findings: [ValidationFinding]) -> String {
        let errors = findings.filter { $0.severity == .error }.count
        let warnings = findings.count - errors
        switch (errors, warnings) {
        case (0, 0): return "ok"
        case (_, 0): return plural(errors, "error")
        case (0, _): return plural(warnings, "warning")
        default: return "\(plural(errors, "error")), \(plural(warnings, "warning"))"
        }
    }

    static func plural(_ count: Int, _ noun: String) -> String {
        "\(count) \(noun)\(count == 1 ? "" : "s")"
    }
}

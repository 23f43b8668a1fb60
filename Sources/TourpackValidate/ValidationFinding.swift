import Foundation
package import TourpackCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// One problem `validate` found, with the file a person has to look at.
///
/// `path` is relative to the validated root (`AudioCache/<tour>/<poi>_Detailed.m4a`,
/// `OfflineTours/<package>/package.json`); for an audio path that a
/// package.json lists but that may not be followed (`../x.m4a`), it is that
/// path exactly as written. A problem inside package.json starts its message
/// with the JSON path (`audio[2].sampleRateHz: ...`).
package struct ValidationFinding: Sendable, Hashable, CustomStringConvertible {
    package typealias Severity = Diagnostic.Severity

    package var severity: Severity
    /// The package folder's name (normally its `packageId`); nil for the bundle as a whole.
    package var package: String?
    package var path: String
    package var check: ValidationCheck
    package var message: String

    package init(_ severity: Severity, package: String?, path: String, check: ValidationCheck, message: String) {
        self.severity = severity
        self.package = package
        self.path = path
        self.check = check
        self.message = message
    }

    /// `path: error: message [check]`, the form of one line of the text report.
    /// Paths and messages can carry text from the bundle (file names, package
    /// fields), so control characters are shown escaped: one finding is one line.
    package var description: String {
        "\(Self.printable(path)): \(severity.rawValue): \(Self.printable(message)) [\(check.rawValue)]"
    }

    /// `text` as `PrintableText` shows it, cut after `limit` characters.
    static func printable(_ text: String, limit: Int = .max) -> String { PrintableText.of(text, limit: limit) }
}

/// One check run on one subject (a package.json, an audio file, the cache),
/// with what it found. A check that found nothing passed; JUnit reports it
/// as a passing test case, which is how CI sees what was covered.
package struct CheckOutcome: Sendable, Hashable {
    package var package: String?
    /// The root-relative path the check looked at.
    package var subject: String
    package var check: ValidationCheck
    package var findings: [ValidationFinding]

    package init(package: String?, subject: String, check: ValidationCheck, findings: [ValidationFinding] = []) {
        self.package = package
        self.subject = subject
        self.check = check
        self.findings = findings
    }

    package var hasErrors: Bool { findings.contains { $0.severity == .error } }
}

/// Collects the outcomes of one subject's checks, so a check function can
/// record several problems and the caller never forgets the passing ones.
struct OutcomeRecorder {
    let package: String?
    let subject: String
    private(set) var outcomes: [CheckOutcome] = []

    init(package: String?, subject: String) {
        self.package = package
        self.subject = subject
    }

    /// Marks `check` as run, even if it finds nothing.
    mutating func ran(_ check: ValidationCheck) {
        if !outcomes.contains(where: { $0.check == check }) {
            outcomes.append(CheckOutcome(package: package, subject: subject, check: check))
        }
    }

    /// The `exists` check of a listed file: its status when it is a regular
    /// file; nil, with the error recorded, when it is missing (`missing`
    /// says which list names it), unreadable or anything else.
    mutating func regularFile(_ url: URL, missing: String) -> stat? {
        ran(.exists)
        var status = stat()
        guard stat(url.path, &status) == 0 else {
            let code = errno
            error(.exists, code == ENOENT ? "missing: \(missing) but it is not there" : "cannot be read: \(errnoDescription(code))")
            return nil
        }
        guard status.st_mode & S_IFMT == S_IFREG else {
            error(.exists, "not a regular file")
            return nil
        }
        return status
    }

    mutating func error(_ check: ValidationCheck, _ message: String, path: String? = nil) {
        add(.error, check, message, path: path)
    }

    mutating func warning(_ check: ValidationCheck, _ message: String, path: String? = nil) {
        add(.warning, check, message, path: path)
    }

    private mutating func add(_ severity: ValidationFinding.Severity, _ check: ValidationCheck, _ message: String, path: String?) {
        ran(check)
        let index = outcomes.firstIndex { $0.check == check }!
        outcomes[index].findings.append(
            ValidationFinding(severity, package: package, path: path ?? subject, check: check, message: message))
    }
}

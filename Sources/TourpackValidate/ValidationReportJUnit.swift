import TourpackCore

// The JUnit XML report, for CI systems that show test results.
extension ValidationReport {
    /// JUnit XML as Jenkins, GitLab and junitparser read it: one `<testsuite>`
    /// per package (and one named `bundle` for temps, strays and the budget),
    /// one `<testcase>` per file and check. A check with errors is a
    /// `<failure>` whose `message` is the first problem and whose text lists
    /// them all; warnings go to the test case's `<system-out>`, so they are
    /// visible without failing the build (with `--strict` they are errors).
    /// A whole-bundle check that found problems in several files gives one
    /// test case per file.
    package func junit() -> String {
        var suites: [(name: String, properties: [(String, String)], cases: [TestCase])] = packages.map { package in
            var properties = [("manifest", package.manifest)]
            if let tourId = package.tourId { properties.append(("tourId", tourId)) }
            if let tourName = package.tourName { properties.append(("tourName", tourName)) }
            if let format = package.format { properties.append(("format", format)) }
            return (package.name, properties, [])
        }
        suites.append(("bundle", [("root", root)], []))
        let index = Dictionary(uniqueKeysWithValues: packages.enumerated().map { ($1.name, $0) })
        for outcome in outcomes {
            let suite = outcome.package.flatMap { index[$0] } ?? suites.count - 1
            suites[suite].cases += TestCase.split(outcome, classname: "validate.\(outcome.package ?? "bundle")")
        }

        let allCases = suites.flatMap(\.cases)
        var xml = ["<?xml version=\"1.0\" encoding=\"UTF-8\"?>"]
        xml.append(
            "<testsuites name=\"tourpack validate\" tests=\"\(allCases.count)\" failures=\"\(allCases.filter(\.failed).count)\" errors=\"0\" skipped=\"0\">"
        )
        for suite in suites {
            xml.append(
                "  <testsuite name=\"\(XMLText.attribute(suite.name))\" tests=\"\(suite.cases.count)\" failures=\"\(suite.cases.filter(\.failed).count)\" errors=\"0\" skipped=\"0\">"
            )
            xml.append("    <properties>")
            for (name, value) in suite.properties {
                xml.append("      <property name=\"\(XMLText.escape(name))\" value=\"\(XMLText.attribute(value))\"/>")
            }
            xml.append("    </properties>")
            xml += suite.cases.map { $0.xml(indent: "    ") }
            xml.append("  </testsuite>")
        }
        xml.append("</testsuites>")
        return xml.joined(separator: "\n") + "\n"
    }

    private struct TestCase {
        var classname: String
        var name: String
        var findings: [ValidationFinding]

        var errors: [ValidationFinding] { findings.filter { $0.severity == .error } }
        var failed: Bool { !errors.isEmpty }

        /// One test case for the outcome's subject, or one per file its findings name.
        static func split(_ outcome: CheckOutcome, classname: String) -> [TestCase] {
            let name = { (path: String) in "\(path) [\(outcome.check.rawValue)]" }
            guard !outcome.findings.isEmpty else { return [TestCase(classname: classname, name: name(outcome.subject), findings: [])] }
            var order: [String] = []
            var byPath: [String: [ValidationFinding]] = [:]
            for finding in outcome.findings {
                if byPath[finding.path] == nil { order.append(finding.path) }
                byPath[finding.path, default: []].append(finding)
            }
            return order.map { TestCase(classname: classname, name: name($0), findings: byPath[$0]!) }
        }

        func xml(indent: String) -> String {
            let open = "\(indent)<testcase classname=\"\(XMLText.attribute(classname))\" name=\"\(XMLText.attribute(name))\""
            guard !findings.isEmpty else { return open + "/>" }
            var lines = [open + ">"]
            if let first = errors.first {
                let message = errors.count == 1 ? first.message : "\(errors.count) problems; first: \(first.message)"
                lines.append(
                    "\(indent)  <failure type=\"\(first.check.rawValue)\" message=\"\(XMLText.attribute(message))\">\(XMLText.escape(errors.map(\.description).joined(separator: "\n")))</failure>"
                )
            }
            let warnings = findings.filter { $0.severity == .warning }
            if !warnings.isEmpty {
                lines.append("\(indent)  <system-out>\(XMLText.escape(warnings.map(\.description).joined(separator: "\n")))</system-out>")
            }
            lines.append("\(indent)</testcase>")
            return lines.joined(separator: "\n")
        }
    }
}

/// Text made safe for XML 1.0 attribute values and element content.
///
/// Messages carry file names read from disk and FFmpeg's words, so anything
/// may be in them. The five markup characters become entities, line breaks
/// and tabs become character references (an attribute would otherwise fold
/// them into spaces), and characters XML 1.0 cannot hold at all (other
/// control characters, lone surrogates, U+FFFE/U+FFFF) become U+FFFD.
enum XMLText {
    /// A name or message for an attribute: escaped, and made printable first
    /// (control characters and bidi overrides as `\u{...}`), because JUnit
    /// viewers show these as one line of plain text.
    static func attribute(_ text: String) -> String {
        escape(ValidationFinding.printable(text))
    }

    static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&apos;"
            case "\n": out += "&#10;"
            case "\r": out += "&#13;"
            case "\t": out += "&#9;"
            default:
                switch scalar.value {
                case 0x20...0xD7FF, 0xE000...0xFFFD, 0x10000...0x10FFFF: out.unicodeScalars.append(scalar)
                default: out += "\u{FFFD}"
                }
            }
        }
        return out
    }
}

import Foundation
import Testing
import TourpackCore
import TourpackTesting

@testable import TourpackKit
@testable import TourpackValidate

/// The report's three renderings and the small readers of validate, on
/// hand-made inputs whose every byte is known.
@Suite struct ValidationReportTests {
    static let package = "46d5d5d7-8fa3-5e14-b356-1dcfa54e3b19"

    static var report: ValidationReport {
        let manifest = "OfflineTours/\(package)/package.json"
        let audio = "AudioCache/t/p_Detailed.m4a"
        let stray = "AudioCache/t/notes <&\"'>\n.txt"
        return ValidationReport(
            root: "/r/Documents", strict: false,
            packages: [.init(name: package, manifest: manifest, tourId: "t", tourName: "Road\u{202E}", format: "aac", audioFiles: 1)],
            outcomes: [
                CheckOutcome(package: package, subject: manifest, check: .schema),
                CheckOutcome(
                    package: package, subject: audio, check: .size,
                    findings: [
                        ValidationFinding(
                            .error, package: package, path: audio, check: .size, message: "10 bytes, package.json says 20 (truncated?)")
                    ]),
                CheckOutcome(
                    package: nil, subject: ".", check: .stray,
                    findings: [
                        ValidationFinding(
                            .warning, package: nil, path: stray, check: .stray, message: "stray file: no package lists it (1 B)")
                    ]),
            ])
    }

    @Test func textIsGroupedByPackageWithASummaryLine() {
        #expect(
            Self.report.text() == """
                validate /r/Documents
                package \(Self.package)  Road\\u{202e} (aac, 1 file): 1 error
                  AudioCache/t/p_Detailed.m4a: error: 10 bytes, package.json says 20 (truncated?) [size]
                bundle: 1 warning
                  AudioCache/t/notes <&"'>\\u{a}.txt: warning: stray file: no package lists it (1 B) [stray]
                validate FAILED: 1 package, 1 audio file, 3 checks; 1 error, 1 warning
                """)
        #expect(Self.report.exitCode == 1)
    }

    @Test func jsonHasVersionSortedKeysAndExplicitNulls() throws {
        let text = try Self.report.json()
        let object = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        #expect(object["version"] as? Int == ValidationReport.formatVersion)
        let findings = try #require(object["findings"] as? [[String: Any]])
        #expect(findings.count == 2)
        #expect(findings[1]["package"] is NSNull)
        #expect(findings[1]["path"] as? String == "AudioCache/t/notes <&\"'>\n.txt")
        let summary = try #require(object["summary"] as? [String: Int])
        #expect(summary == ["packages": 1, "audioFiles": 1, "checks": 3, "failedChecks": 1, "errors": 1, "warnings": 1])
        #expect(text.contains("\"check\" : \"size\",\n      \"message\""))
    }

    @Test func junitEscapesAndCountsEveryCase() {
        let xml = Self.report.junit()
        #expect(
            xml.hasPrefix(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"tourpack validate\" tests=\"3\" failures=\"1\" errors=\"0\" skipped=\"0\">"
            ))
        #expect(xml.contains("<testsuite name=\"\(Self.package)\" tests=\"2\" failures=\"1\" errors=\"0\" skipped=\"0\">"))
        #expect(
            xml.contains("<testcase classname=\"validate.\(Self.package)\" name=\"OfflineTours/\(Self.package)/package.json [schema]\"/>"))
        #expect(xml.contains("<failure type=\"size\" message=\"10 bytes, package.json says 20 (truncated?)\">"))
        // The stray's name, markup and newline included, is escaped in the attribute; the warning goes to system-out.
        #expect(xml.contains("name=\"AudioCache/t/notes &lt;&amp;&quot;&apos;&gt;\\u{a}.txt [stray]\">"))
        #expect(xml.contains("<system-out>AudioCache/t/notes &lt;&amp;&quot;&apos;&gt;\\u{a}.txt: warning: stray file"))
        #expect(!xml.contains("\u{202E}"))
    }

    @Test func xmlTextRefusesWhatXMLCannotHold() {
        #expect(XMLText.escape("a<b>&\"'\t\r\n") == "a&lt;b&gt;&amp;&quot;&apos;&#9;&#13;&#10;")
        #expect(XMLText.escape("bell\u{7}nul\u{0}\u{FFFE}") == "bell\u{FFFD}nul\u{FFFD}\u{FFFD}")
        #expect(XMLText.escape("Höhe – 🏔") == "Höhe – 🏔")
    }

    @Test func strictTurnsWarningsIntoFailures() {
        var report = Self.report
        report.outcomes = report.outcomes.map { outcome in
            var outcome = outcome
            outcome.findings = outcome.findings.map {
                var f = $0; f.severity = .error; return f
            }
            return outcome
        }
        #expect(report.junit().contains("<failure type=\"stray\""))
    }

    // MARK: Readers

    static func box(_ type: String, _ payload: Int) -> [UInt8] {
        let size = UInt32(8 + payload)
        return [UInt8(size >> 24), UInt8(size >> 16 & 0xFF), UInt8(size >> 8 & 0xFF), UInt8(size & 0xFF)] + Array(type.utf8)
            + [UInt8](repeating: 0, count: payload)
    }

    static func boxes(_ bytes: [UInt8]) throws -> MP4Boxes {
        let file = TemporaryFolder.path("tourpack-boxes", suffix: ".m4a")
        defer { TemporaryFolder.remove(file) }
        try Data(bytes).write(to: file)
        return try MP4Boxes(contentsOf: file)
    }

    @Test func mp4BoxOrder() throws {
        let faststart = try Self.boxes(Self.box("ftyp", 12) + Self.box("moov", 40) + Self.box("mdat", 100))
        #expect(faststart.types == ["ftyp", "moov", "mdat"] && faststart.faststartProblems().isEmpty)
        let late = try Self.boxes(Self.box("ftyp", 12) + Self.box("mdat", 100) + Self.box("moov", 40))
        #expect(
            late.faststartProblems() == [
                "'mdat' at offset 20 comes before 'moov' at offset 128; the file is not faststart (top-level boxes: ftyp, mdat, moov)"
            ])
        let cut = try Self.boxes(Array((Self.box("ftyp", 12) + Self.box("moov", 40) + Self.box("mdat", 100)).dropLast(30)))
        #expect(cut.faststartProblems() == ["box 'mdat' at offset 68 declares 108 bytes but only 78 remain (file truncated?)"])
        #expect(
            try Self.boxes(Array("ID3\u{4}\0\0\0\0\0\0".utf8)).faststartProblems() == ["does not start with an 'ftyp' box; not an MP4 file"]
        )
    }

    @Test func oggPagesOfNothingUseful() {
        #expect(
            OggOpusPages(bytes: Array("not an ogg file at all, not at all".utf8)).problems.first
                == "no Ogg page at offset 0 (capture pattern missing)")
        #expect(OggOpusPages(bytes: []).problems == ["0 Ogg page(s); an Opus stream needs OpusHead, OpusTags and audio pages"])
    }

    @Test func mp3FrameHeader() throws {
        // ID3v2 of 10 bytes, then an MPEG-1 Layer III mono frame header (no CRC) and an Info tag after 17 bytes of side info.
        let id3: [UInt8] = Array("ID3".utf8) + [4, 0, 0, 0, 0, 0, 0]
        let header: [UInt8] = [0xFF, 0xFB, 0xB0, 0xC4]
        let frame = try MP3FirstFrame(bytes: id3 + header + [UInt8](repeating: 0, count: 17) + Array("Info".utf8))
        #expect(frame.offset == 10 && frame.version == "MPEG-1" && frame.layer == 3 && frame.isMono && frame.problems().isEmpty)
        let xing = try MP3FirstFrame(bytes: header + [UInt8](repeating: 0, count: 17) + Array("Xing".utf8))
        #expect(xing.problems() == ["Xing header marks a VBR file; the contract is 192 kbps CBR (Info header)"])
        #expect(throws: MP3FirstFrame.Problem.self) { try MP3FirstFrame(bytes: Array("OggS....".utf8)) }
    }
}

import Foundation
import Testing

@testable import TourpackCore

/// `WebVTTParser`: what `WebVTT.encode` writes reads back exactly, the
/// W3C rules' variants (BOM, CRLF and CR, headers, NOTE, STYLE and REGION
/// blocks, cue settings, hours, tags) read as they should, and a broken
/// file is refused with the line and what is wrong.
@Suite struct WebVTTParserTests {
    static func parse(_ text: String) throws -> [WebVTTCue] {
        try WebVTTParser.parse(Array(text.utf8))
    }

    /// The problems of a file that must not parse.
    static func problems(_ bytes: [UInt8]) -> [String] {
        do {
            _ = try WebVTTParser.parse(bytes)
            return []
        } catch {
            return error.problems.map(\.description)
        }
    }

    static func problems(_ text: String) -> [String] { problems(Array(text.utf8)) }

    @Test("what WebVTT.encode writes, tricky text included, reads back cue for cue")
    func roundTrip() throws {
        let cues = [
            CaptionCue(start: 0, end: 1.25, text: "Fish & chips <b>are</b> > 3 --> here."),
            CaptionCue(start: 1.25, end: 2.5, text: "Two\nlines\r\nand\u{2028}more"),
            CaptionCue(start: 2.5, end: 3.0, text: "Emoji 🏔️👩‍👩‍👧 and ZWJ"),
            CaptionCue(start: 3.0, end: 3.5, text: "עברית ‏ثم العربية &amp; مرحبا"),
            CaptionCue(start: 3.5, end: 3_725.042, text: "NOTE this is text, not a comment"),
            CaptionCue(start: 3_725.042, end: 360_000.001, text: "WEBVTT"),
        ]
        let parsed = try WebVTTParser.parse(WebVTT.encode(cues))
        #expect(parsed.count == cues.count)
        for (cue, back) in zip(cues, parsed) {
            #expect(back.startMilliseconds == Int64((cue.start * 1000).rounded()))
            #expect(back.endMilliseconds == Int64((cue.end * 1000).rounded()))
            let flat = cue.text.replacingOccurrences(of: "\r\n", with: " ").replacingOccurrences(of: "\n", with: " ")
                .replacingOccurrences(of: "\u{2028}", with: " ")
            #expect(back.text == flat)
        }
        #expect(parsed.map(\.identifier) == (1...cues.count).map { String($0) })
        #expect(parsed.map(\.line) == [4, 8, 12, 16, 20, 24])
        #expect(parsed[5].end == 360_000.001)
    }

    @Test("BOM, CRLF and CR line ends, a header, NOTE, STYLE and REGION blocks, settings and short times")
    func spellings() throws {
        let text =
            "\u{FEFF}WEBVTT - Glacier road\nKind: captions\n\nREGION\nid:fred width:40%\n\nSTYLE\n::cue { color: yellow }\n\n"
            + "NOTE a comment\nover two lines\n\n00:01.000 --> 00:02.500 align:start line:90%\n<v Guide>Hello</v> <i>there</i>\n\n"
            + "NOTE\n\nintro\n01:00:02.500 --> 01:00:04.000\n<c.loud>Gross&nbsp;glockner</c> &lrm;&lt;3&gt; <00:00:03.000>then &#233;&#x1F3D4;\n"
        for ending in ["\n", "\r\n", "\r"] {
            let cues = try Self.parse(text.replacingOccurrences(of: "\n", with: ending))
            #expect(cues.count == 2)
            #expect(cues[0].startMilliseconds == 1_000 && cues[0].endMilliseconds == 2_500)
            #expect(cues[0].settings == "align:start line:90%")
            #expect(cues[0].identifier == nil)
            #expect(cues[0].text == "Hello there")
            #expect(cues[0].line == 13)
            #expect(cues[1].identifier == "intro")
            #expect(cues[1].start == 3_602.5 && cues[1].end == 3_604)
            #expect(cues[1].text == "Gross\u{A0}glockner \u{200E}<3> then é🏔")
        }
    }

    @Test("a payload of several lines keeps its breaks; a header may run into the first cue")
    func payloadLines() throws {
        let cues = try Self.parse("WEBVTT\n00:00.000 --> 00:01.000\nline one\nline two\n")
        #expect(cues.count == 1 && cues[0].payload == "line one\nline two" && cues[0].text == "line one\nline two")
        #expect(try Self.parse("WEBVTT\n").isEmpty)
        #expect(try Self.parse("WEBVTT\tcaptions\n\nNOTE only\n").isEmpty)
    }

    @Test(
        "broken files are refused with the line and what is wrong",
        arguments: [
            ("", "line 1: empty file"),
            ("WEBVTTX\n", "line 1: expected the signature WEBVTT"),
            ("webvtt\n\n00:00.000 --> 00:01.000\nhi\n", "line 1: expected the signature WEBVTT"),
            ("1\n00:00.000 --> 00:01.000\nhi\n", "line 1: expected the signature WEBVTT"),
            ("WEBVTT\n\n1\n00:00:1.25 --> 00:00:02.000\nhi\n", "line 4: expected a timestamp like 00:00:01.250, found \"00:00:1.25\""),
            ("WEBVTT\n\n00:00.000 --> 00:60.000\nhi\n", "line 3: expected a timestamp like 00:00:01.250, found \"00:60.000\""),
            ("WEBVTT\n\n00:00.000 -> 00:01.000\nhi\n", "line 3: a block with no timing line (\"00:00.000 -> 00:01.000\")"),
            ("WEBVTT\n\n00:00.000 to --> 00:01.000\nhi\n", "line 3: expected \"-->\" after the start time, found \"to\""),
            ("WEBVTT\n\n00:00.000-->00:01.000\nhi\n", "line 3: expected a space on each side of \"-->\""),
            ("WEBVTT\n\n00:00.000 --> 00:01.000x\nhi\n", "line 3: expected a space between the end time and the cue settings"),
            ("WEBVTT\n\n00:02.000 --> 00:01.000\nhi\n", "line 3: the cue ends at 00:00:01.000, not after it starts at 00:00:02.000"),
            ("WEBVTT\n\n00:01.000 --> 00:01.000\nhi\n", "line 3: the cue ends at 00:00:01.000, not after"),
            (
                "WEBVTT\n\n00:02.000 --> 00:03.000\nhi\n\n00:01.000 --> 00:04.000\nho\n",
                "line 6: the cue starts at 00:00:01.000, before the previous cue's start 00:00:02.000"
            ),
            ("WEBVTT\n\n1\n00:00.000 --> 00:01.000\nhi\n2\n00:01.000 --> 00:02.000\nho\n", "line 7: \"-->\" in a cue's text"),
            ("WEBVTT\n\n1\n2\n00:00.000 --> 00:01.000\nhi\n", "line 3: a block with no timing line (\"1\")"),
            ("WEBVTT\n\n00:00.000 --> 00:01.000\nhi\n\nSTYLE\n::cue {}\n", "line 6: a STYLE block after the first cue"),
            ("WEBVTT\n\n1\n00:00:00.000 --> 00:00:0", "line 4: expected a timestamp like 00:00:01.250, found \"00:00:0\""),
            ("WEBVTT\n\n1\n00:00:00.0", "line 3: a block with no timing line"),
            ("WEBVTT\n\n00:00.000 --> 99999999999:00:00.000\nhi\n", "line 3: expected a timestamp like 00:00:01.250"),
        ])
    func refused(_ input: String, _ expected: String) {
        let problems = Self.problems(input)
        #expect(problems.contains { $0.hasPrefix(expected) }, "\(problems)")
    }

    @Test("invalid UTF-8 names its line; a file over the cap is refused unread; problems are capped")
    func bounds() {
        #expect(Self.problems(Array("WEBVTT\n\n00:00.000 --> 00:01.000\n".utf8) + [0xC3, 0x28] + [0x0A]) == ["line 4: not UTF-8"])
        let big = [UInt8](repeating: 0x41, count: WebVTTParser.maxBytes + 1)
        #expect(Self.problems(big).first?.contains("more than the \(WebVTTParser.maxBytes)") == true)
        let many = "WEBVTT\n\n" + String(repeating: "x\n\n", count: 100)
        do {
            _ = try WebVTTParser.parse(Array(many.utf8))
            Issue.record("parsed")
        } catch {
            #expect(error.problems.count == WebVTTParser.maxProblems && error.count == 100)
            #expect(error.description.hasSuffix("and 80 more"))
        }
    }

    @Test("cue text: tags out, references resolved, unknown references and stray ampersands kept")
    func plainText() {
        #expect(WebVTTParser.plainText("<v.loud Guide>A</v> &amp; <b><i>B</i></b>") == "A & B")
        #expect(WebVTTParser.plainText("R&D &unknown; &#0; & done &amp") == "R&D &unknown; &#0; & done &amp")
        #expect(WebVTTParser.plainText("cut <b unfinished") == "cut ")
        #expect(WebVTTParser.plainText("&rlm;&lrm;&nbsp;&gt;&lt;") == "\u{200F}\u{200E}\u{A0}><")
    }
}

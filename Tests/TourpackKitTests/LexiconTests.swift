import Foundation
import Testing

@testable import TourpackCore
@testable import TourpackKit
@testable import TourpackLoad
@testable import TourpackPlan
@testable import TourpackState

/// W3C PLS 1.0 lexicons: strict parsing with file and line, rewriting for
/// each dialect, and what a lexeme's edit does to the chunk keys.
///
/// Goldens live in `Resources/lexicons`: `alps.pls` with `alps.golden.json`
/// (what the parser reads from it), and `rewrite/<case>.txt` (a `limit: N`
/// line, then a narration) with `<case>.golden.json` (its chunks for
/// Google, an OpenAI-style endpoint and the local voice).
/// `TOURPACK_UPDATE_GOLDENS=1 swift test --filter LexiconTests` rewrites the
/// goldens; review every change by eye before committing.
@Suite struct LexiconTests {
    static let sourceDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Resources/lexicons")
    static var updating: Bool { ProcessInfo.processInfo.environment["TOURPACK_UPDATE_GOLDENS"] == "1" }
    static var directory: URL? {
        if updating { return sourceDirectory }
        return Bundle.module.url(forResource: "lexicons", withExtension: nil, subdirectory: "Resources")
            ?? Bundle.module.url(forResource: "lexicons", withExtension: nil)
    }

    static let header = #"<lexicon version="1.0" xmlns="http://www.w3.org/2005/01/pronunciation-lexicon" alphabet="ipa" xml:lang="en-US">"#

    static func lexicon(_ body: String, file: String = "test.pls") throws -> Lexicon {
        try LexiconLoader.parse(header + "\n" + body + "\n</lexicon>\n", file: file)
    }

    static func alps() throws -> Lexicon {
        let directory = try #require(Self.directory)
        return try LexiconLoader.load(directory.appendingPathComponent("alps.pls"), displayName: "alps.pls")
    }

    static func rewrite(_ text: String, _ lexicon: Lexicon, _ dialect: PronunciationDialect) -> String {
        LexiconRewriter(lexicons: [lexicon], dialect: dialect).rewrite(Narration(text: text)).narration.text
    }

    static func writeOrCompare<T: Codable & Equatable>(_ actual: T, golden name: String) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        let encoded = try encoder.encode(actual) + Data("\n".utf8)
        if updating {
            try encoded.write(to: sourceDirectory.appendingPathComponent(name), options: .atomic)
            return
        }
        let directory = try #require(Self.directory)
        let expected = try JSONDecoder().decode(T.self, from: Data(contentsOf: directory.appendingPathComponent(name)))
        #expect(actual == expected, "\(name) differs; run with TOURPACK_UPDATE_GOLDENS=1 and review the diff")
    }

    // MARK: Parsing

    struct ParsedLexeme: Codable, Equatable {
        var line: Int
        var graphemes: [String]
        var phoneme: String?
        var alias: String?
    }

    struct ParsedLexicon: Codable, Equatable {
        var language: String
        var alphabet: String
        var lexemes: [ParsedLexeme]
    }

    @Test func parsesTheGoldenLexicon() throws {
        let lexicon = try Self.alps()
        let parsed = ParsedLexicon(
            language: lexicon.language, alphabet: lexicon.alphabet.rawValue,
            lexemes: lexicon.lexemes.map {
                ParsedLexeme(
                    line: $0.line, graphemes: $0.graphemes, phoneme: $0.phoneme.map { "\($0.alphabet.rawValue): \($0.text)" },
                    alias: $0.alias)
            })
        try Self.writeOrCompare(parsed, golden: "alps.golden.json")
        // Beyond the golden: what each rule must give, stated plainly.
        #expect(lexicon.lexemes.count == 7)
        #expect(lexicon.lexemes[1].graphemes == ["Zermatt Matterhorn"], "whitespace inside a grapheme collapses")
        #expect(lexicon.lexemes[3].phoneme == Phoneme(alphabet: .ipa, text: "ˈstɛlvjo"), "prefer=\"true\" wins over document order")
        #expect(lexicon.lexemes[4].graphemes == ["AT&T"] && lexicon.lexemes[4].alias == "A & T \"<tel>\"", "entities are decoded")
        #expect(lexicon.lexemes[5].phoneme?.alphabet == .xSampa, "a phoneme's alphabet overrides the lexicon's")
    }

    static let errorCases: [(name: String, pls: String, errors: [String])] = [
        (
            "wrong root",
            "<?xml version=\"1.0\"?>\n<speak version=\"1.0\" xmlns=\"http://www.w3.org/2005/01/pronunciation-lexicon\"/>\n",
            ["bad.pls: line 2: the root element must be <lexicon>, not <speak>"]
        ),
        (
            "wrong namespace",
            "<lexicon version=\"1.0\" xmlns=\"http://www.w3.org/2001/10/synthesis\" alphabet=\"ipa\" xml:lang=\"en\">\n</lexicon>\n",
            [
                "bad.pls: line 1: <lexicon> must be in the PLS namespace (xmlns=\"http://www.w3.org/2005/01/pronunciation-lexicon\"), not in the namespace http://www.w3.org/2001/10/synthesis"
            ]
        ),
        (
            "no namespace",
            "<lexicon version=\"1.0\" alphabet=\"ipa\" xml:lang=\"en\"/>\n",
            [
                "bad.pls: line 1: <lexicon> must be in the PLS namespace (xmlns=\"http://www.w3.org/2005/01/pronunciation-lexicon\"), not in no namespace"
            ]
        ),
        (
            "wrong version and alphabet, no language",
            "\n<lexicon version=\"1.1\" xmlns=\"http://www.w3.org/2005/01/pronunciation-lexicon\" alphabet=\"arpabet\">\n</lexicon>\n",
            [
                "bad.pls: line 2: unsupported PLS version \"1.1\"; tourpack reads version=\"1.0\"",
                "bad.pls: line 2: unknown alphabet \"arpabet\"; use \"ipa\" or \"x-sampa\"",
                "bad.pls: line 2: <lexicon> has no xml:lang; name the lexicon's language, as in xml:lang=\"en-US\"",
            ]
        ),
        (
            "every lexeme problem, each at its line",
            header + """

                  <lexeme>
                    <phoneme>a</phoneme>
                  </lexeme>
                  <lexeme>
                    <grapheme>Saas-Fee</grapheme>
                  </lexeme>
                  <lexeme>
                    <grapheme>  </grapheme>
                    <alias>nothing</alias>
                  </lexeme>
                  <lexeme>
                    <grapheme>Visp</grapheme>
                    <phoneme alphabet="klingon">fisp</phoneme>
                  </lexeme>
                  <lexeme>
                    <graphme>Brig</graphme>
                    <alias>Breeg</alias>
                  </lexeme>
                  <lexeme>
                    <alias>Tash</alias>
                    <grapheme>Täsch</grapheme>
                  </lexeme>
                  <lexeme lang="de">
                    <grapheme>Sion</grapheme>
                    <alias prefer="yes">See-on</alias>
                  </lexeme>
                  stray words
                </lexicon>
                """,
            [
                "bad.pls: line 2: the lexeme has no <grapheme>; give the spelling it applies to",
                "bad.pls: line 5: the lexeme \"Saas-Fee\" has neither a <phoneme> nor an <alias>, so it changes nothing",
                "bad.pls: line 9: empty <grapheme>",
                "bad.pls: line 14: unknown alphabet \"klingon\"; use \"ipa\" or \"x-sampa\"",
                "bad.pls: line 17: <graphme> is not allowed in <lexeme>; it holds <grapheme>, <phoneme>, <alias> and <example>",
                "bad.pls: line 22: <grapheme> comes after a <phoneme> or <alias>; a lexeme lists its graphemes first",
                "bad.pls: line 24: unknown attribute lang on <lexeme>; it takes role",
                "bad.pls: line 26: prefer must be \"true\" or \"false\", not \"yes\"",
                "bad.pls: line 29: text \"stray words\" stands outside <grapheme>, <phoneme> and <alias>",
            ]
        ),
        (
            "malformed XML",
            header + "\n  <lexeme>\n    <grapheme>Zermatt</alias>\n  </lexeme>\n</lexicon>\n",
            ["bad.pls: line 3: malformed XML: a closing tag that does not match the element it closes"]
        ),
        (
            "a document type",
            "<?xml version=\"1.0\"?>\n<!DOCTYPE lexicon [<!ENTITY a \"aaaa\">]>\n" + header + "</lexicon>\n",
            ["bad.pls: line 2: <!DOCTYPE> and <!ENTITY> are not allowed in a lexicon; it needs neither"]
        ),
        ("an empty file", "\n", ["bad.pls: line 1: the file is empty"]),
        // Found by the `pls-lexicon` fuzz target (issue 27): libxml2 crashed on these.
        (
            "an encoding other than UTF-8",
            "<?xml version=\"1.0\" encoding=\"EBCDIC-US\"?>\n<lexicon/>\n",
            [
                "bad.pls: line 1: the XML declaration says encoding=\"EBCDIC-US\"; a lexicon is UTF-8: write encoding=\"UTF-8\" or leave it out"
            ]
        ),
        (
            "NUL characters, read as UCS-4",
            "\u{0}\u{0}\u{0}<?xml version=\"1.0\"?>\n" + header + "</lexicon>\n",
            ["bad.pls: line 1: a NUL character; a lexicon is UTF-8 text, and XML allows none"]
        ),
        (
            "a processing instruction",
            "<?x?>\n" + header + "</lexicon>\n",
            ["bad.pls: line 1: processing instructions (<?x …?>) are not allowed in a lexicon; it needs none"]
        ),
        (
            "UTF-7, out of place",
            "\n<?xml version='1.0' encoding = 'UTF-7'?>\n" + header + "</lexicon>\n",
            ["bad.pls: line 2: the XML declaration says encoding=\"UTF-7\"; a lexicon is UTF-8: write encoding=\"UTF-8\" or leave it out"]
        ),
        (
            "an element never closed",
            header + "\n  <lexeme>\n",
            ["bad.pls: line 2: malformed XML: the document does not end where it should (an element left open, or more after the root)"]
        ),
        (
            "an element inside a grapheme",
            header + "\n  <lexeme>\n    <grapheme>Zer<b>matt</b></grapheme>\n    <alias>x</alias>\n  </lexeme>\n</lexicon>\n",
            ["bad.pls: line 3: <b> is not allowed inside <grapheme>, which holds text only"]
        ),
    ]

    @Test(arguments: errorCases.indices)
    func refusesBadLexiconsWithFileAndLine(_ index: Int) {
        let testCase = Self.errorCases[index]
        do {
            _ = try LexiconLoader.parse(testCase.pls, file: "bad.pls")
            Issue.record("\(testCase.name): accepted")
        } catch {
            #expect(error.errors.map(\.description) == testCase.errors, "\(testCase.name)")
        }
    }

    // MARK: Rewriting

    struct RewriteGolden: Codable, Equatable {
        struct Piece: Codable, Equatable {
            var ssml: Bool
            var text: String
        }

        var limit: Int
        var google: [Piece]
        var openai: [Piece]
        var local: [Piece]
    }

    static func rewriteCases() -> [String] {
        guard let directory,
            let files = try? FileManager.default.contentsOfDirectory(atPath: directory.appendingPathComponent("rewrite").path)
        else { return [] }
        return files.filter { $0.hasSuffix(".txt") }.map { String($0.dropLast(4)) }.sorted()
    }

    @Test func thereAreRewriteCases() {
        #expect(Self.rewriteCases().count >= 4)
    }

    @Test(arguments: rewriteCases())
    func rewriteGolden(_ name: String) throws {
        let directory = try #require(Self.directory)
        let input = try String(contentsOf: directory.appendingPathComponent("rewrite/\(name).txt"), encoding: .utf8)
        let newline = try #require(input.firstIndex(of: "\n"))
        let limit = try #require(Int(input[..<newline].dropFirst("limit: ".count)))
        let narration = Narration(text: String(input[input.index(after: newline)...]))
        let lexicons = [try Self.alps()]
        let local = VoicePreset(provider: "local", languageCode: "en-US", name: "en-us", tier: .local)
        let google = VoicePreset(provider: "google", languageCode: "en-US", name: "en-US-Standard-C", tier: .standard)
        func chunks(_ api: TTSAPI, _ voice: VoicePreset) throws -> [RewriteGolden.Piece] {
            let rewriter = LexiconRewriter(lexicons: lexicons, dialect: PronunciationDialect(api: api, voice: voice))
            let limit = api == .google ? ChunkLimit.utf8BytesAfterEscaping(limit) : .characters(limit)
            let chunks = try rewriter.chunks(for: narration, using: Chunker(limit: limit))
            for chunk in chunks where chunk.isSSML { #expect(SSML.validate(chunk.text) == [], "\(name): malformed chunk \(chunk.text)") }
            return chunks.map { .init(ssml: $0.isSSML, text: $0.text) }
        }
        let actual = RewriteGolden(
            limit: limit, google: try chunks(.google, google), openai: try chunks(.openai, google), local: try chunks(.google, local))
        try Self.writeOrCompare(actual, golden: "rewrite/\(name).golden.json")
    }

    @Test func theLongestGraphemeWinsOnWholeWordsCaseSensitively() throws {
        let lexicon = try Self.alps()
        #expect(Self.rewrite("Zermatt Matterhorn", lexicon, .alias) == "Tsair-matt Matter-horn")
        #expect(Self.rewrite("Zermatt\n  Matterhorn!", lexicon, .alias) == "Tsair-matt Matter-horn!", "a space matches any whitespace")
        #expect(Self.rewrite("Zermatt, then Matterhorn", lexicon, .alias) == "Tsair-matt, then Matterhorn")
        #expect(Self.rewrite("Zermatter and Zermatt's and AZermatt", lexicon, .alias) == "Zermatter and Tsair-matt's and AZermatt")
        #expect(Self.rewrite("zermatt ZERMATT Zermatt", lexicon, .alias) == "zermatt Zermatt in capitals Tsair-matt")
        #expect(Self.rewrite("AT&T's", lexicon, .alias) == "A & T \"<tel>\"'s")
    }

    @Test func substitutedTextIsNeverRewrittenAgain() throws {
        let lexicon = try Self.lexicon(
            """
            <lexeme><grapheme>Grindelwald</grapheme><alias>near Zermatt</alias></lexeme>
            <lexeme><grapheme>Zermatt</grapheme><alias>Tsermatt</alias></lexeme>
            """)
        #expect(Self.rewrite("Grindelwald, Zermatt", lexicon, .alias) == "near Zermatt, Tsermatt")
        #expect(
            Self.rewrite("Grindelwald, Zermatt", lexicon, .ssml)
                == #"<speak><sub alias="near Zermatt">Grindelwald</sub>, <sub alias="Tsermatt">Zermatt</sub></speak>"#)
    }

    @Test func attributesAndTextAreEscaped() throws {
        let lexicon = try Self.lexicon(
            #"""
            <lexeme><grapheme>Q&amp;A</grapheme><phoneme>k&lt;"ju&amp;</phoneme></lexeme>
            <lexeme><grapheme>R&amp;R</grapheme><alias>rest &amp; "relax" &lt;3</alias></lexeme>
            """#)
        // Google, plain narration: wrapped, the narration's own text escaped too.
        #expect(
            Self.rewrite(#"Q&A, R&R and "5 < 6""#, lexicon, .ssml)
                == #"<speak><phoneme alphabet="ipa" ph="k&lt;&quot;ju&amp;">Q&amp;A</phoneme>, <sub alias="rest &amp; &quot;relax&quot; &lt;3">R&amp;R</sub> and &quot;5 &lt; 6&quot;</speak>"#
        )
        // Google, SSML narration: the grapheme's own markup (an entity) is kept inside the element.
        #expect(
            Self.rewrite("<speak>R&amp;R</speak>", lexicon, .ssml)
                == #"<speak><sub alias="rest &amp; &quot;relax&quot; &lt;3">R&amp;R</sub></speak>"#)
        // Aliases only: escaped in SSML, as they are in plain text.
        #expect(Self.rewrite("<speak>R&amp;R</speak>", lexicon, .alias) == "<speak>rest &amp; &quot;relax&quot; &lt;3</speak>")
        #expect(Self.rewrite("R&R", lexicon, .alias) == #"rest & "relax" <3"#)
        for text in [#"Q&A, R&R and "5 < 6""#, "<speak>R&amp;R and Q&amp;A</speak>"] {
            #expect(SSML.validate(Self.rewrite(text, lexicon, .ssml)) == [])
        }
    }

    @Test func ssmlTagsAttributesAndPronouncedElementsAreLeftAlone() throws {
        let lexicon = try Self.alps()
        let ssml =
            #"<speak><sub alias="Zermatt">Zermatt</sub> <say-as interpret-as="characters">Zermatt</say-as> <phoneme alphabet="ipa" ph="z">Zermatt</phoneme> <mark name="Zermatt"/><!-- Zermatt --><![CDATA[Zermatt]]> <prosody rate="slow">Zermatt</prosody></speak>"#
        let expected =
            #"<speak><sub alias="Zermatt">Zermatt</sub> <say-as interpret-as="characters">Zermatt</say-as> <phoneme alphabet="ipa" ph="z">Zermatt</phoneme> <mark name="Zermatt"/><!-- Zermatt --><![CDATA[Zermatt]]> <prosody rate="slow"><phoneme alphabet="ipa" ph="ˈtsɛrmat">Zermatt</phoneme></prosody></speak>"#
        #expect(Self.rewrite(ssml, lexicon, .ssml) == expected)
        #expect(Self.rewrite(ssml, lexicon, .alias).hasSuffix(#"<prosody rate="slow">Tsair-matt</prosody></speak>"#))
        let broken = "<speak>Zermatt <b></speak>"
        #expect(Self.rewrite(broken, lexicon, .ssml) == broken, "malformed SSML is left for the chunker to report")
    }

    @Test func aPlainNarrationWithoutAGraphemeStaysPlain() throws {
        let rewriter = LexiconRewriter(lexicons: [try Self.alps()], dialect: .ssml)
        let narration = Narration(text: "Nothing to see <here> & there.")
        let rewritten = rewriter.rewrite(narration)
        #expect(rewritten.narration == narration && !rewritten.wrapped)
    }

    // MARK: Configuration

    static let phonemeOnly = """
        <lexicon version="1.0" xmlns="http://www.w3.org/2005/01/pronunciation-lexicon" alphabet="ipa" xml:lang="en-US">
          <lexeme>
            <grapheme>Zermatt</grapheme>
            <phoneme>ˈtsɛrmat</phoneme>
          </lexeme>
          <lexeme>
            <grapheme>Grindelwald</grapheme>
            <alias>Grin-del-vald</alias>
          </lexeme>
        </lexicon>
        """

    @Test func aPhonemeOnlyLexemeIsRefusedWhereOnlyAliasesCanBeSpoken() throws {
        let fixture = try ConfigFixture()
        defer { fixture.remove() }
        try FileManager.default.createDirectory(at: fixture.root.appendingPathComponent("lexicons"), withIntermediateDirectories: true)
        try fixture.write("lexicons/alps.pls", Self.phonemeOnly)
        try fixture.write("voices/local.yaml", "version: 1\nprovider: local\nlanguageCode: en-US\nname: en-us\ntier: local\n")
        let pipeline = PipelineConfigTests.minimal + "lexicons: [../lexicons/alps.pls]\n"

        // Google with a Google voice: phonemes are fine.
        let config = try fixture.load(pipeline)
        #expect(config.lexicons.map(\.file) == ["lexicons/alps.pls"])
        #expect(config.pronunciationDialect == .ssml)

        let openAI = fixture.errors(pipeline + "tts: {api: openai}\n")
        #expect(
            openAI == [
                "lexicons/alps.pls: line 2: the lexeme \"Zermatt\" has a <phoneme> but no <alias>; the OpenAI-style endpoint cannot speak phonemes, so give it an <alias> to say instead"
            ])
        let local = fixture.errors(pipeline, overrides: PipelineOverrides(voiceFile: "voices/local.yaml"))
        #expect(
            local == [
                "lexicons/alps.pls: line 2: the lexeme \"Zermatt\" has a <phoneme> but no <alias>; the local voice (en-us) cannot speak phonemes, so give it an <alias> to say instead"
            ])
    }

    @Test func voiceLexiconsComeFirstAndPathsResolveAgainstTheirFile() throws {
        let fixture = try ConfigFixture()
        defer { fixture.remove() }
        try FileManager.default.createDirectory(at: fixture.root.appendingPathComponent("lexicons"), withIntermediateDirectories: true)
        let lexeme = { (alias: String) in
            Self.header + "<lexeme><grapheme>Zermatt</grapheme><alias>\(alias)</alias></lexeme></lexicon>"
        }
        try fixture.write("lexicons/pipeline.pls", lexeme("from the pipeline"))
        try fixture.write("voices/voice.pls", lexeme("from the voice"))
        try fixture.write(
            "voices/v.yaml", "version: 1\nprovider: local\nlanguageCode: en-US\nname: en-us\ntier: local\nlexicons: [voice.pls]\n")
        let config = try fixture.load(PipelineConfigTests.minimal + "lexicons: [../lexicons/pipeline.pls, ../voices/voice.pls]\n")
        #expect(config.lexicons.map(\.file) == ["voices/voice.pls", "lexicons/pipeline.pls"], "the voice's first, each file once")
        let rewriter = Planner(config: config).rewriter
        #expect(rewriter.rewrite(Narration(text: "Zermatt")).narration.text == "from the voice")
        #expect(
            config.settledDescription().contains(
                "lexicons  voices/voice.pls (1 lexeme, en-US), lexicons/pipeline.pls (1 lexeme, en-US) · aliases as plain text"))

        let errors = fixture.errors(PipelineConfigTests.minimal + "lexicons: [../lexicons/missing.pls, {a: b}]\n")
        #expect(
            errors == [
                "pipelines/p.yaml: lexicons[1]: expected a non-empty string, found a mapping"
            ])
        let missing = fixture.errors(PipelineConfigTests.minimal + "lexicons: ../lexicons/missing.pls\n")
        #expect(missing == ["lexicons/missing.pls: cannot read: no such file"])
    }

    // MARK: Keys

    /// Editing one lexeme re-synthesizes exactly the chunks that hold its
    /// grapheme: every other chunk keeps its key.
    @Test func editingOneLexemeChangesOnlyTheKeysOfItsChunks() throws {
        let before = try Self.lexicon(
            """
            <lexeme><grapheme>Zermatt</grapheme><phoneme>ˈtsɛrmat</phoneme></lexeme>
            <lexeme><grapheme>Grindelwald</grapheme><alias>Grin-del-vald</alias></lexeme>
            """)
        var after = before
        after.lexemes[0].phoneme = Phoneme(alphabet: .ipa, text: "tsɛrˈmat")
        let narration = Narration(
            text: """
                Grindelwald sits under the north face of the Eiger, with trains every half hour. \
                The railway climbs for the better part of an hour, past meadows and barns, and a waterfall or two that thunder in spring. \
                Zermatt has had no petrol cars for decades; electric taxis meet every train. \
                The glacier below the ridge has been retreating every summer since the middle of the last century, and faster every year. \
                Zermatt and Grindelwald both began as farming villages. \
                Nothing in this last sentence names a town, so its chunk is plain text and keeps the key it had without any lexicon at all.
                """)
        let voice = VoicePreset(provider: "google", languageCode: "en-US", name: "en-US-Standard-C", tier: .standard)
        // A limit that gives each sentence a chunk of its own.
        let chunker = Chunker(limit: .utf8BytesAfterEscaping(200))
        func keyed(_ lexicon: Lexicon) throws -> [(text: String, key: SynthesisKey)] {
            let chunks = try LexiconRewriter(lexicons: [lexicon], dialect: .ssml).chunks(for: narration, using: chunker)
            return chunks.map { ($0.text, SynthesisKey(chunk: $0, voice: voice, sampleRateHz: 24_000)) }
        }
        let old = try keyed(before), new = try keyed(after)
        try #require(old.count == 6 && new.count == 6)
        let changed = old.indices.filter { old[$0].key != new[$0].key }
        #expect(changed == [2, 4], "only the chunks holding Zermatt")
        #expect(changed.allSatisfy { new[$0].text.contains("Zermatt") })
        // Chunks with no lexeme are plain text again, with the keys they had without any lexicon.
        let bare = try chunker.chunks(for: narration)
        #expect(
            old[5].text.hasPrefix("Nothing in this last sentence")
                && old[5].key == SynthesisKey(chunk: bare[3], voice: voice, sampleRateHz: 24_000))
    }

    // MARK: The demo

    @Test func theDemoPipelineLoadsItsLexiconAndSpeaksItsAliases() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let config = try PipelineLoader.load(root.appendingPathComponent("pipelines/demo.yaml"), workingDirectory: root)
        #expect(config.lexicons.map(\.file) == ["lexicons/alps.pls"])
        #expect(config.pronunciationDialect == .alias)
        let tours = try TourLoader().loadAll(globs: config.tourGlobs, relativeTo: root)
        let plan = try Planner(config: config).plan(tours)
        let texts = plan.tours.flatMap(\.items).flatMap(\.chunks).map(\.text)
        let aliases = config.lexicons.flatMap(\.lexemes).compactMap(\.alias)
        #expect(texts.contains { text in aliases.contains { text.contains($0) } }, "some demo narration names a lexeme")
        // The local voice gets aliases as plain words: no markup beyond what the tours wrote themselves.
        var bare = config
        bare.lexicons = []
        let without = try Planner(config: bare).plan(tours).tours.flatMap(\.items).flatMap(\.chunks).map(\.text)
        func markup(_ texts: [String]) -> Int { texts.reduce(0) { $0 + $1.components(separatedBy: "<").count - 1 } }
        #expect(markup(texts) == markup(without))
        #expect(texts != without)
    }
}

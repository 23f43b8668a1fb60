import Testing

@testable import TourpackCore
@testable import TourpackKit
@testable import TourpackPlan

/// The sentences the chunker sees in plain text: cut at every sentence end and nowhere else.
private func sentences(_ text: String) -> [String] {
    let layout = SegmentedNarration(plain: text, limit: .characters(10_000))
    let display = layout.units.map(\.display)
    let levels = CutRules.levels(display, blocks: display.map { _ in false })
    var out: [String] = []
    var start = 0
    for index in 1...display.count where index == display.count || levels[index] == .sentence {
        out.append(layout.render(layout.trimmed(start..<index)))
        start = index
    }
    return out
}

@Suite struct SentenceRuleTests {
    @Test(arguments: [
        (
            "Mr. Smith met Dr. Jones at St. Mary's and Mrs. Ms. Prof. Jr. too. They left.",
            ["Mr. Smith met Dr. Jones at St. Mary's and Mrs. Ms. Prof. Jr. too.", "They left."]
        ),
        (
            "Mt. Everest is approx. 8849 m high, vs. K2 at ca. 8611 m. Impressive.",
            ["Mt. Everest is approx. 8849 m high, vs. K2 at ca. 8611 m.", "Impressive."]
        ),
        (
            "Passes, e.g. Timmelsjoch, i.e. the high ones, etc. All open. Cf. the map.",
            ["Passes, e.g. Timmelsjoch, i.e. the high ones, etc. All open.", "Cf. the map."]
        ),
        (
            "The road climbs 3.5 km. It gains 1.000,5 m. Done.",
            ["The road climbs 3.5 km.", "It gains 1.000,5 m.", "Done."]
        ),
        (
            "J. R. R. Tolkien walked here. So did I. Then we left.",
            ["J. R. R. Tolkien walked here.", "So did I.", "Then we left."]
        ),
        (
            "He waited... And waited… Then it came.",
            ["He waited... And waited… Then it came."]
        ),
        (
            #""Stop." She left. "Stop!" she cried. (It worked.) Yes."#,
            [#""Stop.""#, "She left.", #""Stop!" she cried."#, "(It worked.)", "Yes."]
        ),
        (
            "Really?! Yes! Why? Because.",
            ["Really?!", "Yes!", "Why?", "Because."]
        ),
        (
            "Road No. 107 is closed. No. It is open. No. 5 is.",
            ["Road No. 107 is closed.", "No.", "It is open.", "No. 5 is."]
        ),
        (
            "東京は大きい。京都は古い！本当？はい．終わり",
            ["東京は大きい。", "京都は古い！", "本当？", "はい．", "終わり"]
        ),
        (
            "Am 3. Mai fährt man über die 7. Kehre, z. B. nach Heiligenblut. Dort ist es schön.",
            ["Am 3. Mai fährt man über die 7. Kehre, z. B. nach Heiligenblut.", "Dort ist es schön."]
        ),
        (
            "« Bonjour. » Il part. M. Dupont reste, env. une heure. Fin.",
            ["« Bonjour. »", "Il part.", "M. Dupont reste, env. une heure.", "Fin."]
        ),
        (
            "»Halt.« »Nein.« Er ging. „Gut.“ Sie blieb.",
            ["»Halt.«", "»Nein.«", "Er ging.", "„Gut.“", "Sie blieb."]
        ),
        (
            "Visit www.example.com today. Built in 1850. 200 men worked.",
            ["Visit www.example.com today.", "Built in 1850.", "200 men worked."]
        ),
    ])
    func cutsAtSentenceEnds(_ text: String, _ expected: [String]) {
        #expect(sentences(text) == expected)
    }

    @Test func newlinesAndRunsOfSpaceCollapse() {
        #expect(sentences("  One\n\ntwo   three.\tFour.\r\n") == ["One two three.", "Four."])
    }

    @Test func noBreakSpacesAreKept() {
        #expect(sentences("« Oui\u{A0}! » Non.") == ["« Oui\u{A0}! »", "Non."])
    }
}

@Suite struct ChunkerTests {
    @Test func packsWholeSentencesGreedily() throws {
        let chunker = Chunker(limit: .characters(30))
        let chunks = try chunker.chunks(for: Narration(text: "One two. Three four. Five six seven eight nine. Ten."))
        #expect(chunks.map(\.text) == ["One two. Three four.", "Five six seven eight nine.", "Ten."])
        #expect(chunks.allSatisfy { !$0.isSSML })
    }

    @Test func googleLimitCountsEscapedBytes() throws {
        // 22 characters, but 34 bytes once escaped: "Ah &amp; Bo &amp; Cy." is 21, " Do &amp; Ed." 13 more.
        let text = "Ah & Bo & Cy. Do & Ed."
        let chunks = try Chunker(limit: .utf8BytesAfterEscaping(24)).chunks(for: Narration(text: text))
        #expect(chunks.map(\.text) == ["Ah & Bo & Cy.", "Do & Ed."])
        #expect(try Chunker(limit: .characters(24)).chunks(for: Narration(text: text)).map(\.text) == [text])
    }

    @Test func ssmlChunksAreWholeDocumentsInTheWritersRoot() throws {
        let ssml = #"<speak xml:lang="de-AT">Erster Satz. Zweiter <emphasis>Satz</emphasis>. <break time="1s"/><p>Dritter.</p></speak>"#
        // 32 bytes of wrapper leave 38 for content.
        let chunks = try Chunker(limit: .utf8BytesAfterEscaping(70)).chunks(for: Narration(text: ssml))
        #expect(
            chunks.map(\.text) == [
                #"<speak xml:lang="de-AT">Erster Satz.</speak>"#,
                #"<speak xml:lang="de-AT">Zweiter <emphasis>Satz</emphasis>.</speak>"#,
                #"<speak xml:lang="de-AT"><break time="1s"/><p>Dritter.</p></speak>"#,
            ])
        #expect(chunks.allSatisfy { $0.isSSML && SSML.validate($0.text).isEmpty && $0.text.utf8.count <= 70 })
    }

    @Test func ssmlTextIsCutAtClausesAndCommentsStayPut() throws {
        let ssml =
            #"<speak><!-- draft -->Up the pass, past the lake, over the old stone bridge, <break time="200ms"/> down to the valley.</speak>"#
        // 15 bytes of wrapper leave 45; the first sentence alone needs 68.
        let chunks = try Chunker(limit: .utf8BytesAfterEscaping(60)).chunks(for: Narration(text: ssml))
        #expect(
            chunks.map(\.text) == [
                "<speak><!-- draft -->Up the pass, past the lake,</speak>",
                "<speak>over the old stone bridge,</speak>",
                #"<speak><break time="200ms"/> down to the valley.</speak>"#,
            ])
    }

    @Test func anInlineElementIsNeverCutInside() {
        let ssml = #"<speak><prosody rate="slow">one two three four five six seven</prosody> eight.</speak>"#
        #expect(
            throws: ChunkingError(
                message:
                    "the SSML element <prosody> at character 8 needs 79 characters, more than the 50 one request may carry; it cannot be cut without re-opening it, so make it shorter"
            )
        ) {
            try Chunker(limit: .characters(50)).chunks(for: Narration(text: ssml))
        }
    }

    @Test func anElementTooBigForOneRequestIsAnError() {
        let ssml = "<speak>Short. <p>" + String(repeating: "Long sentence. ", count: 10) + "</p></speak>"
        #expect(
            throws: ChunkingError(
                message:
                    "the SSML element <p> at character 15 needs 172 bytes, more than the 100 one request may carry; it cannot be cut without re-opening it, so break it into smaller <p> or <s> elements"
            )
        ) {
            try Chunker(limit: .utf8BytesAfterEscaping(100)).chunks(for: Narration(text: ssml))
        }
    }

    @Test func malformedSSMLIsAnError() {
        #expect(throws: ChunkingError(message: "malformed SSML: stray & at character 12; write &amp; for a literal &")) {
            try Chunker(limit: .characters(100)).chunks(for: Narration(text: "<speak>Tom & Jerry</speak>"))
        }
    }

    @Test func emptyNarrationIsAnError() {
        #expect(throws: ChunkingError(message: "the narration has nothing to speak")) {
            try Chunker(limit: .characters(100)).chunks(for: Narration(text: " \n\t "))
        }
        #expect(throws: ChunkingError(message: "the narration has nothing to speak")) {
            try Chunker(limit: .characters(100)).chunks(for: Narration(text: "<speak> </speak>"))
        }
    }

    @Test func aGraphemeLargerThanTheLimitIsAnError() {
        // A family emoji is 7 scalars; it may never be cut apart.
        #expect(
            throws: ChunkingError(
                message:
                    #"the text at character 1 ("👨‍👩‍👧‍👦") needs 7 characters, more than the 5 one request may carry and has no place to cut it"#)
        ) {
            try Chunker(limit: .characters(5)).chunks(for: Narration(text: "👨‍👩‍👧‍👦"))
        }
    }

    @Test func combiningSequencesStayWhole() throws {
        let word = String(repeating: "e\u{301}", count: 9)  // 9 characters, 18 scalars
        let chunks = try Chunker(limit: .characters(5)).chunks(for: Narration(text: word))
        #expect(chunks.map { $0.text.count } == [2, 2, 2, 2, 1])
        #expect(chunks.allSatisfy { $0.text.unicodeScalars.first == "e" })
    }
}

@Suite struct ChunkSplitTests {
    let chunker = Chunker(limit: .utf8BytesAfterEscaping(5000))

    @Test func prefersTheSentenceNearestTheMiddle() {
        let chunk = Chunk(text: "One. Two two. Three three three. Four.", isSSML: false)
        #expect(chunker.split(chunk)?.map(\.text) == ["One. Two two.", "Three three three. Four."])
    }

    @Test func fallsBackToAClause() {
        let chunk = Chunk(text: "Up the pass, past the lake; down to the valley.", isSSML: false)
        #expect(chunker.split(chunk)?.map(\.text) == ["Up the pass, past the lake;", "down to the valley."])
    }

    @Test func fallsBackToASpace() {
        let chunk = Chunk(text: "alpha beta gamma delta", isSSML: false)
        #expect(chunker.split(chunk)?.map(\.text) == ["alpha beta", "gamma delta"])
    }

    @Test func fallsBackToAGraphemeInARunWithoutSpaces() {
        let chunk = Chunk(text: "山道山道🇦🇹🇦🇹", isSSML: false)
        #expect(chunker.split(chunk)?.map(\.text) == ["山道山道", "🇦🇹🇦🇹"])
    }

    @Test func splitsSSMLIntoWellFormedDocuments() throws {
        let chunk = Chunk(text: #"<speak><p>One.</p><break time="300ms"/><p>Two.</p></speak>"#, isSSML: true)
        let parts = try #require(chunker.split(chunk))
        // Both cuts halve it equally (11 + 21 + 11 bytes); the earlier one wins.
        #expect(parts.map(\.text) == ["<speak><p>One.</p></speak>", #"<speak><break time="300ms"/><p>Two.</p></speak>"#])
        #expect(parts.allSatisfy { $0.isSSML && SSML.validate($0.text).isEmpty })
    }

    @Test func returnsNilWhenNothingCanBeCut() {
        #expect(chunker.split(Chunk(text: "👨‍👩‍👧‍👦", isSSML: false)) == nil)
        #expect(chunker.split(Chunk(text: "<speak><p>One. Two.</p></speak>", isSSML: true)) == nil)
        #expect(chunker.split(Chunk(text: "<speak>Tom & Jerry. Again.</speak>", isSSML: true)) == nil)
    }
}

import Testing
import TourpackAudio

@testable import TourpackCore
@testable import TourpackKit
@testable import TourpackPlan
@testable import TourpackSpeech

@Suite struct CaptionScriptTests {
    @Test func plainSentencesAreTheNarrationsOwnText() {
        let narration = Narration(text: "Welcome   to the pass.\nMr. Seiler built it in 1856. Look up!  It is   high.")
        #expect(
            CaptionScript.sentenceTexts(of: narration) == [
                "Welcome to the pass.", "Mr. Seiler built it in 1856.", "Look up!", "It is high.",
            ])
    }

    @Test func ssmlShowsWhatIsWrittenNotMarkupOrAliases() {
        let narration = Narration(
            text: """
                <speak>We reach <sub alias="Saint">St.</sub> Gotthard &amp; its lake. <break time="500ms"/>\
                The <phoneme alphabet="ipa" ph="ˈfʊrka">Furka</phoneme> is next.<p>A paragraph. Two sentences.</p></speak>
                """)
        #expect(
            CaptionScript.sentenceTexts(of: narration) == [
                "We reach St. Gotthard & its lake.", "The Furka is next.", "A paragraph. Two sentences.",
            ])
    }

    @Test func boundariesAreByteOffsetsOfSentenceStartsInsideTheChunk() {
        let chunk = Chunk(text: "Été à Zürich. Ça va? Oui.", isSSML: false)
        let offsets = CaptionScript.boundaries(of: chunk)
        let bytes = Array(chunk.text.utf8)
        #expect(offsets.count == 2)
        #expect(offsets.map { String(decoding: bytes[$0...], as: UTF8.self) } == ["Ça va? Oui.", "Oui."])

        let ssml = Chunk(text: #"<speak version="1.0">One &amp; two. <emphasis>Three</emphasis> four.</speak>"#, isSSML: true)
        let marks = CaptionScript.boundaries(of: ssml)
        #expect(marks.map { String(decoding: Array(ssml.text.utf8)[$0...], as: UTF8.self) } == ["<emphasis>Three</emphasis> four.</speak>"])
    }

    @Test func sentencesAreMappedToTheChunkTheyStartIn() throws {
        let narration = Narration(text: "First sentence here. Second one, which is long enough to be cut at its comma. Third.")
        let chunks = try Chunker(limit: .characters(40)).chunks(for: narration)
        #expect(chunks.map(\.text) == ["First sentence here.", "Second one,", "which is long enough to be cut at its", "comma. Third."])
        let script = CaptionScript(narration: narration, chunks: chunks)
        #expect(script.sentences.map(\.text) == CaptionScript.sentenceTexts(of: narration))
        #expect(script.boundaries.count == chunks.count)
        // The cuts inside the second sentence start none; the third starts inside the last chunk, its first mark.
        #expect(script.sentences.map(\.chunk) == [0, 1, 3])
        #expect(script.sentences.map(\.mark) == [0, 0, 1])
        #expect(script.boundaries[3] == ["comma. ".utf8.count])
    }

    @Test func aChunkOfSeveralSentencesMarksEachAfterItsStart() throws {
        let narration = Narration(text: "One. Two. Three.")
        let chunks = try Chunker(limit: .characters(100)).chunks(for: narration)
        let script = CaptionScript(narration: narration, chunks: chunks)
        #expect(chunks.count == 1)
        #expect(script.sentences.map(\.mark) == [0, 1, 2])
        #expect(script.boundaries == [[5, 10]])
        let fractions = script.sentences.map(\.fraction)
        #expect(fractions[0] == 0 && fractions[1] > 0.25 && fractions[1] < 0.4 && fractions[2] > 0.55 && fractions[2] < 0.7)
    }

    @Test func aliasLexiconsNeverReachTheCaptions() throws {
        let lexicon = Lexicon(
            file: "test.pls", language: "en-US", alphabet: .ipa,
            lexemes: [Lexeme(graphemes: ["Grimsel"], phoneme: nil, alias: "Grim zell", line: 1, file: "test.pls")])
        let narration = Narration(text: "The Grimsel Pass is high. The Grimsel lake is cold.")
        let rewriter = LexiconRewriter(lexicons: [lexicon], dialect: .alias)
        let chunks = try rewriter.chunks(for: narration, using: Chunker(limit: .characters(30)))
        #expect(chunks.map(\.text).joined(separator: " ").contains("Grim zell"))
        let script = CaptionScript(narration: narration, chunks: chunks)
        #expect(script.sentences.map(\.text) == ["The Grimsel Pass is high.", "The Grimsel lake is cold."])
    }

    @Test func googleMarksAreCountedAgainstTheLimit() throws {
        let narration = Narration(text: String(repeating: "Go. ", count: 200))
        let marked = try Chunker(limit: .utf8BytesAfterEscaping(500), sentenceMarkCost: 24).chunks(for: narration)
        for chunk in marked {
            let sentences = CaptionScript.boundaries(of: chunk).count + 1
            #expect(chunk.text.utf8.count + sentences * 24 + 15 <= 500)
        }
        let plain = try Chunker(limit: .utf8BytesAfterEscaping(500)).chunks(for: narration)
        #expect(marked.count > plain.count)
    }
}

@Suite struct CaptionTimerTests {
    let rate = 1000
    let joiner = PCMJoiner(pauseMilliseconds: 300, fadeMilliseconds: 0, keepQuietMilliseconds: 0)

    @Test func providerTimesLandWhereTheJoinPutsTheirChunk() throws {
        let narration = Narration(text: "One. Two. Three.")
        // Two chunks: "One. Two." and "Three."
        let chunks = [Chunk(text: "One. Two.", isSSML: false), Chunk(text: "Three.", isSSML: false)]
        let script = CaptionScript(narration: narration, chunks: chunks)
        #expect(script.sentences.map(\.mark) == [0, 1, 0])
        // Chunk 0: speech 100..<2000 (1.9 s), "Two." reported at 1.2 s. Chunk 1: speech 250..<1000.
        let shapes = [
            ChunkShape(samples: 2200, audible: 100..<2000, sentenceTimes: [0.05, 1.2]),
            ChunkShape(samples: 1200, audible: 250..<1000, sentenceTimes: [0.0]),
        ]
        let (cues, timing) = CaptionTimer(joiner: joiner, rate: rate).cues(script, shapes: shapes)
        #expect(timing == .provider)
        // Chunk 0 keeps 0..<2000 (its lead-in kept, its tail trimmed), then the 300 ms pause: chunk 1's speech at 2.3 s.
        #expect(cues.map(\.start) == [0.1, 1.2, 2.3])
        #expect(cues.map(\.end) == [1.2, 2.3, 3.05])
        #expect(cues.map(\.text) == ["One.", "Two.", "Three."])
    }

    @Test func withoutTimesTheStartsAreEstimatedInsideTheSpeech() {
        let narration = Narration(text: "One. Two.")
        let script = CaptionScript(narration: narration, chunks: [Chunk(text: "One. Two.", isSSML: false)])
        let shapes = [ChunkShape(samples: 3000, audible: 1000..<2000)]
        let (cues, timing) = CaptionTimer(joiner: joiner, rate: rate).cues(script, shapes: shapes)
        #expect(timing == .estimated)
        #expect(cues.count == 2)
        #expect(cues[0].start == 1.0)
        #expect(cues[1].start > 1.4 && cues[1].start < 1.7)
        #expect(cues[1].end == 2.0)
    }

    @Test func timesOfTheWrongCountAreNotTrusted() {
        let script = CaptionScript(narration: Narration(text: "One. Two."), chunks: [Chunk(text: "One. Two.", isSSML: false)])
        let shapes = [ChunkShape(samples: 3000, audible: 0..<3000, sentenceTimes: [0.0])]
        #expect(CaptionTimer(joiner: joiner, rate: rate).cues(script, shapes: shapes).timing == .estimated)
    }

    @Test func cuesStayInOrderInsideTheFileEvenWhenTimesDisagree() {
        let script = CaptionScript(narration: Narration(text: "A. B. C."), chunks: [Chunk(text: "A. B. C.", isSSML: false)])
        // Reported out of order, and past the chunk's end.
        let shapes = [ChunkShape(samples: 1000, audible: 0..<1000, sentenceTimes: [0, 0.9, 0.2])]
        let (cues, _) = CaptionTimer(joiner: joiner, rate: rate).cues(script, shapes: shapes)
        for (cue, next) in zip(cues, cues.dropFirst()) {
            #expect(cue.start < cue.end)
            #expect(cue.end <= next.start)
        }
        #expect(cues.allSatisfy { $0.end <= 1.0 })
    }

    @Test func aSilentChunkIsDroppedAndItsSentenceStartsWithTheNext() {
        let chunks = [Chunk(text: "One.", isSSML: false), Chunk(text: "Two.", isSSML: false), Chunk(text: "Three.", isSSML: false)]
        let script = CaptionScript(narration: Narration(text: "One. Two. Three."), chunks: chunks)
        let shapes = [
            ChunkShape(samples: 1000, audible: 0..<1000), ChunkShape(samples: 500, audible: nil),
            ChunkShape(samples: 1000, audible: 0..<1000),
        ]
        let (cues, _) = CaptionTimer(joiner: joiner, rate: rate).cues(script, shapes: shapes)
        #expect(cues.count == 3)
        #expect(abs(cues[2].start - 1.3) <= 0.001)
        #expect(cues[1].start < cues[2].start)
    }
}

@Suite struct WebVTTWriterTests {
    @Test func writesTheFormatWithEscapedText() {
        let bytes = WebVTT.encode([
            CaptionCue(start: 0, end: 1.2345, text: "Fish & chips <b>"), CaptionCue(start: 3723.5, end: 3724, text: "a\nb --> c"),
        ])
        #expect(
            String(decoding: bytes, as: UTF8.self)
                == "WEBVTT\n\n1\n00:00:00.000 --> 00:00:01.235\nFish &amp; chips &lt;b&gt;\n\n2\n01:02:03.500 --> 01:02:04.000\na b --&gt; c\n"
        )
    }
}

@Suite struct CaptionEscapeTests {
    /// `<` followed by a combining mark is one `Character`: escaping by
    /// characters missed it, and a WebVTT reader (or a browser) saw a tag.
    @Test func aMarkupCharacterFollowedByACombiningMarkIsStillEscaped() throws {
        let text = "a <\u{0747}b> & c"
        #expect(WebVTT.escape(text) == "a &lt;\u{0747}b&gt; &amp; c")
        let parsed = try WebVTTParser.parse(WebVTT.encode([CaptionCue(start: 0, end: 1, text: text)]))
        #expect(parsed.map(\.text) == [text])
    }
}

@Suite struct GoogleOwnMarksTests {
    /// An author's own `<mark>`s could carry our names (`s0`): such a chunk is sent untimed.
    @Test func ssmlWithItsOwnMarksIsSentUntimed() {
        let own = Chunk(text: #"<speak>One. <mark name="s1"/>Two.</speak>"#, isSSML: true)
        #expect(SentenceTimings.googleMarkedSSML(own, boundaries: CaptionScript.boundaries(of: own)) == nil)
        let plain = Chunk(text: "One. <mark> Two.", isSSML: false)
        #expect(
            SentenceTimings.googleMarkedSSML(plain, boundaries: CaptionScript.boundaries(of: plain))
                == #"<speak><mark name="s0"/>One. <mark name="s1"/>&lt;mark&gt; Two.</speak>"#)
    }
}

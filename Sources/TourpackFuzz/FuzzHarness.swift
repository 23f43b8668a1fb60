import Foundation
import TourpackCore
import TourpackLoad
import TourpackMaps
import TourpackPlan
import TourpackSpeech
import TourpackValidate

/// The bodies of the libFuzzer targets (`tourpack-fuzz`, built from
/// `Sources/TourpackFuzzEntry` only by `make fuzz`): each hands its bytes to
/// the real parser, as tourpack reads that input from a file, an endpoint or
/// a bundle, and traps when a property that must hold for any input does not
/// (libFuzzer then keeps the input as a crash).
///
/// They live in a target of their own, beside the product and never in it:
/// `FuzzCorpusTests` replays the corpus through them in every `swift test`.
/// What they reach of the parsers' internals is `package`, never `public`.
package enum FuzzHarness {
    /// A target's name, as `make fuzz` and `TOURPACK_FUZZ_TARGET` spell it, and its body.
    package static let targets: [(name: String, run: @Sendable ([UInt8]) -> Void)] = [
        ("tour-json", tourJSON),
        ("pipeline-yaml", pipelineYAML),
        ("voice-yaml", voiceYAML),
        ("pls-lexicon", plsLexicon),
        ("lexicon-rewriter", lexiconRewriter),
        ("ssml-chunker", ssmlChunker),
        ("answer-google", answerGoogle),
        ("answer-elevenlabs", answerElevenLabs),
        ("answer-wav", answerWAV),
        ("answer-pcm", answerPCM),
        ("timing-google", timingGoogle),
        ("timing-elevenlabs", timingElevenLabs),
        ("timing-polly", timingPolly),
        ("mp4-boxes", mp4Boxes),
        ("ogg-opus", oggOpus),
        ("mp3-frame", mp3Frame),
        ("package-json", packageJSON),
        ("mbtiles", mbtiles),
        ("tile-magic", tileMagic),
        ("webvtt", webVTT),
        ("trust-record", trustRecord),
    ]

    /// Stops the run: libFuzzer records the input that broke `property`.
    static func violated(_ target: String, _ property: String) -> Never {
        fatalError("fuzz target \(target): \(property)")
    }

    /// One scratch folder per process, made once; each input overwrites its files.
    static let scratch: URL = {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("tourpack-fuzz-\(getpid())", isDirectory: true)
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }()

    static func file(_ relativePath: String, _ bytes: [UInt8]) -> URL {
        let url = scratch.appendingPathComponent(relativePath)
        try? FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        guard FileManager.default.createFile(atPath: url.path, contents: Data(bytes)) else {
            violated("scratch", "cannot write \(url.path)")
        }
        return url
    }

    /// Every message names a file, as every error of tourpack's must.
    static func checkNamed(_ target: String, _ diagnostics: [Diagnostic]) {
        if let unnamed = diagnostics.first(where: { $0.file.isEmpty || $0.message.isEmpty }) {
            violated(target, "a diagnostic without a file or a message: \(unnamed)")
        }
    }

    // MARK: Configuration and tours

    /// A tour file through the strict JSON reader and the validator: a tour
    /// comes back exactly when no error was reported, and every message names the file.
    static func tourJSON(_ bytes: [UInt8]) {
        var diagnostics = DiagnosticCollector()
        let tour = TourLoader().parse(bytes, displayName: "tours/fuzz.json", into: &diagnostics)
        if (tour == nil) != diagnostics.hasErrors { violated("tour-json", "a tour came back with errors, or neither came back") }
        if diagnostics.diagnostics.contains(where: { $0.file != "tours/fuzz.json" }) {
            violated("tour-json", "a message names another file")
        }
    }

    static func pipelineYAML(_ bytes: [UInt8]) {
        let url = file("pipelines/fuzz.yaml", bytes)
        do {
            _ = try PipelineLoader.load(url, workingDirectory: scratch, environment: [:])
        } catch {
            checkNamed("pipeline-yaml", error.diagnostics)
            if error.errors.isEmpty { violated("pipeline-yaml", "refused without an error") }
        }
    }

    static func voiceYAML(_ bytes: [UInt8]) {
        let url = file("voices/fuzz.yaml", bytes)
        do {
            _ = try VoiceLoader.load(url, displayName: "voices/fuzz.yaml")
        } catch {
            checkNamed("voice-yaml", error.diagnostics)
            if error.errors.isEmpty { violated("voice-yaml", "refused without an error") }
        }
    }

    static func plsLexicon(_ bytes: [UInt8]) {
        guard let text = String(validating: bytes, as: UTF8.self) else { return }
        do {
            let lexicon = try LexiconLoader.parse(text, file: "lexicons/fuzz.pls")
            if lexicon.lexemes.contains(where: { $0.graphemes.isEmpty || $0.graphemes.contains(where: \.isEmpty) }) {
                violated("pls-lexicon", "a lexeme without a grapheme")
            }
        } catch {
            checkNamed("pls-lexicon", error.diagnostics)
        }
    }

    // MARK: Narration

    /// The lexicon the rewriter runs with when the input brings none that reads.
    static let fallbackLexicon: Lexicon? = try? LexiconLoader.parse(
        """
        <?xml version="1.0" encoding="UTF-8"?>
        <lexicon version="1.0" xmlns="http://www.w3.org/2005/01/pronunciation-lexicon" alphabet="ipa" xml:lang="en-US">
          <lexeme><grapheme>Grossglockner</grapheme><phoneme>ˈɡroːsˌɡlɔknɐ</phoneme><alias>Gross glockner</alias></lexeme>
          <lexeme><grapheme>Höhe</grapheme><alias>Hoeh-eh</alias></lexeme>
          <lexeme><grapheme>St. Moritz</grapheme><alias>Saint Moritz</alias></lexeme>
          <lexeme><grapheme>&amp;</grapheme><alias>and</alias></lexeme>
        </lexicon>
        """, file: "fallback.pls")

    /// A limit from the input's first two bytes: characters, escaped UTF-8
    /// bytes or Polly's billed characters, 8 to 1,031.
    static func limit(_ bytes: [UInt8]) -> (ChunkLimit, rest: ArraySlice<UInt8>) {
        guard bytes.count >= 2 else { return (.characters(64), bytes[...]) }
        let value = 8 + (Int(bytes[1]) << 2 | Int(bytes[0] >> 6))
        let limit: ChunkLimit =
            switch bytes[0] & 3 {
            case 1: .utf8BytesAfterEscaping(value)
            case 3: .billedCharacters(value)
            default: .characters(value)
            }
        return (limit, bytes.dropFirst(2))
    }

    /// Text before the first NUL is a PLS lexicon, the rest a narration: the
    /// rewritten narration is still well-formed SSML when it is SSML, and its
    /// chunks fit the limit.
    static func lexiconRewriter(_ bytes: [UInt8]) {
        let (limit, rest) = limit(bytes)
        var lexicons = fallbackLexicon.map { [$0] } ?? []
        var narrationBytes = rest
        if let nul = rest.firstIndex(of: 0) {
            if let text = String(validating: rest[..<nul], as: UTF8.self), let lexicon = try? LexiconLoader.parse(text, file: "fuzz.pls") {
                lexicons = [lexicon]
            }
            narrationBytes = rest[(nul + 1)...]
        }
        let narration = Narration(text: String(decoding: narrationBytes, as: UTF8.self))
        let wasValid = !narration.isSSML || SSML.validate(narration.text).isEmpty
        for dialect in [PronunciationDialect.ssml, .alias] {
            let rewriter = LexiconRewriter(lexicons: lexicons, dialect: dialect)
            let rewritten = rewriter.rewrite(narration).narration
            if rewritten.isSSML, wasValid, let problem = SSML.validate(rewritten.text).first {
                violated("lexicon-rewriter", "\(dialect) rewrote to malformed SSML (\(problem)): \(rewritten.text.debugDescription)")
            }
            guard let chunks = try? rewriter.chunks(for: narration, using: Chunker(limit: limit)) else { continue }
            checkChunks("lexicon-rewriter", chunks, limit: limit)
            // Captions show the narration as written, never an alias.
            checkCaptions(narration, chunks, target: "lexicon-rewriter")
        }
    }

    /// The SSML scanner and the chunker on any text: chunks fit the limit,
    /// SSML chunks are well-formed, and plain chunks joined with single
    /// spaces (nothing between CJK sentences) give back the input, its
    /// whitespace collapsed.
    static func ssmlChunker(_ bytes: [UInt8]) {
        let (limit, rest) = limit(bytes)
        let text = String(decoding: rest, as: UTF8.self)
        let narration = Narration(text: text)
        let problems = SSML.validate(text)
        _ = SSML.hasNothingToSpeak(text)
        let chunks: [Chunk]
        do {
            chunks = try Chunker(limit: limit).chunks(for: narration)
        } catch {
            if error.message.isEmpty { violated("ssml-chunker", "a refusal without a message") }
            return
        }
        if narration.isSSML, !problems.isEmpty { violated("ssml-chunker", "malformed SSML was chunked: \(problems)") }
        checkChunks("ssml-chunker", chunks, limit: limit)
        if !narration.isSSML { checkReassembles(chunks.map(\.text), text) }
        for chunk in chunks {
            guard let halves = Chunker(limit: limit).split(chunk) else { continue }
            if halves.count != 2 || halves.contains(where: { $0.text.isEmpty }) { violated("ssml-chunker", "split gave \(halves)") }
        }
        checkCaptions(narration, chunks, target: "ssml-chunker")
    }

    /// The captions' script of any chunked narration: its sentences are the
    /// narration's (no lexicon here), each placed in a chunk at a start that
    /// chunk is asked the time of, and every asked-for place a UTF-8
    /// boundary of the chunk's text outside any tag; the WebVTT written
    /// from them reads back the same.
    static func checkCaptions(_ narration: Narration, _ chunks: [Chunk], target: String) {
        let script = CaptionScript(narration: narration, chunks: chunks)
        if script.sentences.map(\.text) != CaptionScript.sentenceTexts(of: narration) {
            violated(target, "caption texts \(script.sentences.map(\.text)) are not the narration's sentences")
        }
        for sentence in script.sentences {
            guard sentence.chunk < chunks.count, (0...1).contains(sentence.fraction),
                sentence.mark.map({ $0 <= script.boundaries[sentence.chunk].count }) ?? true
            else { violated(target, "a caption placed outside its chunks: \(sentence)") }
        }
        for (chunk, offsets) in zip(chunks, script.boundaries) {
            let bytes = Array(chunk.text.utf8)
            for offset in offsets {
                guard offset > 0, offset < bytes.count, bytes[offset] & 0xC0 != 0x80,
                    !chunk.isSSML
                        || (String(decoding: bytes[..<offset], as: UTF8.self).split(separator: "<", omittingEmptySubsequences: false).last?
                            .contains(">") ?? true)
                else { violated(target, "a sentence boundary at \(offset) inside \(chunk.text.debugDescription)") }
            }
        }
        let cues = script.sentences.enumerated().map {
            CaptionCue(start: Double($0.offset), end: Double($0.offset) + 0.5, text: $0.element.text)
        }
        do {
            let parsed = try WebVTTParser.parse(WebVTT.encode(cues))
            if parsed.map(\.text) != cues.map({ WebVTTParser.plainText(WebVTT.escape($0.text)) }) {
                violated(target, "captions did not read back: \(cues.map(\.text))")
            }
        } catch {
            violated(target, "captions written as WebVTT do not parse (\(error)): \(cues.map(\.text))")
        }
    }

    static func checkChunks(_ target: String, _ chunks: [Chunk], limit: ChunkLimit) {
        for chunk in chunks {
            if size(chunk, limit) > limit.value { violated(target, "a chunk over \(limit): \(chunk.text.debugDescription)") }
            if case .billedCharacters(let billed) = limit, chunk.characters > 2 * billed {
                violated(target, "a chunk over Polly's total cap, twice \(limit): \(chunk.text.debugDescription)")
            }
            if chunk.isSSML, let problem = SSML.validate(chunk.text).first {
                violated(target, "a malformed SSML chunk (\(problem)): \(chunk.text.debugDescription)")
            }
        }
    }

    static func size(_ chunk: Chunk, _ limit: ChunkLimit) -> Int {
        switch limit {
        case .utf8BytesAfterEscaping: return chunk.isSSML ? chunk.text.utf8.count : SSML.escape(chunk.text).utf8.count
        case .characters: return chunk.text.unicodeScalars.count
        case .billedCharacters: return BillingRule.textCharacters(chunk)
        }
    }

    static func isSpace(_ character: Character) -> Bool {
        character.unicodeScalars.allSatisfy {
            $0.properties.isWhitespace && !["\u{A0}", "\u{2007}", "\u{202F}", "\u{2060}", "\u{FEFF}"].contains($0)
        }
    }

    /// Compared scalar by scalar: a line break before a combining mark is a
    /// grapheme of its own, but once made a space it joins the mark, so the
    /// same scalars can be a different count of `Character`s in a chunk.
    static func checkReassembles(_ pieces: [String], _ original: String) {
        var normalized: [Character] = []
        for character in original {
            if isSpace(character) {
                if let last = normalized.last, last != " " { normalized.append(" ") }
            } else {
                normalized.append(character)
            }
        }
        while normalized.last == " " { normalized.removeLast() }
        let whole = normalized.flatMap(\.unicodeScalars)
        var position = 0
        for piece in pieces {
            guard let first = piece.first, let last = piece.last, !isSpace(first), !isSpace(last) else {
                violated("ssml-chunker", "an empty or untrimmed chunk: \(piece.debugDescription)")
            }
            let scalars = Array(piece.unicodeScalars)
            let end = position + scalars.count
            guard end <= whole.count, scalars.elementsEqual(whole[position..<end]) else {
                let expected = String(String.UnicodeScalarView(whole[position..<min(whole.count, end)]))
                violated(
                    "ssml-chunker",
                    "a chunk does not continue the input at scalar \(position): \(piece.debugDescription), where the input has \(expected.debugDescription)"
                )
            }
            position = end
            if position < whole.count, whole[position] == " " { position += 1 }
        }
        if position != whole.count { violated("ssml-chunker", "the chunks stop at scalar \(position) of \(whole.count)") }
    }

    // MARK: Answers

    /// Google's answer to a request with marks `s0`…`s2`: the audio streams,
    /// and its `timepoints` read as three sentence starts or none.
    static func answerGoogle(_ bytes: [UInt8]) { answer("answer-google", bytes, make: { GoogleAnswerDecoder(marks: 3) }) }
    /// ElevenLabs' `with-timestamps` answer for "Hi. Où? Ok." (sentences at scalars 0, 4 and 8).
    static func answerElevenLabs(_ bytes: [UInt8]) {
        answer("answer-elevenlabs", bytes, make: { ElevenLabsTimestampsDecoder(rate: 24_000, sent: "Hi. Où? Ok.", starts: [0, 4, 8]) })
    }
    static func answerWAV(_ bytes: [UInt8]) { answer("answer-wav", bytes, make: WAVStreamDecoder.init) }
    /// Polly's, Azure's and ElevenLabs' raw 16-bit PCM.
    static func answerPCM(_ bytes: [UInt8]) { answer("answer-pcm", bytes, make: { RawPCMDecoder(rate: 24_000) }) }

    /// A 2xx body, spooled as the synthesizer spools it and decoded into a
    /// FLAC file through `ChunkRecorder`. The same body fed whole and fed in
    /// pieces of every size gives the same samples, or the same refusal, and
    /// the only refusal is `UndecodableBody`.
    static func answer<Decoder: AnswerDecoder>(_ target: String, _ bytes: [UInt8], make: () -> Decoder) {
        let whole = decodeInMemory(bytes, pieces: [bytes.count], make: make)
        var pieces: [Int] = []
        var draws = InputDraws(bytes)
        var left = bytes.count
        while left > 0 {
            let size = min(left, 1 + Int(draws.next() >> 59))
            pieces.append(size)
            left -= size
        }
        let split = decodeInMemory(bytes, pieces: pieces, make: make)
        // Samples decoded before a refusal may be held back with the rest of
        // their block, so only complete decodes are compared sample for sample.
        let bothDecoded = whole.error == nil && split.error == nil
        if (whole.error == nil) != (split.error == nil)
            || bothDecoded && (whole.samples != split.samples || whole.rates != split.rates || whole.times != split.times)
        {
            violated(target, "fed whole and in pieces \(pieces.prefix(8))…, the body decodes differently")
        }
        // Timings are all or nothing, in order, never negative.
        if let times = whole.times, times.enumerated().contains(where: { $1 < 0 || !$1.isFinite || $0 > 0 && $1 < times[$0 - 1] }) {
            violated(target, "sentence times out of order: \(times)")
        }
        if let error = whole.error, !(error is UndecodableBody) { violated(target, "refused with \(type(of: error)): \(error)") }

        let spool = file("\(target).spool", bytes)
        let recorder = ChunkRecorder(destination: scratch.appendingPathComponent("\(target).flac"), rate: 24_000)
        var decoder = make()
        do {
            _ = try recorder.decode(spool: spool, with: &decoder)
        } catch {
            recorder.discard()
        }
    }

    static func decodeInMemory<Decoder: AnswerDecoder>(
        _ bytes: [UInt8], pieces: [Int], make: () -> Decoder
    ) -> (samples: [Int16], rates: [Int], times: [Double]?, error: (any Error)?) {
        var decoder = make()
        var samples: [Int16] = []
        var rates: [Int] = []
        do {
            var start = 0
            for size in pieces {
                try bytes[start..<start + size].withUnsafeBytes { block in
                    try decoder.feed(block) { decoded, rate in
                        samples.append(contentsOf: decoded)
                        if rates.last != rate { rates.append(rate) }
                    }
                }
                start += size
            }
            try decoder.finish()
            return (samples, rates, decoder.sentenceTimes, nil)
        } catch {
            return (samples, rates, nil, error)
        }
    }

    // MARK: validate's readers

    static func mp4Boxes(_ bytes: [UInt8]) {
        guard let boxes = try? MP4Boxes(contentsOf: file("fuzz.m4a", bytes)) else { return }
        var end: Int64 = 0
        for box in boxes.boxes {
            if box.offset != end || box.size < 8 { violated("mp4-boxes", "box \(box) does not follow the last at \(end)") }
            end = box.offset + box.size
        }
        if boxes.damage == nil, end != Int64(bytes.count) {
            violated("mp4-boxes", "undamaged, yet the boxes end at \(end) of \(bytes.count)")
        }
        _ = boxes.faststartProblems()
    }

    static func oggOpus(_ bytes: [UInt8]) {
        let pages = OggOpusPages(bytes: bytes)
        _ = pages.playableSeconds
        if pages.pageCount < 0 { violated("ogg-opus", "a negative page count") }
    }

    static func mp3Frame(_ bytes: [UInt8]) {
        guard let frame = try? MP3FirstFrame(bytes: bytes) else { return }
        if frame.offset < 0 || frame.offset >= bytes.count { violated("mp3-frame", "a frame at \(frame.offset) of \(bytes.count)") }
        _ = frame.problems()
    }

    /// The bytes as `OfflineTours/fuzz/package.json` of a root, through every check that needs no audio.
    static func packageJSON(_ bytes: [UInt8]) {
        let root = scratch.appendingPathComponent("root", isDirectory: true)
        _ = file("root/\(Layout.offlineToursFolder)/fuzz/\(Layout.manifestFileName)", bytes)
        let check = PackageCheck(
            layout: Layout(root: root), name: "fuzz", options: ValidationOptions(now: Date(timeIntervalSince1970: 1_790_000_000)))
        let result = check.run()
        if result.outcomes.isEmpty { violated("package-json", "no outcome at all") }
    }

    /// The bytes as an MBTiles file: metadata, every tile's address, one tile, and the extract's format.
    static func mbtiles(_ bytes: [UInt8]) {
        let url = file("fuzz.mbtiles", bytes)
        defer {
            for suffix in ["-journal", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: url.path + suffix) }
        }
        guard let reader = try? MBTilesReader(url) else { return }
        _ = try? reader.metadata()
        if let ids = try? reader.tileIDs(), let first = ids.first { _ = try? reader.tile(first) }
        _ = try? reader.tile(TileID(z: 0, x: 0, y: 0))
        _ = try? MBTilesExtract.format(of: url)
    }

    // MARK: Captions

    /// Any bytes as a caption file: the parser never traps, refuses a file
    /// over its cap, reports at most `maxProblems` problems each at a line
    /// of the file, and a file it reads holds cues that end after they start,
    /// in order; written back with `WebVTT.encode`, they read back the same.
    /// Then cues made from the bytes (times from a generator they seed, the
    /// bytes as UTF-8 cut into texts) survive `encode` and `parse` exactly.
    static func webVTT(_ bytes: [UInt8]) {
        let lineCount = WebVTTParser.lines(of: bytes).count
        do {
            let cues = try WebVTTParser.parse(bytes)
            if bytes.count > WebVTTParser.maxBytes { violated("webvtt", "read a file of \(bytes.count) bytes, over the cap") }
            for (index, cue) in cues.enumerated() {
                if cue.line < 1 || cue.line > lineCount { violated("webvtt", "cue \(index + 1) at line \(cue.line) of \(lineCount)") }
                if cue.endMilliseconds <= cue.startMilliseconds || index > 0 && cue.startMilliseconds < cues[index - 1].startMilliseconds {
                    violated("webvtt", "cue \(index + 1) is out of order or ends before it starts")
                }
            }
            checkCaptionsRoundTrip(cues.map { CaptionCue(start: $0.start, end: $0.end, text: $0.text) })
        } catch {
            if error.problems.isEmpty || error.problems.count > WebVTTParser.maxProblems || error.count < error.problems.count {
                violated("webvtt", "refused with \(error.problems.count) of \(error.count) problems")
            }
            if let stray = error.problems.first(where: { $0.line < 0 || $0.line > max(lineCount, 1) || $0.message.isEmpty }) {
                violated("webvtt", "a problem at line \(stray.line) of \(lineCount): \(stray)")
            }
        }
        var draws = InputDraws(bytes)
        func next(_ bound: Int) -> Int { Int(draws.next() >> 33) % bound }
        let text = Array(String(decoding: bytes, as: UTF8.self))
        var cues: [CaptionCue] = []
        var position = 0
        var milliseconds = next(5_000)
        while position < text.count || cues.isEmpty {
            let length = min(text.count - position, 1 + next(40))
            let start = milliseconds
            milliseconds += 1 + next(4_000)
            cues.append(
                CaptionCue(start: Double(start) / 1000, end: Double(milliseconds) / 1000, text: String(text[position..<position + length])))
            position += length
            milliseconds += next(3) == 0 ? 0 : next(500)
        }
        checkCaptionsRoundTrip(cues)
    }

    /// `parse(encode(cues))` gives `cues` back: the times to the millisecond,
    /// each text with its line breaks as spaces, as `WebVTT.escape` writes them.
    static func checkCaptionsRoundTrip(_ cues: [CaptionCue]) {
        let parsed: [WebVTTCue]
        do {
            parsed = try WebVTTParser.parse(WebVTT.encode(cues))
        } catch {
            violated("webvtt", "what WebVTT.encode wrote does not parse: \(error)")
        }
        if parsed.count != cues.count { violated("webvtt", "\(cues.count) cues written, \(parsed.count) read") }
        let breaks: Set<Unicode.Scalar> = ["\n", "\r", "\u{2028}", "\u{2029}"]
        for (index, (cue, back)) in zip(cues, parsed).enumerated() {
            let start = Int64((max(0, cue.start) * 1000).rounded())
            let end = Int64((max(0, cue.end) * 1000).rounded())
            if back.startMilliseconds != start || back.endMilliseconds != end {
                violated(
                    "webvtt", "cue \(index + 1) written \(start)...\(end) ms, read \(back.startMilliseconds)...\(back.endMilliseconds)")
            }
            var written = ""
            var afterCR = false
            for scalar in cue.text.unicodeScalars {
                if !(scalar == "\n" && afterCR) { written.unicodeScalars.append(breaks.contains(scalar) ? " " : scalar) }
                afterCR = scalar == "\r"
            }
            if back.text != written {
                violated("webvtt", "cue \(index + 1) written \(written.debugDescription), read \(back.text.debugDescription)")
            }
        }
    }

    /// A tile body against each format's magic number: the signatures are
    /// disjoint, so no body passes as two formats.
    static func tileMagic(_ bytes: [UInt8]) {
        let matching = TileFormat.allCases.filter { $0.matches(bytes) }
        if matching.count > 1 { violated("tile-magic", "one body passes as \(matching)") }
        if bytes.first == UInt8(ascii: "<"), !matching.isEmpty { violated("tile-magic", "markup passes as \(matching)") }
    }
}

package import TourpackCore

/// What one narration's captions say, and where each sentence starts among
/// its chunks, worked out from the text alone (the timings come later,
/// from the voice and the join).
///
/// A sentence is what the chunker calls one (`CutRules`: a sentence end,
/// or an SSML block element such as `<p>` or `<s>`, which is one unit the
/// chunker never cuts inside and so one caption). Its text is the
/// narration's own: SSML markup is left out, an element shows the text
/// written inside it (so `<sub alias="Saint">St.</sub>` reads "St."), and
/// whitespace is collapsed. The lexicons rewrite narration before it is
/// chunked; the captions show the narration as written, never an alias.
///
/// Each chunk is asked for the times of the sentence starts it holds by
/// itself (`boundaries(of:)`): those follow from its text alone, so they
/// can be cached with it under its key. A sentence of the narration whose
/// start is not among them (a chunk cut inside a sentence, or a rule that
/// reads across the chunk's edge) is placed by estimate.
package struct CaptionScript: Sendable, Hashable {
    package struct Sentence: Sendable, Hashable {
        /// The cue's text.
        package var text: String
        /// The chunk it starts in.
        package var chunk: Int
        /// Which of that chunk's starts it is: 0 the chunk's own start,
        /// k the k-th of `boundaries(of:)`; nil when it is none of them.
        package var mark: Int?
        /// How far into the chunk's spoken text it starts, 0..<1, for an estimate.
        package var fraction: Double
    }

    package var sentences: [Sentence]
    /// Per chunk, `boundaries(of:)`: what each chunk's request asks the times of.
    package var boundaries: [[Int]]

    /// The cue texts of a narration, in order: what `validate --pipeline`
    /// holds a caption file to.
    package static func sentenceTexts(of narration: Narration) -> [String] {
        guard let layout = try? layout(narration.text, isSSML: narration.isSSML) else { return [] }
        return writtenSentences(of: layout, levels: levels(of: layout)).map(\.text)
    }

    /// The script of `narration`, spoken as `chunks` (after the lexicons).
    package init(narration: Narration, chunks: [Chunk]) {
        let layouts = chunks.map { try? Self.layout($0.text, isSSML: $0.isSSML) }
        // Each chunk's cut levels, its own sentence starts, and its spoken characters before each unit, worked out once.
        let chunkLevels = layouts.map { $0.map(Self.levels(of:)) }
        let marks = zip(layouts, chunkLevels).map { layout, levels in
            guard let layout, let levels else { return [Int]() }
            return Self.boundaryUnits(layout, levels: levels)
        }
        let spokenBefore = layouts.map { layout -> [Int] in
            var sums = [0]
            for unit in layout?.units ?? [] { sums.append(sums.last! + Self.spokenText(of: unit).count) }
            return sums
        }
        boundaries = zip(layouts, marks).map { layout, marks in layout.map { Self.offsets(of: marks, in: $0) } ?? [] }
        // The chunks' units in a row, a space between chunks (where the
        // chunker trimmed one), so the sentence rules read across seams;
        // and every spoken (non-space) unit's place, by its number.
        var row: [SegmentedNarration.Unit] = []
        var owner: [(chunk: Int, unit: Int)?] = []
        var places: [(chunk: Int, unit: Int)] = []
        for (index, layout) in layouts.enumerated() {
            guard let layout else { continue }
            if !row.isEmpty {
                row.append(SegmentedNarration.Unit(display: " ", markup: " ", cost: 0, kind: .text, position: 0))
                owner.append(nil)
            }
            for unit in layout.units.indices {
                row.append(layout.units[unit])
                owner.append((index, unit))
                if !CutRules.isSpace(layout.units[unit].display) { places.append((index, unit)) }
            }
        }
        // Where the spoken text's sentences start, by spoken unit number.
        // One chunk's row is its own units, whose levels are known.
        let levels =
            layouts.count == 1 && chunkLevels[0] != nil
            ? chunkLevels[0]! : CutRules.levels(row.map(\.display), blocks: row.map(\.isBlock))
        var spokenStarts: [Int] = []
        var number = 0
        var atStart = true
        for index in row.indices {
            if index > 0, levels[index] == .sentence { atStart = true }
            guard owner[index] != nil, !CutRules.isSpace(row[index].display) else { continue }
            // A `<break/>` says nothing: the sentence starts after it, as the written one does.
            let silent = row[index].isBlock && Self.spokenText(of: row[index]).allSatisfy(\.isWhitespace)
            if atStart, !silent {
                spokenStarts.append(number)
                atStart = false
            }
            number += 1
        }
        // The narration as written: its sentences are the cues, whatever the
        // lexicons did. Each is placed at the spoken sentence start of the
        // same number when the two agree (they do unless a lexeme moved a
        // sentence end); otherwise at the spoken unit as far into the
        // chunks as the sentence is into the narration, or the spoken
        // sentence start beside it.
        // The narration is laid out once, for its sentences and its spoken units alike.
        // A narration spoken as one chunk of its own text (no lexeme
        // rewrote it) has that chunk's layout and levels: not worked out again.
        let asWritten = chunks.count == 1 && chunks[0].text == narration.text && chunks[0].isSSML == narration.isSSML
        let narrationLayout = asWritten ? layouts[0] : try? Self.layout(narration.text, isSSML: narration.isSSML)
        let written =
            narrationLayout.map {
                Self.writtenSentences(of: $0, levels: asWritten ? chunkLevels[0] ?? Self.levels(of: $0) : Self.levels(of: $0))
            }
            ?? []
        let writtenTotal = max(1, narrationLayout?.units.count { !CutRules.isSpace($0.display) } ?? 1)
        sentences = written.enumerated().compactMap { index, sentence in
            guard !places.isEmpty else { return nil }
            var at: Int
            if written.count == spokenStarts.count {
                at = spokenStarts[index]
            } else {
                at = Int(clamping: Double(sentence.spokenUnit) * Double(places.count) / Double(writtenTotal), to: 0...(places.count - 1))
                if let near = spokenStarts.min(by: { abs($0 - at) < abs($1 - at) }), abs(near - at) <= 2 { at = near }
            }
            let place = places[at]
            let mark = place.unit == 0 ? 0 : marks[place.chunk].firstIndex(of: place.unit).map { $0 + 1 }
            let sums = spokenBefore[place.chunk]
            let total = sums.last ?? 0
            let fraction = total > 0 ? Double(sums[min(place.unit, sums.count - 1)]) / Double(total) : 0
            return Sentence(text: sentence.text, chunk: place.chunk, mark: mark, fraction: fraction)
        }
    }

    /// The sentences of a narration's layout as written (empty ones left
    /// out), each with how many spoken (non-space) units come before it.
    private static func writtenSentences(of layout: SegmentedNarration, levels: [CutLevel?]) -> [(text: String, spokenUnit: Int)] {
        var spokenBefore = [0]
        for unit in layout.units { spokenBefore.append(spokenBefore.last! + (CutRules.isSpace(unit.display) ? 0 : 1)) }
        return sentenceRanges(of: layout, levels: levels).map { (text(of: layout, $0), spokenBefore[$0.lowerBound]) }.filter {
            !$0.text.isEmpty
        }
    }

    /// Where sentences start inside `chunk` after its own start, as UTF-8
    /// byte offsets into its text (`SynthesisRequest.sentenceBoundaries`).
    package static func boundaries(of chunk: Chunk) -> [Int] {
        guard let layout = try? layout(chunk.text, isSSML: chunk.isSSML) else { return [] }
        return offsets(of: boundaryUnits(layout, levels: levels(of: layout)), in: layout)
    }

    /// The UTF-8 offsets in the chunk's text of the units `marks`.
    private static func offsets(of marks: [Int], in layout: SegmentedNarration) -> [Int] {
        var offsets: [Int] = []
        var offset = layout.prefix.utf8.count
        let marks = Set(marks)
        for (index, unit) in layout.units.enumerated() {
            if marks.contains(index) { offsets.append(offset) }
            offset += unit.markup.utf8.count
        }
        return offsets
    }

    /// The units at which a sentence starts inside a chunk, after its first.
    private static func boundaryUnits(_ layout: SegmentedNarration, levels: [CutLevel?]) -> [Int] {
        sentenceRanges(of: layout, levels: levels).map(\.lowerBound).filter { $0 > 0 }
    }

    /// Where `layout`'s units may be cut (`CutRules.levels`).
    private static func levels(of layout: SegmentedNarration) -> [CutLevel?] {
        CutRules.levels(layout.units.map(\.display), blocks: layout.units.map(\.isBlock))
    }

    /// The sentences' unit ranges, trimmed, without empty ones; `levels` are `levels(of: layout)`.
    private static func sentenceRanges(of layout: SegmentedNarration, levels: [CutLevel?]) -> [Range<Int>] {
        let units = layout.units
        guard !units.isEmpty else { return [] }
        var cuts = [0]
        for index in 1..<units.count where levels[index] == .sentence { cuts.append(index) }
        cuts.append(units.count)
        return zip(cuts, cuts.dropFirst()).map { layout.trimmed($0..<$1) }.filter { !$0.isEmpty }
    }

    private static func text(of layout: SegmentedNarration, _ range: Range<Int>) -> String {
        text(of: layout.units[range])
    }

    private static func text(of units: some Collection<SegmentedNarration.Unit>) -> String {
        units.map(spokenText(of:)).joined().split(whereSeparator: CutRules.isSpace).joined(separator: " ")
    }

    /// A unit as the listener reads it: a character, or an element's text.
    private static func spokenText(of unit: SegmentedNarration.Unit) -> String {
        guard unit.kind != .text else { return String(unit.display) }
        let scanner = SSMLScanner(unit.markup)
        var text = ""
        for token in scanner.tokens {
            switch token.kind {
            case .text: text += scanner.string(token.range)
            case .cdata: text += scanner.string(token.range).dropFirst("<![CDATA[".count).dropLast("]]>".count)
            case .entity(let scalar): text.unicodeScalars.append(scalar)
            case .startTag, .endTag:
                // Block elements and breaks part words.
                text += " "
            default: break
            }
        }
        return text
    }

    private static func layout(_ text: String, isSSML: Bool) throws -> SegmentedNarration {
        let limit = ChunkLimit.characters(Int.max / 4)
        return isSSML ? try SegmentedNarration(ssml: text, limit: limit) : SegmentedNarration(plain: text, limit: limit)
    }
}

package import TourpackCore

/// The chunk stage: cuts one narration into requests that each fit under the
/// TTS endpoint's limit (the contract's "Audio").
///
/// Every chunk becomes a separate utterance, joined later as PCM with a
/// pause, so cuts go where a reader would pause anyway: whole sentences are
/// packed greedily, as many per chunk as fit. Only a sentence too long for
/// one request is cut inside, at a clause (`, ; : — –` and `、，`), then at a
/// space, and, for a run with no spaces at all, between grapheme clusters,
/// never inside one. See `CutRules` and `Abbreviations` for what counts as
/// a sentence end.
///
/// Plain text gives plain chunks. Google's limit is measured on
/// `SSML.escape(text)`, because plain text may be wrapped in SSML on the way
/// out. SSML gives chunks that are each a complete `<speak>…</speak>`
/// document; it is cut only in the text directly inside `<speak>` or between
/// its top-level elements, so no element is ever re-opened.
///
/// Whitespace is normalized: runs collapse into one space and each chunk is
/// trimmed. Joining the chunks with single spaces gives back the narration,
/// except that a cut between CJK sentences gains a space.
package struct Chunker: Sendable {
    /// The most one request may carry, with any headroom already taken off.
    package var limit: ChunkLimit
    /// What the request adds at each sentence start when captions ask the
    /// voice for timings (Google's `<mark name="…"/>`, and its `<speak>`
    /// wrapper around plain text), counted against the limit so the marked
    /// request still fits; 0 when nothing is added.
    package var sentenceMarkCost: Int
    /// One sentence (or top-level SSML block, a `<break/>` included) per
    /// chunk, cut further only when over the limit: for a voice that reports
    /// no times (Piper), so every sentence's start is a chunk's start, which
    /// the join places exactly (`TTSAPI.sendsSentencePerRequest`).
    package var sentencePerChunk: Bool

    package init(limit: ChunkLimit, sentenceMarkCost: Int = 0, sentencePerChunk: Bool = false) {
        self.limit = limit
        self.sentenceMarkCost = max(0, sentenceMarkCost)
        self.sentencePerChunk = sentencePerChunk
    }

    /// The requests for one narration, in order. Throws when the narration is
    /// malformed SSML, has nothing to speak, or holds something that cannot
    /// be cut to fit (such as one top-level SSML element over the limit).
    package func chunks(for narration: Narration) throws(ChunkingError) -> [Chunk] {
        let text = try layout(narration.text, isSSML: narration.isSSML)
        guard !text.units.isEmpty else {
            throw ChunkingError(message: "the narration has nothing to speak")
        }
        let packer = try Packer(text: text, limit: limit, markCost: sentenceMarkCost)
        var ranges: [Range<Int>] = []
        if sentencePerChunk {
            // A piece with nothing to speak (a lone `<break/>`) joins the
            // sentence before it: its pause is then the seam after that chunk.
            var sentences: [Range<Int>] = []
            for piece in packer.cut(0..<text.units.count, at: .sentence) {
                if let last = sentences.last, SSML.hasNothingToSpeak(text.render(piece)) || SSML.hasNothingToSpeak(text.render(last)) {
                    sentences[sentences.count - 1] = last.lowerBound..<piece.upperBound
                } else {
                    sentences.append(piece)
                }
            }
            for sentence in sentences { ranges += try packer.pack(sentence, from: .clause) }
        } else {
            ranges = try packer.pack(0..<text.units.count, from: .sentence)
        }
        return ranges.map { Chunk(text: text.render($0), isSSML: text.isSSML) }
    }

    /// Cuts one chunk in two at its best place, for when the endpoint
    /// answers 400 "longer than the limit" although the chunk fits by our
    /// measure (the server may count differently).
    ///
    /// The best place is a sentence end, then a clause, then a space, then a
    /// grapheme boundary; among equally good places, the one that halves the
    /// size most evenly. Returns nil when the chunk has no place to cut
    /// (one grapheme, or one SSML element) or is malformed SSML.
    package func split(_ chunk: Chunk) -> [Chunk]? {
        guard let text = try? layout(chunk.text, isSSML: chunk.isSSML) else { return nil }
        let whole = text.trimmed(0..<text.units.count)
        guard whole.count >= 2 else { return nil }
        let levels = CutRules.levels(text.units.map(\.display), blocks: text.units.map(\.isBlock))
        var prefixCost = [0]
        for unit in text.units { prefixCost.append(prefixCost.last! + unit.cost) }
        let half = Double(prefixCost[whole.upperBound] + prefixCost[whole.lowerBound]) / 2

        for level in CutLevel.allCases {
            let cuts = (whole.lowerBound + 1..<whole.upperBound).filter { index in
                guard let found = levels[index], found <= level else { return false }
                return !text.trimmed(whole.lowerBound..<index).isEmpty && !text.trimmed(index..<whole.upperBound).isEmpty
            }
            guard let best = cuts.min(by: { abs(Double(prefixCost[$0]) - half) < abs(Double(prefixCost[$1]) - half) }) else {
                continue
            }
            return [whole.lowerBound..<best, best..<whole.upperBound].map {
                Chunk(text: text.render(text.trimmed($0)), isSSML: chunk.isSSML)
            }
        }
        return nil
    }

    private func layout(_ text: String, isSSML: Bool) throws(ChunkingError) -> SegmentedNarration {
        isSSML ? try SegmentedNarration(ssml: text, limit: limit) : SegmentedNarration(plain: text, limit: limit)
    }
}

/// Why a narration could not be chunked, in words a content writer can act on.
package struct ChunkingError: Error, Sendable, Hashable, CustomStringConvertible {
    package var message: String

    package init(message: String) {
        self.message = message
    }

    package var description: String { message }
}

extension SegmentedNarration.Unit {
    var isBlock: Bool {
        if case .block = kind { return true }
        return false
    }
}

/// Greedy packing of units into ranges that fit the budget, cutting at the
/// best level first and falling to the next level only inside a piece that
/// is still too big.
private struct Packer {
    let text: SegmentedNarration
    let limit: ChunkLimit
    let budget: Int
    let levels: [CutLevel?]
    let prefixCost: [Int]

    init(text: SegmentedNarration, limit: ChunkLimit, markCost: Int = 0) throws(ChunkingError) {
        self.text = text
        self.limit = limit
        // Each chunk's own start is marked too, and plain text gains `<speak></speak>`.
        let wrapper = markCost > 0 && !text.isSSML ? "<speak></speak>".utf8.count : 0
        budget = limit.value - text.overhead - markCost - wrapper
        guard budget > 0 else {
            throw ChunkingError(
                message: "the limit of \(limit.value) \(limit.unitName) leaves no room for text inside \(text.render(0..<0))")
        }
        levels = CutRules.levels(text.units.map(\.display), blocks: text.units.map(\.isBlock))
        var sums = [0]
        sums.reserveCapacity(text.units.count + 1)
        for (index, unit) in text.units.enumerated() {
            sums.append(sums.last! + unit.cost + (markCost > 0 && levels[index] == .sentence ? markCost : 0))
        }
        prefixCost = sums
    }

    func cost(_ range: Range<Int>) -> Int { prefixCost[range.upperBound] - prefixCost[range.lowerBound] }

    func pack(_ untrimmed: Range<Int>, from level: CutLevel) throws(ChunkingError) -> [Range<Int>] {
        let range = text.trimmed(untrimmed)
        guard !range.isEmpty else { return [] }
        if cost(range) <= budget { return [range] }
        for current in CutLevel.allCases where current >= level {
            let pieces = cut(range, at: current)
            guard pieces.count > 1 else { continue }
            let next = CutLevel(rawValue: current.rawValue + 1)
            var out: [Range<Int>] = []
            var open: Range<Int>?
            for piece in pieces {
                if let growing = open, cost(growing.lowerBound..<piece.upperBound) <= budget {
                    open = growing.lowerBound..<piece.upperBound
                    continue
                }
                if let growing = open { out.append(growing) }
                open = nil
                if cost(piece) <= budget {
                    open = piece
                } else if let next {
                    // The tail of a cut-up piece may still share a chunk with what follows.
                    out += try pack(piece, from: next)
                    open = out.popLast()
                } else {
                    throw tooBig(piece)
                }
            }
            if let growing = open { out.append(growing) }
            return out
        }
        throw tooBig(range)
    }

    /// `range` cut at every place of `level` or better, each piece trimmed.
    func cut(_ range: Range<Int>, at level: CutLevel) -> [Range<Int>] {
        var pieces: [Range<Int>] = []
        var start = range.lowerBound
        for index in range.lowerBound + 1..<range.upperBound {
            guard let found = levels[index], found <= level else { continue }
            let piece = text.trimmed(start..<index)
            if !piece.isEmpty { pieces.append(piece) }
            start = index
        }
        let last = text.trimmed(start..<range.upperBound)
        if !last.isEmpty { pieces.append(last) }
        return pieces
    }

    private func tooBig(_ range: Range<Int>) -> ChunkingError {
        let size = cost(range) + text.overhead
        let first = text.units[range.lowerBound]
        let needs = "needs \(size) \(limit.unitName), more than the \(limit.value) one request may carry"
        if range.count == 1, case .block(let name) = first.kind {
            return ChunkingError(
                message:
                    "the SSML element <\(name)> at character \(first.position) \(needs); it cannot be cut without re-opening it, so break it into smaller <p> or <s> elements"
            )
        }
        if range.count == 1, case .inline(let name) = first.kind {
            let label = name.isEmpty ? "the SSML comment" : "the SSML element <\(name)>"
            return ChunkingError(
                message: "\(label) at character \(first.position) \(needs); it cannot be cut without re-opening it, so make it shorter")
        }
        let excerpt = String(text.units[range].prefix(20).map(\.display))
        return ChunkingError(message: "the text at character \(first.position) (\"\(excerpt)\") \(needs) and has no place to cut it")
    }
}

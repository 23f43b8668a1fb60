package import TourpackCore

/// Writes pronunciation lexicons into narration, before it is chunked
/// (the contract's "Audio" (pronunciation)).
///
/// Rewriting comes first so that what is chunked, measured against the
/// endpoint's limit, sent, billed and cached is one and the same text: a
/// chunk's key covers its markup, so editing one lexeme changes only the
/// chunks that hold its graphemes, and `plan` shows it before anything is
/// spent. The lexicons themselves are in no key.
///
/// Matching follows PLS: case-sensitive, on whole words (a grapheme that
/// starts or ends with a letter or digit needs a non-word character or the
/// text's edge there), longest grapheme first at each place, left to right,
/// and never again over text a substitution produced. A space in a grapheme
/// matches any run of whitespace. In SSML only character data is rewritten:
/// never a tag, an attribute, a comment or CDATA, and never the content of
/// `<phoneme>`, `<sub>` or `<say-as>`, which already say how to speak it.
///
/// For Google (`PronunciationDialect.ssml`) a lexeme with a phoneme becomes
/// `<phoneme alphabet="…" ph="…">grapheme</phoneme>` (the phoneme wins when
/// a lexeme has both), one with an alias only `<sub alias="…">grapheme</sub>`,
/// and a plain narration that gains one is wrapped in `<speak>` with its text
/// escaped. After chunking, a wrapped chunk that holds no lexeme is turned
/// back into the plain text it was, so it keeps the key it had without
/// lexicons. Elsewhere (`.alias`) the alias replaces the grapheme as text.
package struct LexiconRewriter: Sendable {
    package let dialect: PronunciationDialect
    /// Per first character, the graphemes that start with it, longest first.
    private let candidates: [Character: [Entry]]

    private struct Entry: Sendable {
        /// The grapheme's characters; a space stands for any run of whitespace.
        var pattern: [Character]
        var lexeme: Lexeme
    }

    /// Lexemes in the order given: for a grapheme listed twice, the first
    /// lexeme that has it wins (the voice's lexicons come before the pipeline's).
    package init(lexicons: [Lexicon], dialect: PronunciationDialect) {
        self.dialect = dialect
        var seen: Set<String> = []
        var entries: [Entry] = []
        for lexeme in lexicons.flatMap(\.lexemes) {
            for grapheme in lexeme.graphemes where seen.insert(grapheme).inserted {
                entries.append(Entry(pattern: Array(grapheme), lexeme: lexeme))
            }
        }
        // Stable: equal lengths keep lexicon order.
        let ordered = entries.enumerated().sorted { ($1.element.pattern.count, $0.offset) < ($0.element.pattern.count, $1.offset) }.map(
            \.element)
        candidates = Dictionary(grouping: ordered, by: { $0.pattern[0] })
    }

    /// Whether there is nothing to rewrite with.
    package var isEmpty: Bool { candidates.isEmpty }

    /// The narration's chunks, rewritten: lexemes applied, then cut by
    /// `chunker`, and any wrapped chunk without a lexeme made plain again.
    package func chunks(for narration: Narration, using chunker: Chunker) throws(ChunkingError) -> [Chunk] {
        try chunks(forRewritten: rewrite(narration), using: chunker)
    }

    /// The chunks of a narration `rewrite` made: cut by `chunker`, and any
    /// wrapped chunk without a lexeme made plain again. What they are
    /// follows from `rewritten` and the chunker alone, which is what a kept
    /// plan is keyed by (`PlanInputs`).
    package func chunks(forRewritten rewritten: (narration: Narration, wrapped: Bool), using chunker: Chunker) throws(ChunkingError)
        -> [Chunk]
    {
        let chunks = try chunker.chunks(for: rewritten.narration)
        return rewritten.wrapped ? chunks.map(Self.unwrapped) : chunks
    }

    /// The narration with every lexeme applied, and whether plain text was
    /// wrapped in `<speak>` to carry SSML.
    package func rewrite(_ narration: Narration) -> (narration: Narration, wrapped: Bool) {
        guard !isEmpty else { return (narration, false) }
        if narration.isSSML { return (Narration(text: rewriteSSML(narration.text)), false) }
        switch dialect {
        case .alias:
            let pieces = narration.text.map { Piece(character: $0, markup: String($0)) }
            return (Narration(text: apply(pieces, inSSML: false).text), false)
        case .ssml:
            let pieces = narration.text.map { Piece(character: $0, markup: SSML.escape(String($0))) }
            let result = apply(pieces, inSSML: true)
            guard result.matched else { return (narration, false) }
            return (Narration(text: "<speak>" + result.text + "</speak>"), true)
        }
    }

    // MARK: SSML narration

    /// Elements whose content already says how to speak it.
    static let protectedElements: Set<String> = ["phoneme", "sub", "say-as"]

    private func rewriteSSML(_ text: String) -> String {
        // Broken SSML is left for the chunker to report, unchanged.
        guard SSML.validate(text).isEmpty else { return text }
        let scanner = SSMLScanner(text)
        var out = ""
        var open: [String] = []
        var run: [Piece] = []
        func flush() {
            guard !run.isEmpty else { return }
            out += apply(run, inSSML: true).text
            run = []
        }
        for token in scanner.tokens {
            let source = scanner.string(token.range)
            let protected = open.contains { Self.protectedElements.contains($0) }
            switch token.kind {
            case .text where !protected && !open.isEmpty:
                run += source.map { Piece(character: $0, markup: String($0)) }
                continue
            case .entity(let scalar) where !protected && !open.isEmpty:
                run.append(Piece(character: Character(scalar), markup: source))
                continue
            case .startTag(let name, let selfClosing):
                if !selfClosing { open.append(name) }
            case .endTag(let name):
                if let index = open.lastIndex(of: name) { open.removeSubrange(index...) }
            default:
                break
            }
            flush()
            out += source
        }
        flush()
        return out
    }

    // MARK: Matching

    /// One character of text and how it is written in the output.
    private struct Piece {
        var character: Character
        var markup: String
    }

    /// `pieces` with every match replaced, left to right; the output of a
    /// substitution is never looked at again.
    private func apply(_ pieces: [Piece], inSSML: Bool) -> (text: String, matched: Bool) {
        let characters = pieces.map(\.character)
        var out = ""
        var matched = false
        var i = 0
        while i < pieces.count {
            if let (entry, end) = match(at: i, in: characters) {
                out += replacement(for: entry.lexeme, original: pieces[i..<end].map(\.markup).joined(), inSSML: inSSML)
                matched = true
                i = end
            } else {
                out += pieces[i].markup
                i += 1
            }
        }
        return (out, matched)
    }

    /// The longest grapheme that matches at `start` on word boundaries, and where it ends.
    private func match(at start: Int, in text: [Character]) -> (Entry, Int)? {
        guard let entries = candidates[text[start]] else { return nil }
        for entry in entries {
            if Self.isWord(entry.pattern[0]), start > 0, Self.isWord(text[start - 1]) { continue }
            guard let end = Self.end(of: entry.pattern, at: start, in: text) else { continue }
            if let last = entry.pattern.last, Self.isWord(last), end < text.count, Self.isWord(text[end]) { continue }
            return (entry, end)
        }
        return nil
    }

    /// Where `pattern` ends when it matches `text` at `start`, or nil. A
    /// space in the pattern takes a whole run of whitespace in the text.
    private static func end(of pattern: [Character], at start: Int, in text: [Character]) -> Int? {
        var j = start
        for character in pattern {
            if character == " " {
                guard j < text.count, text[j].isWhitespace else { return nil }
                while j < text.count, text[j].isWhitespace { j += 1 }
            } else {
                guard j < text.count, text[j] == character else { return nil }
                j += 1
            }
        }
        return j
    }

    /// Letters, digits and `_` make words; a grapheme never starts or ends inside one.
    static func isWord(_ character: Character) -> Bool {
        character.isLetter || character.isNumber || character == "_"
    }

    private func replacement(for lexeme: Lexeme, original: String, inSSML: Bool) -> String {
        switch dialect {
        case .alias:
            // The loader refuses a lexeme without an alias for this dialect.
            let alias = lexeme.alias ?? original
            return inSSML ? SSML.escape(alias) : alias
        case .ssml:
            if let phoneme = lexeme.phoneme {
                return "<phoneme alphabet=\"\(phoneme.alphabet.rawValue)\" ph=\"\(SSML.escape(phoneme.text))\">\(original)</phoneme>"
            }
            return "<sub alias=\"\(SSML.escape(lexeme.alias ?? ""))\">\(original)</sub>"
        }
    }

    // MARK: Unwrapping

    /// A chunk of a narration this rewriter wrapped, as plain text again
    /// when it holds no markup: then it is exactly the text it would have
    /// been without lexicons, and keeps that chunk's key.
    static func unwrapped(_ chunk: Chunk) -> Chunk {
        let prefix = "<speak>", suffix = "</speak>"
        guard chunk.isSSML, chunk.text.hasPrefix(prefix), chunk.text.hasSuffix(suffix) else { return chunk }
        let content = chunk.text.dropFirst(prefix.count).dropLast(suffix.count)
        guard !content.contains("<") else { return chunk }
        return Chunk(text: unescape(content), isSSML: false)
    }

    /// The inverse of `SSML.escape`, in one pass.
    static func unescape(_ text: Substring) -> String {
        let entities: [(String, String)] = [("&amp;", "&"), ("&lt;", "<"), ("&gt;", ">"), ("&quot;", "\""), ("&apos;", "'")]
        var out = ""
        var rest = text
        while let ampersand = rest.firstIndex(of: "&") {
            out += rest[..<ampersand]
            rest = rest[ampersand...]
            if let (entity, character) = entities.first(where: { rest.hasPrefix($0.0) }) {
                out += character
                rest = rest.dropFirst(entity.count)
            } else {
                out += "&"
                rest = rest.dropFirst()
            }
        }
        return out + rest
    }
}

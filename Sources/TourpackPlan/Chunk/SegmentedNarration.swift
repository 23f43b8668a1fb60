import TourpackCore

/// Narration laid out as a row of units the chunker may cut between.
///
/// A unit is one grapheme cluster of text, one SSML entity reference, or one
/// whole top-level SSML element; it is never cut. Each unit carries what the
/// sentence rules read (`display`), what is sent (`markup`) and what it costs
/// against the limit. Runs of whitespace are already collapsed into one
/// space unit, and there is none at either end.
///
/// For SSML, only the content of the root `<speak …>` is laid out; every
/// chunk is wrapped again in the writer's own opening tag and `</speak>`,
/// whose size is `overhead`. What stands outside the root (an `<?xml …?>`
/// declaration, comments) is not spoken and is left out of the chunks.
struct SegmentedNarration {
    struct Unit {
        enum Kind: Equatable {
            case text
            /// A top-level element that lives inside a sentence (`<emphasis>`, `<say-as>`, …).
            case inline(String)
            /// A top-level element that is a boundary of its own (`<p>`, `<s>`, `<break/>`).
            case block(String)
        }

        var display: Character
        var markup: String
        var cost: Int
        var kind: Kind
        /// The 1-based character position in the narration, for messages.
        var position: Int
    }

    /// Elements between which SSML may be cut as between sentences.
    static let blockElements: Set<String> = ["p", "s", "paragraph", "sentence", "break"]

    private(set) var units: [Unit] = []
    private(set) var prefix = ""
    private(set) var suffix = ""
    let isSSML: Bool
    let limit: ChunkLimit

    /// Plain text. Google's cost is the UTF-8 size after SSML escaping.
    init(plain text: String, limit: ChunkLimit) {
        self.isSSML = false
        self.limit = limit
        var position = 0
        for character in text {
            position += 1
            appendText(character, markup: String(character), position: position)
        }
        dropTrailingSpace()
    }

    /// An SSML document, which must be well-formed.
    init(ssml text: String, limit: ChunkLimit) throws(ChunkingError) {
        self.isSSML = true
        self.limit = limit
        let scanner = SSMLScanner(text)
        let structure = SSMLStructure(scanner: scanner)
        let problems = SSML.sorted(scanner.problems + structure.problems)
        guard problems.isEmpty, let root = structure.rootTag, let content = structure.content else {
            let prefix = "malformed SSML: "
            let reasons = problems.map { $0.message.hasPrefix(prefix) ? String($0.message.dropFirst(prefix.count)) : $0.message }
            throw ChunkingError(message: prefix + reasons.joined(separator: "; "))
        }
        prefix = scanner.string(scanner.tokens[root].range)
        suffix = "</speak>"

        var depth = 0
        var elementStart = 0
        var elementName = ""
        var elementPosition = 0
        for token in scanner.tokens[content] {
            let position = scanner.position(token.range.lowerBound)
            if depth > 0 {
                switch token.kind {
                case .startTag(_, false): depth += 1
                case .endTag:
                    depth -= 1
                    if depth == 0 {
                        appendElement(elementName, markup: scanner.string(elementStart..<token.range.upperBound), position: elementPosition)
                    }
                default: break
                }
                continue
            }
            switch token.kind {
            case .text:
                for (offset, character) in scanner.string(token.range).enumerated() {
                    appendText(character, markup: String(character), position: position + offset)
                }
            case .entity(let scalar):
                appendText(Character(scalar), markup: scanner.string(token.range), position: position)
            case .startTag(let name, true):
                appendElement(name, markup: scanner.string(token.range), position: position)
            case .startTag(let name, false):
                depth = 1
                elementStart = token.range.lowerBound
                elementName = name
                elementPosition = position
            case .comment, .cdata:
                appendElement("", markup: scanner.string(token.range), position: position)
            case .endTag, .declaration, .refused:
                break
            }
        }
        dropTrailingSpace()
    }

    /// What the wrapper around every chunk costs.
    var overhead: Int { measure(prefix) + measure(suffix) }

    /// The text sent for the units in `range`.
    func render(_ range: Range<Int>) -> String {
        prefix + units[range].map(\.markup).joined() + suffix
    }

    /// `range` without space units at either end.
    func trimmed(_ range: Range<Int>) -> Range<Int> {
        var lower = range.lowerBound
        var upper = range.upperBound
        while lower < upper, CutRules.isSpace(units[lower].display) { lower += 1 }
        while upper > lower, CutRules.isSpace(units[upper - 1].display) { upper -= 1 }
        return lower..<upper
    }

    /// How markup counts against the limit: UTF-8 bytes for Google, characters
    /// (Unicode scalars, as OpenAI counts them) otherwise.
    ///
    /// Polly bills the text, not the tags (an element is free, an escaped
    /// character one), but also caps a request's characters, tags and all,
    /// at twice the billed limit (6,000 to 3,000). A unit therefore costs
    /// its billed characters or half its length, whichever is more: a chunk
    /// within the limit then holds both caps, at the price of splitting a
    /// narration dense with markup a little earlier than the billed count alone would.
    func measure(_ markup: String) -> Int {
        switch limit {
        case .utf8BytesAfterEscaping: return markup.utf8.count
        case .characters: return markup.unicodeScalars.count
        case .billedCharacters:
            let length = markup.unicodeScalars.count
            let billed = markup.hasPrefix("<") ? 0 : (markup.hasPrefix("&") ? 1 : length)
            return Swift.max(billed, (length + 1) / 2)
        }
    }

    // MARK: Building

    private mutating func appendText(_ character: Character, markup: String, position: Int) {
        if CutRules.isSpace(character) {
            guard let last = units.last, !CutRules.isSpace(last.display) else { return }
            units.append(Unit(display: " ", markup: " ", cost: 1, kind: .text, position: position))
            return
        }
        let cost: Int
        if !isSSML, case .utf8BytesAfterEscaping = limit {
            cost = SSML.escapedUTF8Count(character.unicodeScalars)
        } else {
            cost = measure(markup)
        }
        units.append(Unit(display: character, markup: markup, cost: cost, kind: .text, position: position))
    }

    private mutating func appendElement(_ name: String, markup: String, position: Int) {
        let kind: Unit.Kind = Self.blockElements.contains(name) ? .block(name) : .inline(name)
        units.append(Unit(display: CutRules.placeholder, markup: markup, cost: measure(markup), kind: kind, position: position))
    }

    private mutating func dropTrailingSpace() {
        while let last = units.last, CutRules.isSpace(last.display) { units.removeLast() }
    }
}

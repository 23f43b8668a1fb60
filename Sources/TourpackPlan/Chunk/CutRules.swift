/// How good a place to cut narration is; lower is better.
///
/// The chunker packs whole sentences; only a sentence too long for one
/// request is cut at a clause, then at a space, and as a last resort (a run
/// with no spaces, such as CJK text without punctuation) between two
/// grapheme clusters.
enum CutLevel: Int, Comparable, CaseIterable, Sendable {
    case sentence
    case clause
    case space
    case grapheme

    static func < (lhs: CutLevel, rhs: CutLevel) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// Finds where narration may be cut, and how good each place is.
///
/// Works on one `Character` per unit: the text as a listener hears it, with
/// every SSML element shown as U+FFFC so sentence rules read past it.
/// Sentence ends are `.`, `!`, `?` (and `‼ ⁇ ⁈ ⁉`) followed by a space, and
/// the CJK marks `。 ！ ？ ． ｡`, which need no space. Closing quotes and
/// brackets right after the mark stay with their sentence (`"Stop." She` is
/// cut after `."`), and so does a French ` »`. A period is not an end when
/// it belongs to an abbreviation or initial (`Abbreviations`), when the
/// next word starts in lowercase, or inside a number (`3.5`, `1.000,5`;
/// no space follows). Ellipses (`…`, `...`) never end a sentence; they are
/// clause-level places instead.
enum CutRules {
    static let placeholder: Character = "\u{FFFC}"

    static let terminators: Set<Character> = [".", "!", "?", "‼", "⁇", "⁈", "⁉", "…", "。", "！", "？", "．", "｡"]
    static let cjkTerminators: Set<Character> = ["。", "！", "？", "．", "｡"]
    static let exclamations: Set<Character> = ["!", "?", "‼", "⁇", "⁈", "⁉"]
    static let closers: Set<Character> = [
        "\"", "'", "”", "’", "“", "‘", "»", "«", "›", "‹", ")", "]", "}",
        "」", "』", "）", "】", "〕", "〉", "》",
    ]
    static let openers: Set<Character> = ["\"", "'", "“", "‘", "„", "‚", "«", "»", "‹", "›", "(", "[", "{", "¿", "¡"]
    /// Clause marks that need a space after them (so `1,000` and `10:30` stay whole).
    static let spacedClauseMarks: Set<Character> = [",", ";", ":"]
    /// Clause marks that end a clause wherever they stand.
    static let clauseMarks: Set<Character> = ["—", "、", "，", "；", "："]

    /// The best cut before each unit: `levels[i]` is the level of a cut
    /// between unit `i - 1` and unit `i`, or nil where no cut is allowed.
    static func levels(_ text: [Character], blocks: [Bool]) -> [CutLevel?] {
        let n = text.count
        // Each unit is classified once (ASCII from a table), not looked up
        // in each set by each rule: planning asks this of every character
        // of every narration, and a `Set<Character>` lookup hashes a string.
        let kinds = text.map(UnitKind.init)
        var levels = [CutLevel?](repeating: nil, count: n + 1)
        func mark(_ i: Int, _ level: CutLevel) {
            guard i > 0 && i < n else { return }
            if let existing = levels[i], existing <= level { return }
            levels[i] = level
        }

        for i in 1..<max(n, 1) where !kinds[i].contains(.continuesCluster) && !kinds[i - 1].contains(.endsWithJoiner) {
            mark(i, .grapheme)
        }
        for i in 0..<n where kinds[i].contains(.space) { mark(i, .space) }
        for i in 0..<n {
            let kind = kinds[i]
            let spacedDash = kind.contains(.enDash) && i > 0 && kinds[i - 1].contains(.space)
            guard kind.contains(.spacedClauseMark) || kind.contains(.clauseMark) || spacedDash else { continue }
            let k = skipClosers(text, kinds, from: i + 1)
            if kind.contains(.clauseMark) || k == n || kinds[k].contains(.space) { mark(k, .clause) }
        }
        for i in 0..<n where blocks[i] {
            mark(i, .sentence)
            mark(i + 1, .sentence)
        }

        var i = 0
        while i < n {
            guard kinds[i].contains(.terminator) else {
                i += 1
                continue
            }
            var j = i
            while j < n, kinds[j].contains(.terminator) { j += 1 }
            let k = skipClosers(text, kinds, from: j)
            switch sentenceEnd(text, kinds, run: i..<j, after: k) {
            case .sentence?: mark(k, .sentence)
            case .clause?: mark(k, .clause)
            default: break
            }
            i = k
        }
        return levels
    }

    /// What the rules ask of one unit: which of the sets above it is in,
    /// and the few single characters they test.
    private struct UnitKind: OptionSet {
        let rawValue: UInt16
        static let space = UnitKind(rawValue: 1 << 0)
        static let terminator = UnitKind(rawValue: 1 << 1)
        static let cjkTerminator = UnitKind(rawValue: 1 << 2)
        static let exclamation = UnitKind(rawValue: 1 << 3)
        static let closer = UnitKind(rawValue: 1 << 4)
        static let spacedClauseMark = UnitKind(rawValue: 1 << 5)
        static let clauseMark = UnitKind(rawValue: 1 << 6)
        static let enDash = UnitKind(rawValue: 1 << 7)
        static let ellipsis = UnitKind(rawValue: 1 << 8)
        static let closingGuillemet = UnitKind(rawValue: 1 << 9)
        static let continuesCluster = UnitKind(rawValue: 1 << 10)
        static let endsWithJoiner = UnitKind(rawValue: 1 << 11)
        static let placeholder = UnitKind(rawValue: 1 << 12)

        init(rawValue: UInt16) { self.rawValue = rawValue }

        init(_ c: Character) {
            if let ascii = c.asciiValue {
                self = Self.ascii[Int(ascii)]
            } else {
                self = Self.classify(c)
            }
        }

        /// The 128 ASCII characters, classified once.
        private static let ascii: [UnitKind] = (0..<128).map { classify(Character(Unicode.Scalar(UInt8($0)))) }

        private static func classify(_ c: Character) -> UnitKind {
            var kind: UnitKind = []
            if CutRules.isSpace(c) { kind.insert(.space) }
            if terminators.contains(c) { kind.insert(.terminator) }
            if cjkTerminators.contains(c) { kind.insert(.cjkTerminator) }
            if exclamations.contains(c) { kind.insert(.exclamation) }
            if closers.contains(c) { kind.insert(.closer) }
            if spacedClauseMarks.contains(c) { kind.insert(.spacedClauseMark) }
            if clauseMarks.contains(c) { kind.insert(.clauseMark) }
            if c == "–" { kind.insert(.enDash) }
            if c == "…" { kind.insert(.ellipsis) }
            if c == "»" || c == "›" { kind.insert(.closingGuillemet) }
            if CutRules.continuesCluster(c) { kind.insert(.continuesCluster) }
            if CutRules.endsWithJoiner(c) { kind.insert(.endsWithJoiner) }
            if c == CutRules.placeholder { kind.insert(.placeholder) }
            return kind
        }
    }

    /// Whether the terminator run `run`, followed by closers up to `k`, ends
    /// a sentence (`.sentence`), is only a pause (`.clause`), or neither.
    private static func sentenceEnd(_ text: [Character], _ kinds: [UnitKind], run: Range<Int>, after k: Int) -> CutLevel? {
        let marks = kinds[run]
        if marks.contains(where: { $0.contains(.cjkTerminator) }) { return .sentence }
        let spaceAfter = k == text.count || kinds[k].contains(.space)
        let isExclamation = marks.contains { $0.contains(.exclamation) }
        if !isExclamation && (marks.count > 1 || marks.contains { $0.contains(.ellipsis) }) {
            return spaceAfter ? .clause : nil
        }
        guard spaceAfter else {
            // "你好!我": a Latin mark right before CJK text still ends the sentence.
            return isExclamation && isCJK(text[k]) ? .sentence : nil
        }
        var start = k
        while start < text.count, kinds[start].contains(.space) { start += 1 }
        let nextWord = start < text.count ? word(in: text, kinds, from: start) : nil
        if let first = nextWord?.first(where: { !openers.contains($0) }), first.isLowercase { return nil }
        if isExclamation { return .sentence }

        var wordStart = run.lowerBound
        while wordStart > 0, !kinds[wordStart - 1].contains(.space), !kinds[wordStart - 1].contains(.placeholder) { wordStart -= 1 }
        var before = text[wordStart..<run.lowerBound]
        while let first = before.first, openers.contains(first) { before = before.dropFirst() }
        while let last = before.last, closers.contains(last) { before = before.dropLast() }
        var previousEnd = wordStart
        while previousEnd > 0, kinds[previousEnd - 1].contains(.space) { previousEnd -= 1 }
        var previousStart = previousEnd
        while previousStart > 0, !kinds[previousStart - 1].contains(.space) { previousStart -= 1 }
        let previousWord = previousStart < previousEnd ? String(text[previousStart..<previousEnd]) : nil
        if !before.isEmpty && Abbreviations.keepsPeriod(word: String(before), nextWord: nextWord, previousWord: previousWord) {
            return nil
        }
        return .sentence
    }

    private static func word(in text: [Character], _ kinds: [UnitKind], from start: Int) -> String {
        var end = start
        while end < text.count, !kinds[end].contains(.space) { end += 1 }
        return String(text[start..<end])
    }

    /// Past closing quotes and brackets that belong to the sentence before,
    /// including a French ` »` (a space, then `»` followed by a space or the end).
    private static func skipClosers(_ text: [Character], _ kinds: [UnitKind], from start: Int) -> Int {
        var k = start
        while k < text.count, kinds[k].contains(.closer) { k += 1 }
        if k == start, k + 1 < text.count, kinds[k].contains(.space), kinds[k + 1].contains(.closingGuillemet),
            k + 2 == text.count || kinds[k + 2].contains(.space)
        {
            k += 2
        }
        return k
    }

    /// Whitespace that may be collapsed and cut at. No-break spaces (as in
    /// French `« Bonjour »` or `10 km`) are glue and are kept as they are.
    static func isSpace(_ c: Character) -> Bool {
        if let ascii = c.asciiValue { return ascii == 0x20 || (0x09...0x0D).contains(ascii) }
        return c.unicodeScalars.allSatisfy(isSpace)
    }

    /// One scalar of `isSpace`. ASCII is answered without Unicode's property
    /// tables (tab, line feed, vertical tab, form feed, carriage return and
    /// space are its whitespace), which a build's planning asks for every
    /// character of every narration, several times over.
    private static func isSpace(_ scalar: Unicode.Scalar) -> Bool {
        if scalar.isASCII { return scalar.value == 0x20 || (0x09...0x0D).contains(scalar.value) }
        return scalar.properties.isWhitespace && !noBreakSpaces.contains(scalar)
    }

    static let noBreakSpaces: Set<Unicode.Scalar> = ["\u{00A0}", "\u{2007}", "\u{202F}", "\u{2060}", "\u{FEFF}"]

    /// A unit that would attach to the one before it if the text were one
    /// string (a combining mark or a joiner that came from an SSML
    /// character reference), so a cut before it would split a cluster.
    private static func continuesCluster(_ c: Character) -> Bool {
        // No ASCII scalar is a mark, a joiner, a variation selector or an emoji modifier.
        guard let first = c.unicodeScalars.first, !first.isASCII else { return false }
        switch first.properties.generalCategory {
        case .nonspacingMark, .spacingMark, .enclosingMark: return true
        default: return first.value == 0x200D || first.properties.isVariationSelector || first.properties.isEmojiModifier
        }
    }

    private static func endsWithJoiner(_ c: Character) -> Bool {
        c.unicodeScalars.last?.value == 0x200D
    }

    static func isCJK(_ c: Character) -> Bool {
        guard let scalar = c.unicodeScalars.first else { return false }
        switch scalar.value {
        case 0x3040...0x30FF, 0x3400...0x4DBF, 0x4E00...0x9FFF, 0xAC00...0xD7AF, 0xF900...0xFAFF, 0x20000...0x2FFFF:
            return true
        default:
            return false
        }
    }
}

/// One piece of SSML markup, located by Unicode-scalar offsets into the source.
package struct SSMLToken: Sendable, Equatable {
    package enum Kind: Sendable, Equatable {
        /// Character data with no markup in it (a stray `<` or `&` is reported and kept as text).
        case text
        /// A valid entity or character reference and the scalar it stands for.
        case entity(Unicode.Scalar)
        case startTag(name: String, selfClosing: Bool)
        case endTag(name: String)
        case comment
        case cdata
        /// An `<?xml …?>` declaration at the very start.
        case declaration
        /// Markup that is not allowed here (already reported), such as `<!DOCTYPE>`.
        case refused
    }

    package var kind: Kind
    package var range: Range<Int>
}

/// Splits SSML into tokens and reports what is wrong inside each one
/// (names, attributes, quotes, references, stray `<` and `&`).
///
/// Works on Unicode scalars, as XML does, so a combining mark after `>` can
/// never hide the end of a tag; positions in messages are converted to
/// characters for people. Nesting is checked afterwards by `SSMLStructure`.
package struct SSMLScanner {
    let scalars: [Unicode.Scalar]
    package private(set) var tokens: [SSMLToken] = []
    package private(set) var problems: [SSMLProblem] = []
    /// The 1-based character (grapheme) position of every scalar.
    private let characterPositions: [Int]
    /// Where the document proper starts; only there may an `<?xml …?>` declaration stand.
    private let firstNonSpace: Int

    package init(_ text: String) {
        scalars = Array(text.unicodeScalars)
        var positions: [Int] = []
        positions.reserveCapacity(scalars.count)
        var position = 0
        for character in text {
            position += 1
            for _ in character.unicodeScalars { positions.append(position) }
        }
        characterPositions = positions
        firstNonSpace = scalars.firstIndex { !Self.isSpace($0) } ?? scalars.count
        scan()
    }

    /// The character position a person would count to reach `scalarOffset`.
    package func position(_ scalarOffset: Int) -> Int {
        if scalarOffset < characterPositions.count { return characterPositions[scalarOffset] }
        return (characterPositions.last ?? 0) + 1
    }

    package func string(_ range: Range<Int>) -> String {
        var out = ""
        out.unicodeScalars.append(contentsOf: scalars[range])
        return out
    }

    mutating func report(_ message: String, at scalarOffset: Int) {
        problems.append(SSMLProblem(message: "malformed SSML: " + message, offset: position(scalarOffset)))
    }

    // MARK: Scanning

    private mutating func scan() {
        var i = 0
        var textStart: Int?
        func flush(_ tokens: inout [SSMLToken], upTo end: Int) {
            if let start = textStart, start < end { tokens.append(SSMLToken(kind: .text, range: start..<end)) }
            textStart = nil
        }
        while i < scalars.count {
            switch scalars[i] {
            case "<":
                flush(&tokens, upTo: i)
                i = scanMarkup(at: i)
            case "&":
                flush(&tokens, upTo: i)
                if let (end, decoded) = readReference(at: i) {
                    tokens.append(SSMLToken(kind: .entity(decoded), range: i..<end))
                    i = end
                } else {
                    tokens.append(SSMLToken(kind: .text, range: i..<i + 1))
                    i += 1
                }
            default:
                if textStart == nil { textStart = i }
                i += 1
            }
        }
        flush(&tokens, upTo: scalars.count)
    }

    private mutating func scanMarkup(at i: Int) -> Int {
        let at = position(i)
        if hasPrefix("<!--", at: i) {
            guard let end = find("-->", from: i + 4) else {
                report("the comment opened at character \(at) is never closed (missing -->)", at: i)
                tokens.append(SSMLToken(kind: .comment, range: i..<scalars.count))
                return scalars.count
            }
            if find("--", from: i + 4, before: end) != nil {
                report("the comment at character \(at) contains --, which XML does not allow inside a comment", at: i)
            }
            tokens.append(SSMLToken(kind: .comment, range: i..<end + 3))
            return end + 3
        }
        if hasPrefix("<![CDATA[", at: i) {
            guard let end = find("]]>", from: i + 9) else {
                report("the CDATA section opened at character \(at) is never closed (missing ]]>)", at: i)
                tokens.append(SSMLToken(kind: .cdata, range: i..<scalars.count))
                return scalars.count
            }
            tokens.append(SSMLToken(kind: .cdata, range: i..<end + 3))
            return end + 3
        }
        if hasPrefix("<!", at: i) {
            report(
                "<! at character \(at) (such as <!DOCTYPE>) is not allowed in narration SSML; use elements, text and comments only", at: i)
            let end = find(">", from: i).map { $0 + 1 } ?? scalars.count
            tokens.append(SSMLToken(kind: .refused, range: i..<end))
            return end
        }
        if peek(i + 1) == "?" {
            var j = i + 2
            let target = scanName(&j)
            guard let end = find("?>", from: i + 2) else {
                report("<?\(target) at character \(at) is never closed (missing ?>)", at: i)
                tokens.append(SSMLToken(kind: .refused, range: i..<scalars.count))
                return scalars.count
            }
            let atStart = i == firstNonSpace
            if target == "xml" && atStart {
                tokens.append(SSMLToken(kind: .declaration, range: i..<end + 2))
            } else {
                report("<?\(target) at character \(at) is not allowed; only an <?xml …?> declaration at the very start is", at: i)
                tokens.append(SSMLToken(kind: .refused, range: i..<end + 2))
            }
            return end + 2
        }
        if peek(i + 1) == "/", let next = peek(i + 2), Self.isNameStart(next) {
            return scanEndTag(at: i)
        }
        if let next = peek(i + 1), Self.isNameStart(next) {
            return scanStartTag(at: i)
        }
        report("stray < at character \(at); write &lt; for a literal <", at: i)
        tokens.append(SSMLToken(kind: .text, range: i..<i + 1))
        return i + 1
    }

    private mutating func scanEndTag(at i: Int) -> Int {
        var j = i + 2
        let name = scanName(&j)
        skipSpace(&j)
        if peek(j) == ">" {
            tokens.append(SSMLToken(kind: .endTag(name: name), range: i..<j + 1))
            return j + 1
        }
        report("the closing tag </\(name)> at character \(position(i)) is not closed with >", at: i)
        let end = recover(from: j)
        tokens.append(SSMLToken(kind: .endTag(name: name), range: i..<end))
        return end
    }

    private mutating func scanStartTag(at i: Int) -> Int {
        let at = position(i)
        var j = i + 1
        let name = scanName(&j)
        var seen: Set<String> = []
        var spaced = true
        while true {
            spaced = skipSpace(&j) || spaced
            guard j < scalars.count else {
                report("the tag <\(name)> at character \(at) is not closed with >", at: i)
                tokens.append(SSMLToken(kind: .startTag(name: name, selfClosing: false), range: i..<j))
                return j
            }
            let c = scalars[j]
            if c == ">" {
                tokens.append(SSMLToken(kind: .startTag(name: name, selfClosing: false), range: i..<j + 1))
                return j + 1
            }
            if c == "/" && peek(j + 1) == ">" {
                tokens.append(SSMLToken(kind: .startTag(name: name, selfClosing: true), range: i..<j + 2))
                return j + 2
            }
            if c == "<" {
                // Treat the broken tag as absent, so the rest of the document still nests.
                report("the tag <\(name)> at character \(at) is not closed with >", at: i)
                tokens.append(SSMLToken(kind: .refused, range: i..<j))
                return j
            }
            if !Self.isNameStart(c) {
                report("unexpected \(c) in the tag <\(name)> at character \(at)", at: i)
                let end = recover(from: j)
                let selfClosing = end >= 2 && scalars[end - 2] == "/" && scalars[end - 1] == ">"
                tokens.append(SSMLToken(kind: .startTag(name: name, selfClosing: selfClosing), range: i..<end))
                return end
            }
            if !spaced {
                report("the attributes of <\(name)> at character \(at) must be separated by spaces", at: i)
            }
            let attribute = scanName(&j)
            spaced = false
            if !seen.insert(attribute).inserted {
                report("the attribute \(attribute) appears twice in <\(name)> at character \(at)", at: i)
            }
            spaced = skipSpace(&j)
            guard peek(j) == "=" else {
                report("the attribute \(attribute) of <\(name)> at character \(at) has no value; write \(attribute)=\"…\"", at: i)
                continue
            }
            j += 1
            skipSpace(&j)
            guard let quote = peek(j), quote == "\"" || quote == "'" else {
                report("the value of \(attribute) in <\(name)> at character \(at) must be in quotes, as in \(attribute)=\"…\"", at: i)
                while j < scalars.count, !Self.isSpace(scalars[j]), scalars[j] != ">", scalars[j] != "<",
                    !(scalars[j] == "/" && peek(j + 1) == ">")
                { j += 1 }
                spaced = false
                continue
            }
            j += 1
            while j < scalars.count, scalars[j] != quote {
                if scalars[j] == "<" {
                    // Most likely the closing quote is missing; `<` is not allowed in a value either way.
                    report(
                        "the value of \(attribute) in <\(name)> at character \(at) has no closing \(quote) before the next tag (a literal < in a value must be written &lt;)",
                        at: i)
                    let selfClosing = j >= 2 && scalars[j - 2] == "/" && scalars[j - 1] == ">"
                    tokens.append(SSMLToken(kind: .startTag(name: name, selfClosing: selfClosing), range: i..<j))
                    return j
                } else if scalars[j] == "&" {
                    j = readReference(at: j)?.end ?? j + 1
                } else {
                    j += 1
                }
            }
            guard j < scalars.count else {
                report("the value of \(attribute) in <\(name)> at character \(at) is never closed (missing \(quote))", at: i)
                tokens.append(SSMLToken(kind: .startTag(name: name, selfClosing: false), range: i..<j))
                return j
            }
            j += 1
            spaced = false
        }
    }

    /// Reads a reference at `i` (which holds `&`). Reports and returns nil when it is not valid.
    mutating func readReference(at i: Int) -> (end: Int, decoded: Unicode.Scalar)? {
        let at = position(i)
        var j = i + 1
        if peek(j) == "#" {
            j += 1
            let hex = peek(j) == "x"
            if hex { j += 1 }
            let digitsStart = j
            while let c = peek(j), hex ? c.properties.isASCIIHexDigit : ("0"..."9").contains(c) { j += 1 }
            guard j > digitsStart, peek(j) == ";" else {
                report("the character reference at character \(at) is incomplete; it must look like &#233; or &#xE9;", at: i)
                return nil
            }
            let digits = string(digitsStart..<j)
            if let value = UInt32(digits, radix: hex ? 16 : 10), let scalar = Unicode.Scalar(value), Self.isXMLCharacter(scalar) {
                return (j + 1, scalar)
            }
            report("\(string(i..<j + 1)) at character \(at) is not a character XML allows", at: i)
            return nil
        }
        let name = peek(j).map(Self.isNameStart) == true ? scanName(&j) : ""
        guard !name.isEmpty, peek(j) == ";" else {
            report("stray & at character \(at); write &amp; for a literal &", at: i)
            return nil
        }
        switch name {
        case "amp": return (j + 1, "&")
        case "lt": return (j + 1, "<")
        case "gt": return (j + 1, ">")
        case "quot": return (j + 1, "\"")
        case "apos": return (j + 1, "'")
        default:
            report(
                "&\(name); at character \(at) is not an XML entity; SSML knows only &amp; &lt; &gt; &quot; &apos; and numeric ones such as &#233;",
                at: i)
            return nil
        }
    }

    // MARK: Low-level reading

    private func peek(_ i: Int) -> Unicode.Scalar? { i < scalars.count ? scalars[i] : nil }

    private func hasPrefix(_ prefix: String, at i: Int) -> Bool {
        var j = i
        for scalar in prefix.unicodeScalars {
            guard peek(j) == scalar else { return false }
            j += 1
        }
        return true
    }

    private func find(_ needle: String, from start: Int, before limit: Int? = nil) -> Int? {
        let end = limit ?? scalars.count
        var i = start
        while i < end {
            if hasPrefix(needle, at: i) { return i }
            i += 1
        }
        return nil
    }

    /// Skips to just past the next `>`, or stops before a `<` that starts new markup.
    private func recover(from start: Int) -> Int {
        var j = start
        while j < scalars.count {
            if scalars[j] == ">" { return j + 1 }
            if scalars[j] == "<" { return j }
            j += 1
        }
        return j
    }

    private func scanName(_ j: inout Int) -> String {
        let start = j
        guard let first = peek(j), Self.isNameStart(first) else { return "" }
        j += 1
        while let c = peek(j), Self.isNameCharacter(c) { j += 1 }
        return string(start..<j)
    }

    @discardableResult
    private func skipSpace(_ j: inout Int) -> Bool {
        let start = j
        while let c = peek(j), Self.isSpace(c) { j += 1 }
        return j > start
    }

    static func isSpace(_ c: Unicode.Scalar) -> Bool {
        c == " " || c == "\t" || c == "\n" || c == "\r"
    }

    static func isNameStart(_ c: Unicode.Scalar) -> Bool {
        if c.isASCII { return ("a"..."z").contains(c) || ("A"..."Z").contains(c) || c == "_" || c == ":" }
        return c.value >= 0xC0 && c.properties.isAlphabetic
    }

    static func isNameCharacter(_ c: Unicode.Scalar) -> Bool {
        if isNameStart(c) || ("0"..."9").contains(c) || c == "-" || c == "." || c == "\u{B7}" { return true }
        guard !c.isASCII else { return false }
        switch c.properties.generalCategory {
        case .nonspacingMark, .spacingMark, .decimalNumber, .connectorPunctuation: return true
        default: return false
        }
    }

    static func isXMLCharacter(_ c: Unicode.Scalar) -> Bool {
        switch c.value {
        case 0x9, 0xA, 0xD, 0x20...0xD7FF, 0xE000...0xFFFD, 0x10000...0x10FFFF: return true
        default: return false
        }
    }
}

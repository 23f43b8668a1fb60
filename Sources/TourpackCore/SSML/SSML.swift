/// SSML as tourpack handles it: escaping plain text and checking that
/// narration SSML is well-formed before anything is spent on it.
///
/// Narration that begins with `<speak` is sent as SSML, so a mistake in it
/// would otherwise surface only as a 400 from the TTS endpoint, far from the
/// tour file. `validate` finds such mistakes at load time and explains them
/// in words a content writer can act on. It is a small hand-written scanner
/// (`SSMLScanner`) rather than an XML library: it needs no DTDs or
/// namespaces, refuses `<!DOCTYPE>` outright, and reports positions in
/// characters, the way a person counts in an editor.
package enum SSML {
    /// Escapes the five XML special characters (`& < > " '`).
    ///
    /// Google measures its 5000-byte limit after this escaping, because plain
    /// text may be wrapped in `<speak>`; the chunker measures plain text the
    /// same way so a chunk can never grow past the limit when it is wrapped.
    package static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&apos;"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// The UTF-8 size of `escape(text)`, without building the escaped string.
    package static func escapedUTF8Count<S: Sequence>(_ scalars: S) -> Int where S.Element == Unicode.Scalar {
        escapedLength(scalars, plain: UTF8.width)
    }

    /// The Unicode scalars of `escape(text)`, without building the escaped string.
    package static func escapedScalarCount<S: Sequence>(_ scalars: S) -> Int where S.Element == Unicode.Scalar {
        escapedLength(scalars) { _ in 1 }
    }

    /// `escape`'s length, each entity (ASCII) counted by its characters and
    /// every other scalar by `plain`.
    private static func escapedLength<S: Sequence>(_ scalars: S, plain: (Unicode.Scalar) -> Int) -> Int
    where S.Element == Unicode.Scalar {
        var count = 0
        for scalar in scalars {
            switch scalar {
            case "&": count += 5
            case "<", ">": count += 4
            case "\"", "'": count += 6
            default: count += plain(scalar)
            }
        }
        return count
    }

    /// Every well-formedness problem in an SSML document; empty when it is
    /// well-formed.
    ///
    /// Checks that the root element is `<speak>`, that tags are balanced and
    /// properly nested, that attributes are `name="value"` with quotes, that
    /// entity references are the five XML ones or numeric, that no `<` or `&`
    /// stands alone, and that nothing but whitespace follows `</speak>`.
    /// Problems are sorted by position; all of them are reported, not just
    /// the first, so one run of the loader lists everything to fix.
    package static func validate(_ text: String) -> [SSMLProblem] {
        let scanner = SSMLScanner(text)
        return sorted(scanner.problems + SSMLStructure(scanner: scanner).problems)
    }

    /// Whether SSML gives the voice nothing to say: no text, character
    /// reference or CDATA outside its tags but whitespace, as in
    /// `<speak><break time="2s"/></speak>` or `<speak/>`. Such a narration is
    /// well-formed, yet it would be sent, and billed, for silence; the loader
    /// refuses it as empty. Chunks are not checked with it: only a whole
    /// narration must have something to say.
    package static func hasNothingToSpeak(_ text: String) -> Bool {
        let scanner = SSMLScanner(text)
        func spoken(_ scalars: ArraySlice<Unicode.Scalar>) -> Bool { scalars.contains { !$0.properties.isWhitespace } }
        return !scanner.tokens.contains { token in
            switch token.kind {
            case .text: return spoken(scanner.scalars[token.range])
            case .entity(let scalar): return !scalar.properties.isWhitespace
            // Between "<![CDATA[" and "]]>".
            case .cdata: return spoken(scanner.scalars[token.range].dropFirst(9).dropLast(3))
            default: return false
            }
        }
    }

    /// Problems by position, keeping the order they were found in for equal positions.
    package static func sorted(_ problems: [SSMLProblem]) -> [SSMLProblem] {
        problems.enumerated()
            .sorted { ($0.element.offset, $0.offset) < ($1.element.offset, $1.offset) }
            .map(\.element)
    }
}

/// One well-formedness problem in narration SSML.
package struct SSMLProblem: Sendable, Hashable, CustomStringConvertible {
    /// A sentence for the content writer, such as
    /// `malformed SSML: <emphasis> opened at character 41 is never closed`.
    package var message: String
    /// Where the problem starts: a 1-based position counted in characters
    /// (grapheme clusters), the same number the message names.
    package var offset: Int

    package init(message: String, offset: Int) {
        self.message = message
        self.offset = offset
    }

    package var description: String { message }
}

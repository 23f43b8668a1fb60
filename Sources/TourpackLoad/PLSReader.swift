import Foundation
import FoundationXML
import TourpackCore

/// Reads the XML of one W3C PLS 1.0 lexicon strictly, reporting every
/// problem with its line.
///
/// The XML itself is parsed by Foundation's `XMLParser` (libxml2 on Linux),
/// which knows XML far better than a hand-written scanner would and gives
/// the line of every event. On top of it this reader holds the document to
/// PLS: the `<lexicon>` root in the PLS namespace with `version="1.0"`, a
/// known `alphabet` and an `xml:lang`; `<lexeme>`s of one or more
/// `<grapheme>`s followed by `<phoneme>`s and `<alias>`es (at least one of
/// them) and `<example>`s. A writer's typo (`<graphme>`, `aplhabet=`) is an
/// error rather than something silently ignored, since a lexeme that does
/// not apply would only be heard, much later, as a mispronunciation.
///
/// Document type declarations are refused before parsing: a lexicon needs
/// none, and refusing them rules out entity expansion and external entities.
struct PLSReader {
    static let namespace = "http://www.w3.org/2005/01/pronunciation-lexicon"

    let file: String
    private(set) var diagnostics = DiagnosticCollector()

    init(file: String) {
        self.file = file
    }

    mutating func read(_ text: String) -> Lexicon? {
        if let line = Self.lineOfDocumentType(in: text) {
            diagnostics.error(file, "line \(line)", "<!DOCTYPE> and <!ENTITY> are not allowed in a lexicon; it needs neither")
            return nil
        }
        // libxml2 guesses the encoding from the first bytes: NULs there
        // read as UCS-4 or UTF-16 and crashed it (SIGSEGV in xmlParseChunk).
        // XML allows no U+0000 anywhere.
        if let nul = text.firstIndex(of: "\u{0}") {
            let line = text[..<nul].reduce(1) { $1 == "\n" ? $0 + 1 : $0 }
            diagnostics.error(file, "line \(line)", "a NUL character; a lexicon is UTF-8 text, and XML allows none")
            return nil
        }
        // FoundationXML hands a processing instruction without data to
        // strlen as NULL (`<?x?>`: SIGSEGV); a lexicon needs none.
        if let (line, target) = Self.processingInstruction(in: text) {
            diagnostics.error(
                file, "line \(line)", "processing instructions (<?\(target) …?>) are not allowed in a lexicon; it needs none")
            return nil
        }
        // The text is UTF-8 already and goes to libxml2 as such; another
        // encoding declared made libxml2's push parser crash (EBCDIC-US, or
        // UTF-7 with a mistake later in the file: SIGSEGV in xmlParseChunk).
        if let (line, encoding) = Self.declaredEncoding(in: text), !["utf-8", "utf8"].contains(encoding.lowercased()) {
            diagnostics.error(
                file, "line \(line)",
                "the XML declaration says encoding=\"\(encoding)\"; a lexicon is UTF-8: write encoding=\"UTF-8\" or leave it out")
            return nil
        }
        let parser = XMLParser(data: Data(text.utf8))
        parser.shouldProcessNamespaces = true
        parser.shouldResolveExternalEntities = false
        let events = PLSEvents(file: file, parser: parser)
        parser.delegate = events
        let parsed = parser.parse()
        diagnostics.append(contentsOf: events.diagnostics.diagnostics)
        if !parsed, !events.aborted, !events.diagnostics.hasErrors {
            let reason =
                text.allSatisfy(\.isWhitespace) ? "the file is empty" : "malformed XML: the file ends before every element is closed"
            diagnostics.error(file, "line \(parser.lineNumber)", reason)
        }
        guard !diagnostics.hasErrors else { return nil }
        guard let lexicon = events.lexicon else {
            // libxml2 reports nothing for an empty document.
            diagnostics.error(file, "line 1", text.allSatisfy(\.isWhitespace) ? "the file is empty" : "no <lexicon> element")
            return nil
        }
        return lexicon
    }

    /// The target and 1-based line of the first `<?…?>` that is not the XML declaration.
    static func processingInstruction(in text: String) -> (line: Int, target: String)? {
        var rest = text[...]
        while let start = rest.range(of: "<?") {
            let target = rest[start.upperBound...].prefix { !$0.isWhitespace && $0 != "?" && $0 != ">" }
            if target != "xml" {
                let line = text[..<start.lowerBound].reduce(1) { $1 == "\n" ? $0 + 1 : $0 }
                return (line, String(target.prefix(40)))
            }
            rest = rest[start.upperBound...]
        }
        return nil
    }

    /// The `encoding` of the first `<?xml … ?>` declaration, wherever it
    /// stands (libxml2 reads one out of place too), with its 1-based line.
    static func declaredEncoding(in text: String) -> (line: Int, encoding: String)? {
        guard let start = text.range(of: "<?xml", options: .caseInsensitive) else { return nil }
        let declaration = text[start.upperBound...].prefix { $0 != ">" }
        guard let key = declaration.range(of: "encoding") else { return nil }
        var rest = declaration[key.upperBound...].drop { $0.isWhitespace }
        guard rest.first == "=" else { return nil }
        rest = rest.dropFirst().drop { $0.isWhitespace }
        guard let quote = rest.first, quote == "\"" || quote == "'" else { return nil }
        let value = rest.dropFirst().prefix { $0 != quote }
        let line = text[..<start.lowerBound].reduce(1) { $1 == "\n" ? $0 + 1 : $0 }
        return (line, String(value))
    }

    /// The 1-based line of the first `<!DOCTYPE` or `<!ENTITY`, or nil.
    static func lineOfDocumentType(in text: String) -> Int? {
        for marker in ["<!DOCTYPE", "<!ENTITY"] {
            guard let range = text.range(of: marker, options: .caseInsensitive) else { continue }
            return text[..<range.lowerBound].reduce(1) { $1 == "\n" ? $0 + 1 : $0 }
        }
        return nil
    }
}

/// The SAX events of one lexicon, folded into a `Lexicon` as they come.
///
/// A class because `XMLParser` wants an `NSObject` delegate; it lives only
/// for one synchronous `parse()`.
private final class PLSEvents: NSObject, XMLParserDelegate {
    let file: String
    unowned let parser: XMLParser
    var diagnostics = DiagnosticCollector()
    var lexicon: Lexicon?
    /// Set when reading stopped on purpose (a wrong root): no further "malformed XML".
    var aborted = false

    private var depth = 0
    /// Depth at which foreign or metadata content started; everything inside is skipped.
    private var skipUntilDepth: Int?
    private var lexeme: LexemeDraft?
    /// The text element being read (`grapheme`, `phoneme`, `alias`, `example`) and its text so far.
    private var field: (name: String, line: Int, alphabet: PhoneticAlphabet?, prefer: Bool, text: String)?

    private struct LexemeDraft {
        var line: Int
        var graphemes: [String] = []
        var phonemes: [(phoneme: Phoneme, prefer: Bool)] = []
        var aliases: [(text: String, prefer: Bool)] = []
        var sawPronunciation = false
        /// Something inside was already reported; a missing grapheme or
        /// pronunciation would only repeat it.
        var flawed = false
    }

    init(file: String, parser: XMLParser) {
        self.file = file
        self.parser = parser
    }

    private func error(_ message: String, line: Int? = nil) {
        diagnostics.error(file, "line \(line ?? parser.lineNumber)", message)
        lexeme?.flawed = true
    }

    // MARK: XMLParserDelegate

    func parser(
        _ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?,
        attributes: [String: String] = [:]
    ) {
        depth += 1
        let line = parser.lineNumber
        if aborted || skipUntilDepth != nil { return }
        let shown = qualifiedName ?? name
        let inPLS = namespaceURI == PLSReader.namespace
        // Foundation gives "" for an element in no namespace.
        let namespaceURI = namespaceURI?.isEmpty == false ? namespaceURI : nil

        switch depth {
        case 1:
            startLexicon(name: name, shown: shown, namespaceURI: namespaceURI, attributes: attributes, line: line)
        case 2:
            if inPLS && (name == "meta" || name == "metadata") {
                skipUntilDepth = depth
            } else if inPLS && name == "lexeme" {
                checkAttributes(attributes, of: "lexeme", allowed: ["role"], line: line)
                lexeme = LexemeDraft(line: line)
            } else {
                error("<\(shown)> is not allowed in <lexicon>; it holds <lexeme>, <meta> and <metadata>", line: line)
                skipUntilDepth = depth
            }
        case 3:
            guard inPLS, ["grapheme", "phoneme", "alias", "example"].contains(name) else {
                error("<\(shown)> is not allowed in <lexeme>; it holds <grapheme>, <phoneme>, <alias> and <example>", line: line)
                skipUntilDepth = depth
                return
            }
            startField(name, attributes: attributes, line: line)
        default:
            error("<\(shown)> is not allowed inside <\(field?.name ?? "lexeme")>, which holds text only", line: line)
            skipUntilDepth = depth
        }
    }

    func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
        defer { depth -= 1 }
        if aborted { return }
        if let skip = skipUntilDepth {
            if skip == depth { skipUntilDepth = nil }
            return
        }
        switch depth {
        case 3: endField()
        case 2: endLexeme()
        default: break
        }
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) {
        text(string)
    }

    func parser(_ parser: XMLParser, foundCDATA block: Data) {
        text(String(decoding: block, as: UTF8.self))
    }

    /// The first error ends the reading: libxml2 recovers and goes on, but
    /// what it reports after that is mostly the same mistake again.
    func parser(_ parser: XMLParser, parseErrorOccurred parseError: any Error) {
        guard !aborted, !Self.warningCodes.contains((parseError as NSError).code) else { return }
        error("malformed XML: \(Self.describe(parseError))")
        abort()
    }

    // MARK: Elements

    private func startLexicon(name: String, shown: String, namespaceURI: String?, attributes: [String: String], line: Int) {
        guard name == "lexicon" else {
            error("the root element must be <lexicon>, not <\(shown)>", line: line)
            abort()
            return
        }
        guard namespaceURI == PLSReader.namespace else {
            let found = namespaceURI.map { "the namespace \($0)" } ?? "no namespace"
            error("<lexicon> must be in the PLS namespace (xmlns=\"\(PLSReader.namespace)\"), not in \(found)", line: line)
            abort()
            return
        }
        checkAttributes(attributes, of: "lexicon", allowed: ["version", "alphabet", "xml:lang", "xml:base"], line: line)
        switch attributes["version"] {
        case "1.0"?: break
        case let version?: error("unsupported PLS version \"\(version)\"; tourpack reads version=\"1.0\"", line: line)
        case nil: error("<lexicon> has no version; write version=\"1.0\"", line: line)
        }
        var alphabet: PhoneticAlphabet?
        if let raw = attributes["alphabet"] {
            alphabet = self.alphabet(raw, line: line)
        } else {
            error("<lexicon> has no alphabet; write alphabet=\"ipa\" or alphabet=\"x-sampa\"", line: line)
        }
        let language = attributes["xml:lang"]
        if let language {
            if !LanguageCode.isValid(language) { error("xml:lang \"\(language)\" is not a BCP-47 language code like en-US", line: line) }
        } else {
            error("<lexicon> has no xml:lang; name the lexicon's language, as in xml:lang=\"en-US\"", line: line)
        }
        lexicon = Lexicon(file: file, language: language ?? "", alphabet: alphabet ?? .ipa, lexemes: [])
    }

    private func startField(_ name: String, attributes: [String: String], line: Int) {
        var allowed: [String] = []
        switch name {
        case "phoneme": allowed = ["alphabet", "prefer"]
        case "alias": allowed = ["prefer"]
        default: allowed = []
        }
        checkAttributes(attributes, of: name, allowed: allowed, line: line)
        var alphabet: PhoneticAlphabet?
        if name == "phoneme", let raw = attributes["alphabet"] { alphabet = self.alphabet(raw, line: line) }
        var prefer = false
        if let raw = attributes["prefer"] {
            switch raw {
            case "true": prefer = true
            case "false": prefer = false
            default: error("prefer must be \"true\" or \"false\", not \"\(raw)\"", line: line)
            }
        }
        if name == "grapheme", lexeme?.sawPronunciation == true {
            error("<grapheme> comes after a <phoneme> or <alias>; a lexeme lists its graphemes first", line: line)
        }
        if name == "phoneme" || name == "alias" { lexeme?.sawPronunciation = true }
        field = (name, line, alphabet, prefer, "")
    }

    private func endField() {
        guard let field, lexeme != nil else { return }
        self.field = nil
        let text = Self.collapsed(field.text)
        if text.isEmpty, field.name != "example" {
            error("empty <\(field.name)>", line: field.line)
            return
        }
        if text.unicodeScalars.contains(where: {
            $0.properties.generalCategory == .control || $0.properties.generalCategory == .format && !Self.joiners.contains($0)
        }) {
            error("<\(field.name)> holds a control or invisible format character", line: field.line)
            return
        }
        switch field.name {
        case "grapheme":
            lexeme?.graphemes.append(text)
        case "phoneme":
            lexeme?.phonemes.append((Phoneme(alphabet: field.alphabet ?? lexicon?.alphabet ?? .ipa, text: text), field.prefer))
        case "alias":
            lexeme?.aliases.append((text, field.prefer))
        default:
            break
        }
    }

    private func endLexeme() {
        guard let draft = lexeme else { return }
        lexeme = nil
        guard !draft.flawed else { return }
        guard !draft.graphemes.isEmpty else {
            error("the lexeme has no <grapheme>; give the spelling it applies to", line: draft.line)
            return
        }
        let label = "the lexeme \"\(draft.graphemes[0])\""
        guard !draft.phonemes.isEmpty || !draft.aliases.isEmpty else {
            error("\(label) has neither a <phoneme> nor an <alias>, so it changes nothing", line: draft.line)
            return
        }
        let phoneme = (draft.phonemes.first { $0.prefer } ?? draft.phonemes.first)?.phoneme
        let alias = (draft.aliases.first { $0.prefer } ?? draft.aliases.first)?.text
        lexicon?.lexemes.append(Lexeme(graphemes: draft.graphemes, phoneme: phoneme, alias: alias, line: draft.line, file: file))
    }

    private func text(_ string: String) {
        guard !aborted, skipUntilDepth == nil else { return }
        if field != nil {
            field?.text += string
        } else if depth >= 1, string.contains(where: { !$0.isWhitespace }) {
            let excerpt = string.trimmingCharacters(in: .whitespacesAndNewlines).prefix(30)
            error("text \"\(excerpt)\" stands outside <grapheme>, <phoneme> and <alias>")
        }
    }

    // MARK: Helpers

    private func alphabet(_ raw: String, line: Int) -> PhoneticAlphabet? {
        guard let alphabet = PhoneticAlphabet(rawValue: raw) else {
            error("unknown alphabet \"\(raw)\"; use \"ipa\" or \"x-sampa\"", line: line)
            return nil
        }
        return alphabet
    }

    /// Attributes outside `allowed` are errors, so a misspelled one is not
    /// silently ignored; namespaced ones from other vocabularies (such as
    /// `xsi:schemaLocation`) and namespace declarations are let through.
    private func checkAttributes(_ attributes: [String: String], of element: String, allowed: [String], line: Int) {
        for name in attributes.keys.sorted() where !allowed.contains(name) {
            if name == "xmlns" || name.contains(":") && !name.hasPrefix("xml:") { continue }
            let expected = allowed.isEmpty ? "it takes none" : "it takes \(allowed.joined(separator: ", "))"
            error("unknown attribute \(name) on <\(element)>; \(expected)", line: line)
        }
    }

    private func abort() {
        aborted = true
        parser.abortParsing()
    }

    /// ZWNJ and ZWJ, which real spellings in Persian and the Indic scripts need.
    static let joiners: Set<Unicode.Scalar> = ["\u{200C}", "\u{200D}"]

    /// Trimmed, with every run of whitespace made one space: a grapheme
    /// written over two lines still matches the words in a narration.
    static func collapsed(_ text: String) -> String {
        text.split(whereSeparator: \.isWhitespace).joined(separator: " ")
    }

    /// What went wrong, from libxml2's error code (`XMLParser` on Linux
    /// passes libxml2's `xmlParserErrors` through, with no message), in words
    /// for the most common mistakes; the bare code otherwise.
    static func describe(_ error: any Error) -> String {
        let code = (error as NSError).code
        return libxml2Reasons[code] ?? "libxml2 error \(code)"
    }

    static let libxml2Reasons: [Int: String] = [
        4: "no root element (expected <lexicon>)",
        5: "the document does not end where it should (an element left open, or more after the root)",
        9: "a character XML does not allow",
        23: "an entity reference without its closing ;",
        26: "an undeclared entity; XML knows only &amp; &lt; &gt; &quot; &apos; and numeric references such as &#233;",
        38: "< inside an attribute value; write &lt;",
        40: "an attribute value that is never closed",
        41: "an attribute without a value",
        42: "an attribute given twice",
        45: "a comment that is never closed",
        62: "]]> in text; write ]]&gt;",
        65: "a space is missing (between attributes?)",
        68: "a name was expected (after < or in a tag)",
        73: "a tag not closed with >",
        76: "a closing tag that does not match the element it closes",
        201: "a namespace prefix that is not declared",
    ]

    /// libxml2's namespace warnings (a namespace name that is not an
    /// absolute URI): not errors in XML; the namespace check speaks for itself.
    static let warningCodes: Set<Int> = [100, 101]
}

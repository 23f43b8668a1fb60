/// One cue of a parsed WebVTT file, with where it stands in the file.
package struct WebVTTCue: Sendable, Hashable {
    /// The cue's identifier line, when it has one (tourpack writes the cue's number).
    package var identifier: String?
    /// Times in whole milliseconds, as the format writes them: exact, so
    /// comparisons never meet float noise.
    package var startMilliseconds: Int64
    package var endMilliseconds: Int64
    /// What follows the end time on the timing line (`line:90% align:start`), trimmed.
    package var settings: String
    /// The payload lines as written, joined with LF: escapes and tags kept.
    package var payload: String
    /// The 1-based line number of the timing line, for messages.
    package var line: Int

    package var start: Double { Double(startMilliseconds) / 1000 }
    package var end: Double { Double(endMilliseconds) / 1000 }

    /// The text a viewer reads: cue tags (`<v Speaker>`, `<b>`, `<c.loud>`,
    /// `<00:00:01.000>`) left out, character references (`&amp;`, `&lt;`,
    /// `&gt;`, `&lrm;`, `&rlm;`, `&nbsp;`, numeric ones) resolved. Line breaks stay.
    package var text: String { WebVTTParser.plainText(payload) }
}

/// What is wrong with a WebVTT file: each problem with its line.
package struct WebVTTError: Error, Sendable, Hashable, CustomStringConvertible {
    package struct Problem: Sendable, Hashable, CustomStringConvertible {
        /// 1-based; 0 for the file as a whole (its size).
        package var line: Int
        package var message: String
        package var description: String { line > 0 ? "line \(line): \(message)" : message }
    }

    /// The first problems, at most `WebVTTParser.maxProblems`.
    package var problems: [Problem]
    /// How many there were in all (more than `problems` holds when the file is very broken).
    package var count: Int

    package var description: String {
        let shown = problems.map(\.description).joined(separator: "; ")
        return count > problems.count ? "\(shown); and \(count - problems.count) more" : shown
    }
}

/// A WebVTT reader that follows the W3C parsing rules ("WebVTT: The Web
/// Video Text Tracks Format", section 6) for what tourpack's captions use,
/// and reports, as a conformance checker does, what a player would
/// silently drop.
///
/// The rules kept: an optional BOM; the `WEBVTT` signature, alone or followed
/// by a space or tab and text; a header up to the first blank line (a timing
/// line ends it early, as the rules allow); blocks separated by blank lines;
/// CRLF, CR or LF line ends; a cue's optional identifier line, its timing
/// line `[hh:]mm:ss.ttt --> [hh:]mm:ss.ttt` with optional settings after it,
/// and its payload up to a blank line; `NOTE` blocks (comments) anywhere,
/// `STYLE` and `REGION` blocks before the first cue.
///
/// Where the rules drop something and carry on, this reports it: a timing
/// line that does not parse, a block that is neither a cue nor one of those
/// three, `-->` inside a payload, STYLE or REGION after a cue, an end time
/// not after its start and a start before the previous cue's (the syntax
/// requires both). Invalid UTF-8 is a problem too, where the rules would
/// put U+FFFD in its place.
///
/// Bounded: a file over `maxBytes` is refused unread, and nothing grows with
/// the input beyond the lines and cues of the file itself and at most
/// `maxProblems` messages.
package enum WebVTTParser {
    /// The largest file read: a narration's captions take a few KiB.
    package static let maxBytes = 4 * 1024 * 1024
    /// Problems kept in an error; the rest are counted.
    package static let maxProblems = 20

    /// The cues of `bytes`, in file order.
    /// - Throws: `WebVTTError` with every problem found, each with its line.
    package static func parse(_ bytes: [UInt8]) throws(WebVTTError) -> [WebVTTCue] {
        guard bytes.count <= maxBytes else {
            throw WebVTTError(
                problems: [.init(line: 0, message: "\(bytes.count) bytes, more than the \(maxBytes) a caption file may have")], count: 1)
        }
        var reader = Reader(lines: lines(of: bytes))
        reader.run()
        if reader.problemCount > 0 { throw WebVTTError(problems: reader.problems, count: reader.problemCount) }
        return reader.cues
    }

    // MARK: Lines

    /// The file's lines, split at CRLF, CR or LF, each decoded as UTF-8 (nil
    /// when it is not), the BOM dropped. A final line end adds no empty line.
    package static func lines(of bytes: [UInt8]) -> [String?] {
        var start = bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0
        var lines: [String?] = []
        var index = start
        while index < bytes.count {
            let byte = bytes[index]
            guard byte == 0x0A || byte == 0x0D else {
                index += 1
                continue
            }
            lines.append(String(validating: bytes[start..<index], as: UTF8.self))
            index += byte == 0x0D && index + 1 < bytes.count && bytes[index + 1] == 0x0A ? 2 : 1
            start = index
        }
        if start < bytes.count { lines.append(String(validating: bytes[start..<bytes.count], as: UTF8.self)) }
        return lines
    }

    /// The state of one parse: the lines, where it is, what it found.
    struct Reader {
        let lines: [String?]
        var position = 0
        var cues: [WebVTTCue] = []
        var problems: [WebVTTError.Problem] = []
        var problemCount = 0

        init(lines: [String?]) {
            self.lines = lines
        }

        mutating func problem(_ line: Int, _ message: String) {
            problemCount += 1
            if problems.count < WebVTTParser.maxProblems { problems.append(.init(line: line, message: message)) }
        }

        /// The line at `index` as text; an undecodable line (reported once, up front) reads as U+FFFD.
        func text(_ index: Int) -> String {
            lines[index] ?? "\u{FFFD}"
        }

        mutating func run() {
            guard let first = lines.first else {
                return problem(1, "empty file; a WebVTT file starts with the line WEBVTT")
            }
            let signature = first ?? ""
            let afterSignature = signature.utf8.dropFirst(6).first
            if !signature.hasPrefix("WEBVTT") || (afterSignature != nil && afterSignature != 0x20 && afterSignature != 0x09) {
                problem(1, "expected the signature WEBVTT, found \(shown(signature))")
            }
            for (index, line) in lines.enumerated() where line == nil {
                problem(index + 1, "not UTF-8")
            }
            position = 1
            // The rest of the header: up to a blank line, or a timing line (which starts the first cue).
            while position < lines.count, !text(position).isEmpty, !text(position).contains("-->") { position += 1 }
            while position < lines.count {
                if text(position).isEmpty {
                    position += 1
                    continue
                }
                block()
            }
        }

        /// One block from `position`: a cue, a NOTE, STYLE or REGION block, or a problem.
        mutating func block() {
            let firstLine = position + 1
            var identifier: String?
            let head = text(position)
            if !head.contains("-->") {
                if let keyword = Self.keyword(head) {
                    if keyword != "NOTE", !cues.isEmpty {
                        problem(firstLine, "a \(keyword) block after the first cue; it must come before every cue")
                    }
                    position += 1
                    while position < lines.count, !text(position).isEmpty {
                        if text(position).contains("-->") {
                            problem(position + 1, "\"-->\" inside a \(keyword) block (a blank line missing before a cue?)")
                        }
                        position += 1
                    }
                    return
                }
                identifier = head
                position += 1
                guard position < lines.count, text(position).contains("-->") else {
                    problem(
                        firstLine,
                        "a block with no timing line (\(shown(head))); expected a cue's \"00:00:01.250 --> 00:00:03.000\" line or NOTE")
                    // The rules drop the block: skip to its end.
                    while position < lines.count, !text(position).isEmpty, !text(position).contains("-->") { position += 1 }
                    return
                }
            }
            let timingLine = position + 1
            let timing = Self.timing(text(position))
            position += 1
            var payload: [String] = []
            while position < lines.count, !text(position).isEmpty {
                if text(position).contains("-->") {
                    problem(
                        position + 1,
                        "\"-->\" in a cue's text: a blank line is missing before the next cue, or the text must escape it (--&gt;)")
                    // The rules read it as the next cue's timing line.
                    break
                }
                payload.append(text(position))
                position += 1
            }
            switch timing {
            case .failure(let message):
                problem(timingLine, message)
            case .success(let (start, end, settings)):
                if end <= start {
                    problem(
                        timingLine,
                        "the cue ends at \(Self.timestamp(end)), not after it starts at \(Self.timestamp(start))")
                }
                if let previous = cues.last, start < previous.startMilliseconds {
                    problem(
                        timingLine,
                        "the cue starts at \(Self.timestamp(start)), before the previous cue's start \(Self.timestamp(previous.startMilliseconds)); cues are in order of start time"
                    )
                }
                cues.append(
                    WebVTTCue(
                        identifier: identifier, startMilliseconds: start, endMilliseconds: end, settings: settings,
                        payload: payload.joined(separator: "\n"), line: timingLine))
            }
        }

        /// `NOTE`, `STYLE` or `REGION` when the line is that word alone or followed by a space or tab.
        static func keyword(_ line: String) -> String? {
            for word in ["NOTE", "STYLE", "REGION"] where line.hasPrefix(word) {
                let next = line.utf8.dropFirst(word.utf8.count).first
                if next == nil || next == 0x20 || next == 0x09 { return word }
            }
            return nil
        }

        enum Timing {
            case success((Int64, Int64, String))
            case failure(String)
        }

        /// `start --> end [settings]`, whitespace around the arrow.
        static func timing(_ line: String) -> Timing {
            var scanner = Scanner(Array(line.utf8))
            scanner.skipWhitespace()
            guard let start = scanner.timestamp() else { return .failure(scanner.expectedTimestamp()) }
            let beforeArrow = scanner.skipWhitespace()
            guard scanner.consume("-->") else {
                return .failure("expected \"-->\" after the start time, found \(scanner.rest())")
            }
            if beforeArrow == 0 || scanner.skipWhitespace() == 0 {
                return .failure("expected a space on each side of \"-->\"")
            }
            guard let end = scanner.timestamp() else { return .failure(scanner.expectedTimestamp()) }
            let space = scanner.skipWhitespace()
            if !scanner.isAtEnd && space == 0 {
                return .failure("expected a space between the end time and the cue settings, found \(scanner.rest())")
            }
            let settings = String(decoding: scanner.bytes[scanner.index...], as: UTF8.self)
            return .success((start, end, settings.trimmingWhitespace()))
        }

        static func timestamp(_ milliseconds: Int64) -> String {
            WebVTT.timestamp(Double(milliseconds) / 1000)
        }
    }

    /// A cursor over a timing line's bytes.
    struct Scanner {
        let bytes: [UInt8]
        var index = 0

        init(_ bytes: [UInt8]) {
            self.bytes = bytes
        }

        var isAtEnd: Bool { index >= bytes.count }

        /// Skips spaces, tabs and form feeds; returns how many.
        @discardableResult
        mutating func skipWhitespace() -> Int {
            let from = index
            while index < bytes.count, bytes[index] == 0x20 || bytes[index] == 0x09 || bytes[index] == 0x0C { index += 1 }
            return index - from
        }

        mutating func consume(_ text: String) -> Bool {
            let expected = Array(text.utf8)
            guard bytes[index...].starts(with: expected) else { return false }
            index += expected.count
            return true
        }

        /// Up to 10 digits (no timestamp needs more; a longer run is refused, never overflows).
        mutating func digits() -> (value: Int64, count: Int)? {
            var value: Int64 = 0
            var count = 0
            while index < bytes.count, (0x30...0x39).contains(bytes[index]) {
                value = value * 10 + Int64(bytes[index] - 0x30)
                count += 1
                index += 1
                if count > 10 { return nil }
            }
            return count == 0 ? nil : (value, count)
        }

        /// The rules' "collect a WebVTT timestamp", in milliseconds: `mm:ss.ttt`
        /// or `h+:mm:ss.ttt`, minutes and seconds under 60. Leaves `index` where it failed.
        /// Hours take at most 6 digits (114 years), so every time is exact as a `Double` of seconds too.
        mutating func timestamp() -> Int64? {
            guard let first = digits(), first.count <= 6 else { return nil }
            let hoursFirst = first.count != 2 || first.value > 59
            guard consume(":"), let second = digits(), second.count == 2 else { return nil }
            var hours: Int64 = 0
            var minutes = first.value
            var seconds = second.value
            if hoursFirst || (index < bytes.count && bytes[index] == UInt8(ascii: ":")) {
                guard consume(":"), let third = digits(), third.count == 2 else { return nil }
                (hours, minutes, seconds) = (first.value, second.value, third.value)
            }
            guard consume("."), let fraction = digits(), fraction.count == 3, minutes < 60, seconds < 60 else { return nil }
            return ((hours * 60 + minutes) * 60 + seconds) * 1000 + fraction.value
        }

        /// The message for a timestamp that did not parse, showing the text from where it starts.
        func expectedTimestamp() -> String {
            "expected a timestamp like 00:00:01.250, found \(rest())"
        }

        /// The line from the cursor's token on, shown: what was found instead.
        func rest() -> String {
            var from = min(index, bytes.count)
            while from > 0, bytes[from - 1] != 0x20, bytes[from - 1] != 0x09 { from -= 1 }
            let token = bytes[from...].prefix { $0 != 0x20 && $0 != 0x09 }
            return token.isEmpty ? "the end of the line" : shown(String(decoding: token, as: UTF8.self))
        }
    }

    /// Text shown in a message: quoted, control characters escaped, cut after 40 characters.
    static func shown(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars.prefix(40) {
            let category = scalar.properties.generalCategory
            if category == .control || category == .format {
                out += "\\u{\(String(scalar.value, radix: 16))}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return "\"\(out)\(text.unicodeScalars.count > 40 ? "…" : "")\""
    }
}

extension String {
    /// Without leading and trailing spaces, tabs and form feeds.
    fileprivate func trimmingWhitespace() -> String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\u{0C}" }
        guard let first = firstIndex(where: { !isSpace($0) }), let last = lastIndex(where: { !isSpace($0) }) else { return "" }
        return String(self[first...last])
    }
}

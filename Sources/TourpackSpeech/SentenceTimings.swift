import Foundation
package import TourpackCore

/// Where a chunk's sentences start, as each provider is asked about them and
/// answers: Google's `<mark>` timepoints, ElevenLabs' character alignment,
/// Polly's sentence speech marks. Every reading is all or nothing: a
/// sentence the answer does not place leaves the chunk without timings
/// (nil), to be estimated later, and never costs the chunk its audio.
package enum SentenceTimings {
    /// The chunk's sentence starts in `chunk.text`, as UTF-8 offsets: its
    /// own start (the root's content for SSML, 0 for plain text), then each
    /// boundary; and where its words end. Nil when a boundary is not strictly
    /// after the one before it, lands inside a UTF-8 sequence, or falls
    /// outside the text (outside the root's content for SSML).
    package static func sentenceStarts(_ chunk: Chunk, boundaries: [Int]) -> (starts: [Int], end: Int)? {
        let utf8 = Array(chunk.text.utf8)
        var start = 0
        var end = utf8.count
        if chunk.isSSML {
            guard let content = rootContent(chunk.text) else { return nil }
            (start, end) = (content.lowerBound, content.upperBound)
        }
        var starts = [start]
        for boundary in boundaries {
            guard boundary > starts[starts.count - 1], boundary < end, utf8[boundary] & 0xC0 != 0x80 else { return nil }
            starts.append(boundary)
        }
        return (starts, end)
    }

    /// The UTF-8 range of a `<speak …>` document's content: after the root's
    /// opening tag, before its closing one (as `BillingRule.innerSSML` cuts it).
    static func rootContent(_ ssml: String) -> Range<Int>? {
        guard let open = ssml.range(of: "<speak"), let openEnd = ssml[open.upperBound...].firstIndex(of: ">"),
            let close = ssml.range(of: "</speak>", options: .backwards), close.lowerBound > openEnd
        else { return nil }
        let utf8 = ssml.utf8
        let start = utf8.distance(from: utf8.startIndex, to: ssml.index(after: openEnd))
        return start..<utf8.distance(from: utf8.startIndex, to: close.lowerBound)
    }

    // MARK: Google

    /// The SSML Google is sent to time the chunk's sentences: `<mark name="s0"/>`
    /// where the root's content starts and `<mark name="sK"/>` at boundary K-1;
    /// a plain chunk is escaped and wrapped in `<speak>`. Nil when the
    /// boundaries do not fit the chunk, or when the marks would take the
    /// input past Google's 5,000-byte limit (the chunk is then sent as it
    /// is, untimed, rather than refused and split), or when the SSML has
    /// marks of its own (its names could be ours, and Google would time
    /// them too).
    static func googleMarkedSSML(_ chunk: Chunk, boundaries: [Int]) -> String? {
        guard !(chunk.isSSML && chunk.text.contains("<mark")) else { return nil }
        guard let (starts, end) = sentenceStarts(chunk, boundaries: boundaries) else { return nil }
        let utf8 = Array(chunk.text.utf8)
        func piece(_ range: Range<Int>) -> String {
            let text = String(decoding: utf8[range], as: UTF8.self)
            return chunk.isSSML ? text : SSML.escape(text)
        }
        var ssml = chunk.isSSML ? piece(0..<starts[0]) : "<speak>"
        for (index, start) in starts.enumerated() {
            let next = index + 1 < starts.count ? starts[index + 1] : end
            ssml += "<mark name=\"s\(index)\"/>" + piece(start..<next)
        }
        ssml += chunk.isSSML ? piece(end..<utf8.count) : "</speak>"
        guard ssml.utf8.count <= GoogleProvider.requestBytes else { return nil }
        return ssml
    }

    /// `timepoints` (`[{"markName": "sK", "timeSeconds": t}]`) in mark order.
    /// proto3's JSON leaves a zero `timeSeconds` out, so a mark without one is at 0.
    static func googleTimes(_ timepoints: Any?, marks: Int) -> [Double]? {
        guard let items = timepoints as? [Any] else { return nil }
        var times = [Double?](repeating: nil, count: marks)
        for case let item as [String: Any] in items {
            guard let name = item["markName"] as? String, name.hasPrefix("s"), let index = Int(name.dropFirst()),
                "s\(index)" == name, (0..<marks).contains(index)
            else { continue }
            let time: Double
            if let value = item["timeSeconds"] {
                guard let number = value as? NSNumber else { return nil }
                time = number.doubleValue
            } else {
                time = 0
            }
            if let seen = times[index], seen != time { return nil }
            times[index] = time
        }
        return ordered(times)
    }

    /// All present, finite, not negative and in order; otherwise nil.
    static func ordered(_ times: [Double?]) -> [Double]? {
        var result: [Double] = []
        for time in times {
            guard let time, time.isFinite, time >= 0, time >= (result.last ?? 0) else { return nil }
            result.append(time)
        }
        return result
    }

    // MARK: ElevenLabs

    /// The sentence starts in the plain text ElevenLabs is sent
    /// (`ElevenLabsDialect.plain`), in its Unicode scalars: each sentence's
    /// first non-space character. Nil when a sentence cannot be placed.
    package static func elevenLabsStarts(_ chunk: Chunk, boundaries: [Int], sent: String) -> [Int]? {
        guard let (starts, end) = sentenceStarts(chunk, boundaries: boundaries) else { return nil }
        let (text, origins) = plainWithOrigins(chunk)
        // The same words as the body carries, or no timings at all.
        guard text.unicodeScalars.elementsEqual(sent.unicodeScalars) else { return nil }
        let scalars = Array(text.unicodeScalars)
        var placed: [Int] = []
        var index = 0
        for (number, start) in starts.enumerated() {
            let next = number + 1 < starts.count ? starts[number + 1] : end
            while index < scalars.count && (origins[index] < start || scalars[index].properties.isWhitespace) { index += 1 }
            guard index < scalars.count, origins[index] < next else { return nil }
            placed.append(index)
        }
        return placed
    }

    /// The chunk's text as `ElevenLabsDialect.plain` makes it, with the
    /// UTF-8 offset in `chunk.text` each scalar came from: SSML tags become
    /// spaces, the five entities their characters, whitespace runs one space.
    static func plainWithOrigins(_ chunk: Chunk) -> (String, [Int]) {
        var raw: [(Unicode.Scalar, Int)] = []
        var offset = 0
        if chunk.isSSML {
            let utf8 = Array(chunk.text.utf8)
            let entities: [(String, Unicode.Scalar)] = [("&lt;", "<"), ("&gt;", ">"), ("&quot;", "\""), ("&apos;", "'"), ("&amp;", "&")]
            var inTag = false
            var skip = 0
            for scalar in chunk.text.unicodeScalars {
                defer { offset += UTF8.width(scalar) }
                if skip > 0 {
                    skip -= 1
                    continue
                }
                if scalar == "<" {
                    inTag = true
                    raw.append((" ", offset))
                } else if scalar == ">" {
                    inTag = false
                } else if !inTag {
                    if scalar == "&", let (name, character) = entities.first(where: { utf8[offset...].starts(with: $0.0.utf8) }) {
                        raw.append((character, offset))
                        skip = name.unicodeScalars.count - 1
                    } else {
                        raw.append((scalar, offset))
                    }
                }
            }
        } else {
            for scalar in chunk.text.unicodeScalars {
                raw.append((scalar, offset))
                offset += UTF8.width(scalar)
            }
        }
        var text = String.UnicodeScalarView()
        var origins: [Int] = []
        var pendingSpace: Int?
        for (scalar, origin) in raw {
            if scalar.properties.isWhitespace {
                if !text.isEmpty && pendingSpace == nil { pendingSpace = origin }
                continue
            }
            if let space = pendingSpace {
                text.append(" ")
                origins.append(space)
                pendingSpace = nil
            }
            text.append(scalar)
            origins.append(origin)
        }
        return (String(text), origins)
    }

    /// Each sentence's start: the `character_start_times_seconds` of the
    /// alignment entry holding its first character. The entries must spell
    /// the text sent, or nothing is read from them.
    static func elevenLabsTimes(_ alignment: Any?, sent: String, starts: [Int]) -> [Double]? {
        guard let alignment = alignment as? [String: Any], let characters = alignment["characters"] as? [String],
            let values = alignment["character_start_times_seconds"] as? [Any], values.count == characters.count
        else { return nil }
        var entryOfScalar: [Int] = []
        for (entry, character) in characters.enumerated() {
            entryOfScalar += repeatElement(entry, count: character.unicodeScalars.count)
        }
        guard characters.joined().unicodeScalars.elementsEqual(sent.unicodeScalars) else { return nil }
        var times: [Double?] = []
        for start in starts {
            guard start < entryOfScalar.count, let number = values[entryOfScalar[start]] as? NSNumber else { return nil }
            times.append(number.doubleValue)
        }
        return ordered(times)
    }

    // MARK: Polly

    /// Polly's sentence speech marks (one JSON object a line: `time` in ms,
    /// `type`, `start` and `end` as UTF-8 offsets into the text sent) matched
    /// to the sentence starts (`targets`, offsets into the text sent, and
    /// `end`): each takes the first mark that starts at or after it and
    /// before the next sentence.
    ///
    /// Throws `MalformedSpeechMarks` for a body that is not speech marks (a
    /// line that is not a JSON object, a sentence mark without its start or
    /// time): a damaged answer, which the client asks for again, where a
    /// well-formed answer that places too few sentences is nil.
    package static func pollyTimes(_ body: [UInt8], targets: [Int], end: Int) throws(MalformedSpeechMarks) -> [Double]? {
        var marks: [(start: Int, time: Double)] = []
        for (index, line) in body.split(separator: UInt8(ascii: "\n")).enumerated() {
            guard let object = try? JSONSerialization.jsonObject(with: Data(line)) as? [String: Any] else {
                if line.allSatisfy({ $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\r") }) { continue }
                throw MalformedSpeechMarks(line: index + 1, problem: "not a JSON object")
            }
            guard object["type"] as? String == "sentence" else { continue }
            guard let start = object["start"] as? NSNumber, let time = object["time"] as? NSNumber else {
                throw MalformedSpeechMarks(line: index + 1, problem: "a sentence mark without its start or time")
            }
            marks.append((start.intValue, time.doubleValue / 1000))
        }
        var times: [Double?] = []
        for (index, target) in targets.enumerated() {
            let next = index + 1 < targets.count ? targets[index + 1] : end
            times.append(marks.filter { $0.start >= target && $0.start < next }.min { $0.start < $1.start }?.time)
        }
        return ordered(times)
    }
}

/// A speech marks answer that is not speech marks; `line` counts from 1.
package struct MalformedSpeechMarks: Error, CustomStringConvertible {
    var line: Int
    var problem: String

    package var description: String { "speech marks answer, line \(line): \(problem)" }
}

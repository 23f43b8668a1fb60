import Foundation
import TourpackAudio

/// When each sentence, word, `<mark>` and character of an input is spoken,
/// read from espeak-ng's own events for that utterance: the timings
/// serve-tts reports as Google's timepoints, ElevenLabs' character
/// alignment and Polly's speech marks.
///
/// Positions are indices into the input's Unicode scalars (espeak counts
/// scalars of its UTF-8 input, SSML tags included); each API's answer
/// converts them to its own unit (UTF-8 bytes for Polly). Times are seconds
/// from the audio's first sample; resampling the audio does not move them.
///
/// espeak places plain-text positions exactly, but in SSML a position can
/// be one scalar off, so spans are snapped to the word they fall in. It also
/// drops a `<mark>` between sentences: a mark without its event is timed by
/// the first word after it.
struct SpeechTimeline: Sendable {
    /// A stretch of the input and when its speech begins.
    struct Span: Sendable, Hashable {
        /// Scalar indices, `end` exclusive.
        var start: Int
        var end: Int
        var seconds: Double
    }

    /// A `<mark>` of the SSML input.
    struct Mark: Sendable, Hashable {
        /// The name with XML entities decoded, as Google's `markName` gives it back.
        var name: String
        /// The tag itself, `<mark …/>`, as scalar indices, `end` exclusive.
        var tagStart: Int
        var tagEnd: Int
        var seconds: Double
    }

    /// Each scalar of the input with when it starts and ends, as ElevenLabs' alignment lists them.
    struct Alignment: Sendable, Hashable {
        var characters: [String]
        var startSeconds: [Double]
        var endSeconds: [Double]
    }

    let scalars: [Unicode.Scalar]
    let isSSML: Bool
    let events: [EspeakEvent]
    /// The native audio the events are placed in.
    let samples: [Int16]
    let sampleRate: Int

    init(text: String, isSSML: Bool, speech: EspeakSpeech) {
        scalars = Array(text.unicodeScalars)
        self.isSSML = isSSML
        events = speech.events
        samples = speech.pcm.samples
        sampleRate = max(1, speech.pcm.sampleRate)
    }

    var durationSeconds: Double { Double(samples.count) / Double(sampleRate) }

    func seconds(_ sample: Int) -> Double { Double(min(max(sample, 0), samples.count)) / Double(sampleRate) }

    // MARK: Sentences and words

    /// One span per sentence espeak spoke, in order: from its first word to
    /// its last visible scalar (trailing spaces and tags left out).
    var sentences: [Span] {
        let starts = increasing(events.filter { $0.kind == .sentence })
        return starts.enumerated().map { index, start in
            let limit = index + 1 < starts.count ? starts[index + 1].position : scalars.count
            return Span(start: start.position, end: trimmedEnd(from: start.position, to: limit), seconds: seconds(start.sample))
        }
    }

    /// One span per word espeak spoke, in order. Words espeak splits
    /// further (`日本` is two) are one span, timed by the first.
    var words: [Span] {
        let starts = increasing(events.filter { $0.kind == .word })
        return starts.enumerated().map { index, start in
            let next = index + 1 < starts.count ? starts[index + 1].position : scalars.count
            var end = min(start.position + max(start.length, 1), next, scalars.count)
            if isSSML {
                // espeak's lengths in SSML can be a scalar off too: the word runs to a space or a tag, less its punctuation.
                end = start.position
                while end < next, !scalars[end].properties.isWhitespace, scalars[end] != "<" { end += 1 }
                while end > start.position + 1, !Self.isWordScalar(scalars[end - 1]) { end -= 1 }
            }
            return Span(start: start.position, end: trimmedEnd(from: start.position, to: end), seconds: seconds(start.sample))
        }
    }

    /// Events turned into snapped scalar positions, each later than the one
    /// before (a repeat of a position, or a step back, is dropped).
    private func increasing(_ events: [EspeakEvent]) -> [(position: Int, length: Int, sample: Int)] {
        var result: [(position: Int, length: Int, sample: Int)] = []
        for event in events {
            let position = snappedStart(event.textPosition - 1)
            guard position < scalars.count else { continue }
            if let last = result.last, position <= last.position { continue }
            result.append((position, event.length, max(event.sample, result.last?.sample ?? 0)))
        }
        return result
    }

    /// The start of the word at or after `index`: past spaces (and, in
    /// SSML, tags), then back to the word's first letter.
    func snappedStart(_ index: Int) -> Int {
        var i = min(max(index, 0), scalars.count)
        if isSSML, let open = scalars[..<i].lastIndex(of: "<"), !scalars[open..<i].contains(">") {
            i = scalars[open...].firstIndex(of: ">").map { $0 + 1 } ?? scalars.count
        }
        while i < scalars.count {
            if scalars[i].properties.isWhitespace {
                i += 1
            } else if isSSML, scalars[i] == "<" {
                i = scalars[i...].firstIndex(of: ">").map { $0 + 1 } ?? scalars.count
            } else {
                break
            }
        }
        while i > 0, i < scalars.count, Self.isWordScalar(scalars[i - 1]), Self.isWordScalar(scalars[i]) { i -= 1 }
        return i
    }

    /// `limit` moved back over trailing spaces (and, in SSML, tags), never before `start + 1`.
    private func trimmedEnd(from start: Int, to limit: Int) -> Int {
        var end = min(limit, scalars.count)
        while end > start + 1 {
            if scalars[end - 1].properties.isWhitespace {
                end -= 1
            } else if isSSML, scalars[end - 1] == ">", let open = scalars[start..<(end - 1)].lastIndex(of: "<") {
                end = open
            } else {
                break
            }
        }
        return max(end, min(start + 1, scalars.count))
    }

    static func isWordScalar(_ scalar: Unicode.Scalar) -> Bool {
        scalar.properties.isAlphabetic || scalar.properties.numericType != nil
    }

    // MARK: Marks

    /// Every `<mark name="…"/>` of the SSML input, in order, each timed by
    /// espeak's mark event of the same name or else by the first word after
    /// it (the end of the audio when none follows). Times never decrease.
    var marks: [Mark] {
        guard isSSML else { return [] }
        var markEvents = events.filter { $0.kind == .mark }[...]
        let wordEvents = events.filter { $0.kind == .word }
        var result: [Mark] = []
        for tag in Self.markTags(in: scalars) {
            var sample: Int?
            if let found = markEvents.firstIndex(where: { $0.name == tag.rawName }) {
                sample = markEvents[found].sample
                markEvents = markEvents[(found + 1)...]
            } else {
                let middle = (tag.start + tag.end) / 2
                sample = wordEvents.first { $0.textPosition - 1 >= middle }?.sample
            }
            let time = max(seconds(sample ?? samples.count), result.last?.seconds ?? 0)
            result.append(Mark(name: tag.name, tagStart: tag.start, tagEnd: tag.end, seconds: time))
        }
        return result
    }

    /// The `<mark>` tags of SSML: where each is and its name, raw and decoded.
    static func markTags(in scalars: [Unicode.Scalar]) -> [(start: Int, end: Int, rawName: String, name: String)] {
        var tags: [(start: Int, end: Int, rawName: String, name: String)] = []
        var i = 0
        while let open = scalars[i...].firstIndex(of: "<") {
            guard let close = closingBracket(of: open, in: scalars) else { break }
            let tag = String(String.UnicodeScalarView(scalars[open...close]))
            if tag.hasPrefix("<mark"), tag.dropFirst(5).first.map({ $0.isWhitespace || $0 == "/" }) == true,
                let raw = attribute("name", in: tag)
            {
                tags.append((open, close + 1, raw, SSMLEntities.decode(raw)))
            }
            i = close + 1
        }
        return tags
    }

    /// The `>` that ends the tag opened at `open`; a `>` inside a quoted attribute value does not.
    static func closingBracket(of open: Int, in scalars: [Unicode.Scalar]) -> Int? {
        var quote: Unicode.Scalar?
        for index in (open + 1)..<scalars.count {
            let scalar = scalars[index]
            if let open = quote {
                if scalar == open { quote = nil }
            } else if scalar == "\"" || scalar == "'" {
                quote = scalar
            } else if scalar == ">" {
                return index
            }
        }
        return nil
    }

    /// An attribute's raw value in a tag, single- or double-quoted.
    static func attribute(_ name: String, in tag: String) -> String? {
        var rest = Substring(tag)
        while let found = rest.range(of: name) {
            let before = rest[..<found.lowerBound].last
            var after = rest[found.upperBound...].drop { $0.isWhitespace }
            rest = rest[found.upperBound...]
            guard before?.isWhitespace == true, after.first == "=" else { continue }
            after = after.dropFirst().drop { $0.isWhitespace }
            guard let quote = after.first, quote == "\"" || quote == "'" else { return nil }
            let value = after.dropFirst()
            guard let end = value.firstIndex(of: quote) else { return nil }
            return String(value[..<end])
        }
        return nil
    }

    // MARK: Characters

    /// A start and end for every scalar of the input. Each word's letters
    /// share the word's sounding part evenly (from its event to the last
    /// sound before the next word); the spaces and punctuation after it
    /// share the quiet that follows. So the first character of a sentence
    /// starts exactly at the sentence's event.
    var alignment: Alignment {
        let count = scalars.count
        var starts = [Double](repeating: 0, count: count)
        var ends = [Double](repeating: 0, count: count)
        func spread(_ range: Range<Int>, from start: Double, to end: Double) {
            guard !range.isEmpty else { return }
            let step = (end - start) / Double(range.count)
            for (k, index) in range.enumerated() {
                starts[index] = start + step * Double(k)
                ends[index] = start + step * Double(k + 1)
            }
        }
        let spoken = words
        if let first = spoken.first {
            spread(0..<first.start, from: 0, to: first.seconds)
        } else {
            spread(0..<count, from: 0, to: durationSeconds)
        }
        for (index, word) in spoken.enumerated() {
            let nextStart = index + 1 < spoken.count ? spoken[index + 1].start : count
            let nextTime = max(index + 1 < spoken.count ? spoken[index + 1].seconds : durationSeconds, word.seconds)
            let letters = word.start..<min(word.end, nextStart)
            let gap = letters.upperBound..<nextStart
            if gap.isEmpty {
                spread(letters, from: word.seconds, to: nextTime)
            } else {
                let sounding = lastSound(from: word.seconds, to: nextTime)
                spread(letters, from: word.seconds, to: sounding)
                spread(gap, from: sounding, to: nextTime)
            }
        }
        return Alignment(characters: scalars.map { String($0) }, startSeconds: starts, endSeconds: ends)
    }

    /// The end of the last 5 ms window with sound in `start..<end`; `end`
    /// when it sounds to the end, the middle when it is all quiet.
    func lastSound(from start: Double, to end: Double) -> Double {
        let window = max(1, sampleRate / 200)
        let first = Int(start * Double(sampleRate)), last = min(Int(end * Double(sampleRate)), samples.count)
        guard last - first >= window else { return end }
        var position = last
        while position - window >= first {
            let slice = samples[(position - window)..<position]
            let power = slice.reduce(0.0) { $0 + Double($1) * Double($1) } / Double(window)
            if power > Self.quietPower { return min(end, Double(position) / Double(sampleRate)) }
            position -= window
        }
        return (start + end) / 2
    }

    /// Below an RMS of 100 (of 32767) a window counts as quiet: espeak's
    /// pauses are near digital silence.
    static let quietPower = 100.0 * 100.0
}

/// XML's predefined and numeric character references, as an SSML
/// attribute value is read.
enum SSMLEntities {
    static func decode(_ raw: String) -> String {
        guard raw.contains("&") else { return raw }
        var out = ""
        var rest = Substring(raw)
        while let amp = rest.firstIndex(of: "&") {
            out += rest[..<amp]
            guard let semi = rest[amp...].firstIndex(of: ";") else {
                rest = rest[amp...]
                break
            }
            let entity = rest[rest.index(after: amp)..<semi]
            switch entity {
            case "amp": out += "&"
            case "lt": out += "<"
            case "gt": out += ">"
            case "quot": out += "\""
            case "apos": out += "'"
            default:
                let number: UInt32? =
                    entity.hasPrefix("#x") || entity.hasPrefix("#X")
                    ? UInt32(entity.dropFirst(2), radix: 16) : entity.hasPrefix("#") ? UInt32(entity.dropFirst()) : nil
                if let number, let scalar = Unicode.Scalar(number) {
                    out.unicodeScalars.append(scalar)
                } else {
                    out += rest[amp...semi]
                }
            }
            rest = rest[rest.index(after: semi)...]
        }
        return out + rest
    }
}

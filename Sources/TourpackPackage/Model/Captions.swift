/// Whether a build writes captions beside each narration (the pipeline's
/// top-level `captions`).
public enum CaptionsSetting: String, Sendable, Hashable, Codable {
    /// A WebVTT file per narration, one cue per sentence (the default).
    case webvtt
    case off
}

/// Where a caption file's cue times come from, as package.json states it.
public enum CaptionTiming: String, Sendable, Hashable, Codable {
    /// Every sentence start was reported by the voice: Google's timepoints,
    /// ElevenLabs' character alignment, Polly's sentence speech marks, or
    /// serve-tts answering those from espeak-ng's own events.
    case provider
    /// At least one sentence start was estimated inside its chunk's
    /// measured speech, in proportion to characters (an API that reports
    /// no timings, a cache entry kept without them, a chunk the server
    /// made us split).
    case estimated
}

/// One caption: a sentence of the narration and when it is spoken in the
/// shipped file, in seconds from the file's first sample.
public struct CaptionCue: Sendable, Hashable {
    public var start: Double
    public var end: Double
    /// The narration's own text of the sentence: no SSML, no lexicon alias.
    public var text: String

    public init(start: Double, end: Double, text: String) {
        self.start = start
        self.end = end
        self.text = text
    }
}

/// WebVTT (W3C, "WebVTT: The Web Video Text Tracks Format"), as tourpack
/// writes it: the `WEBVTT` header, then one cue per sentence, numbered
/// from 1, with `HH:MM:SS.mmm` times, UTF-8 with LF line ends.
public enum WebVTT {
    /// The file's bytes. Cue text is made safe for the format: `&`, `<`
    /// and `>` are escaped, line breaks become spaces (a blank line would
    /// end the cue) and `-->` cannot appear.
    public static func encode(_ cues: [CaptionCue]) -> [UInt8] {
        var out = "WEBVTT\n"
        for (index, cue) in cues.enumerated() {
            out += "\n\(index + 1)\n\(timestamp(cue.start)) --> \(timestamp(cue.end))\n\(escape(cue.text))\n"
        }
        return Array(out.utf8)
    }

    /// `HH:MM:SS.mmm`, rounded to the millisecond.
    public static func timestamp(_ seconds: Double) -> String {
        // A cue past a million hours is written as the last time that fits: never a trap.
        let total = Int(clamping: seconds * 1000, to: 0...(1_000_000 * 3_600_000))
        let (hours, rest) = total.quotientAndRemainder(dividingBy: 3_600_000)
        let (minutes, rest2) = rest.quotientAndRemainder(dividingBy: 60_000)
        let (secs, millis) = rest2.quotientAndRemainder(dividingBy: 1000)
        func pad(_ value: Int, _ width: Int) -> String {
            let digits = String(value)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        return "\(pad(hours, 2)):\(pad(minutes, 2)):\(pad(secs, 2)).\(pad(millis, 3))"
    }

    /// Cue text as WebVTT carries it (the inverse of what a parser unescapes).
    public static func escape(_ text: String) -> String {
        // By scalar: "<" followed by a combining mark is one Character, not "<".
        var out = ""
        var afterCR = false
        for scalar in text.unicodeScalars {
            // CR LF is one line break, one space.
            defer { afterCR = scalar == "\r" }
            if scalar == "\n", afterCR { continue }
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\n", "\r", "\u{2028}", "\u{2029}": out += " "
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}

/// How short a voice's audio can be for the words it was sent: the bound
/// an answer, a cached chunk and a shipped narration are each held to.
///
/// A 200 with no audio, or with a few samples for a paragraph, is not an
/// answer: joined, it silently shortens the narration (a two-chunk
/// narration once shipped at 161 s of its 434 s). So the audio must last at
/// least `minimumSeconds`, from a speaking rate with a wide margin:
///
/// - Count the characters that are spoken: letters and digits, outside
///   SSML's tags (punctuation, spaces and markup make no sound of their own).
/// - A typical voice speaks about 15 of them a second at speaking rate 1.0,
///   and fast speech about 20 (some 240 words a minute). The bound allows
///   `charactersPerSecond` (60) at rate 1.0: three times fast speech, four
///   times a typical voice.
/// - The voice's `speakingRate` (0.25 to 4.0) scales it: at 2.0 a voice may
///   speak 120 a second.
///
/// So a 900-character paragraph at rate 1.0 must last at least 15 s, where
/// a voice takes about 60; text with something to say is never 0 s long.
/// Audio may always be longer: pauses, `<break>`s and slow voices only add.
package enum SpeechLength {
    /// Spoken characters a second the bound allows at speaking rate 1.0.
    package static let charactersPerSecond = 60.0

    /// Letters and digits a voice would speak in `text`: for SSML, those
    /// outside its tags (in text, character references and CDATA).
    package static func spokenCharacters(_ text: String, isSSML: Bool) -> Int {
        func spoken(_ scalar: Unicode.Scalar) -> Bool { scalar.properties.isAlphabetic || scalar.properties.numericType != nil }
        guard isSSML else { return text.unicodeScalars.reduce(0) { $0 + (spoken($1) ? 1 : 0) } }
        let scanner = SSMLScanner(text)
        var count = 0
        for token in scanner.tokens {
            switch token.kind {
            case .text: count += scanner.scalars[token.range].reduce(0) { $0 + (spoken($1) ? 1 : 0) }
            case .entity(let scalar): count += spoken(scalar) ? 1 : 0
            case .cdata: count += scanner.scalars[token.range].dropFirst(9).dropLast(3).reduce(0) { $0 + (spoken($1) ? 1 : 0) }
            default: break
            }
        }
        return count
    }

    /// The shortest audio, in seconds, a voice at `speakingRate` can make
    /// of `spokenCharacters` (a rate outside 0.25...4.0 counts as its nearest end).
    package static func minimumSeconds(spokenCharacters: Int, speakingRate: Double) -> Double {
        let rate = speakingRate.isFinite ? min(max(speakingRate, 0.25), 4.0) : 1.0
        return Double(max(0, spokenCharacters)) / (charactersPerSecond * rate)
    }

    /// Why `seconds` of audio is too little for `spokenCharacters` at
    /// `speakingRate`; nil when it is enough.
    package static func shortfall(seconds: Double, spokenCharacters: Int, speakingRate: Double) -> String? {
        let least = minimumSeconds(spokenCharacters: spokenCharacters, speakingRate: speakingRate)
        if spokenCharacters > 0, !(seconds > 0) {
            return "no audio for \(spokenCharacters) spoken characters"
        }
        guard seconds < least else { return nil }
        return "too little audio: \(format(seconds)) s for \(spokenCharacters) spoken characters, "
            + "where a voice at speaking rate \(format(speakingRate)) needs at least \(format(least)) s"
    }

    private static func format(_ value: Double) -> String {
        guard value.isFinite else { return "\(value)" }
        let hundredths = Int(clamping: value * 100, to: -1_000_000_000...1_000_000_000)
        let sign = hundredths < 0 ? "-" : ""
        let magnitude = abs(hundredths)
        let fraction = magnitude % 100
        return "\(sign)\(magnitude / 100).\(fraction < 10 ? "0" : "")\(fraction)"
    }
}

/// A W3C PLS 1.0 pronunciation lexicon, as loaded and checked from a `.pls`
/// file (the contract's "Audio" (pronunciation)).
///
/// Only what changes the text sent is kept: each lexeme's graphemes and the
/// one phoneme and one alias it would be spoken with. Where the lexeme came
/// from (file and line) stays with it, so a lexeme that the endpoint cannot
/// use is named in the error that refuses it.
package struct Lexicon: Sendable, Hashable {
    /// The file as the user named it; for messages.
    package var file: String
    /// The `xml:lang` of the root, such as `en-US`.
    package var language: String
    /// The lexicon's default alphabet, for phonemes that name none.
    package var alphabet: PhoneticAlphabet
    /// In document order: when two lexemes share a grapheme, the first wins.
    package var lexemes: [Lexeme]

    package init(file: String, language: String, alphabet: PhoneticAlphabet, lexemes: [Lexeme]) {
        self.file = file
        self.language = language
        self.alphabet = alphabet
        self.lexemes = lexemes
    }
}

/// One `<lexeme>`: the spellings it matches and how to say them.
package struct Lexeme: Sendable, Hashable {
    /// The spellings, each trimmed and with inner whitespace collapsed to one space; never empty.
    package var graphemes: [String]
    /// The pronunciation for SSML endpoints: the preferred `<phoneme>` (the
    /// first with `prefer="true"`, else the first), with its alphabet.
    package var phoneme: Phoneme?
    /// Text to say instead: the preferred `<alias>`, chosen the same way.
    package var alias: String?
    /// The line of the `<lexeme>` tag in `file`.
    package var line: Int
    /// The lexicon file it came from, as the user named it.
    package var file: String

    package init(graphemes: [String], phoneme: Phoneme?, alias: String?, line: Int, file: String) {
        self.graphemes = graphemes
        self.phoneme = phoneme
        self.alias = alias
        self.line = line
        self.file = file
    }

    /// `the lexeme "Zermatt"` (by its first grapheme), for messages that
    /// also give `file` and `line`.
    package var label: String { "the lexeme \"\(graphemes.first ?? "")\"" }
}

/// A pronunciation in a phonetic alphabet.
package struct Phoneme: Sendable, Hashable {
    package var alphabet: PhoneticAlphabet
    package var text: String

    package init(alphabet: PhoneticAlphabet, text: String) {
        self.alphabet = alphabet
        self.text = text
    }
}

/// The phonetic alphabets that SSML's `<phoneme alphabet="…">` takes on the
/// endpoints tourpack speaks to (Google accepts exactly these two).
package enum PhoneticAlphabet: String, Sendable, Hashable, CaseIterable {
    case ipa
    case xSampa = "x-sampa"
}

/// How lexemes are written into narration for the endpoint in use.
///
/// Google reads SSML, so it gets `<phoneme>` and `<sub alias>` elements. An
/// OpenAI-style endpoint takes no SSML, and the local voice (espeak-ng
/// behind `serve-tts`) reads no IPA or X-SAMPA, so both get the alias as
/// plain words; a lexeme that has only a phoneme cannot be said by them.
package enum PronunciationDialect: String, Sendable, Hashable {
    /// `<phoneme alphabet ph>` for a lexeme with a phoneme, else `<sub alias>`.
    case ssml
    /// The alias replaces the grapheme as plain text.
    case alias

    /// The dialect for an endpoint's API and the voice it speaks with: SSML
    /// for the APIs that read phonemes (`SpeechProvider.readsPhonemes`) with
    /// a voice that is not the local one; the alias otherwise.
    package init(api: TTSAPI, voice: VoicePreset) {
        let isLocal = voice.provider == "local" || voice.tier == .local
        self = api.provider.readsPhonemes && !isLocal ? .ssml : .alias
    }

    /// Who cannot take phonemes, for messages.
    package static func speaker(api: TTSAPI, voice: VoicePreset) -> String {
        api.provider.phonemeRefusal(for: voice)
    }
}

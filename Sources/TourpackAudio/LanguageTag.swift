/// Converts the tour's BCP-47 language (`en-US`) to the ISO 639-2 code that
/// the mp4 track header (`mdhd`) and the ID3v2 `TLAN` frame require.
///
/// libavformat's own converter is private, and without a three-letter code
/// the mp4 muxer silently writes `und`. OpusTags take the BCP-47 tag as is.
enum LanguageTag {
    /// The ISO 639-2/T code for the primary subtag, or `und` when unknown.
    static func iso639Part2(_ bcp47: String) -> String {
        let primary = bcp47.split(whereSeparator: { $0 == "-" || $0 == "_" }).first.map { $0.lowercased() } ?? ""
        if primary.count == 3, primary.allSatisfy({ $0 >= "a" && $0 <= "z" }) { return primary }
        return twoToThree[primary] ?? "und"
    }

    /// ISO 639-1 to ISO 639-2/T for the languages TTS providers offer.
    private static let twoToThree: [String: String] = [
        "af": "afr", "am": "amh", "ar": "ara", "bg": "bul", "bn": "ben", "bs": "bos", "ca": "cat",
        "cs": "ces", "cy": "cym", "da": "dan", "de": "deu", "el": "ell", "en": "eng", "es": "spa",
        "et": "est", "eu": "eus", "fa": "fas", "fi": "fin", "fr": "fra", "ga": "gle",
        "gl": "glg", "gu": "guj", "he": "heb", "hi": "hin", "hr": "hrv", "hu": "hun", "hy": "hye",
        "id": "ind", "is": "isl", "it": "ita", "ja": "jpn", "ka": "kat", "kk": "kaz", "km": "khm",
        "kn": "kan", "ko": "kor", "lt": "lit", "lv": "lav", "mk": "mkd", "ml": "mal", "mn": "mon",
        "mr": "mar", "ms": "msa", "mt": "mlt", "my": "mya", "nb": "nob", "ne": "nep", "nl": "nld",
        "nn": "nno", "no": "nor", "pa": "pan", "pl": "pol", "pt": "por", "ro": "ron", "ru": "rus",
        "sk": "slk", "sl": "slv", "sq": "sqi", "sr": "srp", "sv": "swe", "sw": "swa", "ta": "tam",
        "te": "tel", "th": "tha", "tr": "tur", "uk": "ukr", "ur": "urd", "uz": "uzb", "vi": "vie",
        "zh": "zho", "zu": "zul",
    ]
}

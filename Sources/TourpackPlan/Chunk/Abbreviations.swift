/// Words whose final period never ends a sentence.
///
/// A TTS voice reads each chunk as a separate utterance, so a false sentence
/// end costs an audible pause mid-sentence ("Mr. | Smith"), while a missed
/// one costs nothing audible. The rules therefore lean towards *not*
/// splitting: when in doubt, a period is not a sentence end.
///
/// The rules, in the order they are tried (matching ignores case):
/// - `always`: titles (Mr., Mrs., Ms., Dr., Prof., St., Mt., Jr., Sr., …),
///   Latin and scholarly forms (approx., etc., vs., cf., ca., viz., al.),
///   and the German and French forms a tour writer meets (bzw., usw., vgl.,
///   ggf., Str., Jh., env., av., apr., …). `etc.` is kept even though it can
///   end a sentence, as the foundation issue asks.
/// - `beforeNumbers`: No., Nr., Vol., Fig., pp., Art. only when a number
///   follows ("No. 5", "Nr. 12"), so "I said no. Then" still splits.
/// - Initials and initialisms: a word made of single letters joined by
///   periods or hyphens (J., R., e.g., i.e., U.S., z.B., d.h., J.-C.).
///   The pronoun "I" alone is the exception, so "So did I. Then" splits.
///   A single *lowercase* letter counts only next to another single-letter
///   abbreviation ("z. B.", "d. h."), so "8611 m. Then" still splits.
/// - German ordinals: one or two digits before a month or a word like
///   "Kehre" or "Jahrhundert" ("am 3. Mai", "die 7. Kehre").
///
/// Left out on purpose: unit symbols such as `km` (SI symbols take no period,
/// so "12 km." is far more often a sentence end than an abbreviation) and
/// month abbreviations (they collide with names such as "Jan").
enum Abbreviations {
    static let always: Set<String> = [
        // English titles and names
        "mr", "mrs", "ms", "mx", "dr", "prof", "st", "mt", "jr", "sr", "rev", "hon",
        "gen", "col", "capt", "lt", "sgt", "gov", "sen", "messrs",
        // Latin and scholarly
        "approx", "etc", "vs", "cf", "ca", "viz", "al", "incl", "dept", "esp",
        // German
        "bzw", "usw", "vgl", "ggf", "evtl", "inkl", "zzgl", "sog", "str", "jh", "jhd",
        "hr", "fr", "hl", "geb", "gest",
        // French
        "env", "av", "apr", "mme", "mlle", "mgr", "bd",
    ]

    static let beforeNumbers: Set<String> = ["no", "nos", "nr", "vol", "fig", "pp", "art", "kap"]

    static let germanOrdinalNouns: Set<String> = [
        "januar", "jänner", "februar", "feber", "märz", "april", "mai", "juni", "juli",
        "august", "september", "oktober", "november", "dezember",
        "jahrhundert", "jh", "jhd", "jahrtausend", "kehre", "stock", "etappe", "platz",
    ]

    /// Whether the period after `word` belongs to the word rather than ending
    /// a sentence. `word` has opening quotes and brackets stripped;
    /// `nextWord` is the word after the period, if any.
    static func keepsPeriod(word: String, nextWord: String?, previousWord: String?) -> Bool {
        let lower = word.lowercased()
        if always.contains(lower) { return true }
        let nextStartsWithNumber = nextWord?.first?.isNumber ?? false
        if beforeNumbers.contains(lower) && nextStartsWithNumber { return true }
        if isInitialism(word) {
            guard word.count == 1, word.first?.isLowercase == true else { return true }
            return isSingleLetterAbbreviation(previousWord) || isSingleLetterAbbreviation(nextWord)
        }
        if let nextWord, (1...2).contains(word.count), word.allSatisfy({ $0.isASCII && $0.isNumber }) {
            let noun = nextWord.lowercased().filter { $0.isLetter }
            if germanOrdinalNouns.contains(noun) { return true }
        }
        return false
    }

    /// "B." or "h.": one letter and a period.
    private static func isSingleLetterAbbreviation(_ word: String?) -> Bool {
        guard let word else { return false }
        let characters = Array(word)
        return characters.count == 2 && characters[0].isLetter && characters[1] == "."
    }

    /// Single letters joined by `.` or `-`: "J", "e.g", "U.S", "J.-C".
    static func isInitialism(_ word: String) -> Bool {
        guard word != "I" else { return false }
        var run = 0
        var letters = 0
        for character in word {
            if character.isLetter {
                run += 1
                letters += 1
                if run > 1 { return false }
            } else if character == "." || character == "-" {
                run = 0
            } else {
                return false
            }
        }
        return letters > 0
    }
}

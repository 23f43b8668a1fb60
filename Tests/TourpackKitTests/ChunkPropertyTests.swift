import Testing
import TourpackTesting

@testable import TourpackCore
@testable import TourpackKit
@testable import TourpackPlan

/// Narration-like text built from pieces that exercise every rule: abbreviations,
/// decimals, initials, ellipses, quotes, CJK, combining marks, emoji, escapes,
/// clause marks, long unbroken runs and messy whitespace.
enum NarrationGenerator {
    static let words = [
        "the", "road", "climbs", "Grossglockner", "Höhe", "Straße", "über", "café", "naïve", "Zürich",
        "Ærøskøbing", "e\u{301}te\u{301}", "🏔️", "👨‍👩‍👧‍👦", "🇦🇹", "東京", "山道の", "Tom&Jerry", "<tag>",
        "\"quoted\"", "it's", "3.5", "1.000,5", "km", "Mr.", "Dr.", "St.", "e.g.", "i.e.", "etc.", "vs.",
        "J.", "R.", "No. 7", "…", "...", "z. B.", "(Pasterze)", "«\u{A0}Oui\u{A0}»", "Kaiser-Franz-Josefs-Höhe",
    ]
    static let gaps = [" ", " ", " ", " ", "  ", "\n", "\t", ", ", "; ", ": ", " — ", " – ", "、", "，", " \n\n "]
    static let ends = [". ", ". ", "! ", "? ", "?! ", "。", "！", "？", ".\" ", "!) ", "… ", ".\n"]

    static func text(_ random: inout SeededGenerator) -> String {
        var out = Bool.random(using: &random) ? "  " : ""
        for _ in 0..<Int.random(in: 1...25, using: &random) {
            for word in 0..<Int.random(in: 1...14, using: &random) {
                if word > 0 { out += gaps.randomElement(using: &random)! }
                if Int.random(in: 0..<40, using: &random) == 0 {
                    // A long run with no place to cut but between graphemes.
                    let letters = ["a", "ß", "é", "山", "e\u{301}", "🇦🇹"]
                    out += (0..<Int.random(in: 20...90, using: &random)).map { _ in letters.randomElement(using: &random)! }.joined()
                } else {
                    out += words.randomElement(using: &random)!
                }
            }
            out += ends.randomElement(using: &random)!
        }
        return out
    }
}

/// Checks what every chunking must give, whatever the input.
enum ChunkInvariants {
    static func isSpace(_ c: Character) -> Bool {
        c.unicodeScalars.allSatisfy {
            $0.properties.isWhitespace && !["\u{A0}", "\u{2007}", "\u{202F}", "\u{2060}", "\u{FEFF}"].contains($0)
        }
    }

    /// Runs of whitespace collapsed to one space, and trimmed.
    static func normalized(_ text: String) -> [Character] {
        var out: [Character] = []
        for c in text {
            if isSpace(c) {
                if let last = out.last, last != " " { out.append(" ") }
            } else {
                out.append(c)
            }
        }
        while out.last == " " { out.removeLast() }
        return out
    }

    static func size(_ text: String, _ limit: ChunkLimit, isSSML: Bool) -> Int {
        switch limit {
        case .utf8BytesAfterEscaping: return isSSML ? text.utf8.count : SSML.escape(text).utf8.count
        case .characters: return text.unicodeScalars.count
        case .billedCharacters: return BillingRule.textCharacters(Chunk(text: text, isSSML: isSSML))
        }
    }

    /// Each piece is non-empty, trimmed and starts on a grapheme boundary of
    /// the input; joined with single spaces (or nothing, between CJK
    /// sentences) they give back the normalized input exactly.
    static func expectReassembles(_ pieces: [String], _ original: String, seed: UInt64, sourceLocation: SourceLocation = #_sourceLocation) {
        let whole = normalized(original)
        var position = 0
        for (index, piece) in pieces.enumerated() {
            let characters = Array(piece)
            #expect(
                !characters.isEmpty && !isSpace(characters.first!) && !isSpace(characters.last!),
                "seed \(seed): piece \(index) is empty or untrimmed: \(piece.debugDescription)", sourceLocation: sourceLocation)
            let end = position + characters.count
            let matches =
                end <= whole.count
                && zip(characters, whole[position..<end]).allSatisfy {
                    $0.unicodeScalars.elementsEqual($1.unicodeScalars)
                }
            guard matches else {
                Issue.record(
                    "seed \(seed): piece \(index) does not continue the input at \(position): \(piece.debugDescription)",
                    sourceLocation: sourceLocation)
                return
            }
            position = end
            if position < whole.count && whole[position] == " " { position += 1 }
        }
        #expect(position == whole.count, "seed \(seed): the pieces stop at \(position) of \(whole.count)", sourceLocation: sourceLocation)
    }
}

@Suite struct ChunkPropertyTests {
    @Test(arguments: 0..<150)
    func plainTextChunksFitAndReassemble(seed: Int) throws {
        var random = SeededGenerator(seed: UInt64(seed))
        let text = NarrationGenerator.text(&random)
        let limit: ChunkLimit =
            seed.isMultiple(of: 2)
            ? .utf8BytesAfterEscaping(Int.random(in: 40...600, using: &random))
            : .characters(Int.random(in: 20...400, using: &random))
        let chunks = try Chunker(limit: limit).chunks(for: Narration(text: text))
        for chunk in chunks {
            #expect(!chunk.isSSML)
            #expect(
                ChunkInvariants.size(chunk.text, limit, isSSML: false) <= limit.value,
                "seed \(seed): \(chunk.text.debugDescription) is over \(limit)")
        }
        ChunkInvariants.expectReassembles(chunks.map(\.text), text, seed: UInt64(seed))
    }

    @Test(arguments: 0..<60)
    func ssmlChunksAreWellFormedFitAndReassemble(seed: Int) throws {
        var random = SeededGenerator(seed: UInt64(1_000 + seed))
        var inner = ""
        for _ in 0..<Int.random(in: 1...12, using: &random) {
            switch Int.random(in: 0..<6, using: &random) {
            case 0: inner += #"<break time="300ms"/>"#
            case 1: inner += "<p>" + SSML.escape("Kehre 7. Höhe & Blick!") + "</p>"
            case 2: inner += "Zur <emphasis level=\"strong\">" + SSML.escape("\"Pasterze\"") + "</emphasis> hinab. "
            case 3: inner += "<!-- note --> "
            default: inner += SSML.escape(NarrationGenerator.text(&random)) + " "
            }
        }
        let document = "<speak>\n" + inner + "\n</speak>\n"
        let limit: ChunkLimit =
            seed.isMultiple(of: 2)
            ? .utf8BytesAfterEscaping(Int.random(in: 120...800, using: &random))
            : .characters(Int.random(in: 100...600, using: &random))
        let chunks = try Chunker(limit: limit).chunks(for: Narration(text: document))
        var contents: [String] = []
        for chunk in chunks {
            #expect(chunk.isSSML)
            #expect(SSML.validate(chunk.text) == [], "seed \(seed): \(chunk.text.debugDescription)")
            #expect(ChunkInvariants.size(chunk.text, limit, isSSML: true) <= limit.value)
            #expect(chunk.text.hasPrefix("<speak>") && chunk.text.hasSuffix("</speak>"))
            contents.append(String(chunk.text.dropFirst("<speak>".count).dropLast("</speak>".count)))
        }
        ChunkInvariants.expectReassembles(contents, inner, seed: UInt64(seed))
    }

    @Test(arguments: 0..<60)
    func splitGivesSmallerPiecesOfTheSameText(seed: Int) throws {
        var random = SeededGenerator(seed: UInt64(5_000 + seed))
        let text = NarrationGenerator.text(&random)
        let chunker = Chunker(limit: .utf8BytesAfterEscaping(100_000))
        let chunk = try #require(try chunker.chunks(for: Narration(text: text)).first)
        guard let parts = chunker.split(chunk) else {
            #expect(chunk.text.count == 1, "seed \(seed): only a single grapheme may be left unsplit")
            return
        }
        #expect(parts.count >= 2)
        #expect(parts.allSatisfy { $0.text.utf8.count < chunk.text.utf8.count })
        ChunkInvariants.expectReassembles(parts.map(\.text), chunk.text, seed: UInt64(seed))
    }
}

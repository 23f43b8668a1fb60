/// How the endpoint measures a request: Google counts UTF-8 bytes of the
/// (SSML-escaped) input, OpenAI, Azure and ElevenLabs count characters,
/// Polly counts billed characters (SSML tags left out).
package enum ChunkLimit: Sendable, Hashable {
    case utf8BytesAfterEscaping(Int)
    case characters(Int)
    case billedCharacters(Int)

    /// The limit with `headroom` units kept free, never below 1.
    package func reduced(by headroom: Int) -> ChunkLimit {
        switch self {
        case .utf8BytesAfterEscaping(let n): return .utf8BytesAfterEscaping(Swift.max(1, n - headroom))
        case .characters(let n): return .characters(Swift.max(1, n - headroom))
        case .billedCharacters(let n): return .billedCharacters(Swift.max(1, n - headroom))
        }
    }

    package var value: Int {
        switch self {
        case .utf8BytesAfterEscaping(let n), .characters(let n), .billedCharacters(let n): return n
        }
    }
}

/// One request's worth of narration. `text` is what is sent: plain text, or
/// a complete `<speak>…</speak>` document when `isSSML`.
package struct Chunk: Sendable, Hashable, Codable {
    package var text: String
    package var isSSML: Bool

    package init(text: String, isSSML: Bool) {
        self.text = text
        self.isSSML = isSSML
    }

    /// Characters as billed: Unicode scalars of the text sent.
    package var characters: Int { text.unicodeScalars.count }
}

extension ChunkLimit {
    /// "bytes" or "characters", for messages.
    package var unitName: String {
        switch self {
        case .utf8BytesAfterEscaping: return "bytes"
        case .characters: return "characters"
        case .billedCharacters: return "billed characters"
        }
    }
}

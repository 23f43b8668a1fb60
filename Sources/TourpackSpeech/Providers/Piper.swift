import Foundation
package import TourpackCore
import TourpackHTTP

extension TTSAPI {
    /// Piper's HTTP server (`python3 -m piper.http_server`): `POST {endpoint}/synthesize`,
    /// JSON `{text, length_scale}`, a WAV back; no key, no SSML, no pitch.
    package static let piper = TTSAPI(PiperProvider())
}

/// Piper, run on our own machine: one sentence a request, no SSML (what it
/// cannot honour is refused when the build is planned; lexicons give
/// aliases), no pitch, counted in characters of the text sent in the
/// `local` tier (counted, never refused, nothing to pay). It reports no
/// times; one sentence a request places each caption exactly.
struct PiperProvider: HTTPSpeechProvider {
    var id: String { "piper" }
    var name: String { "Piper" }

    /// The most one Piper request carries. Piper is sent one sentence a
    /// request (`sendsSentencePerRequest`), so this only cuts a sentence
    /// too long to speak well in one breath: Piper runs each sentence as one
    /// ONNX inference, its memory and latency growing with the phonemes,
    /// and its voices were trained on utterances of a few seconds to about
    /// 15 s. 400 characters is about 25 s of speech at 14 characters a
    /// second, so a sentence is cut (at a clause, then a space) only where
    /// a reader would breathe anyway.
    static let sentenceLimit = 400

    func requestLimit(for voice: VoicePreset?) -> ChunkLimit { .characters(Self.sentenceLimit) }

    /// Piper reports no times, so each sentence is its own chunk: the join
    /// places each chunk's first audible sample exactly, so every caption
    /// starts where its sentence's speech starts, and a sentence edited asks
    /// again for that sentence alone. A `<break/>` in the narration cuts the
    /// chunk too, and becomes the join's pause.
    var sendsSentencePerRequest: Bool { true }
    /// One sentence a request: each start is the chunk's own, placed by the join.
    var reportsSentenceTimes: Bool { true }
    /// Piper answers at its voice's own rate, whatever is asked: no offered rates.
    var tiers: [PricingTier] { [.local] }
    /// What Piper is sent: the text, no markup.
    func requestUnits(for chunk: Chunk, billing: BillingRule) -> Int { BillingRule.textCharacters(chunk) }
    func phonemeRefusal(for voice: VoicePreset) -> String { "Piper (voice \(voice.name), which reads no SSML)" }
    /// Refused before anything is sent, rather than spoken as markup or dropped.
    func unsupportedMarkup(inSSML text: String) -> [String] { PiperText.unsupported(text) }
    var takesPitch: Bool { false }

    func dialect(for settings: TTSSettings) -> any TTSDialect { PiperDialect() }
}

/// Piper's own HTTP server (`python3 -m piper.http_server -m VOICE.onnx`,
/// from `piper-tts[http]`): `POST /synthesize` with a JSON body
/// `{"text", "length_scale"}`, answering a WAV at the voice's rate.
///
/// Piper takes no key, no SSML and no pitch. The text sent is
/// `PiperText.text(of:)`: markup left out, a `<sub>`'s alias in its place;
/// what Piper cannot honour is refused when the build is planned.
/// `speakingRate` becomes `length_scale`, its inverse (Piper's phoneme
/// length: 2 is half as fast). Each chunk is one sentence
/// (`TTSAPI.sendsSentencePerRequest`), so captions need no times from the
/// answer: the chunk's one sentence starts at its first audible sample.
///
/// The answer goes through `WAVStreamDecoder`, the OpenAI dialect's: a body
/// cut short, or not a WAV (Flask's HTML error page), is a retryable fault.
/// Flask labels the WAV `text/html`, so the content type says nothing here.
/// An error is Flask's HTML page: a 500 for a failed synthesis, which is
/// retried as any 5xx is.
struct PiperDialect: TTSDialect {
    func path(for request: SynthesisRequest) -> String { "/synthesize" }

    func headers(apiKey: APIKey?) -> [(name: String, value: String)] {
        [(name: "Content-Type", value: "application/json")]
    }

    struct Body: Encodable {
        var text: String
        var lengthScale: Double?

        enum CodingKeys: String, CodingKey {
            case text
            case lengthScale = "length_scale"
        }
    }

    /// `length_scale` for a speaking rate; nil at 1, so the voice's own default stands.
    static func lengthScale(speakingRate: Double) -> Double? {
        speakingRate == 1 ? nil : 1 / speakingRate
    }

    func body(for request: SynthesisRequest, settings: TTSSettings) throws -> [UInt8] {
        let body = Body(text: PiperText.text(of: request.chunk), lengthScale: Self.lengthScale(speakingRate: request.voice.speakingRate))
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return Array(try encoder.encode(body))
    }

    func answerDecoder(for request: SynthesisRequest, settings: TTSSettings) -> any AnswerDecoder {
        PiperAnswerDecoder(silentStarts: Self.silentStarts(request))
    }

    /// How many later sentence starts the request names that have nothing
    /// spoken after them (a `<break/>` the chunker kept at the end of the
    /// sentence before it): they start no caption. Nil when one of them is
    /// followed by speech (a chunk of several sentences), or when no times
    /// are asked for.
    static func silentStarts(_ request: SynthesisRequest) -> Int? {
        guard let boundaries = request.sentenceBoundaries else { return nil }
        let utf8 = Array(request.chunk.text.utf8)
        for boundary in boundaries {
            guard boundary >= 0, boundary <= utf8.count else { return nil }
            let rest = String(decoding: utf8[boundary...], as: UTF8.self)
            let silent = request.chunk.isSSML ? SSML.hasNothingToSpeak("<speak>" + rest) : rest.allSatisfy(\.isWhitespace)
            guard silent else { return nil }
        }
        return boundaries.count
    }
}

/// Piper's WAV, decoded by the shared `WAVStreamDecoder`. A chunk that holds
/// one spoken sentence (every Piper chunk the chunker cuts, see
/// `TTSAPI.sendsSentencePerRequest`) reports that sentence's start as the
/// answer's own start, so its caption is placed by the join, exactly; a
/// silent start after it (a trailing `<break/>`) is placed at the answer's
/// end, where it starts no caption. A chunk of several spoken sentences (a
/// server-made split) reports none, and its captions are estimated.
struct PiperAnswerDecoder: AnswerDecoder {
    var wav = WAVStreamDecoder()
    /// `PiperDialect.silentStarts`: nil when the chunk holds more than one spoken sentence.
    let silentStarts: Int?
    private var samples = 0
    private var rate = 0

    init(silentStarts: Int?) { self.silentStarts = silentStarts }

    mutating func feed(_ bytes: UnsafeRawBufferPointer, emit: (UnsafeBufferPointer<Int16>, Int) throws -> Void) throws {
        var counted = 0
        var seenRate = rate
        try wav.feed(bytes) { block, blockRate in
            counted += block.count
            seenRate = blockRate
            try emit(block, blockRate)
        }
        samples += counted
        rate = seenRate
    }

    mutating func finish() throws { try wav.finish() }

    var sentenceTimes: [Double]? {
        guard let silentStarts else { return nil }
        let end = rate > 0 ? Double(samples) / Double(rate) : 0
        return [0] + Array(repeating: end, count: silentStarts)
    }
}

import Foundation
import TourpackCore
import TourpackHTTP

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
        PiperAnswerDecoder(oneSentence: request.sentenceBoundaries?.isEmpty == true)
    }
}

/// Piper's WAV, decoded by the shared `WAVStreamDecoder`. A chunk that holds
/// one sentence (every Piper chunk the chunker cuts, see
/// `TTSAPI.sendsSentencePerRequest`) reports that sentence's start as the
/// answer's own start, so its caption is placed by the join, exactly; a
/// chunk of several sentences (a server-made split) reports none, and its
/// captions are estimated.
struct PiperAnswerDecoder: AnswerDecoder {
    var wav = WAVStreamDecoder()
    let oneSentence: Bool

    init(oneSentence: Bool) { self.oneSentence = oneSentence }

    mutating func feed(_ bytes: UnsafeRawBufferPointer, emit: (UnsafeBufferPointer<Int16>, Int) throws -> Void) throws {
        try wav.feed(bytes, emit: emit)
    }

    mutating func finish() throws { try wav.finish() }

    var sentenceTimes: [Double]? { oneSentence ? [0] : nil }
}

import Foundation
package import TourpackCore
import TourpackHTTP

extension TTSAPI {
    /// Azure Speech: `POST {endpoint}/cognitiveservices/v1`, SSML body, key in `Ocp-Apim-Subscription-Key`.
    package static let azure = TTSAPI(AzureProvider())
}

/// Azure Speech: 5,000 characters a request (far inside its 10-minute
/// audio cap and 64 KB body), SSML read, billed on the SSML inside
/// `<voice>`, raw PCM at its rates, no sentence times.
struct AzureProvider: HTTPSpeechProvider {
    var id: String { "azure" }
    var name: String { "Azure" }

    func requestLimit(for voice: VoicePreset?) -> ChunkLimit { .characters(5000) }
    var offeredSampleRates: [Int]? { [8000, 16_000, 22_050, 24_000, 44_100, 48_000] }
    var reportsSentenceTimes: Bool { false }
    var tiers: [PricingTier] { [.neural, .local] }
    var readsPhonemes: Bool { true }

    /// Characters of the SSML inside `<voice>` (markup included, the
    /// `<speak>` and `<voice>` elements not), a CJK ideograph or kana counting two.
    func requestUnits(for chunk: Chunk, billing: BillingRule) -> Int {
        let inner = AzureSSML.voiceContent(chunk, speakingRate: billing.speakingRate, pitch: billing.pitch)
        return inner.unicodeScalars.reduce(0) { $0 + (BillingRule.isDoubleWidth($1) ? 2 : 1) }
    }

    func dialect(for settings: TTSSettings) -> any TTSDialect { AzureDialect(rate: settings.requestedSampleRateHz) }
}

/// Azure Speech REST: `POST /cognitiveservices/v1` with an SSML body
/// naming the voice, the key in `Ocp-Apim-Subscription-Key`, raw 16-bit
/// mono PCM asked for in `X-Microsoft-OutputFormat`.
///
/// Reference: https://learn.microsoft.com/azure/ai-services/speech-service/rest-text-to-speech
struct AzureDialect: TTSDialect {
    /// The raw PCM rate asked for in `X-Microsoft-OutputFormat`.
    let rate: Int

    func path(for request: SynthesisRequest) -> String { "/cognitiveservices/v1" }

    func headers(apiKey: APIKey?) -> [(name: String, value: String)] {
        var headers = [
            (name: "Content-Type", value: "application/ssml+xml"),
            (name: "X-Microsoft-OutputFormat", value: Self.outputFormat(rate: rate)),
            (name: "User-Agent", value: "tourpack"),
        ]
        if let apiKey { headers.append((name: "Ocp-Apim-Subscription-Key", value: apiKey.value)) }
        return headers
    }

    /// `X-Microsoft-OutputFormat` for a raw PCM rate.
    static func outputFormat(rate: Int) -> String {
        switch rate {
        case 8000: return "raw-8khz-16bit-mono-pcm"
        case 16_000: return "raw-16khz-16bit-mono-pcm"
        case 22_050: return "raw-22050hz-16bit-mono-pcm"
        case 44_100: return "raw-44100hz-16bit-mono-pcm"
        case 48_000: return "raw-48khz-16bit-mono-pcm"
        default: return "raw-24khz-16bit-mono-pcm"
        }
    }

    func body(for request: SynthesisRequest, settings: TTSSettings) throws -> [UInt8] {
        Array(AzureSSML.document(request.chunk, voice: request.voice).utf8)
    }

    func answerDecoder(for request: SynthesisRequest, settings: TTSSettings) -> any AnswerDecoder { RawPCMDecoder(rate: rate) }

    func accepts(contentType: String?) -> Bool { RawPCMDecoder.isAudio(contentType) }
}

/// The SSML Azure receives: a `<voice>` in a `<speak>`, with the chunk
/// (plain text escaped, or an SSML document's content) inside, wrapped in
/// `<prosody>` when the voice's rate or pitch is not the default. Shared by
/// the request builder and `BillingRule`, since Azure bills the markup
/// inside `<voice>`.
enum AzureSSML {
    /// What goes inside `<voice>`.
    static func voiceContent(_ chunk: Chunk, speakingRate: Double, pitch: Double) -> String {
        let inner = chunk.isSSML ? BillingRule.innerSSML(chunk.text) : SSML.escape(chunk.text)
        guard speakingRate != 1 || pitch != 0 else { return inner }
        var attributes = ""
        if speakingRate != 1 { attributes += " rate=\"\(speakingRate.compactText)\"" }
        if pitch != 0 { attributes += " pitch=\"\(pitch > 0 ? "+" : "")\(pitch.compactText)st\"" }
        return "<prosody\(attributes)>\(inner)</prosody>"
    }

    /// The whole request body.
    static func document(_ chunk: Chunk, voice: VoicePreset) -> String {
        let language = SSML.escape(voice.languageCode)
        return "<speak version=\"1.0\" xmlns=\"http://www.w3.org/2001/10/synthesis\" xml:lang=\"\(language)\">"
            + "<voice name=\"\(SSML.escape(voice.name))\">"
            + voiceContent(chunk, speakingRate: voice.speakingRate, pitch: voice.pitch) + "</voice></speak>"
    }
}

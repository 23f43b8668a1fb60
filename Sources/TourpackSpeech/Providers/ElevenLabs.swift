import Foundation
package import TourpackCore
import TourpackHTTP

extension TTSAPI {
    /// ElevenLabs: `POST {endpoint}/v1/text-to-speech/{voice_id}`, key in `xi-api-key`.
    package static let elevenlabs = TTSAPI(ElevenLabsProvider())
}

/// ElevenLabs: the model's character limit a request, no SSML (markup is
/// dropped, lexicons give aliases), billed in credits (one a character,
/// half for Flash and Turbo models), raw PCM at its rates, sentences timed
/// by `with-timestamps`' character alignment at no extra cost.
struct ElevenLabsProvider: HTTPSpeechProvider {
    var id: String { "elevenlabs" }
    var name: String { "ElevenLabs" }

    /// The model's character limit (`ElevenLabsModel.characterLimits`).
    func requestLimit(for voice: VoicePreset?) -> ChunkLimit {
        let model = voice?.elevenLabsModel ?? ElevenLabsModel.defaultID
        return .characters(ElevenLabsModel.characterLimits[model] ?? 5000)
    }

    var offeredSampleRates: [Int]? { [8000, 16_000, 22_050, 24_000, 32_000, 44_100, 48_000] }
    var reportsSentenceTimes: Bool { true }
    var tiers: [PricingTier] { [.fullCredit, .halfCredit, .local] }
    func billingUnit(for tier: PricingTier) -> String { tier == .local ? "characters" : "credits" }

    /// One credit a character of the text sent, half a character rounded
    /// up per request for Flash and Turbo models.
    func requestUnits(for chunk: Chunk, billing: BillingRule) -> Int {
        let characters = chunk.isSSML ? BillingRule.textCharacters(chunk) : chunk.characters
        return billing.tier == .halfCredit ? (characters + 1) / 2 : characters
    }

    func phonemeRefusal(for voice: VoicePreset) -> String {
        "ElevenLabs (model \(voice.elevenLabsModel), which reads no phoneme tags)"
    }

    func ownFields(of voice: VoicePreset) -> [(field: String, phrase: String)] {
        var fields: [(field: String, phrase: String)] = []
        if voice.modelId != nil { fields.append((field: "modelId", phrase: "modelId")) }
        if voice.voiceSettings != nil { fields.append((field: "voiceSettings", phrase: "voiceSettings")) }
        return fields
    }

    func checkOwnFields(of voice: VoicePreset, displayName: String, into diagnostics: inout DiagnosticCollector) {
        if let model = voice.modelId, ElevenLabsModel.characterLimits[model] == nil {
            diagnostics.error(
                displayName, "modelId",
                "'\(model)' is not an ElevenLabs model tourpack knows the limit of: "
                    + ElevenLabsModel.characterLimits.keys.sorted().joined(separator: ", "))
        }
    }

    /// ElevenLabs' speed is 0.7...1.2, and a model bills in one credit class.
    func checkVoice(_ voice: VoicePreset, displayName: String, into diagnostics: inout DiagnosticCollector) {
        if !(0.7...1.2).contains(voice.speakingRate) {
            diagnostics.error(
                displayName, "speakingRate", "ElevenLabs speaks at 0.7...1.2 (its speed); \(voice.speakingRate) is out of range")
        }
        if voice.tier != .local {
            let expected = ElevenLabsModel.tier(of: voice.elevenLabsModel)
            if voice.tier != expected {
                diagnostics.error(
                    displayName, "tier",
                    "model \(voice.elevenLabsModel) is billed in the \(expected.rawValue) class, not \(voice.tier.rawValue)")
            }
        }
    }

    func dialect(for settings: TTSSettings) -> any TTSDialect { ElevenLabsDialect() }
}

/// ElevenLabs `POST /v1/text-to-speech/{voice_id}?output_format=pcm_<rate>`,
/// key in `xi-api-key`, `model_id` and `voice_settings` from the preset,
/// and the neighbouring chunks' text in `previous_text` and `next_text` so
/// the prosody flows across chunk seams. Answers raw 16-bit mono PCM.
///
/// With sentence boundaries (captions), the same body goes to
/// `/v1/text-to-speech/{voice_id}/with-timestamps`, which answers JSON:
/// the PCM base64-encoded in `audio_base64` and each character's start
/// time in `alignment`.
///
/// Reference: https://elevenlabs.io/docs/api-reference/text-to-speech/convert
/// and https://elevenlabs.io/docs/api-reference/text-to-speech/convert-with-timestamps
package struct ElevenLabsDialect: TTSDialect {
    func path(for request: SynthesisRequest) -> String {
        let id = request.voice.name.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(["/"])) ?? request.voice.name
        let timed = request.sentenceBoundaries == nil ? "" : "/with-timestamps"
        return "/v1/text-to-speech/\(id)\(timed)?output_format=pcm_\(Self.rate(request))"
    }

    /// The rate the query names; the request carries it so `path` needs no settings.
    private static func rate(_ request: SynthesisRequest) -> Int {
        TTSSettings(api: .elevenlabs, sampleRateHz: request.sampleRateHz).requestedSampleRateHz
    }

    func headers(apiKey: APIKey?) -> [(name: String, value: String)] {
        var headers = [(name: "Content-Type", value: "application/json")]
        if let apiKey { headers.append((name: "xi-api-key", value: apiKey.value)) }
        return headers
    }

    struct Body: Encodable {
        struct Settings: Encodable {
            var stability: Double?
            var similarityBoost: Double?
            var style: Double?
            var useSpeakerBoost: Bool?
            var speed: Double?

            enum CodingKeys: String, CodingKey {
                case stability, style, speed
                case similarityBoost = "similarity_boost"
                case useSpeakerBoost = "use_speaker_boost"
            }
        }
        var text: String
        var modelId: String
        var voiceSettings: Settings?
        var previousText: String?
        var nextText: String?

        enum CodingKeys: String, CodingKey {
            case text
            case modelId = "model_id"
            case voiceSettings = "voice_settings"
            case previousText = "previous_text"
            case nextText = "next_text"
        }
    }

    func body(for request: SynthesisRequest, settings: TTSSettings) throws -> [UInt8] {
        let voice = request.voice
        let given = voice.voiceSettings
        var voiceSettings: Body.Settings?
        if given != nil || voice.speakingRate != 1 {
            voiceSettings = .init(
                stability: given?.stability, similarityBoost: given?.similarityBoost, style: given?.style,
                useSpeakerBoost: given?.useSpeakerBoost, speed: voice.speakingRate == 1 ? nil : voice.speakingRate)
        }
        let body = Body(
            text: request.chunk.plainText, modelId: voice.elevenLabsModel, voiceSettings: voiceSettings,
            previousText: request.previousText, nextText: request.nextText)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return Array(try encoder.encode(body))
    }

    func answerDecoder(for request: SynthesisRequest, settings: TTSSettings) -> any AnswerDecoder {
        guard let boundaries = request.sentenceBoundaries else { return RawPCMDecoder(rate: Self.rate(request)) }
        let sent = request.chunk.plainText
        return ElevenLabsTimestampsDecoder(
            rate: Self.rate(request), sent: sent,
            starts: SentenceTimings.elevenLabsStarts(request.chunk, boundaries: boundaries, sent: sent))
    }

    func accepts(contentType: String?) -> Bool { RawPCMDecoder.isAudio(contentType) }

    /// `with-timestamps` answers JSON; the audio path, audio.
    func accepts(contentType: String?, for request: SynthesisRequest) -> Bool {
        guard request.sentenceBoundaries != nil else { return accepts(contentType: contentType) }
        return contentType.map { $0.lowercased().hasPrefix("application/json") } ?? true
    }

    func classify(status: Int, headers: [String: String], body: [UInt8], scrub: (String) -> String) -> ErrorAnswer {
        let message = TTSErrorBody.message(from: body, scrub: scrub)
        if message.contains("(quota_exceeded)") { return .final(message) }
        switch status {
        case 429, 500, 502, 503, 504: return .retry(message)
        case 401, 403: return .auth(message)
        default:
            return TTSErrorBody.isInputTooLong(status: status, message: message) ? .tooLong(message) : .final(message)
        }
    }
}

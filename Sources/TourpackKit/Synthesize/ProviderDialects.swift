import Foundation
package import TourpackCore
import TourpackHTTP

/// Amazon Polly `SynthesizeSpeech`: `POST /v1/speech` with a JSON body,
/// signed with SigV4 for service `polly` (by libcurl, from the key pair;
/// see `SynthesisClient`), answering raw 16-bit mono PCM (`audio/pcm`)
/// at 8 or 16 kHz.
///
/// With sentence boundaries (captions), a second request for the same
/// text, voice and engine asks for `OutputFormat: json` with
/// `SpeechMarkTypes: ["sentence"]` once the audio came back (Polly gives
/// speech marks or audio, never both in one answer); Polly bills it as it
/// bills the audio.
///
/// Reference: https://docs.aws.amazon.com/polly/latest/dg/API_SynthesizeSpeech.html
/// and https://docs.aws.amazon.com/polly/latest/dg/output.html
struct PollyDialect: TTSDialect, TimingFollowUp {
    func path(for request: SynthesisRequest) -> String { "/v1/speech" }

    func headers(apiKey: APIKey?) -> [(name: String, value: String)] {
        [(name: "Content-Type", value: "application/json")]
    }

    struct Body: Encodable {
        var engine: String
        var languageCode: String
        var outputFormat = "pcm"
        var sampleRate: String?
        var speechMarkTypes: [String]?
        var text: String
        var textType: String
        var voiceId: String

        /// Polly's members are UpperCamelCase.
        enum CodingKeys: String, CodingKey {
            case engine = "Engine", languageCode = "LanguageCode", outputFormat = "OutputFormat", sampleRate = "SampleRate"
            case speechMarkTypes = "SpeechMarkTypes", text = "Text", textType = "TextType", voiceId = "VoiceId"
        }
    }

    /// The text as Polly is sent it, and where an offset in `chunk.text`
    /// lands in it (speech marks count UTF-8 bytes of the text sent).
    static func sentText(for request: SynthesisRequest) -> (text: String, isSSML: Bool, offset: (Int) -> Int) {
        let voice = request.voice
        let chunk = request.chunk
        // Polly takes its rate as SSML prosody; the tags are not billed.
        guard voice.speakingRate != 1 else { return (chunk.text, chunk.isSSML, { $0 }) }
        let prefix = "<speak><prosody rate=\"\(Int((voice.speakingRate * 100).rounded()))%\">"
        let inner: String
        let offset: (Int) -> Int
        if chunk.isSSML {
            inner = BillingRule.innerSSML(chunk.text)
            let contentStart = SentenceTimings.rootContent(chunk.text)?.lowerBound ?? 0
            offset = { prefix.utf8.count + $0 - contentStart }
        } else {
            inner = SSML.escape(chunk.text)
            let utf8 = Array(chunk.text.utf8)
            offset = { prefix.utf8.count + SSML.escapedUTF8Count(String(decoding: utf8.prefix($0), as: UTF8.self).unicodeScalars) }
        }
        return (prefix + inner + "</prosody></speak>", true, offset)
    }

    func body(for request: SynthesisRequest, settings: TTSSettings) throws -> [UInt8] {
        try encode(request, sampleRate: String(settings.requestedSampleRateHz), speechMarkTypes: nil, outputFormat: "pcm")
    }

    private func encode(_ request: SynthesisRequest, sampleRate: String?, speechMarkTypes: [String]?, outputFormat: String) throws
        -> [UInt8]
    {
        let voice = request.voice
        let sent = Self.sentText(for: request)
        let body = Body(
            engine: voice.pollyEngine, languageCode: voice.languageCode, outputFormat: outputFormat, sampleRate: sampleRate,
            speechMarkTypes: speechMarkTypes, text: sent.text, textType: sent.isSSML ? "ssml" : "text", voiceId: voice.name)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return Array(try encoder.encode(body))
    }

    /// The speech marks request: the audio's body with `OutputFormat: json`,
    /// `SpeechMarkTypes: ["sentence"]` and no `SampleRate` (audio only).
    func timingBody(for request: SynthesisRequest, settings: TTSSettings) throws -> [UInt8]? {
        guard request.sentenceBoundaries != nil else { return nil }
        return try encode(request, sampleRate: nil, speechMarkTypes: ["sentence"], outputFormat: "json")
    }

    /// Polly streams marks as `application/x-json-stream`.
    func acceptsTiming(contentType: String?) -> Bool {
        guard let type = contentType?.lowercased() else { return true }
        return type.hasPrefix("application/x-json-stream") || type.hasPrefix("application/json")
    }

    func sentenceTimes(fromTimingAnswer body: [UInt8], for request: SynthesisRequest) throws(MalformedSpeechMarks) -> [Double]? {
        guard let boundaries = request.sentenceBoundaries,
            let (starts, end) = SentenceTimings.sentenceStarts(request.chunk, boundaries: boundaries)
        else { return nil }
        let offset = Self.sentText(for: request).offset
        return try SentenceTimings.pollyTimes(body, targets: starts.map(offset), end: offset(end))
    }

    func answerDecoder(for request: SynthesisRequest, settings: TTSSettings) -> any AnswerDecoder {
        RawPCMDecoder(rate: settings.requestedSampleRateHz)
    }

    func accepts(contentType: String?) -> Bool { RawPCMDecoder.isAudio(contentType) }

    /// Polly names the error in `x-amzn-ErrorType` (and `__type`); throttling is a 400.
    func classify(status: Int, headers: [String: String], body: [UInt8], scrub: (String) -> String) -> ErrorAnswer {
        let message = TTSErrorBody.message(from: body, scrub: scrub)
        let kind = Self.errorType(headers: headers, body: body)
        let shown = kind.map { message.contains($0) ? message : "\(message) (\($0))" } ?? message
        switch kind {
        case "ThrottlingException", "ServiceFailureException", "ServiceUnavailableException", "RequestTimeout":
            return .retry(shown)
        case "TextLengthExceededException":
            return .tooLong(shown)
        case "UnrecognizedClientException", "InvalidSignatureException", "IncompleteSignature", "MissingAuthenticationToken",
            "AccessDeniedException", "ExpiredTokenException", "SignatureDoesNotMatch", "InvalidClientTokenId":
            return .auth(shown)
        default:
            switch status {
            case 429, 500, 502, 503, 504: return .retry(shown)
            case 401, 403: return .auth(shown)
            default: return .final(shown)
            }
        }
    }

    /// `ThrottlingException` from `ThrottlingException:http://…` or `com.amazonaws.polly#ThrottlingException`.
    static func errorType(headers: [String: String], body: [UInt8]) -> String? {
        var raw = headers["x-amzn-errortype"]
        if raw == nil, let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any] {
            raw = (object["__type"] as? String) ?? (object["code"] as? String)
        }
        guard var kind = raw else { return nil }
        if let colon = kind.firstIndex(of: ":") { kind = String(kind[..<colon]) }
        if let hash = kind.lastIndex(of: "#") { kind = String(kind[kind.index(after: hash)...]) }
        return kind
    }
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
            text: Self.plain(request.chunk), modelId: voice.elevenLabsModel, voiceSettings: voiceSettings,
            previousText: request.previousText, nextText: request.nextText)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return Array(try encoder.encode(body))
    }

    package static func plain(_ chunk: Chunk) -> String {
        chunk.isSSML ? OpenAIDialect.plainText(fromSSML: chunk.text) : chunk.text
    }

    func answerDecoder(for request: SynthesisRequest, settings: TTSSettings) -> any AnswerDecoder {
        guard let boundaries = request.sentenceBoundaries else { return RawPCMDecoder(rate: Self.rate(request)) }
        let sent = Self.plain(request.chunk)
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

/// Headerless 16-bit little-endian mono PCM at a rate the request chose.
/// A body that ends inside a sample was cut short.
package struct RawPCMDecoder: AnswerDecoder {
    let rate: Int
    private var odd: UInt8?
    private var block: [Int16] = []

    package init(rate: Int) { self.rate = rate }

    package mutating func feed(_ bytes: UnsafeRawBufferPointer, emit: (UnsafeBufferPointer<Int16>, Int) throws -> Void) throws {
        guard !bytes.isEmpty else { return }
        block.removeAll(keepingCapacity: true)
        var index = 0
        if let first = odd {
            block.append(Int16(bitPattern: UInt16(first) | UInt16(bytes[0]) << 8))
            odd = nil
            index = 1
        }
        while index + 1 < bytes.count {
            block.append(Int16(bitPattern: UInt16(bytes[index]) | UInt16(bytes[index + 1]) << 8))
            index += 2
        }
        if index < bytes.count { odd = bytes[index] }
        try block.withUnsafeBufferPointer { try emit($0, rate) }
    }

    package mutating func finish() throws {
        if odd != nil { throw UndecodableBody(reason: "the PCM body ends inside a sample: it was cut short") }
    }

    /// Audio, or no content type at all; not a text, JSON or HTML page.
    static func isAudio(_ contentType: String?) -> Bool {
        guard let type = contentType?.lowercased() else { return true }
        return type.hasPrefix("audio/") || type.hasPrefix("application/octet-stream")
    }
}

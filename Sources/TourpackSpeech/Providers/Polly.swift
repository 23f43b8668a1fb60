import Foundation
package import TourpackCore
import TourpackHTTP

extension TTSAPI {
    /// Amazon Polly `SynthesizeSpeech`: `POST {endpoint}/v1/speech`, signed with SigV4 (service `polly`).
    package static let polly = TTSAPI(PollyProvider())
}

/// Amazon Polly: 3,000 billed characters a request (SSML tags not
/// counted), SSML read, billed per engine, raw PCM at 8 or 16 kHz, signed
/// with an AWS key pair; sentences timed by a second request for speech
/// marks, billed as the first.
struct PollyProvider: HTTPSpeechProvider {
    var id: String { "polly" }
    var name: String { "Polly" }

    func requestLimit(for voice: VoicePreset?) -> ChunkLimit { .billedCharacters(3000) }
    var offeredSampleRates: [Int]? { [8000, 16_000] }
    var reportsSentenceTimes: Bool { true }
    var tiers: [PricingTier] { [.standard, .neural, .longForm, .generative, .local] }
    var readsPhonemes: Bool { true }
    var credentials: SpeechCredentials { .sigV4(service: "polly") }

    /// Two requests with timings: the audio, then its speech marks.
    func requestsPerChunk(timings: Bool) -> Int { timings ? 2 : 1 }

    /// Characters of the text, SSML tags not counted.
    func requestUnits(for chunk: Chunk, billing: BillingRule) -> Int { BillingRule.textCharacters(chunk) }

    func ownFields(of voice: VoicePreset) -> [(field: String, phrase: String)] {
        voice.engine == nil ? [] : [(field: "engine", phrase: "an engine")]
    }

    func checkOwnFields(of voice: VoicePreset, displayName: String, into diagnostics: inout DiagnosticCollector) {
        if let engine = voice.engine, !PollyEngine.all.contains(engine) {
            diagnostics.error(displayName, "engine", "'\(engine)' is not one of \(PollyEngine.all.joined(separator: ", "))")
        }
    }

    /// Polly bills per engine: a voice's engine and tier agree.
    func checkVoice(_ voice: VoicePreset, displayName: String, into diagnostics: inout DiagnosticCollector) {
        if let engine = voice.engine, voice.tier != .local, voice.tier.rawValue != engine {
            diagnostics.error(
                displayName, "tier", "Polly bills per engine: the tier of engine \(engine) is \(engine), not \(voice.tier.rawValue)")
        }
    }

    func dialect(for settings: TTSSettings) -> any TTSDialect { PollyDialect() }
}

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

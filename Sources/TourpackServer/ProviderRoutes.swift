import Foundation
import HTTPTypes
import Hummingbird
import TourpackAudio
import TourpackCore

/// Amazon Polly, Azure Speech and ElevenLabs, answered as each service
/// answers what its clients send, from the local voice. Faults come from
/// the same dice as Google's and OpenAI's routes, shaped as each provider
/// shapes its errors (Polly's throttling is a 400 `ThrottlingException`).
///
/// Polly checks the SigV4 `Authorization` header's form and scope
/// (`…/<region>/polly/aws4_request`) and, with a required key, the access
/// key ID in it; it does not recompute the signature.
extension SynthesisRoutes {
    /// Polly's limits on one request: billed characters (SSML tags not
    /// counted) and all characters.
    static let pollyBilledLimit = 3000
    static let pollyTotalLimit = 6000
    static let pollySampleRates = ["pcm": ["8000", "16000"], "mp3": ["8000", "16000", "22050", "24000"]]

    // MARK: Amazon Polly

    struct PollyRequest: Decodable {
        var engine: String?
        var languageCode: String?
        var outputFormat: String?
        var sampleRate: String?
        var text: String?
        var textType: String?
        var voiceId: String?
        /// With `OutputFormat: json`: which speech marks to answer instead of audio.
        var speechMarkTypes: [String]?

        enum CodingKeys: String, CodingKey {
            case engine = "Engine", languageCode = "LanguageCode", outputFormat = "OutputFormat", sampleRate = "SampleRate"
            case text = "Text", textType = "TextType", voiceId = "VoiceId", speechMarkTypes = "SpeechMarkTypes"
        }
    }

    /// The error Polly sends for a missing, malformed or foreign SigV4
    /// header, or for another access key ID; nil when the caller may pass.
    func pollyRefusal(_ request: Request) -> Response? {
        guard let authorization = request.headers[.authorization], authorization.hasPrefix("AWS4-HMAC-SHA256 ") else {
            return (ErrorBody.polly(403, "MissingAuthenticationTokenException", "Missing Authentication Token"))
        }
        guard request.headers[HTTPField.Name("x-amz-date")!] != nil else {
            return
                (ErrorBody.polly(
                    400, "IncompleteSignatureException",
                    "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header."))
        }
        let fields = authorization.dropFirst("AWS4-HMAC-SHA256 ".count).split(separator: ",").map {
            $0.trimmingCharacters(in: .whitespaces)
        }
        guard let credential = fields.first(where: { $0.hasPrefix("Credential=") })?.dropFirst("Credential=".count),
            fields.contains(where: { $0.hasPrefix("SignedHeaders=") }), fields.contains(where: { $0.hasPrefix("Signature=") })
        else {
            return
                (ErrorBody.polly(
                    400, "IncompleteSignatureException", "Authorization header requires 'Credential', 'SignedHeaders' and 'Signature'."))
        }
        let scope = credential.split(separator: "/")
        guard scope.count == 5, scope[4] == "aws4_request" else {
            return (ErrorBody.polly(400, "IncompleteSignatureException", "Credential should be scoped to a valid region."))
        }
        guard scope[3] == "polly" else {
            return (ErrorBody.polly(403, "InvalidSignatureException", "Credential should be scoped to correct service: 'polly'."))
        }
        if let requiredAPIKey, String(scope[0]) != requiredAPIKey {
            return (ErrorBody.polly(403, "UnrecognizedClientException", "The security token included in the request is invalid."))
        }
        return nil
    }

    func pollySpeech(_ request: Request) async throws -> Response {
        try await paced { try await pollyAnswer(request) }
    }

    private func pollyAnswer(_ request: Request) async throws -> Response {
        if let refusal = pollyRefusal(request) { return refusal }
        let body = try await request.body.collect(upTo: Self.maxBodyBytes)
        guard let parsed = try? JSONDecoder().decode(PollyRequest.self, from: Data(body.readableBytesView)) else {
            return ErrorBody.polly(400, "SerializationException", "Start of structure or map found where not expected.")
        }
        for (field, value) in [("OutputFormat", parsed.outputFormat), ("Text", parsed.text), ("VoiceId", parsed.voiceId)] where value == nil
        {
            return ErrorBody.polly(
                400, "ValidationException",
                "1 validation error detected: Value null at '\(field.prefix(1).lowercased() + field.dropFirst())' failed to satisfy constraint: Member must not be null"
            )
        }
        let text = parsed.text ?? ""
        stats.textArrived(text)
        let engine = parsed.engine ?? "standard"
        guard PollyEngine.all.contains(engine) else {
            return ErrorBody.polly(
                400, "ValidationException",
                "1 validation error detected: Value '\(engine)' at 'engine' failed to satisfy constraint: Member must satisfy enum value set: [standard, neural, long-form, generative]"
            )
        }
        let format = parsed.outputFormat ?? ""
        // json answers speech marks, not audio: no sample rate applies.
        guard let rates = format == "json" ? [] : Self.pollySampleRates[format] else {
            return ErrorBody.polly(
                400, "ValidationException",
                "1 validation error detected: Value '\(format)' at 'outputFormat' failed to satisfy constraint: Member must satisfy enum value set: [json, mp3, ogg_vorbis, pcm]"
            )
        }
        let rateText = parsed.sampleRate ?? (format == "pcm" ? "16000" : "22050")
        guard format == "json" || rates.contains(rateText), let sampleRate = Int(rateText) else {
            return ErrorBody.polly(
                400, "InvalidSampleRateException", "The specified sample rate \(rateText) is not valid for the \(format) output format.")
        }
        let textType = parsed.textType ?? "text"
        guard textType == "text" || textType == "ssml" else {
            return ErrorBody.polly(
                400, "ValidationException",
                "1 validation error detected: Value '\(textType)' at 'textType' failed to satisfy constraint: Member must satisfy enum value set: [ssml, text]"
            )
        }
        let markTypes = parsed.speechMarkTypes ?? []
        if let refusal = Self.speechMarksRefusal(markTypes, format: format, textType: textType) { return refusal }
        let isSSML = textType == "ssml"
        if isSSML, let problem = SSML.validate(text).first {
            return ErrorBody.polly(400, "InvalidSsmlException", "Invalid SSML request: \(problem)")
        }
        let billed = BillingRule.textCharacters(Chunk(text: text, isSSML: isSSML))
        guard billed <= Self.pollyBilledLimit, text.unicodeScalars.count <= Self.pollyTotalLimit else {
            return ErrorBody.polly(400, "TextLengthExceededException", "Maximum text length has been exceeded")
        }
        guard let speaker = try await voice.resolve(name: parsed.voiceId, languageCode: parsed.languageCode ?? "en-US") else {
            return ErrorBody.polly(400, "ValidationException", "Voice \(parsed.voiceId ?? "") is not available.")
        }
        if let refused = dice.plan.refuseText, text.contains(refused) {
            return ErrorBody.polly(400, "ValidationException", "Input refused: it contains \"\(refused)\" (injected permanent failure).")
        }
        if dice.holds(text) { return await hold(.polly) }
        let encoding: ResponseEncoding = format == "pcm" ? .pcm : .mp3(kbps: 48)
        var headers = HTTPFields()
        headers[HTTPField.Name("x-amzn-RequestCharacters")!] = String(billed)
        headers[HTTPField.Name("x-amzn-RequestId")!] = UUID().uuidString.lowercased()
        if format == "json" {
            // Speech marks bill like the audio; espeak's own rate needs no resampling.
            return try await answer(
                .polly, .pcm, text: text, billed: billed, headers: headers, envelope: Self.pollyMarksEnvelope(types: Set(markTypes))
            ) {
                try await voice.speakTimed(
                    text: text, isSSML: isSSML, voice: speaker, speakingRate: 1, pitchSemitones: 0, sampleRate: 22_050)
            }
        }
        return try await answer(.polly, encoding, text: text, billed: billed, headers: headers) {
            try await voice.speak(text: text, isSSML: isSSML, voice: speaker, speakingRate: 1, pitchSemitones: 0, sampleRate: sampleRate)
        }
    }

    /// Polly's `DescribeVoices` (`GET /v1/voices`, signed).
    func pollyVoices(_ request: Request) async throws -> Response {
        if let refusal = pollyRefusal(request) { return refusal }
        let voices = try await voice.engine.listVoices()
        let listed: [[String: Any]] = voices.map { voice in
            let language = LocalVoice.googleLanguageCode(voice.languages.first ?? "en")
            return [
                "Gender": voice.gender == 2 ? "Female" : "Male", "Id": Self.shortName(voice.identifier), "LanguageCode": language,
                "LanguageName": language, "Name": voice.name, "SupportedEngines": PollyEngine.all,
            ]
        }
        let data = try JSONSerialization.data(withJSONObject: ["Voices": listed], options: [.sortedKeys])
        return ErrorBody.json(.ok, Array(data))
    }

    // MARK: Azure Speech

    /// `X-Microsoft-OutputFormat` values this server answers, with the rate and whether a RIFF header comes first.
    static let azureFormats: [String: (rate: Int, riff: Bool)] = [
        "raw-8khz-16bit-mono-pcm": (8000, false), "raw-16khz-16bit-mono-pcm": (16_000, false),
        "raw-22050hz-16bit-mono-pcm": (22_050, false), "raw-24khz-16bit-mono-pcm": (24_000, false),
        "raw-44100hz-16bit-mono-pcm": (44_100, false), "raw-48khz-16bit-mono-pcm": (48_000, false),
        "riff-8khz-16bit-mono-pcm": (8000, true), "riff-16khz-16bit-mono-pcm": (16_000, true),
        "riff-22050hz-16bit-mono-pcm": (22_050, true), "riff-24khz-16bit-mono-pcm": (24_000, true),
        "riff-44100hz-16bit-mono-pcm": (44_100, true), "riff-48khz-16bit-mono-pcm": (48_000, true),
    ]
    static let azureMaxSSMLBytes = 64 * 1024

    func azureSpeech(_ request: Request) async throws -> Response {
        try await paced { try await azureAnswer(request) }
    }

    private func azureRefusal(_ request: Request) -> Response? {
        guard let requiredAPIKey else { return nil }
        let key = request.headers[HTTPField.Name("Ocp-Apim-Subscription-Key")!]
        guard key == requiredAPIKey else {
            return ErrorBody.azure(
                401,
                "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource."
            )
        }
        return nil
    }

    private func azureAnswer(_ request: Request) async throws -> Response {
        if let refusal = azureRefusal(request) { return refusal }
        guard let type = request.headers[.contentType], type.lowercased().hasPrefix("application/ssml+xml") else {
            return ErrorBody.azure(415, "Unsupported media type: the body must be application/ssml+xml.")
        }
        guard let formatName = request.headers[HTTPField.Name("X-Microsoft-OutputFormat")!],
            let format = Self.azureFormats[formatName.lowercased()]
        else {
            return ErrorBody.azure(400, "Unsupported or missing X-Microsoft-OutputFormat.")
        }
        let body = try await request.body.collect(upTo: Self.maxBodyBytes)
        guard body.readableBytes <= Self.azureMaxSSMLBytes else {
            return ErrorBody.azure(400, "The SSML is too long: \(body.readableBytes) bytes, at most \(Self.azureMaxSSMLBytes).")
        }
        guard let ssml = String(validating: Array(body.readableBytesView), as: UTF8.self) else {
            return ErrorBody.azure(400, "The request body is not UTF-8.")
        }
        guard let document = AzureDocument(ssml) else {
            return ErrorBody.azure(400, "Invalid SSML: expected <speak version xml:lang> holding one <voice name>.")
        }
        stats.textArrived(document.content)
        let inner = "<speak>\(document.content)</speak>"
        if let problem = SSML.validate(inner).first { return ErrorBody.azure(400, "Invalid SSML: \(problem)") }
        guard let speaker = try await voice.resolve(name: document.voiceName, languageCode: document.language) else {
            return ErrorBody.azure(400, "Unsupported voice \(document.voiceName).")
        }
        if let refused = dice.plan.refuseText, document.content.contains(refused) {
            return ErrorBody.azure(400, "Input refused: it contains \"\(refused)\" (injected permanent failure).")
        }
        if dice.holds(document.content) { return await hold(.azure) }
        let billed = document.content.unicodeScalars.reduce(0) { $0 + (Self.isCJK($1) ? 2 : 1) }
        return try await answer(.azure, format.riff ? .wav : .pcm, text: document.content, billed: billed) {
            try await voice.speak(
                text: inner, isSSML: true, voice: speaker, speakingRate: 1, pitchSemitones: 0, sampleRate: format.rate)
        }
    }

    /// Azure's `GET /cognitiveservices/voices/list`.
    func azureVoices(_ request: Request) async throws -> Response {
        if let refusal = azureRefusal(request) { return refusal }
        let voices = try await voice.engine.listVoices()
        let listed: [[String: Any]] = voices.map { voice in
            let locale = LocalVoice.googleLanguageCode(voice.languages.first ?? "en")
            return [
                "Name": "Microsoft Server Speech Text to Speech Voice (\(locale), \(voice.name))", "DisplayName": voice.name,
                "LocalName": voice.name, "ShortName": Self.shortName(voice.identifier), "Gender": voice.gender == 2 ? "Female" : "Male",
                "Locale": locale, "SampleRateHertz": "24000", "VoiceType": "Neural", "Status": "GA",
            ]
        }
        return ErrorBody.json(.ok, Array(try JSONSerialization.data(withJSONObject: listed, options: [.sortedKeys])))
    }

    static func isCJK(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x1100...0x11FF, 0x3040...0x30FF, 0x3400...0x4DBF, 0x4E00...0x9FFF, 0xAC00...0xD7AF, 0xF900...0xFAFF, 0x20000...0x2FA1F: true
        default: false
        }
    }

    // MARK: ElevenLabs

    struct ElevenLabsRequest: Decodable {
        struct Settings: Decodable {
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
        var text: String?
        var modelId: String?
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

    private func elevenLabsRefusal(_ request: Request) -> Response? {
        guard let requiredAPIKey else { return nil }
        guard let key = request.headers[HTTPField.Name("xi-api-key")!] else {
            return ErrorBody.elevenLabs(
                401, "needs_authorization", "Neither authorization header nor xi-api-key received, please provide one.")
        }
        guard key == requiredAPIKey else { return ErrorBody.elevenLabs(401, "invalid_api_key", "Invalid API key") }
        return nil
    }

    /// How an ElevenLabs route answers: the audio file (`/`, `/stream`) or
    /// JSON with each character's times (`/with-timestamps`, and
    /// `/stream/with-timestamps` as a newline-delimited stream of one chunk).
    enum ElevenLabsAnswer: Sendable { case audio, timestamps, streamedTimestamps }

    /// `POST /v1/text-to-speech/{voice_id}[/stream][/with-timestamps]`: one request body, answered as `shape` says.
    func elevenLabsSpeech(_ request: Request, voiceID: String, shape: ElevenLabsAnswer = .audio) async throws -> Response {
        try await paced { try await elevenLabsAnswer(request, voiceID: voiceID, shape: shape) }
    }

    private func elevenLabsAnswer(_ request: Request, voiceID: String, shape: ElevenLabsAnswer) async throws -> Response {
        if let refusal = elevenLabsRefusal(request) { return refusal }
        let formatName = request.uri.queryParameters.get("output_format") ?? "mp3_44100_128"
        let parts = formatName.split(separator: "_")
        guard parts.count >= 2, let rate = Int(parts[1]), parts[0] == "pcm" || parts[0] == "mp3",
            parts[0] == "mp3" || [8000, 16_000, 22_050, 24_000, 32_000, 44_100, 48_000].contains(rate)
        else {
            return ErrorBody.elevenLabsValidation(
                ["query", "output_format"], "Input should be a supported output format, such as pcm_24000")
        }
        let body = try await request.body.collect(upTo: Self.maxBodyBytes)
        guard let parsed = try? JSONDecoder().decode(ElevenLabsRequest.self, from: Data(body.readableBytesView)) else {
            return ErrorBody.elevenLabsValidation(["body"], "JSON decode error")
        }
        guard let text = parsed.text, !text.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
            return ErrorBody.elevenLabsValidation(["body", "text"], "Field required")
        }
        stats.textArrived(text)
        if parsed.previousText != nil || parsed.nextText != nil { stats.update { $0.requestsWithNeighbourText += 1 } }
        let model = parsed.modelId ?? ElevenLabsModel.defaultID
        guard let limit = ElevenLabsModel.characterLimits[model] else {
            return ErrorBody.elevenLabs(400, "model_not_found", "A model with model ID \(model) was not found.")
        }
        guard text.count <= limit else {
            return ErrorBody.elevenLabs(
                400, "max_character_limit_exceeded",
                "You are sending \(text.count) characters in a single request, which is over the maximum of \(limit) for \(model).")
        }
        let settings = parsed.voiceSettings
        for (name, value) in [
            ("stability", settings?.stability), ("similarity_boost", settings?.similarityBoost), ("style", settings?.style),
        ] {
            if let value, !(0...1).contains(value) {
                return ErrorBody.elevenLabsValidation(["body", "voice_settings", name], "Input should be less than or equal to 1")
            }
        }
        let speed = settings?.speed ?? 1
        guard (0.7...1.2).contains(speed) else {
            return ErrorBody.elevenLabsValidation(["body", "voice_settings", "speed"], "Input should be between 0.7 and 1.2")
        }
        guard let speaker = try await voice.resolve(name: voiceID, languageCode: "en-us") else {
            return ErrorBody.elevenLabs(404, "voice_not_found", "A voice with voice_id \(voiceID) was not found.")
        }
        if let refused = dice.plan.refuseText, text.contains(refused) {
            return ErrorBody.elevenLabs(
                400, "content_against_policy", "Input refused: it contains \"\(refused)\" (injected permanent failure).")
        }
        if dice.holds(text) { return await hold(.elevenlabs) }
        let characters = text.count
        let credits = ElevenLabsModel.tier(of: model) == .halfCredit ? (characters + 1) / 2 : characters
        var headers = HTTPFields()
        headers[HTTPField.Name("character-cost")!] = String(credits)
        headers[HTTPField.Name("request-id")!] = UUID().uuidString.lowercased()
        let encoding: ResponseEncoding = parts[0] == "pcm" ? .pcm : .mp3(kbps: 128)
        let sampleRate = parts[0] == "pcm" ? rate : 24_000
        if shape != .audio {
            let envelope = Self.elevenLabsTimestampsEnvelope(streamed: shape == .streamedTimestamps)
            return try await answer(.elevenlabs, encoding, text: text, billed: credits, headers: headers, envelope: envelope) {
                try await voice.speakTimed(
                    text: text, isSSML: false, voice: speaker, speakingRate: speed, pitchSemitones: 0, sampleRate: sampleRate)
            }
        }
        return try await answer(.elevenlabs, encoding, text: text, billed: credits, headers: headers) {
            try await voice.speak(text: text, isSSML: false, voice: speaker, speakingRate: speed, pitchSemitones: 0, sampleRate: sampleRate)
        }
    }

    /// ElevenLabs' `GET /v1/voices`.
    func elevenLabsVoices(_ request: Request) async throws -> Response {
        if let refusal = elevenLabsRefusal(request) { return refusal }
        let voices = try await voice.engine.listVoices()
        let listed: [[String: Any]] = voices.map { voice in
            [
                "voice_id": Self.shortName(voice.identifier), "name": voice.name, "category": "premade",
                "labels": ["language": voice.languages.first ?? "en"],
            ]
        }
        return ErrorBody.json(.ok, Array(try JSONSerialization.data(withJSONObject: ["voices": listed], options: [.sortedKeys])))
    }

    /// `GET /v1/voices` is Google's, Polly's and ElevenLabs' path: the caller's credentials say whose.
    func anyVoices(_ request: Request) async throws -> Response {
        if request.headers[.authorization]?.hasPrefix("AWS4-HMAC-SHA256") == true { return try await pollyVoices(request) }
        if request.headers[HTTPField.Name("xi-api-key")!] != nil { return try await elevenLabsVoices(request) }
        return try await listVoices(request)
    }

    /// `gmw/en-US` → `en-US`: an identifier without a slash, fit for a URL path.
    static func shortName(_ identifier: String) -> String {
        String(identifier.split(separator: "/").last ?? Substring(identifier))
    }
}

/// The parts of Azure's SSML body this server reads: the document's
/// language, the voice's name, and what the voice element holds.
struct AzureDocument {
    var language: String
    var voiceName: String
    var content: String

    init?(_ ssml: String) {
        guard let speakOpen = ssml.range(of: "<speak"), let speakEnd = ssml[speakOpen.upperBound...].firstIndex(of: ">") else { return nil }
        let speakTag = String(ssml[speakOpen.lowerBound...speakEnd])
        guard speakTag.contains("version="), let language = Self.attribute("xml:lang", in: speakTag) else { return nil }
        guard let voiceOpen = ssml.range(of: "<voice", range: speakEnd..<ssml.endIndex),
            let voiceEnd = ssml[voiceOpen.upperBound...].firstIndex(of: ">"),
            let voiceClose = ssml.range(of: "</voice>", options: .backwards), voiceClose.lowerBound > voiceEnd,
            ssml.range(of: "</speak>", options: .backwards).map({ $0.lowerBound >= voiceClose.upperBound }) == true
        else { return nil }
        let voiceTag = String(ssml[voiceOpen.lowerBound...voiceEnd])
        guard let name = Self.attribute("name", in: voiceTag), !name.isEmpty else { return nil }
        self.language = language
        voiceName = name
        content = String(ssml[ssml.index(after: voiceEnd)..<voiceClose.lowerBound])
    }

    static func attribute(_ name: String, in tag: String) -> String? {
        for quote in ["\"", "'"] {
            if let start = tag.range(of: " \(name)=\(quote)"), let end = tag[start.upperBound...].firstIndex(of: Character(quote)) {
                return String(tag[start.upperBound..<end])
            }
        }
        return nil
    }
}

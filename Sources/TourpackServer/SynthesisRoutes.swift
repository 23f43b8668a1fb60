import Foundation
import HTTPTypes
import Hummingbird
import TourpackAudio
import TourpackCore
import TourpackHTTP

/// Google's and OpenAI's synthesize endpoints and the voice list, with
/// faults on top (Polly, Azure and ElevenLabs are in `ProviderRoutes`, the
/// timing answers in `TimingRoutes`).
///
/// `POST /v1/text:synthesize` validates as Google does and answers Google's
/// JSON, and `POST /v1beta1/text:synthesize` adds `<mark>` timepoints;
/// `POST /v1/audio/speech` answers like OpenAI's endpoint. Both speak
/// every encoding their service offers (`ResponseEncoding`).
struct SynthesisRoutes: Sendable {
    let stats: ServerStats
    let dice: FaultDice
    let voice = LocalVoice()
    let defaultSampleRate: Int
    /// Google's per-request limit on input.text or input.ssml, in UTF-8 bytes (5000).
    let googleInputLimitBytes: Int
    let requiredAPIKey: String?
    /// OpenAI's limit on `input`, in characters.
    static let openAIInputLimitCharacters = 4096
    static let maxBodyBytes = 1 << 20

    enum Dialect { case google, openai, polly, azure, elevenlabs }

    // MARK: Google v1

    struct GoogleRequest: Decodable {
        struct Input: Decodable { var text: String?; var ssml: String? }
        struct Voice: Decodable { var languageCode: String?; var name: String? }
        struct AudioConfig: Decodable {
            var audioEncoding: String?
            var speakingRate: Double?
            var pitch: Double?
            var sampleRateHertz: Int?
        }
        var input: Input?
        var voice: Voice?
        var audioConfig: AudioConfig?
        /// v1beta1 only: `["SSML_MARK"]` asks for a timepoint per `<mark>`.
        var enableTimePointing: [String]?
    }

    /// `POST /v1/text:synthesize`.
    func googleSynthesize(_ request: Request) async throws -> Response {
        try await paced { try await googleAnswer(request, beta: false) }
    }

    /// `POST /v1beta1/text:synthesize`: v1's request and answer, plus
    /// `enableTimePointing` and, in the answer, `timepoints` and `audioConfig`.
    func googleBetaSynthesize(_ request: Request) async throws -> Response {
        try await paced { try await googleAnswer(request, beta: true) }
    }

    private func googleAnswer(_ request: Request, beta: Bool) async throws -> Response {
        if let requiredAPIKey {
            guard let key = request.headers[HTTPField.Name("x-goog-api-key")!] else {
                return ErrorBody.google(
                    403, "Method doesn't allow unregistered callers. Please use an API key in the x-goog-api-key header.")
            }
            guard key == requiredAPIKey else { return ErrorBody.google(400, "API key not valid. Please pass a valid API key.") }
        }
        let body = try await request.body.collect(upTo: Self.maxBodyBytes)
        guard let parsed = try? JSONDecoder().decode(GoogleRequest.self, from: Data(body.readableBytesView)) else {
            return ErrorBody.google(400, "Invalid JSON payload received.")
        }
        if let refusal = Self.timePointingRefusal(parsed.enableTimePointing, beta: beta) { return refusal }
        let text = parsed.input?.text, ssml = parsed.input?.ssml
        guard (text == nil) != (ssml == nil) else {
            return ErrorBody.google(400, "Exactly one of `input.text` or `input.ssml` must be set.")
        }
        let input = text ?? ssml ?? ""
        stats.textArrived(input)
        guard input.utf8.count <= googleInputLimitBytes else {
            return ErrorBody.google(
                400,
                "Either `input.text` or `input.ssml` is longer than the limit of \(googleInputLimitBytes) bytes. This limit is different from quotas. To fix, reduce the byte length of the characters in this request, or consider using the Long Audio API: https://cloud.google.com/text-to-speech/docs/create-audio-text-long-audio-synthesis."
            )
        }
        guard !input.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
            return ErrorBody.google(400, "`input.text` or `input.ssml` is empty.")
        }
        // The same check the pipeline's loader makes, as Google refuses broken markup before speaking it.
        if let ssml, let problem = SSML.validate(ssml).first {
            return ErrorBody.google(400, "Invalid SSML: \(problem).")
        }
        guard let languageCode = parsed.voice?.languageCode, !languageCode.isEmpty else {
            return ErrorBody.google(400, "Invalid language code: `voice.languageCode` is required.")
        }
        let config = parsed.audioConfig
        // Absent is proto3's AUDIO_ENCODING_UNSPECIFIED, which Google refuses too.
        let encodingName = config?.audioEncoding ?? "AUDIO_ENCODING_UNSPECIFIED"
        guard let encoding = ResponseEncoding(google: encodingName) else {
            return ErrorBody.google(
                400,
                "Invalid value for audioConfig.audioEncoding: \"\(encodingName)\". Supported: \(ResponseEncoding.googleNames.joined(separator: ", "))."
            )
        }
        let rate = (config?.speakingRate).flatMap { $0 == 0 ? nil : $0 } ?? 1
        guard (0.25...4).contains(rate) else {
            return ErrorBody.google(400, "speakingRate \(rate) is out of range; it must be between 0.25 and 4.0.")
        }
        let pitch = config?.pitch ?? 0
        guard (-20...20).contains(pitch) else {
            return ErrorBody.google(400, "pitch \(pitch) is out of range; it must be between -20.0 and 20.0 semitones.")
        }
        let sampleRate = (config?.sampleRateHertz).flatMap { $0 == 0 ? nil : $0 } ?? defaultSampleRate
        guard (8000...48000).contains(sampleRate) else {
            return ErrorBody.google(400, "sampleRateHertz \(sampleRate) is out of range; it must be between 8000 and 48000.")
        }
        // Google converts to any rate the encoding supports and fails the
        // request otherwise; so does this server, naming the rates it takes.
        if let rates = encoding.sampleRates, !rates.contains(sampleRate) {
            return ErrorBody.google(
                400,
                "sampleRateHertz \(sampleRate) is not supported for \(encodingName); use one of \(rates.map(String.init).joined(separator: ", "))."
            )
        }
        guard let speaker = try await voice.resolve(name: parsed.voice?.name, languageCode: languageCode) else {
            return ErrorBody.google(
                400, "Voice '\(parsed.voice?.name ?? languageCode)' does not exist. Is it misspelled? See GET /v1/voices.")
        }
        if let refused = dice.plan.refuseText, input.contains(refused) {
            return ErrorBody.google(400, "Input refused: it contains \"\(refused)\" (injected permanent failure).")
        }
        if dice.holds(input) { return await hold(openAI: false) }
        guard beta else {
            return try await answer(.google, encoding, text: input) {
                try await voice.speak(
                    text: input, isSSML: ssml != nil, voice: speaker, speakingRate: rate, pitchSemitones: pitch, sampleRate: sampleRate)
            }
        }
        let echoed = GoogleAnswerConfig(
            encodingName: encodingName, speakingRate: rate, pitch: pitch, sampleRateHertz: sampleRate,
            marks: parsed.enableTimePointing?.contains("SSML_MARK") == true)
        // Google bills SSML's characters, but not its `<mark>` tags.
        return try await answer(
            .google, encoding, text: input, billed: BillingRule.googleCharacters(input), envelope: Self.googleBetaEnvelope(echoed)
        ) {
            try await voice.speakTimed(
                text: input, isSSML: ssml != nil, voice: speaker, speakingRate: rate, pitchSemitones: pitch, sampleRate: sampleRate)
        }
    }

    func listVoices(_ request: Request) async throws -> Response {
        let filter = request.uri.queryParameters.get("languageCode")?.lowercased()
        let voices = try await voice.engine.listVoices().filter { voice in
            guard let filter, !filter.isEmpty else { return true }
            return voice.languages.contains { $0 == filter || $0.hasPrefix(filter + "-") || filter.hasPrefix($0 + "-") }
        }
        let listed: [[String: Any]] = voices.map { voice in
            [
                "name": voice.identifier,
                "languageCodes": voice.languages.map(LocalVoice.googleLanguageCode),
                "ssmlGender": voice.gender == 1 ? "MALE" : voice.gender == 2 ? "FEMALE" : "SSML_VOICE_GENDER_UNSPECIFIED",
                "naturalSampleRateHertz": 22050,
            ]
        }
        let data = try JSONSerialization.data(withJSONObject: ["voices": listed], options: [.sortedKeys])
        return ErrorBody.json(.ok, Array(data))
    }

    // MARK: OpenAI-compatible

    struct OpenAIRequest: Decodable {
        var model: String?
        var input: String?
        var voice: String?
        var responseFormat: String?
        var speed: Double?

        enum CodingKeys: String, CodingKey {
            case model, input, voice, speed
            case responseFormat = "response_format"
        }
    }

    func openAISpeech(_ request: Request) async throws -> Response {
        try await paced { try await openAIAnswer(request) }
    }

    private func openAIAnswer(_ request: Request) async throws -> Response {
        if let requiredAPIKey, request.headers[.authorization] != "Bearer \(requiredAPIKey)" {
            return ErrorBody.openAI(401, "Incorrect API key provided.")
        }
        let body = try await request.body.collect(upTo: Self.maxBodyBytes)
        guard let parsed = try? JSONDecoder().decode(OpenAIRequest.self, from: Data(body.readableBytesView)) else {
            return ErrorBody.openAI(400, "We could not parse the JSON body of your request.")
        }
        if let input = parsed.input { stats.textArrived(input) }
        guard let input = parsed.input, !input.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
            return ErrorBody.openAI(400, "'input' is required and must not be empty.")
        }
        guard input.count <= Self.openAIInputLimitCharacters else {
            return ErrorBody.openAI(
                400, "'input' is too long: \(input.count) characters, at most \(Self.openAIInputLimitCharacters) allowed.")
        }
        // OpenAI answers mp3 when no format is named.
        let format = parsed.responseFormat ?? "mp3"
        guard let encoding = ResponseEncoding(openAI: format) else {
            return ErrorBody.openAI(
                400,
                "Invalid value for 'response_format': '\(format)'. Supported values are: \(ResponseEncoding.openAINames.map { "'\($0)'" }.joined(separator: ", ")).",
                param: "response_format")
        }
        let speed = parsed.speed ?? 1
        guard (0.25...4).contains(speed) else {
            return ErrorBody.openAI(400, "speed \(speed) is out of range; it must be between 0.25 and 4.0.")
        }
        // OpenAI's voice names (alloy, nova…) mean nothing to espeak: those get US English.
        guard let speaker = try await voice.resolve(name: parsed.voice, languageCode: "en-us") else {
            return ErrorBody.openAI(500, "espeak-ng has no English voice installed.")
        }
        let sampleRate = 24_000  // what OpenAI speaks in every format
        if let refused = dice.plan.refuseText, input.contains(refused) {
            return ErrorBody.openAI(400, "Input refused: it contains \"\(refused)\" (injected permanent failure).")
        }
        if dice.holds(input) { return await hold(openAI: true) }
        return try await answer(.openai, encoding, text: input) {
            try await voice.speak(
                text: input, isSSML: false, voice: speaker, speakingRate: speed, pitchSemitones: 0, sampleRate: sampleRate)
        }
    }

    // MARK: Faults and answers

    /// Counts the request in flight and, with a latency fault, holds the
    /// answer until `latencyMilliseconds` after arrival. Speaking happens
    /// inside that time, as it does at a real endpoint whose response time
    /// includes synthesis.
    func paced(_ work: () async throws -> Response) async throws -> Response {
        stats.synthesizeBegan()
        defer { stats.synthesizeEnded() }
        let due = ContinuousClock.now.advanced(by: .milliseconds(dice.plan.latencyMilliseconds))
        let response = try await work()
        try? await Task.sleep(until: due, clock: .continuous)
        return response
    }

    /// The held request: waits, then a 503 that speaks and bills nothing.
    func hold(_ dialect: Dialect) async -> Response {
        stats.update { $0.faultsInjected["held", default: 0] += 1 }
        try? await Task.sleep(for: .milliseconds(dice.plan.stallMilliseconds))
        return ErrorBody.serverError(dialect, 503, "held and dropped (injected)")
    }

    private func hold(openAI: Bool) async -> Response { await hold(openAI ? .openai : .google) }

    /// Draws a fault, speaks unless the fault is an error status, encodes,
    /// and shapes the answer in the dialect's way: Google's JSON with the
    /// file in base64, or the bare file (OpenAI, Polly, Azure, ElevenLabs).
    /// `billed` is what the provider bills for the request, in its unit.
    func answer(
        _ dialect: Dialect, _ encoding: ResponseEncoding, text: String, billed: Int? = nil, headers extra: HTTPFields = [:],
        speak: () async throws -> PCMAudio
    ) async throws -> Response {
        try await answer(dialect, encoding, text: text, billed: billed, headers: extra, envelope: Envelope<Void>?.none) {
            (try await speak(), ())
        }
    }

    /// How an answer carries the encoded audio when the route's shape is not
    /// its dialect's plain one: a JSON object around it (Google's v1beta1
    /// with timepoints, ElevenLabs' with-timestamps) or marks in its place
    /// (Polly's speech marks). `Extra` is what speaking learned besides the
    /// audio, such as its timeline.
    struct Envelope<Extra> {
        var contentType: String
        var wrap: (_ audio: [UInt8], _ extra: Extra) -> [UInt8]
    }

    /// `answer`, with the body made by `envelope` from the audio and what
    /// `speak` returned beside it. Faults cut or garble that body as they do
    /// the plain one: a JSON body is cut short, or replaced by a proxy's page.
    func answer<Extra>(
        _ dialect: Dialect, _ encoding: ResponseEncoding, text: String, billed: Int? = nil, headers extra: HTTPFields = [:],
        envelope: Envelope<Extra>?, speak: () async throws -> (PCMAudio, Extra)
    ) async throws -> Response {
        let characters = billed ?? text.unicodeScalars.count
        let fault = dice.draw()
        if let fault { stats.update { $0.faultsInjected[fault.rawValue, default: 0] += 1 } }
        switch fault {
        case .failure:
            let status = [500, 503, 504][Int(dice.next() % 3)]
            return ErrorBody.tagged(ErrorBody.serverError(dialect, status, "injected failure"), fault)
        case .rateLimited:
            var response = ErrorBody.throttled(dialect)
            response.headers[.retryAfter] = String(dice.plan.retryAfterSeconds)
            return ErrorBody.tagged(response, fault)
        case .stalled:
            try? await Task.sleep(for: .milliseconds(dice.plan.stallMilliseconds))
        case .truncated, .garbage, nil:
            break
        }
        let pcm: PCMAudio
        let learned: Extra
        do {
            let (spoken, extraSpoken) = try await speak()
            pcm = dice.plan.leveled(spoken, for: text)
            learned = extraSpoken
        } catch {
            return ErrorBody.serverError(dialect, 500, "synthesis failed: \(error)")
        }
        var audio: [UInt8]
        do { audio = try await encoding.encode(pcm) } catch {
            return ErrorBody.serverError(dialect, 500, "encoding failed: \(error)")
        }
        let wrap: (([UInt8]) -> [UInt8])? = envelope.map { envelope in { envelope.wrap($0, learned) } }
        let googleJSON: ([UInt8]) -> [UInt8] =
            wrap ?? { Array("{\"audioContent\":\"\(Data($0).base64EncodedString())\"}".utf8) }
        var body: [UInt8]
        var contentType = envelope?.contentType ?? (dialect == .google ? "application/json; charset=utf-8" : encoding.contentType)
        // One truncation in three happens at the HTTP level: a full
        // Content-Length, half the body, then the connection drops.
        let cutConnection = fault == .truncated && dice.next() % 3 == 0
        switch (fault, dialect) {
        case (.truncated, _) where cutConnection:
            body = dialect == .google ? googleJSON(audio) : wrap?(audio) ?? audio
        case (.garbage, .google):
            body =
                dice.next() % 2 == 0
                ? Array(#"{"audioContent":"%%% not base64 %%%"}"#.utf8)
                : Array("{\"audioContent\":\"\(Data(dice.noise(audio.count / 2)).base64EncodedString())\"}".utf8)
        case (.garbage, .polly), (.garbage, .azure), (.garbage, .elevenlabs):
            // Raw PCM has no structure to garble: a proxy's error page under a 200 is what goes wrong.
            body = Array("<html><body><h1>502 Bad Gateway</h1></body></html>".utf8)
            contentType = "text/html; charset=utf-8"
        case (.garbage, _):
            body = dice.noise(max(64, audio.count / 2))
        case (.truncated, .google):
            if dice.next() % 2 == 0 {  // the WAV inside is cut short
                audio = Array(audio.prefix(max(48, audio.count / 2)))
                body = googleJSON(audio)
            } else {  // the JSON itself is cut short
                let full = googleJSON(audio)
                body = Array(full.prefix(full.count * 3 / 5))
            }
        case (.truncated, _) where wrap != nil:
            let full = wrap?(audio) ?? audio
            body = Array(full.prefix(full.count * 3 / 5))
        case (.truncated, .polly), (.truncated, .azure), (.truncated, .elevenlabs):
            // Cut inside a sample: the one cut a headerless body shows.
            body = Array(audio.prefix(max(49, audio.count / 2) | 1))
        case (.truncated, _):
            body = Array(audio.prefix(max(48, audio.count / 2)))
        default:
            body = dialect == .google ? googleJSON(audio) : wrap?(audio) ?? audio
        }
        stats.update { $0.characters += characters }
        var response = Response(status: .ok, headers: [.contentType: contentType], body: .init(byteBuffer: ByteBuffer(bytes: body)))
        for field in extra { response.headers.append(field) }
        if cutConnection {
            let half = ByteBuffer(bytes: body.prefix(body.count / 2))
            response.body = ResponseBody(contentLength: body.count) { writer in
                try await writer.write(half)
                throw CutConnection()
            }
        }
        if let fault { response.headers[ErrorBody.faultHeader] = fault.rawValue }
        return response
    }
}

/// Thrown mid-body to drop the connection: an answer cut short on the wire.
struct CutConnection: Error {}

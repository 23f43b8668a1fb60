import Foundation
import Testing
import TourpackAudio
import TourpackCore
import TourpackTesting

@testable import TourpackKit
@testable import TourpackLoad
@testable import TourpackPlan
@testable import TourpackSpeech

/// Sentence timings for captions, as each provider is asked for them and
/// answers: the requests libcurl actually sends, captured on loopback, and
/// canned answers in each provider's wire format. Timings are all or
/// nothing and never cost a chunk its audio; with captions off the wire
/// format is what it was.
@Suite struct TimingDialectTests {
    /// 5 s: long enough for every time the answers below report (times past
    /// the audio are dropped), and for the words of each request (`SpeechLength`).
    static let pcm = PCMAudio(samples: (0..<120_000).map { Int16(truncatingIfNeeded: ($0 * 7_919) % 20_000 - 10_000) }, sampleRate: 24_000)
    /// 62 s, for the 3,663 spoken characters of the 5,000-byte chunk (at least 61 s at speaking rate 1.0).
    static let longPCM = PCMAudio(
        samples: (0..<(62 * 24_000)).map { Int16(truncatingIfNeeded: ($0 * 7_919) % 20_000 - 10_000) }, sampleRate: 24_000)

    static func settings(port: Int, api: TTSAPI, maxAttempts: Int = 3) -> TTSSettings {
        var settings = TTSSettings(
            api: api, endpoint: "http://127.0.0.1:\(port)", concurrency: 1, requestsPerMinute: 60_000, timeoutSeconds: 10,
            maxAttempts: maxAttempts, initialBackoffSeconds: 0.001, maxBackoffSeconds: 0.002, sampleRateHz: 24_000)
        if api == .polly {
            settings.region = "eu-central-1"
            settings.accessKeyEnv = "TP_ACCESS"
            settings.secretKeyEnv = "TP_SECRET"
            settings.accessKey = Secret("AKIDTIMINGTEST")
            settings.secretKey = Secret("timing-test-secret")
        }
        return settings
    }

    static func voice(_ api: TTSAPI, speakingRate: Double = 1) -> VoicePreset {
        switch api {
        case .polly:
            return VoicePreset(
                provider: "polly", languageCode: "en-US", name: "Joanna", tier: .neural, speakingRate: speakingRate, engine: "neural")
        case .elevenlabs: return VoicePreset(provider: "elevenlabs", languageCode: "en-US", name: "voice1", tier: .fullCredit)
        default: return VoicePreset(provider: api.rawValue, languageCode: "en-US", name: "", tier: .neural)
        }
    }

    /// UTF-8 offsets in `text` where each of `starts` first occurs.
    static func offsets(_ text: String, _ starts: [String]) -> [Int] {
        starts.map { start in text.utf8.distance(from: text.startIndex, to: text.range(of: start)!.lowerBound) }
    }

    static func request(_ text: String, ssml: Bool = false, api: TTSAPI, boundaries: [Int]?, speakingRate: Double = 1)
        -> SynthesisRequest
    {
        SynthesisRequest(
            chunk: Chunk(text: text, isSSML: ssml), voice: voice(api, speakingRate: speakingRate), sampleRateHz: 24_000,
            itemLabel: "tour/poi/Detailed", sentenceBoundaries: boundaries)
    }

    /// Speaks `request` against a capture server answering with `answer`; the shape, the requests' heads and bodies, and the stats.
    static func speak(
        _ request: SynthesisRequest, api: TTSAPI, maxAttempts: Int = 3,
        answer: @escaping @Sendable (String, [UInt8]) -> (status: Int, headers: [String], body: [UInt8])
    ) async throws -> (shape: ChunkShape, heads: [String], bodies: [[UInt8]], stats: SynthesisStats, billed: Int) {
        let server = try CaptureServer(answerRequest: answer)
        defer { server.stop() }
        let synthesizer = try HTTPSpeechSynthesizer(
            settings: settings(port: server.port, api: api, maxAttempts: maxAttempts), apiKey: api == .polly ? nil : "k")
        let folder = try TemporaryFolder.make("timing")
        defer { TemporaryFolder.remove(folder) }
        let billed = BilledCharacters()
        let shape = try await BilledCharacters.$current.withValue(billed) {
            try await synthesizer.synthesize(request, to: folder.appendingPathComponent("chunk.flac"))
        }
        return (shape, server.received, server.receivedBodies, synthesizer.stats, billed.value)
    }

    static func json(_ bytes: [UInt8]) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
    }

    static func path(_ head: String) -> String { String(head.split(separator: " ")[1]) }

    // MARK: Google

    static func googleAnswer(timepoints: String?, first: Bool = false, audio pcm: PCMAudio = pcm) -> [UInt8] {
        let audio = "\"audioContent\": \"\(Data(WAV.encode(pcm)).base64EncodedString())\""
        guard let timepoints else { return Array("{\(audio)}".utf8) }
        let members = first ? ["\"timepoints\": \(timepoints)", audio] : [audio, "\"timepoints\": \(timepoints)"]
        return Array("{\(members.joined(separator: ", ")), \"audioConfig\": {\"audioEncoding\": \"LINEAR16\"}}".utf8)
    }

    @Test("Google: a plain chunk with entities and multibyte text goes to v1beta1 as SSML with a mark at each sentence")
    func googlePlainChunk() async throws {
        let text = "Tom & Jerry say \"hi\". Où est-il? 日本語です。"
        let boundaries = Self.offsets(text, ["Où", "日本"])
        let expected =
            "<speak><mark name=\"s0\"/>Tom &amp; Jerry say &quot;hi&quot;. <mark name=\"s1\"/>Où est-il? <mark name=\"s2\"/>日本語です。</speak>"
        #expect(SentenceTimings.googleMarkedSSML(Chunk(text: text, isSSML: false), boundaries: boundaries) == expected)
        for first in [false, true] {
            let timepoints = #"[{"markName": "s0"}, {"markName": "s2", "timeSeconds": 1.6}, {"markName": "s1", "timeSeconds": 0.8}]"#
            let result = try await Self.speak(Self.request(text, api: .google, boundaries: boundaries), api: .google) { _, _ in
                (200, ["Content-Type: application/json; charset=UTF-8"], Self.googleAnswer(timepoints: timepoints, first: first))
            }
            #expect(result.heads.count == 1)
            #expect(Self.path(result.heads[0]) == "/v1beta1/text:synthesize")
            let body = try Self.json(result.bodies[0])
            #expect((body["input"] as? [String: Any])?["ssml"] as? String == expected)
            #expect((body["input"] as? [String: Any])?["text"] == nil)
            #expect(body["enableTimePointing"] as? [String] == ["SSML_MARK"])
            #expect(result.shape.samples == Self.pcm.samples.count)
            // proto3 JSON leaves a zero timeSeconds out: s0 is at 0.
            #expect(result.shape.sentenceTimes == [0, 0.8, 1.6])
        }
    }

    @Test("Google: an SSML chunk keeps its root and markup; s0 follows the root's opening tag")
    func googleSSMLChunk() throws {
        let text = #"<speak xml:lang="fr">Le &lt;Café&gt; ouvre. <break time="300ms"/>Élan vital. Fin.</speak>"#
        let boundaries = Self.offsets(text, ["<break", "Fin"])
        let marked = SentenceTimings.googleMarkedSSML(Chunk(text: text, isSSML: true), boundaries: boundaries)
        #expect(
            marked == #"<speak xml:lang="fr"><mark name="s0"/>Le &lt;Café&gt; ouvre. <mark name="s1"/><break time="300ms"/>Élan vital. "#
                + #"<mark name="s2"/>Fin.</speak>"#)
        // Boundaries that are out of order, inside a UTF-8 sequence or outside the root's content time nothing.
        let chunk = Chunk(text: text, isSSML: true)
        let cafe = Self.offsets(text, ["é"])[0]
        for bad in [[boundaries[1], boundaries[0]], [cafe + 1], [3], [text.utf8.count - 2]] {
            #expect(SentenceTimings.googleMarkedSSML(chunk, boundaries: bad) == nil, "\(bad)")
        }
    }

    @Test("Google: captions off sends exactly v1's request; marks past the 5,000-byte limit send it untimed")
    func googleUntimed() async throws {
        let text = "Tom & Jerry. Où?"
        let off = try await Self.speak(Self.request(text, api: .google, boundaries: nil), api: .google) { _, _ in
            (200, [], Self.googleAnswer(timepoints: nil))
        }
        #expect(Self.path(off.heads[0]) == "/v1/text:synthesize")
        // JSONEncoder's member order is its own (not sorted): the same object, no member added.
        let expected: [String: Any] = [
            "input": ["text": "Tom & Jerry. Où?"], "voice": ["languageCode": "en-US"],
            "audioConfig": ["audioEncoding": "LINEAR16", "speakingRate": 1, "pitch": 0, "sampleRateHertz": 24_000],
        ]
        #expect(NSDictionary(dictionary: try Self.json(off.bodies[0])).isEqual(to: expected))
        #expect(try Self.json(off.bodies[0]).keys.sorted() == ["audioConfig", "input", "voice"])
        #expect(off.shape.sentenceTimes == nil)

        let long = String(repeating: "Word and word. ", count: 333)  // 4,995 bytes
        let boundaries = stride(from: 15, to: long.utf8.count - 1, by: 15).map { $0 }
        let answer = Self.googleAnswer(timepoints: nil, audio: Self.longPCM)
        let full = try await Self.speak(Self.request(long, api: .google, boundaries: boundaries), api: .google) { _, _ in
            (200, [], answer)
        }
        #expect(Self.path(full.heads[0]) == "/v1/text:synthesize")
        #expect(try Self.json(full.bodies[0])["enableTimePointing"] == nil)
        #expect(full.shape.sentenceTimes == nil && full.shape.samples == Self.longPCM.samples.count)
    }

    @Test(
        "Google: missing or garbled timepoints leave the chunk untimed, its audio whole",
        arguments: [
            nil, "[]", #"[{"markName": "s0", "timeSeconds": 0.1}]"#, #"[{"markName": "s0"}, {"markName": "s1", "timeSeconds": "x"}]"#,
            #"[{"markName": "s0", "timeSeconds": 0.9}, {"markName": "s1", "timeSeconds": 0.2}]"#, #"{"s0": 1}"#, "null",
        ])
    func googleGarbledTimepoints(timepoints: String?) async throws {
        let text = "One. Two."
        let result = try await Self.speak(Self.request(text, api: .google, boundaries: [5]), api: .google) { _, _ in
            (200, [], Self.googleAnswer(timepoints: timepoints))
        }
        #expect(result.shape.samples == Self.pcm.samples.count)
        #expect(result.shape.sentenceTimes == nil)
        #expect(result.stats.requests == 1 && result.stats.retries == 0)
    }

    @Test("Google: a chunk split after \"too long\" asks no timings for its parts and has none")
    func googleSplitDropsTimings() async throws {
        let server = try CaptureServer(answerRequest: { head, _ in
            head.hasPrefix("POST /v1beta1/")
                ? (400, [], Array(#"{"error":{"code":400,"message":"Input is longer than the limit","status":"INVALID_ARGUMENT"}}"#.utf8))
                : (200, [], Self.googleAnswer(timepoints: nil))
        })
        defer { server.stop() }
        let synthesizer = try HTTPSpeechSynthesizer(
            settings: Self.settings(port: server.port, api: .google), apiKey: "k",
            splitter: { chunk in [Chunk(text: "One.", isSSML: chunk.isSSML), Chunk(text: "Two.", isSSML: chunk.isSSML)] })
        let folder = try TemporaryFolder.make("timing")
        defer { TemporaryFolder.remove(folder) }
        let shape = try await synthesizer.synthesize(
            Self.request("One. Two.", api: .google, boundaries: [5]), to: folder.appendingPathComponent("chunk.flac"))
        #expect(server.received.map(Self.path) == ["/v1beta1/text:synthesize", "/v1/text:synthesize", "/v1/text:synthesize"])
        #expect(shape.sentenceTimes == nil && shape.samples == 2 * Self.pcm.samples.count)
        #expect(synthesizer.stats.splits == 1)
    }

    // MARK: ElevenLabs

    static func elevenLabsAnswer(_ sent: String, step: Double = 0.1, alignment: Bool = true) -> [UInt8] {
        let characters = sent.unicodeScalars.map { String($0) }
        let starts = characters.indices.map { Double($0) * step }
        var object: [String: Any] = [
            "audio_base64": Data(pcm.samples.flatMap { withUnsafeBytes(of: $0.littleEndian, Array.init) }).base64EncodedString()
        ]
        if alignment {
            object["alignment"] = [
                "characters": characters, "character_start_times_seconds": starts,
                "character_end_times_seconds": starts.map { $0 + step },
            ]
            object["normalized_alignment"] = object["alignment"]
        }
        return Array(try! JSONSerialization.data(withJSONObject: object))
    }

    @Test("ElevenLabs: with-timestamps, the same body, and each sentence at its first character's start (multibyte, SSML)")
    func elevenLabsTimestamps() async throws {
        let ssml = #"<speak>Ça &amp; va?   <break time="1s"/>Oui. 日本!</speak>"#
        let plain = "Ça & va? Oui. 日本!"
        for (text, isSSML, starts) in [(ssml, true, ["<break", "日本"]), (plain, false, ["Oui", "日本"])] {
            let request = Self.request(text, ssml: isSSML, api: .elevenlabs, boundaries: Self.offsets(text, starts))
            let sent = request.chunk.plainText
            #expect(sent == plain)
            let result = try await Self.speak(request, api: .elevenlabs) { _, _ in
                (200, ["Content-Type: application/json"], Self.elevenLabsAnswer(sent))
            }
            #expect(Self.path(result.heads[0]) == "/v1/text-to-speech/voice1/with-timestamps?output_format=pcm_24000")
            var untimed = request
            untimed.sentenceBoundaries = nil
            #expect(result.bodies[0] == (try ElevenLabsDialect().body(for: untimed, settings: Self.settings(port: 1, api: .elevenlabs))))
            #expect(result.shape.samples == Self.pcm.samples.count)
            // "Ça & va? Oui. 日本!": O is scalar 9, 日 scalar 14.
            let times = try #require(result.shape.sentenceTimes)
            #expect(times.count == 3)
            #expect(zip(times, [0, 0.9, 1.4]).allSatisfy { abs($0 - $1) < 1e-9 }, "\(times)")
        }
    }

    @Test("ElevenLabs: captions off asks the audio path; an alignment that does not spell the text times nothing")
    func elevenLabsUntimed() async throws {
        let off = try await Self.speak(Self.request("One. Two.", api: .elevenlabs, boundaries: nil), api: .elevenlabs) { _, _ in
            (200, ["Content-Type: audio/pcm"], Self.pcm.samples.flatMap { withUnsafeBytes(of: $0.littleEndian, Array.init) })
        }
        #expect(Self.path(off.heads[0]) == "/v1/text-to-speech/voice1?output_format=pcm_24000")
        #expect(off.shape.sentenceTimes == nil && off.shape.samples == Self.pcm.samples.count)
        for answer in [Self.elevenLabsAnswer("Other text."), Self.elevenLabsAnswer("One. Two.", alignment: false)] {
            let result = try await Self.speak(Self.request("One. Two.", api: .elevenlabs, boundaries: [5]), api: .elevenlabs) { _, _ in
                (200, ["Content-Type: application/json"], answer)
            }
            #expect(result.shape.sentenceTimes == nil && result.shape.samples == Self.pcm.samples.count)
        }
    }

    // MARK: Polly

    static let pcmBytes = pcm.samples.flatMap { withUnsafeBytes(of: $0.littleEndian, Array.init) }

    static func pollyAnswer(marks: String, marksStatus: Int = 200)
        -> @Sendable (String, [UInt8]) -> (
            status: Int, headers: [String], body: [UInt8]
        )
    {
        { _, body in
            let object = (try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any]) ?? [:]
            if object["OutputFormat"] as? String == "json" {
                return marksStatus == 200
                    ? (200, ["Content-Type: application/x-json-stream"], Array(marks.utf8))
                    : (marksStatus, ["x-amzn-ErrorType: ServiceFailureException"], Array(#"{"message":"try later"}"#.utf8))
            }
            return (200, ["Content-Type: audio/pcm"], pcmBytes)
        }
    }

    @Test("Polly: audio, then its sentence speech marks; both billed; marks matched to the sentences by byte offset")
    func pollySpeechMarks() async throws {
        let text = "Café ouvre. Où? Fin."
        let (ou, fin) = (Self.offsets(text, ["Où"])[0], Self.offsets(text, ["Fin"])[0])
        let marks =
            [
                #"{"time":6,"type":"sentence","start":0,"end":12,"value":"Café ouvre."}"#,
                #"{"time":6,"type":"word","start":0,"end":5,"value":"Café"}"#,
                #"{"time":1200,"type":"sentence","start":\#(ou),"end":\#(ou + 4),"value":"Où?"}"#,
                #"{"time":2000,"type":"sentence","start":\#(fin),"end":\#(fin + 4),"value":"Fin."}"#,
            ].joined(separator: "\n") + "\n"
        let request = Self.request(text, api: .polly, boundaries: [ou, fin])
        let result = try await Self.speak(request, api: .polly, answer: Self.pollyAnswer(marks: marks))
        #expect(result.heads.count == 2)
        let (audio, speechMarks) = (try Self.json(result.bodies[0]), try Self.json(result.bodies[1]))
        #expect(audio["OutputFormat"] as? String == "pcm" && audio["SampleRate"] as? String == "16000" && audio["SpeechMarkTypes"] == nil)
        #expect(speechMarks["OutputFormat"] as? String == "json" && speechMarks["SampleRate"] == nil)
        #expect(speechMarks["SpeechMarkTypes"] as? [String] == ["sentence"])
        for key in ["Text", "TextType", "VoiceId", "Engine", "LanguageCode"] {
            #expect(audio[key] as? String == speechMarks[key] as? String, "\(key)")
        }
        #expect(result.shape.sentenceTimes == [0.006, 1.2, 2.0])
        let units = BillingRule(api: .polly, voice: Self.voice(.polly)).requestUnits(for: request.chunk)
        #expect(result.stats.requests == 2 && result.stats.charactersSynthesized == 2 * units && result.billed == 2 * units)
        #expect(BillingRule(api: .polly, voice: Self.voice(.polly), timings: true).units(for: request.chunk) == 2 * units)
    }

    @Test("Polly: with a speaking rate the text is wrapped in prosody; the marks' offsets are into the wrapped, escaped text")
    func pollyWrappedOffsets() async throws {
        let text = "A & B. C."
        let request = Self.request(text, api: .polly, boundaries: [7], speakingRate: 1.2)
        let sent = PollyDialect.sentText(for: request)
        #expect(sent.text == #"<speak><prosody rate="120%">A &amp; B. C.</prosody></speak>"#)
        let prefix = #"<speak><prosody rate="120%">"#.utf8.count
        let marks =
            #"{"time":0,"type":"sentence","start":\#(prefix),"end":\#(prefix + 10),"value":"A &amp; B."}"# + "\n"
            + #"{"time":850,"type":"sentence","start":\#(prefix + 11),"end":\#(prefix + 13),"value":"C."}"#
        let result = try await Self.speak(request, api: .polly, answer: Self.pollyAnswer(marks: marks))
        #expect(result.shape.sentenceTimes == [0, 0.85])
    }

    @Test("Polly: a marks request that fails for good keeps the audio, untimed; one that merges sentences times none")
    func pollyMarksFail() async throws {
        let request = Self.request("One. Two.", api: .polly, boundaries: [5])
        let failed = try await Self.speak(request, api: .polly, maxAttempts: 2, answer: Self.pollyAnswer(marks: "", marksStatus: 500))
        // Polly answers 16 kHz; the chunk is kept at the request's 24 kHz.
        #expect(failed.shape.samples > 0 && failed.shape.sentenceTimes == nil)
        #expect(failed.stats.failures == 0 && failed.stats.requests == 3 && failed.stats.retries == 1)
        let merged = try await Self.speak(
            request, api: .polly,
            answer: Self.pollyAnswer(marks: #"{"time":5,"type":"sentence","start":0,"end":9,"value":"One. Two."}"#))
        #expect(merged.shape.sentenceTimes == nil && merged.shape.samples > 0)
        // Marks that are not speech marks are a damaged answer: asked again (and billed) until the tries run out.
        let garbled = try await Self.speak(request, api: .polly, answer: Self.pollyAnswer(marks: "{not json"))
        #expect(garbled.shape.sentenceTimes == nil && garbled.shape.samples > 0)
        #expect(garbled.stats.requests == 4 && garbled.stats.retries == 2 && garbled.stats.failures == 0)
    }

    @Test("Polly: captions off sends one request, as before")
    func pollyUntimed() async throws {
        let result = try await Self.speak(
            Self.request("One. Two.", api: .polly, boundaries: nil), api: .polly, answer: Self.pollyAnswer(marks: ""))
        #expect(result.heads.count == 1 && result.shape.sentenceTimes == nil)
        #expect(
            String(decoding: result.bodies[0], as: UTF8.self)
                == #"{"Engine":"neural","LanguageCode":"en-US","OutputFormat":"pcm","SampleRate":"16000","Text":"One. Two.","#
                + #""TextType":"text","VoiceId":"Joanna"}"#)
    }

    @Test("billing: Polly with timings costs a chunk two requests, Google's plain chunk its <speak> (marks free)")
    func billing() {
        let chunk = Chunk(text: "Hello & there. Again.", isSSML: false)
        for api in TTSAPI.allCases {
            let plain = BillingRule(api: api, voice: Self.voice(api))
            let timed = BillingRule(api: api, voice: Self.voice(api), timings: true)
            #expect(plain.units(for: chunk) == plain.requestUnits(for: chunk))
            let expected =
                api == .google ? "<speak>Hello &amp; there. Again.</speak>".count : plain.units(for: chunk) * (api == .polly ? 2 : 1)
            #expect(timed.units(for: chunk) == expected, "\(api)")
        }
        // What the Google dialect sends, its marks not counted, is what was reserved.
        let marked = SentenceTimings.googleMarkedSSML(chunk, boundaries: CaptionScript.boundaries(of: chunk))
        #expect(
            marked.map(BillingRule.googleCharacters)
                == BillingRule(api: .google, voice: Self.voice(.google), timings: true).units(for: chunk))
        let ssml = Chunk(text: #"<speak>One. <mark name="x"/>Two.</speak>"#, isSSML: true)
        #expect(BillingRule.googleCharacters(ssml.text) == "<speak>One. Two.</speak>".count)
        #expect(BillingRule.googleCharacters("<speak><marker/>a</speak>") == "<speak><marker/>a</speak>".count)
        // Counted without building the SSML: the same as counting what is sent.
        let google = BillingRule(api: .google, voice: Self.voice(.google), timings: true)
        for text in ["", "<mark name=\"a\"/> written out", "Tom's \"café\" & <b>", "山の上 🏔️ e\u{301}", "&amp;&lt;<<>>''"] {
            let sent = BillingRule.googleCharacters("<speak>" + SSML.escape(text) + "</speak>")
            #expect(google.requestUnits(for: Chunk(text: text, isSSML: false)) == sent, "\(text)")
        }
    }
}

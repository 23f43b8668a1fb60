import Foundation
import Testing
import TourpackAudio
import TourpackCore
import TourpackServer
import TourpackTesting

/// serve-tts's timings (Google v1beta1 timepoints, ElevenLabs
/// with-timestamps, Polly speech marks) as the official clients parse them,
/// checked against the audio itself: each sentence reported must start
/// where the decoded audio's pause before it ends.
@Suite(.serialized) struct TimingRouteTests {
    static let key = "AKIDTOURPACKTEST0001"
    static let sentences = ["The road climbs to the glacier.", "Marmots whistle from the rocks above.", "At the top the view opens wide."]
    static let multibyte = "Café crème in Genève. 日本 is far away. Ünïcödé ends here."
    /// How far a reported sentence start may be from the one heard in the audio.
    static let tolerance = 0.1

    @Test func officialClientsParseTimingsThatMatchTheAudio() async throws {
        let folder = try TemporaryFolder.make("tourpack-clients")
        defer { TemporaryFolder.remove(folder) }
        try await withServer(configure: { $0.requiredAPIKey = Self.key }) { port, _ in
            try await OfficialClientTests.runClient("timing_client.py", port: port, outdir: folder, arguments: [Self.key])
        }
        let manifest = try OfficialClientTests.manifest(in: folder)
        try checkGoogle(manifest, folder: folder)
        try checkElevenLabs(manifest, folder: folder)
        try checkPolly(manifest, folder: folder)
    }

    private func checkGoogle(_ manifest: [String: Any], folder: URL) throws {
        let answers = try #require(manifest["google"] as? [[String: Any]])
        let byLabel = Dictionary(uniqueKeysWithValues: answers.compactMap { entry in (entry["label"] as? String).map { ($0, entry) } })
        func timepoints(_ label: String) -> [(name: String, time: Double)] {
            (byLabel[label]?["timepoints"] as? [[String: Any]] ?? []).map {
                ($0["markName"] as? String ?? "", $0["timeSeconds"] as? Double ?? -1)
            }
        }
        #expect(answers.allSatisfy { $0["audioEncoding"] as? String == "LINEAR16" && $0["sampleRateHertz"] as? Int == 24_000 })
        let marked = timepoints("sentences")
        #expect(marked.map(\.name) == ["s1", "s2", "s3"])
        let wav = try WAV.decode(Array(try Data(contentsOf: folder.appendingPathComponent("google-sentences.wav"))))
        Self.expectNear(marked.map(\.time), Self.sentenceOnsets(wav), "Google timepoints")
        // Names come back decoded, as written before escaping.
        #expect(timepoints("odd-names").map(\.name) == ["say \"cheese\"", "it's", "日本語 é", "<tag>", "a&b", "x>y"])
        Self.expectIncreasing(timepoints("odd-names").map(\.time), "odd names")
        for label in ["no-marks", "empty-list", "plain-text"] {
            #expect(timepoints(label).isEmpty, "\(label) has no timepoints")
        }
        let long = timepoints("long")
        #expect(long.count == manifest["googleLongMarks"] as? Int)
        #expect(long.map(\.name) == (0..<long.count).map { "m\($0)" })
        Self.expectIncreasing(long.map(\.time), "long document", strictly: true)
    }

    private func checkElevenLabs(_ manifest: [String: Any], folder: URL) throws {
        let answers = try #require(manifest["elevenlabs"] as? [[String: Any]])
        #expect(answers.count == 3)
        for answer in answers {
            let label = answer["label"] as? String ?? "?"
            let text = try #require(answer["text"] as? String)
            let characters = answer["characters"] as? [String] ?? []
            let starts = answer["starts"] as? [Double] ?? [], ends = answer["ends"] as? [Double] ?? []
            // One entry per character (Unicode scalar, as the JSON arrays count them) of the text sent.
            #expect(characters.count == text.unicodeScalars.count && starts.count == characters.count && ends.count == characters.count)
            #expect(characters.joined() == text, "\(label) characters spell the text")
            #expect(answer["normalizedCharacters"] as? [String] == characters)
            Self.expectIncreasing(starts, "\(label) starts")
            #expect(zip(starts, ends).allSatisfy { $0 <= $1 }, "\(label) every end is at or after its start")
            let pcm = try Self.rawPCM(folder.appendingPathComponent(answer["file"] as? String ?? ""), rate: 24_000)
            #expect(abs((ends.last ?? 0) - pcm.durationSeconds) < 0.05, "\(label) ends with the audio")
            guard label != "long" else { continue }
            // The first character of each sentence starts where that sentence's audio does.
            let scalars = Array(text.unicodeScalars)
            let firsts = scalars.indices.filter { index in
                index == 0 || (index >= 2 && scalars[index - 1] == " " && scalars[index - 2] == ".")
            }
            Self.expectNear(firsts.map { starts[$0] }, Self.sentenceOnsets(pcm), "\(label) sentence starts")
        }
        let stream = try #require(manifest["elevenlabsStream"] as? [String: Any])
        #expect((stream["chunks"] as? Int ?? 0) >= 1)
        #expect((stream["characters"] as? [String])?.joined() == Self.sentences.joined(separator: " "))
        #expect((stream["bytes"] as? Int ?? 0) > 24_000, "more than half a second of pcm_24000")
        let multibyte = try #require(answers.first { $0["label"] as? String == "multibyte" })
        let characters = multibyte["characters"] as? [String] ?? []
        #expect(characters.firstIndex(of: "日") == Array(Self.multibyte.unicodeScalars).firstIndex(of: "日"))
    }

    private func checkPolly(_ manifest: [String: Any], folder: URL) throws {
        let answers = try #require(manifest["polly"] as? [[String: Any]])
        let byLabel = Dictionary(uniqueKeysWithValues: answers.compactMap { entry in (entry["label"] as? String).map { ($0, entry) } })
        for answer in answers {
            let label = answer["label"] as? String ?? "?"
            let text = Array((answer["text"] as? String ?? "").utf8)
            #expect(answer["contentType"] as? String == "application/x-json-stream")
            // start and end are UTF-8 byte offsets into Text, and value is what lies between them.
            for mark in answer["marks"] as? [[String: Any]] ?? [] where mark["type"] as? String != "ssml" {
                let start = mark["start"] as? Int ?? -1, end = mark["end"] as? Int ?? -1
                #expect(0 <= start && start < end && end <= text.count, "\(label) \(mark)")
                if 0 <= start, start < end, end <= text.count {
                    #expect(String(decoding: text[start..<end], as: UTF8.self) == mark["value"] as? String, "\(label) \(mark)")
                }
            }
            Self.expectIncreasing((answer["marks"] as? [[String: Any]] ?? []).map { Double($0["time"] as? Int ?? -1) }, label)
        }
        let sentences = try #require(byLabel["sentences"]?["marks"] as? [[String: Any]])
        #expect(sentences.map { $0["value"] as? String } == Self.sentences)
        #expect(sentences.allSatisfy { $0["type"] as? String == "sentence" })
        // Speech marks bill like audio: every character of the text.
        #expect(byLabel["sentences"]?["requestCharacters"] as? Int == Self.sentences.joined(separator: " ").count)
        let pcm = try Self.rawPCM(folder.appendingPathComponent("polly-sentences.pcm"), rate: 16_000)
        Self.expectNear(sentences.map { Double($0["time"] as? Int ?? -1) / 1000 }, Self.sentenceOnsets(pcm), "Polly sentence marks")

        let multibyte = try #require(byLabel["multibyte"]?["marks"] as? [[String: Any]])
        let words = multibyte.filter { $0["type"] as? String == "word" }
        #expect(
            words.map { $0["value"] as? String } == ["Café", "crème", "in", "Genève", "日本", "is", "far", "away", "Ünïcödé", "ends", "here"])
        let japanese = Self.multibyte.components(separatedBy: "日本")[0].utf8.count
        #expect(words.first { $0["value"] as? String == "日本" }?["start"] as? Int == japanese)

        let ssml = try #require(byLabel["ssml"])
        let marks = ssml["marks"] as? [[String: Any]] ?? []
        #expect(marks.filter { $0["type"] as? String == "ssml" }.map { $0["value"] as? String } == ["here", "日本"])
        #expect(marks.filter { $0["type"] as? String == "sentence" }.count == 2)
        // SSML tags are not billed.
        let ssmlText = ssml["text"] as? String ?? ""
        #expect(ssml["requestCharacters"] as? Int == BillingRule.textCharacters(Chunk(text: ssmlText, isSSML: true)))

        let refusals = try #require(manifest["pollyRefusals"] as? [[String: Any]])
        #expect(
            refusals.map { $0["code"] as? String } == [
                "MarksNotSupportedForFormatException", "MarksNotSupportedForFormatException",
                "SsmlMarksNotSupportedForTextTypeException", "ValidationException",
            ])
    }

    // MARK: Refusals and billing, over plain HTTP

    @Test func googleRefusesTimePointingOnV1AndUnknownTypes() async throws {
        try await withServer { port, _ in
            let body = """
                {"input":{"ssml":"<speak>One <mark name=\\"a\\"/>two.</speak>"},"voice":{"languageCode":"en-US"},\
                "audioConfig":{"audioEncoding":"LINEAR16"},"enableTimePointing":["%@"]}
                """
            let v1 = try await rawHTTP(
                "POST", port: port, path: "/v1/text:synthesize", json: body.replacingOccurrences(of: "%@", with: "SSML_MARK"))
            #expect(v1.status == 400, "v1 has no enableTimePointing")
            let unknown = try await rawHTTP(
                "POST", port: port, path: "/v1beta1/text:synthesize", json: body.replacingOccurrences(of: "%@", with: "WORD"))
            #expect(unknown.status == 400)
            #expect(String(decoding: unknown.body, as: UTF8.self).contains("INVALID_ARGUMENT"))
        }
    }

    /// Each timing route bills what its plain route bills: Google every
    /// input character but its `<mark>` tags, ElevenLabs one credit a character,
    /// Polly the text outside tags.
    @Test func timingsBillAsThePlainRequest() async throws {
        let ssml = "<speak>First <mark name='m'/>part. Second part.</speak>"
        let google = try await withServer { port, server in
            let answer = try await rawHTTP(
                "POST", port: port, path: "/v1beta1/text:synthesize",
                json: """
                    {"input":{"ssml":"\(ssml)"},"voice":{"languageCode":"en-US"},\
                    "audioConfig":{"audioEncoding":"MP3"},"enableTimePointing":["SSML_MARK"]}
                    """)
            #expect(answer.status == 200)
            let object = try JSONSerialization.jsonObject(with: answer.body) as? [String: Any]
            #expect((object?["timepoints"] as? [[String: Any]])?.map { $0["markName"] as? String } == ["m"])
            #expect(Data(base64Encoded: object?["audioContent"] as? String ?? "")?.isEmpty == false)
            return server.stats.snapshot.characters
        }
        // Google bills SSML's characters but not its `<mark>` tags.
        #expect(google == ssml.unicodeScalars.count - "<mark name='m'/>".count)

        let text = "Go 🚀 now. Ça va? Oui!"
        let eleven = try await withServer { port, server in
            let answer = try await rawHTTP(
                "POST", port: port, path: "/v1/text-to-speech/en-US/with-timestamps?output_format=mp3_44100_128",
                json: "{\"text\":\"\(text)\",\"model_id\":\"eleven_multilingual_v2\"}")
            #expect(answer.status == 200)
            let object = try JSONSerialization.jsonObject(with: answer.body) as? [String: Any]
            let alignment = object?["alignment"] as? [String: Any]
            #expect((alignment?["characters"] as? [String])?.joined() == text)
            #expect((alignment?["characters"] as? [String])?.count == text.unicodeScalars.count)
            let audio = Data(base64Encoded: object?["audio_base64"] as? String ?? "") ?? Data()
            #expect(audio.starts(with: Data("ID3".utf8)) || audio.first == 0xFF, "mp3 as output_format asked")
            return server.stats.snapshot.characters
        }
        #expect(eleven == text.count)
    }

    @Test func pollyMarksAVeryLongText() async throws {
        let sentence = "Über dem Gletscher kreisen Dohlen im Wind. "
        let text = String(repeating: sentence, count: 3000 / sentence.count)
        try await withServer { port, _ in
            let answer = try await rawHTTP(
                "POST", port: port, path: "/v1/speech",
                json: "{\"Text\":\"\(text)\",\"OutputFormat\":\"json\",\"SpeechMarkTypes\":[\"sentence\"],\"VoiceId\":\"en-US\"}",
                headers: [
                    "Authorization":
                        "AWS4-HMAC-SHA256 Credential=AKID/20260101/eu-central-1/polly/aws4_request, SignedHeaders=host, Signature=0",
                    "X-Amz-Date": "20260101T000000Z",
                ])
            #expect(answer.status == 200)
            let lines = String(decoding: answer.body, as: UTF8.self).split(separator: "\n")
            let marks = lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            #expect(marks.count == 3000 / sentence.count)
            #expect(marks.allSatisfy { $0["value"] as? String == String(sentence.dropLast()) })
            Self.expectIncreasing(marks.map { Double($0["time"] as? Int ?? -1) }, "long text", strictly: true)
            #expect(marks.last?["end"] as? Int == text.utf8.count - 1)
        }
    }

    /// Timepoints are seconds of the answer's audio whatever its rate and
    /// speed: resampled to 8 kHz at speaking rate 1.5, each mark before a
    /// sentence still lands on that sentence's start.
    @Test func googleTimepointsHoldAtAnotherRateAndSpeed() async throws {
        let ssml = "<speak>" + Self.sentences.enumerated().map { "<mark name='s\($0.offset)'/>\($0.element) " }.joined() + "</speak>"
        try await withServer { port, _ in
            let answer = try await rawHTTP(
                "POST", port: port, path: "/v1beta1/text:synthesize",
                json: """
                    {"input":{"ssml":"\(ssml)"},"voice":{"languageCode":"en-US"},"enableTimePointing":["SSML_MARK"],\
                    "audioConfig":{"audioEncoding":"LINEAR16","sampleRateHertz":8000,"speakingRate":1.5}}
                    """)
            #expect(answer.status == 200)
            let object = try #require(try JSONSerialization.jsonObject(with: answer.body) as? [String: Any])
            let config = object["audioConfig"] as? [String: Any]
            #expect(config?["sampleRateHertz"] as? Int == 8000 && config?["speakingRate"] as? Double == 1.5)
            let timepoints = object["timepoints"] as? [[String: Any]] ?? []
            #expect(timepoints.map { $0["markName"] as? String } == ["s0", "s1", "s2"])
            let wav = try WAV.decode(Array(Data(base64Encoded: object["audioContent"] as? String ?? "") ?? Data()))
            #expect(wav.sampleRate == 8000)
            Self.expectNear(
                timepoints.map { $0["timeSeconds"] as? Double ?? -1 }, Self.sentenceOnsets(wav, minimumPause: 0.1), "8 kHz at 1.5×")
        }
    }

    /// A timing answer is faulted as an audio answer is: cut short (a JSON
    /// body that no longer parses, or a dropped connection) or replaced by
    /// a proxy's HTML page under a 200.
    @Test func faultsCutOrReplaceTimingAnswers() async throws {
        let body = "{\"text\":\"One sentence. Two sentences.\"}"
        for faults in [FaultInjection(truncateRate: 1, seed: 3), FaultInjection(garbageRate: 1, seed: 3)] {
            let answered = try await withServer(faults: faults) { port, _ in
                var answered = 0
                for _ in 0..<4 {
                    guard
                        let answer = try? await rawHTTP(
                            "POST", port: port, path: "/v1/text-to-speech/en-US/with-timestamps?output_format=pcm_16000", json: body)
                    else { continue }  // the connection was dropped mid-body
                    #expect(answer.status == 200)
                    #expect((try? JSONSerialization.jsonObject(with: answer.body)) == nil, "a faulted answer does not parse")
                    answered += 1
                }
                return answered
            }
            #expect(answered > 0, "some faulted answers arrive whole enough to check")
        }
    }

    // MARK: The audio's own sentence starts

    /// Where each sentence starts in the audio, found without espeak: the
    /// first sound, then the end of every quiet stretch of at least
    /// `minimumPause` that sound follows (a sentence's closing pause: about
    /// 300 ms at espeak's normal rate, 130 ms at 1.5×; the gaps inside a
    /// sentence stay under 50 ms). 10 ms windows, quiet below an RMS of 100.
    static func sentenceOnsets(_ pcm: PCMAudio, minimumPause: Double = 0.2) -> [Double] {
        let window = pcm.sampleRate / 100
        var onsets: [Double] = []
        var quiet = 0
        var heard = false
        var index = 0
        while index + window <= pcm.samples.count {
            let power = pcm.samples[index..<index + window].reduce(0.0) { $0 + Double($1) * Double($1) } / Double(window)
            if power < 100 * 100 {
                quiet += 1
            } else {
                if !heard || Double(quiet) / 100 >= minimumPause { onsets.append(Double(index) / Double(pcm.sampleRate)) }
                heard = true
                quiet = 0
            }
            index += window
        }
        return onsets
    }

    static func rawPCM(_ url: URL, rate: Int) throws -> PCMAudio {
        let data = try Data(contentsOf: url)
        let samples = data.withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) }.map { Int16(littleEndian: $0) }
        return PCMAudio(samples: samples, sampleRate: rate)
    }

    static func expectNear(_ reported: [Double], _ heard: [Double], _ what: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(reported.count == heard.count, "\(what): reported \(reported), heard \(heard)", sourceLocation: sourceLocation)
        for (got, want) in zip(reported, heard) {
            #expect(abs(got - want) < tolerance, "\(what): reported \(reported), heard \(heard)", sourceLocation: sourceLocation)
        }
        expectIncreasing(reported, what, strictly: true, sourceLocation: sourceLocation)
    }

    static func expectIncreasing(
        _ times: [Double], _ what: String, strictly: Bool = false, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let ordered = zip(times, times.dropFirst()).allSatisfy { strictly ? $0 < $1 : $0 <= $1 }
        #expect(ordered && times.allSatisfy { $0 >= 0 }, "\(what): \(times)", sourceLocation: sourceLocation)
    }
}

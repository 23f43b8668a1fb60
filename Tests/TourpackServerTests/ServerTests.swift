import Foundation
import Logging
import Testing
import TourpackAudio
import TourpackCore
import TourpackKit
import TourpackServer

/// serve-tts validates and answers as the real APIs do.
@Suite struct ServerTests {
    private func googleError(_ data: Data) throws -> (code: Int, message: String, status: String) {
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let error = try #require(object["error"] as? [String: Any])
        return (error["code"] as? Int ?? 0, error["message"] as? String ?? "", error["status"] as? String ?? "")
    }

    @Test func googleValidation() async throws {
        try await withServer { port, server in
            let both = try await rawHTTP(
                "POST", port: port, path: "/v1/text:synthesize",
                json: #"{"input":{"text":"a","ssml":"<speak>a</speak>"},"voice":{"languageCode":"en-US"}}"#)
            #expect(both.status == 400)
            #expect(try googleError(both.body).message.contains("Exactly one of"))

            let long = String(repeating: "é", count: 2501)  // 5002 bytes, 2501 characters
            let tooLong = try await rawHTTP(
                "POST", port: port, path: "/v1/text:synthesize",
                json: #"{"input":{"text":"\#(long)"},"voice":{"languageCode":"en-US"}}"#)
            let tooLongError = try googleError(tooLong.body)
            #expect(tooLong.status == 400)
            #expect(tooLongError.status == "INVALID_ARGUMENT")
            #expect(tooLongError.message.hasPrefix("Either `input.text` or `input.ssml` is longer than the limit of 5000 bytes."))

            let noLanguage = try await rawHTTP("POST", port: port, path: "/v1/text:synthesize", json: #"{"input":{"text":"a"}}"#)
            #expect(noLanguage.status == 400)
            #expect(try googleError(noLanguage.body).message.contains("languageCode"))

            let slow = try await rawHTTP(
                "POST", port: port, path: "/v1/text:synthesize",
                json:
                    #"{"input":{"text":"a"},"voice":{"languageCode":"en-US"},"audioConfig":{"audioEncoding":"LINEAR16","speakingRate":0.1}}"#
            )
            #expect(slow.status == 400)
            #expect(try googleError(slow.body).message.contains("speakingRate"))

            let brokenSSML = try await rawHTTP(
                "POST", port: port, path: "/v1/text:synthesize",
                json: #"{"input":{"ssml":"<speak>Hello <break time=\"1s\"></speak>"},"voice":{"languageCode":"en-US"}}"#)
            #expect(brokenSSML.status == 400)
            #expect(try googleError(brokenSSML.body).message.contains("Invalid SSML"))

            // FLAC is not among Google's TTS encodings; an absent encoding is AUDIO_ENCODING_UNSPECIFIED.
            let flac = try await rawHTTP(
                "POST", port: port, path: "/v1/text:synthesize",
                json: #"{"input":{"text":"a"},"voice":{"languageCode":"en-US"},"audioConfig":{"audioEncoding":"FLAC"}}"#)
            #expect(flac.status == 400)
            let flacError = try googleError(flac.body)
            #expect(flacError.status == "INVALID_ARGUMENT")
            #expect(flacError.message.contains("audioEncoding"))

            let ok = try await rawHTTP(
                "POST", port: port, path: "/v1/text:synthesize",
                json:
                    #"{"input":{"text":"Hello there."},"voice":{"languageCode":"en-US"},"audioConfig":{"audioEncoding":"LINEAR16","sampleRateHertz":16000}}"#
            )
            #expect(ok.status == 200)
            let object = try #require(try JSONSerialization.jsonObject(with: ok.body) as? [String: Any])
            let content = try #require(object["audioContent"] as? String)
            let wav = try #require(Data(base64Encoded: content))
            let pcm = try WAV.decode(Array(wav))
            #expect(pcm.sampleRate == 16_000)
            #expect(pcm.durationSeconds > 0.4)
            #expect(server.stats.snapshot.responsesByStatus["400"] == 6)
        }
    }

    @Test func encodingsAndRatesAreRefusedAsTheServicesRefuseThem() async throws {
        try await withServer { port, server in
            func google(_ audioConfig: String) async throws -> (status: Int, body: Data) {
                try await rawHTTP(
                    "POST", port: port, path: "/v1/text:synthesize",
                    json: #"{"input":{"text":"Hello there."},"voice":{"languageCode":"en-US"},"audioConfig":\#(audioConfig)}"#)
            }
            for config in [
                #"{}"#, #"{"audioEncoding":"AUDIO_ENCODING_UNSPECIFIED"}"#, #"{"audioEncoding":"mp3"}"#, #"{"audioEncoding":"OGG_VORBIS"}"#,
            ] {
                let refused = try await google(config)
                #expect(refused.status == 400, "\(config)")
                #expect(try googleError(refused.body).status == "INVALID_ARGUMENT", "\(config)")
            }
            let opusRate = try await google(#"{"audioEncoding":"OGG_OPUS","sampleRateHertz":44100}"#)
            #expect(opusRate.status == 400)
            #expect(try googleError(opusRate.body).message.contains("8000, 12000, 16000, 24000, 48000"))
            let mp3Rate = try await google(#"{"audioEncoding":"MP3","sampleRateHertz":20000}"#)
            #expect(mp3Rate.status == 400)
            #expect(try googleError(mp3Rate.body).status == "INVALID_ARGUMENT")

            let mulaw = try await google(#"{"audioEncoding":"MULAW","sampleRateHertz":8000}"#)
            #expect(mulaw.status == 200)
            let object = try #require(try JSONSerialization.jsonObject(with: mulaw.body) as? [String: Any])
            let content = try #require(object["audioContent"] as? String)
            let wav = try #require(Data(base64Encoded: content))
            #expect(wav.prefix(4) == Data("RIFF".utf8))
            #expect(wav[wav.startIndex + 20] == 7 && wav[wav.startIndex + 34] == 8, "fmt: format code 7 (µ-law), 8 bits")

            let unknown = try await rawHTTP(
                "POST", port: port, path: "/v1/audio/speech",
                json: #"{"model":"tts-1","voice":"alloy","input":"Hello there.","response_format":"ogg"}"#)
            #expect(unknown.status == 400)
            let error = try #require((try JSONSerialization.jsonObject(with: unknown.body) as? [String: Any])?["error"] as? [String: Any])
            #expect(error["type"] as? String == "invalid_request_error")
            #expect(error["param"] as? String == "response_format")

            // No response_format is mp3: an MPEG audio frame sync or an ID3v2 tag first.
            let plain = try await rawHTTP(
                "POST", port: port, path: "/v1/audio/speech",
                json: #"{"model":"tts-1","voice":"alloy","input":"Hello there."}"#)
            #expect(plain.status == 200)
            let bytes = [UInt8](plain.body)
            #expect(bytes.starts(with: Array("ID3".utf8)) || (bytes.count > 2 && bytes[0] == 0xFF && bytes[1] & 0xE0 == 0xE0))
            #expect(server.stats.snapshot.responsesByStatus["400"] == 7)
        }
    }

    @Test func voicesAreListedGoogleStyle() async throws {
        try await withServer { port, _ in
            let answer = try await rawHTTP("GET", port: port, path: "/v1/voices?languageCode=en-US")
            #expect(answer.status == 200)
            let object = try #require(try JSONSerialization.jsonObject(with: answer.body) as? [String: Any])
            let voices = try #require(object["voices"] as? [[String: Any]])
            #expect(!voices.isEmpty)
            #expect(voices.contains { ($0["languageCodes"] as? [String])?.contains("en-US") == true })
            #expect(voices.allSatisfy { $0["name"] is String && $0["naturalSampleRateHertz"] as? Int == 22050 })
            let all = try await rawHTTP("GET", port: port, path: "/v1/voices")
            let allObject = try JSONSerialization.jsonObject(with: all.body) as? [String: Any]
            let allVoices = try #require(allObject?["voices"] as? [Any])
            #expect(allVoices.count > voices.count)
        }
    }

    @Test func statsEndpointCountsAndResets() async throws {
        try await withServer { port, _ in
            let synthesizer = try HTTPSpeechSynthesizer(settings: fastSettings(port: port), apiKey: nil)
            _ = try await synthesizer.synthesize(speechRequest("Count me."))
            let before = try JSONDecoder().decode(
                ServerStatsSnapshot.self, from: try await rawHTTP("GET", port: port, path: "/debug/stats").body)
            #expect(before.synthesizeRequests == 1)
            #expect(before.characters == "Count me.".count)
            #expect(before.maxInFlight == 1)
            let reset = try await rawHTTP("POST", port: port, path: "/debug/stats/reset")
            #expect(reset.status == 204)
            let after = try JSONDecoder().decode(
                ServerStatsSnapshot.self, from: try await rawHTTP("GET", port: port, path: "/debug/stats").body)
            #expect(after.synthesizeRequests == 0)
            #expect(after.characters == 0)
        }
    }

    /// A text asked for again is a repeat, whichever dialect asks; the
    /// counters are what proves a fleet spoke each chunk once.
    @Test func statsCountDistinctTextsAndRepeats() async throws {
        try await withServer { port, server in
            let google = try HTTPSpeechSynthesizer(settings: fastSettings(port: port), apiKey: nil)
            let openAI = try HTTPSpeechSynthesizer(settings: fastSettings(port: port, api: .openai), apiKey: nil)
            _ = try await google.synthesize(speechRequest("Once."))
            _ = try await google.synthesize(speechRequest("Twice."))
            _ = try await google.synthesize(speechRequest("Twice."))
            _ = try await openAI.synthesize(speechRequest("Once."))
            let stats = server.stats.snapshot
            #expect(stats.synthesizeRequests == 4)
            #expect(stats.distinctTexts == 2 && stats.repeatedRequests == 2 && stats.untrackedTexts == 0)
            server.stats.reset()
            _ = try await google.synthesize(speechRequest("Once."))
            #expect(server.stats.snapshot.distinctTexts == 1 && server.stats.snapshot.repeatedRequests == 0, "a reset forgets the texts")
        }
    }

    @Test func apiKeyTravelsOnlyInItsHeaderAndIsNeverPrinted() async throws {
        let serverLog = LogCapture()
        let clientLog = LogCapture()
        let faults = FaultInjection(failureRate: 0.3, rateLimitRate: 0.2, retryAfterSeconds: 0, seed: 3)
        try await withServer(
            faults: faults,
            configure: {
                $0.requiredAPIKey = sentinelKey
                $0.logger = serverLog.logger("serve-tts")
            }
        ) { port, _ in
            var texts: [String] = []
            // serve-tts speaks the five providers' APIs; Piper takes no key (PiperBuildTests).
            for api in TTSAPI.allCases where api != .piper {
                var options = HTTPSpeechSynthesizer.Options()
                options.logger = clientLog.logger("client")
                // Polly signs with a key pair: the access key ID is what serve-tts checks.
                func settings(_ key: String) -> TTSSettings {
                    var settings = fastSettings(port: port, api: api, maxAttempts: 20)
                    if api == .polly {
                        settings.region = "eu-central-1"
                        settings.accessKey = Secret(key)
                        settings.secretKey = Secret(key + "-secret")
                    }
                    return settings
                }
                let right = try HTTPSpeechSynthesizer(settings: settings(sentinelKey), apiKey: sentinelKey, options: options)
                let wrong = try HTTPSpeechSynthesizer(
                    settings: settings(sentinelKey + "-wrong"), apiKey: sentinelKey + "-wrong", options: options)
                // Polly, Azure and ElevenLabs name the voice in the request.
                var voice = englishVoice
                if [.polly, .azure, .elevenlabs].contains(api) { voice.name = "en-US" }
                // The right key works: it did reach the server, in the header that API reads.
                let pcm = try await right.synthesize(speechRequest("Secret handshake.", voice: voice))
                #expect(pcm.durationSeconds > 0.3)
                // The wrong key is refused for good, and the error does not repeat it.
                do {
                    _ = try await wrong.synthesize(speechRequest("Let me in.", voice: voice))
                    Issue.record("a wrong key was accepted")
                } catch {
                    texts.append("\(error)")
                    texts.append(String(reflecting: error))
                    #expect(wrong.stats.retries == 0 || wrong.stats.requests > 1)
                }
                // A final error with the right key (pitch out of range) carries no key either.
                var shrill = voice
                shrill.pitch = 40
                do { _ = try await right.synthesize(speechRequest("x", voice: shrill)) } catch { texts.append("\(error)") }
                var dumped = ""
                dump(right, to: &dumped)
                texts += ["\(right)", String(reflecting: right), dumped, "\(right.stats)"]
            }
            texts += serverLog.lines + clientLog.lines
            #expect(!serverLog.lines.isEmpty && !clientLog.lines.isEmpty, "the logs were captured")
            #expect(clientLog.lines.contains { $0.contains("tts retry") }, "faults made the client log retries")
            for text in texts {
                #expect(!text.contains(sentinelKey), "the key leaked: \(text.prefix(200))")
                #expect(!text.contains("kq7Zp4Wx"), "part of the key leaked: \(text.prefix(200))")
            }
        }
    }
}

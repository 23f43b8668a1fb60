import Foundation
import Testing
import TourpackCore

@testable import TourpackKit
@testable import TourpackPlan
@testable import TourpackSpeech

/// What Piper is sent, without a server: one sentence a chunk, the text
/// with no markup (aliases spoken, breaks cut at), `length_scale` from the
/// speaking rate, and what Piper cannot do refused.
@Suite struct PiperDialectTests {
    static let voice = VoicePreset(provider: "piper", languageCode: "en-US", name: "en_US-joe-medium", tier: .local)

    static func sent(_ chunk: Chunk, rate: Double = 1) throws -> [String: Any] {
        var voice = Self.voice
        voice.speakingRate = rate
        let request = SynthesisRequest(chunk: chunk, voice: voice, sampleRateHz: 24_000, itemLabel: "test")
        let body = try PiperDialect().body(for: request, settings: TTSSettings(api: .piper, sampleRateHz: 24_000))
        return try #require(try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any])
    }

    @Test func everySentenceIsAChunkAndABreakIsASeam() throws {
        let chunker = Chunker(limit: TTSAPI.piper.requestLimit, sentencePerChunk: true)
        let plain = try chunker.chunks(for: Narration(text: "Listen. Behind the hotel, meltwater rushes out. It is cold."))
        #expect(plain.map(\.text) == ["Listen.", "Behind the hotel, meltwater rushes out.", "It is cold."])
        let ssml = try chunker.chunks(
            for: Narration(text: "<speak>Listen. <break time=\"700ms\"/> Behind the hotel. <sub alias=\"Mister\">Mr.</sub> Seiler.</speak>")
        )
        #expect(ssml.map(PiperText.text(of:)) == ["Listen.", "Behind the hotel.", "Mister Seiler."])
        // A lone break joins the sentence before it: no chunk has nothing to speak.
        #expect(ssml.count == 3 && ssml[0].text.contains("<break"))
        // A sentence over the limit is cut at a clause.
        let long = String(repeating: "a long clause of many words, ", count: 20) + "and an end."
        let cut = try chunker.chunks(for: Narration(text: long))
        #expect(cut.count > 1 && cut.allSatisfy { $0.characters <= PiperProvider.sentenceLimit })
    }

    @Test func theBodyHasTheTextAndLengthScaleOnly() throws {
        let plain = try Self.sent(Chunk(text: "The lake is 40 metres deep.", isSSML: false))
        #expect(plain["text"] as? String == "The lake is 40 metres deep." && plain["length_scale"] == nil && plain.count == 1)
        let fast = try Self.sent(Chunk(text: "Quick.", isSSML: false), rate: 1.25)
        #expect(fast["length_scale"] as? Double == 0.8)
        let ssml = try Self.sent(
            Chunk(text: "<speak>Up to <say-as interpret-as=\"cardinal\">70</say-as> &amp; more.</speak>", isSSML: true))
        #expect(ssml["text"] as? String == "Up to 70 & more.")
    }

    @Test func whatPiperCannotHonourIsNamed() {
        #expect(PiperText.unsupported("<speak><p>One. <break/></p> <sub alias=\"x\">y</sub> <break time=\"1s\"/></speak>").count == 1)
        let problems = PiperText.unsupported(
            "<speak><emphasis>Loud.</emphasis> <phoneme ph=\"x\">y</phoneme> <say-as interpret-as=\"date\">1/2</say-as></speak>")
        #expect(problems.count == 3)
        #expect(problems.allSatisfy { $0.contains("Piper") })
        #expect(PiperText.unsupported("<speak>Plain. <break time=\"700ms\"/> Then more.</speak>").isEmpty)
    }

    @Test func aTrailingBreakStartsNoCaptionAndSeveralSpokenSentencesAreUntimed() {
        func starts(_ text: String, ssml: Bool) -> Int? {
            let chunk = Chunk(text: text, isSSML: ssml)
            return PiperDialect.silentStarts(
                SynthesisRequest(
                    chunk: chunk, voice: Self.voice, sampleRateHz: 24_000, itemLabel: "test",
                    sentenceBoundaries: CaptionScript.boundaries(of: chunk)))
        }
        #expect(starts("One sentence.", ssml: false) == 0)
        #expect((starts("<speak>Listen. <break time=\"700ms\"/></speak>", ssml: true) ?? -1) >= 0)
        #expect(starts("One. Two.", ssml: false) == nil)
        var decoder = PiperAnswerDecoder(silentStarts: 1)
        #expect(decoder.sentenceTimes == [0, 0])
        decoder = PiperAnswerDecoder(silentStarts: nil)
        #expect(decoder.sentenceTimes == nil)
    }

    @Test func billingIsLocalAndCountsTheTextSent() {
        let rule = BillingRule(api: .piper, voice: Self.voice)
        #expect(rule.unit == "characters" && TTSAPI.piper.tiers == [.local])
        #expect(rule.units(for: Chunk(text: "<speak>Hi <break/> there.</speak>", isSSML: true)) == 10)
    }
}

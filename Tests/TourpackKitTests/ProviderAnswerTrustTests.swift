import Foundation
import Testing
import TourpackTesting

@testable import TourpackAudio
@testable import TourpackCore
@testable import TourpackKit
@testable import TourpackPlan
@testable import TourpackSpeech
@testable import TourpackState

/// Issue 35's rules, part by part: times are data (checked conversions,
/// the fit rule, the caption timer on hostile times, a cache row repaired
/// on read on both backends), and audio must fit its text (`SpeechLength`).
@Suite(.offThePool) struct ProviderAnswerTrustTests {
    /// The issue's hostile times, each in the middle of three.
    static let hostile: [(String, [Double])] = [
        ("1e15 s", [0, 1e15, 2]), ("1e308 s", [0, 1e308, 2]), ("1e300 ms", [0, 1e297, 2]), ("NaN", [0, .nan, 2]),
        ("infinity", [0, .infinity, 2]), ("negative", [0, -1, 2]), ("decreasing", [0, 1.5, 0.5]), ("past the audio", [0, 1, 3.5]),
    ]

    @Test func checkedConversionsNeverTrap() {
        #expect(Int(checked: 2.5) == 3 && Int(checked: -2.5) == -3 && Int(checked: 0.4) == 0)
        for value in [Double.nan, .infinity, -.infinity, 1e15 * 24_000, 1e308, -1e308, 9.3e18, 9_223_372_036_854_775_808.0] {
            #expect(Int(checked: value) == nil, "\(value)")
        }
        #expect(Int(checked: -9_223_372_036_854_775_808.0) == Int.min)
        #expect(Int(clamping: 1e308, to: 0...100) == 100 && Int(clamping: -.infinity, to: 0...100) == 0)
        #expect(Int(clamping: .nan, to: 5...100) == 5 && Int(clamping: 41.6, to: 0...100) == 42)
        #expect(WebVTT.timestamp(1e308) == "1000000:00:00.000" && WebVTT.timestamp(.nan) == "00:00:00.000")
    }

    @Test func timesFitOnlyWhenFiniteOrderedAndInsideTheAudio() {
        // 3 s at 24 kHz.
        #expect(ChunkShape.timesFit([0, 1, 3], samples: 72_000, rate: 24_000))
        #expect(ChunkShape.timesFit([0.2, 0.2, 2.9], samples: 72_000, rate: 24_000), "equal times are in order")
        for (name, times) in Self.hostile {
            #expect(!ChunkShape.timesFit(times, samples: 72_000, rate: 24_000), "\(name)")
            var shape = ChunkShape(samples: 72_000, audible: 0..<72_000, sentenceTimes: times)
            #expect(shape.withFittingTimes(rate: 24_000).sentenceTimes == nil, "\(name)")
            shape.sentenceTimes = [0, 1, 2]
            #expect(shape.withFittingTimes(rate: 24_000) == shape)
        }
    }

    /// The crash of the issue: a time of 1e15 s reached `Int(_:)` in the caption timer.
    @Test(arguments: 0..<8) func theCaptionTimerEstimatesWhereTheTimesAreImpossible(_ index: Int) {
        let (name, times) = Self.hostile[index]
        let chunk = Chunk(text: "One road. Two lakes. Three peaks.", isSSML: false)
        let script = CaptionScript(narration: Narration(text: chunk.text + " " + chunk.text), chunks: [chunk, chunk])
        #expect(script.boundaries[0].count == 2)
        let shape = ChunkShape(samples: 72_000, audible: 2_400..<69_600, sentenceTimes: times)
        let timer = CaptionTimer(joiner: PCMJoiner(), rate: 24_000)
        let (cues, timing) = timer.cues(script, shapes: [shape, shape])
        #expect(timing == .estimated, "\(name)")
        #expect(cues.count == 6)
        var previous = 0.0
        for cue in cues {
            #expect(cue.start >= previous && cue.start < cue.end && cue.end <= 6.5, "\(name): \(cue)")
            previous = cue.end
        }
        var good = shape
        good.sentenceTimes = [0, 1, 2]
        #expect(timer.cues(script, shapes: [good, good]).timing == .provider)
    }

    @Test func spokenCharactersAreLettersAndDigitsOutsideTags() {
        #expect(SpeechLength.spokenCharacters("Hi, 42 Où?", isSSML: false) == 6)
        #expect(SpeechLength.spokenCharacters(#"<speak>Hi <break time="9s"/>&amp; <sub alias="x">St</sub></speak>"#, isSSML: true) == 4)
        #expect(SpeechLength.spokenCharacters("<speak><break time=\"2s\"/></speak>", isSSML: true) == 0)
    }

    @Test func theBoundIsAWideMarginUnderSpeech() throws {
        #expect(SpeechLength.minimumSeconds(spokenCharacters: 600, speakingRate: 1) == 10)
        #expect(SpeechLength.minimumSeconds(spokenCharacters: 600, speakingRate: 2) == 5)
        #expect(SpeechLength.minimumSeconds(spokenCharacters: 600, speakingRate: 100) == 2.5, "a rate past 4.0 counts as 4.0")
        // A narration of 90 sentences is never 0.0 s long, nor a few samples.
        let narration = Array(repeating: "The road climbs in thirty-six hairpins.", count: 90).joined(separator: " ")
        let spoken = SpeechLength.spokenCharacters(narration, isSSML: false)
        let shortfall = try #require(SpeechLength.shortfall(seconds: 0, spokenCharacters: spoken, speakingRate: 1))
        #expect(shortfall.contains("no audio"))
        #expect(SpeechLength.shortfall(seconds: 30, spokenCharacters: spoken, speakingRate: 1)?.contains("too little audio") == true)
        // espeak says it in about 3 minutes: far inside the bound.
        #expect(SpeechLength.shortfall(seconds: 180, spokenCharacters: spoken, speakingRate: 1) == nil)
        #expect(SpeechLength.shortfall(seconds: 0, spokenCharacters: 0, speakingRate: 1) == nil, "nothing to say: silence is enough")
    }

    @Test func aRequestNamesItsChunkAndHoldsItsAnswerToTheBound() {
        var request = SynthesisRequest(
            chunk: Chunk(text: String(repeating: "Lakes and hairpins. ", count: 30), isSSML: false), voice: StoreManifestFixture.voice,
            sampleRateHz: 24_000, itemLabel: "alps/poi/approaching", chunkIndex: 1, chunkCount: 2)
        #expect(request.chunkLabel == "chunk 2 of 2")
        #expect(request.shortfall(of: ChunkShape(samples: 0, audible: nil)) != nil)
        #expect(request.shortfall(of: ChunkShape(samples: 24_000, audible: nil)) != nil, "1 s for 510 letters")
        #expect(request.shortfall(of: ChunkShape(samples: 24_000 * 30, audible: nil)) == nil)
        request.chunkIndex = nil
        #expect(request.chunkLabel == "the chunk")
    }

    /// A row an older version kept with a provider's impossible times: a
    /// hit whose captions are estimated, and the row is rewritten, so no
    /// later build (or worker) meets them again.
    @Test(arguments: Backend.allCases) func impossibleCachedTimesAreRepairedOnRead(backend: Backend) throws {
        let fixture = try StateFixture(backend)
        defer { fixture.remove() }
        let cache = try fixture.synthesisCache(clock: ManualClock())
        for (index, (name, times)) in Self.hostile.enumerated() where !times.contains(where: \.isNaN) && !times.contains(.infinity) {
            let key = SynthesisCacheTests.key("Hostile \(index).")
            try cache.store(SynthesisCacheTests.pcm(index, count: 72_000), for: key, characters: 10)
            var entry = try #require(try cache.index.entry(key.hex))
            entry.sentenceTimes = SentenceTimes.encode(times)
            try cache.index.keep(entry, settling: nil)

            let hit = try #require(try cache.lookup(key), "\(name): the audio is still a hit")
            #expect(hit.shape.sentenceTimes == nil, "\(name)")
            #expect(try cache.index.entry(key.hex)?.sentenceTimes == nil, "\(name): the row is rewritten")
            #expect(try cache.load(key)?.samples.count == 72_000)
        }
        // Text that is not a list of numbers is repaired the same way.
        let key = SynthesisCacheTests.key("Garbled.")
        try cache.store(SynthesisCacheTests.pcm(9), for: key, characters: 8)
        var entry = try #require(try cache.index.entry(key.hex))
        entry.sentenceTimes = "0.0,nan,x"
        try cache.index.keep(entry, settling: nil)
        #expect(try cache.lookup(key)?.shape.sentenceTimes == nil)
        #expect(try cache.index.entry(key.hex)?.sentenceTimes == nil)
        // Times that fit are kept as they are.
        let fine = SynthesisCacheTests.key("Fine.")
        try cache.store(SynthesisCacheTests.pcm(3), for: fine, characters: 5)
        var kept = try #require(try cache.index.entry(fine.hex))
        kept.sentenceTimes = SentenceTimes.encode([0, 0.5])
        try cache.index.keep(kept, settling: nil)
        #expect(try cache.lookup(fine)?.shape.sentenceTimes == [0, 0.5])
        #expect(try cache.index.entry(fine.hex)?.sentenceTimes == "0.000000,0.500000")
    }
}

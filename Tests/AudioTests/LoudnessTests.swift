import Foundation
import Testing
import TourpackTesting

@testable import TourpackAudio
@testable import TourpackCore
@testable import TourpackKit

/// The loudness meter against BS.1770's reference tone, chunk profiles
/// against a measurement of the whole, and the leveler's promises: one gain,
/// peaks under the ceiling, the same length.
@Suite("Loudness: meter, profiles and the leveler", .offThePool)
struct LoudnessTests {
    static func tone(hertz: Double, dBFS: Double, seconds: Double, rate: Int, phase: Double = 0) -> [Int16] {
        let amplitude = pow(10, dBFS / 20) * 32767
        return (0..<Int(seconds * Double(rate))).map { n in
            Int16((amplitude * sin(2 * Double.pi * hertz * Double(n) / Double(rate) + phase)).rounded())
        }
    }

    static func measure(_ samples: [Int16], rate: Int) throws -> LoudnessMeter {
        let meter = try LoudnessMeter(rate: rate)
        samples.withUnsafeBufferPointer { meter.add($0) }
        return meter
    }

    static func leveled(_ samples: [Int16], gainDB: Double, ceiling: Double, rate: Int, block: Int = 1_000) throws -> (
        samples: [Int16], report: LevelingReport
    ) {
        let leveler = LoudnessLeveler(gainDB: gainDB, ceilingDBTP: ceiling, rate: rate)
        var output: [Int16] = []
        try samples.withUnsafeBufferPointer { all in
            var start = 0
            while start < all.count {
                let end = min(all.count, start + block)
                try leveler.feed(UnsafeBufferPointer(rebasing: all[start..<end])) { output.append(contentsOf: $0) }
                start = end
            }
        }
        try leveler.finish { output.append(contentsOf: $0) }
        return (output, leveler.report)
    }

    @Test(
        "a 997 Hz tone at -20 dBFS measures -23 LUFS, as BS.1770 says a full-scale one measures -3.01", arguments: [24_000, 44_100, 48_000])
    func referenceTone(rate: Int) throws {
        let meter = try Self.measure(Self.tone(hertz: 997, dBFS: -20, seconds: 5, rate: rate), rate: rate)
        let integrated = try #require(meter.integratedLUFS)
        #expect(abs(integrated - -23.01) < 0.1, "libebur128: \(integrated)")
        let fromBlocks = try #require(meter.finishedProfile.integratedLUFS)
        #expect(abs(fromBlocks - integrated) < 0.06, "profile \(fromBlocks) against libebur128 \(integrated)")
        let peak = try #require(meter.finishedProfile.truePeakDBTP)
        #expect(abs(peak - -20) < 0.1)
    }

    @Test("chunks 9 dB apart: the merged profiles gate like a measurement of the whole")
    func mergedProfiles() throws {
        let rate = 24_000
        let directory = try TemporaryFolder.make("tourpack-audio")
        defer { TemporaryFolder.remove(directory) }
        let chunks = try Fixtures.chunks(rate: rate, in: directory).enumerated().map { index, chunk in
            // Levels 0, -9 and -18 dB: the quietest falls under the relative gate.
            chunk.samples.map { Int16((Double($0) * pow(10, -9 * Double(index) / 20)).rounded()) }
        }
        let profiles = try chunks.map { try Self.measure($0, rate: rate).finishedProfile }
        let merged = profiles.dropFirst().reduce(profiles[0]) { $0.merged(with: $1) }
        let whole = try Self.measure(chunks.flatMap { $0 }, rate: rate)
        let estimate = try #require(merged.integratedLUFS)
        let truth = try #require(whole.integratedLUFS)
        #expect(abs(estimate - truth) < 0.3, "merged \(estimate) against the whole \(truth)")
        #expect(abs(merged.truePeak - whole.truePeak) < 1e-6)
        // Each chunk on its own is far from the whole: the merge is not an average.
        let loudest = try #require(profiles[0].integratedLUFS)
        let quietest = try #require(profiles[2].integratedLUFS)
        #expect(loudest - quietest > 17)
    }

    @Test("a profile's bytes read back as the same profile; other bytes do not read")
    func profileBytes() throws {
        let profile = try Self.measure(Self.tone(hertz: 440, dBFS: -12, seconds: 2, rate: 24_000), rate: 24_000).finishedProfile
        #expect(profile.blockCount == 17)
        #expect(LoudnessProfile(encoded: profile.encoded) == profile)
        #expect(LoudnessProfile(encoded: Data([2, 0, 0])) == nil)
        // A survey by another revision of the limiter is not trusted: the chunk is measured again.
        var stale = profile.encoded
        stale[1] = UInt8(LoudnessLeveler.revision - 1)
        #expect(LoudnessProfile(encoded: stale) == nil)
        #expect(LoudnessProfile(encoded: profile.encoded.dropLast()) == nil)
        #expect(LoudnessProfile().integratedLUFS == nil)
        #expect(LoudnessProfile().truePeakDBTP == nil)
    }

    @Test("with loudness off, a chunk is measured for its shape only; with a target, for its loudness too")
    func shapeOnlyWhenOff() throws {
        let tone = Self.tone(hertz: 440, dBFS: -12, seconds: 1, rate: 24_000)
        var off = ChunkMeter(rate: 24_000, measuresLoudness: false)
        try tone.withUnsafeBufferPointer { try off.add($0) }
        let shape = off.finish()
        #expect(shape.loudness == nil && shape.samples == tone.count && shape.audible != nil)
        var on = ChunkMeter(rate: 24_000)
        try tone.withUnsafeBufferPointer { try on.add($0) }
        let measured = on.finish()
        #expect(measured.audible == shape.audible && measured.loudness?.limiting.count == LimiterSurvey.thresholdsDBFS.count)
    }

    @Test("gain below the ceiling: exactly the gained samples, none lost or added")
    func gainOnly() throws {
        let rate = 24_000
        let input = Self.tone(hertz: 300, dBFS: -30, seconds: 1.3, rate: rate)
        let unity = try Self.leveled(input, gainDB: 0, ceiling: -1, rate: rate, block: 777)
        #expect(unity.samples == input)
        #expect(unity.report.limiterReductionDB == 0)
        let louder = try Self.leveled(input, gainDB: 6, ceiling: -1, rate: rate)
        #expect(louder.samples.count == input.count)
        let expected = input.map { Int16((Double($0) * pow(10, 6.0 / 20)).rounded()) }
        #expect(zip(louder.samples, expected).allSatisfy { abs(Int($0) - Int($1)) <= 1 })
    }

    @Test("peaks pushed over the ceiling are held under it, between samples too", arguments: [24_000, 44_100])
    func limiterHoldsTruePeaks(rate: Int) throws {
        // A tone at a quarter of the rate, sampled 45° off its crests: the
        // samples sit 3 dB below the true peak, which a sample-peak limiter misses.
        let tone = Self.tone(hertz: Double(rate) / 4, dBFS: -6, seconds: 0.5, rate: rate, phase: Double.pi / 4)
        let directory = try TemporaryFolder.make("tourpack-audio")
        defer { TemporaryFolder.remove(directory) }
        let speech = try Fixtures.chunks(rate: rate, in: directory).flatMap(\.samples)
        for input in [tone, speech] {
            let before = try Self.measure(input, rate: rate).truePeak
            let gainDB = 8.0
            let result = try Self.leveled(input, gainDB: gainDB, ceiling: -1.5, rate: rate)
            #expect(result.samples.count == input.count)
            let after = try #require(try Self.measure(result.samples, rate: rate).finishedProfile.truePeakDBTP)
            #expect(after <= -1.4, "true peak \(after) dBTP after limiting (before: \(20 * log10(before)) dBTP + \(gainDB) dB)")
            #expect(result.report.limiterReductionDB > 1)
        }
    }

    /// The survey as one `LimiterGain` per threshold, each run over every
    /// block in turn, its energy summed per block as the survey sums it:
    /// what `LimiterSurvey`'s lanes must give to the bit.
    static func referenceSurvey(_ samples: [Int16], block: Int, rate: Int) -> [Double] {
        let lookahead = LoudnessLeveler.lookahead(rate: rate)
        var blocks = stride(from: 0, to: samples.count, by: block).map { start in
            samples[start..<min(samples.count, start + block)].map { Float($0) / 32768 }
        }
        blocks.append([Float](repeating: 0, count: lookahead + TruePeakEnvelope.latency))
        let values = blocks.flatMap { $0 }
        var envelope = TruePeakEnvelope()
        var limiters = LimiterSurvey.thresholdsDBFS.map {
            LimiterGain(threshold: Float(pow(10, $0 / 20)), lookahead: lookahead, release: LoudnessLeveler.release(rate: rate))
        }
        var before = 0.0
        var after = [Double](repeating: 0, count: limiters.count)
        for samples in blocks {
            var peaks: [Float] = []
            samples.withUnsafeBufferPointer { envelope.run($0, into: &peaks) }
            for index in limiters.indices {
                var energy = 0.0
                peaks.withUnsafeBufferPointer { peaks in
                    limiters[index].run(peaks) { out, gain in
                        let limited = Double(values[out] * gain)
                        energy += limited * limited
                    }
                }
                after[index] += energy
            }
            let handedOut = limiters[0].nextOut
            for out in max(0, handedOut - peaks.count)..<handedOut { before += Double(values[out]) * Double(values[out]) }
        }
        guard before > 0 else { return [] }
        return after.map { min(1, $0 / before) }
    }

    @Test(
        "the survey's thirteen limiters in SIMD lanes give each limiter's own figures, to the bit, whatever the blocks",
        arguments: [16_000, 48_000])
    func surveyLanesAreLimiters(rate: Int) throws {
        let directory = try TemporaryFolder.make("tourpack-survey")
        defer { TemporaryFolder.remove(directory) }
        // A second and a half of speech: the reference is slow in a debug build.
        let speech = Array(try Fixtures.chunks(rate: rate, in: directory).flatMap(\.samples).prefix(rate * 3 / 2))
        func scaled(_ samples: [Int16], dB: Double) -> [Int16] {
            samples.map { Int16(clamping: Int((Double($0) * pow(10, dB / 20)).rounded())) }
        }
        let silence = [Int16](repeating: 0, count: rate / 2)
        let signals: [(String, [Int16])] = [
            ("speech", speech),
            ("speech pushed 12 dB into clipping, between pauses", silence + scaled(speech, dB: 12) + silence + speech),
            ("quiet speech", scaled(speech, dB: -30)),
            (
                "tone bursts",
                silence + Self.tone(hertz: 997, dBFS: -3, seconds: 0.3, rate: rate) + silence
                    + Self.tone(hertz: 3_000, dBFS: -20, seconds: 0.2, rate: rate)
            ),
            ("silence", silence),
            ("three samples", Array(speech.prefix(3))),
        ]
        for (name, samples) in signals {
            for block in [1, 61, 1 << 20] where block > 1 || samples.count < 20_000 {
                let expected = Self.referenceSurvey(samples, block: block, rate: rate)
                if name != "silence" && name != "three samples" {
                    #expect(expected.count == LimiterSurvey.thresholdsDBFS.count && expected.contains { $0 < 1 }, "\(name)")
                }
                var survey = LimiterSurvey(rate: rate)
                for start in stride(from: 0, to: samples.count, by: block) {
                    samples[start..<min(samples.count, start + block)].withUnsafeBufferPointer { survey.add($0) }
                }
                #expect(survey.finish() == expected, "\(name) in blocks of \(block) at \(rate) Hz")
            }
            // The leveler's limiter skips settled blocks: the same samples out.
            for gainDB in [-6.0, 9.0] {
                let levelled = try [true, false].map { skips in
                    let leveler = LoudnessLeveler(gainDB: gainDB, ceilingDBTP: -1, rate: rate, skipsSettled: skips)
                    var out: [Int16] = []
                    for start in stride(from: 0, to: samples.count, by: 61) {
                        try samples[start..<min(samples.count, start + 61)].withUnsafeBufferPointer {
                            try leveler.feed($0) { out.append(contentsOf: $0) }
                        }
                    }
                    try leveler.finish { out.append(contentsOf: $0) }
                    return (out, leveler.report)
                }
                #expect(levelled[0].0 == levelled[1].0 && levelled[0].1 == levelled[1].1, "\(name) levelled \(gainDB) dB")
                #expect(levelled[0].0.count == samples.count)
            }
        }
    }

    /// The true-peak envelope a sample at a time, as its documentation
    /// reads: sample n's magnitude and the interpolated points on either
    /// side of it, each a sum over samples n-5 … n+6 (zeros before the start).
    static func envelope(_ samples: [Float]) -> [Float] {
        let phases = TruePeakEnvelope.phases
        let padded = [Float](repeating: 0, count: 11) + samples
        var between: [Float] = []
        for k in samples.indices {
            var largest: Float = 0
            for phase in 0..<3 {
                var sum: Float = 0
                for tap in 0..<12 { sum += padded[k + tap] * phases[phase * 12 + tap] }
                largest = max(largest, abs(sum))
            }
            between.append(largest)
        }
        // Sample n = k - 6 is known when sample k arrives.
        return (6..<max(6, samples.count)).map { k in
            max(abs(padded[k + 5]), between[k], k > 6 ? between[k - 1] : 0)
        }
    }

    @Test("the true-peak envelope, four windows at a time, is a sample at a time's to the bit, whatever the blocks")
    func envelopeInBlocks() throws {
        let directory = try TemporaryFolder.make("tourpack-envelope")
        defer { TemporaryFolder.remove(directory) }
        var generator = SeededGenerator(seed: 39)
        let speech = try Fixtures.chunks(rate: 24_000, in: directory).flatMap(\.samples).prefix(30_000).map { Float($0) / 32_768 }
        let noise = (0..<5_003).map { _ in Float.random(in: -1...1, using: &generator) }
        let square = (0..<999).map { $0 / 7 % 2 == 0 ? Float(0.99) : -0.99 }
        for (name, samples) in [("speech", speech), ("noise", noise), ("square", square), ("five samples", Array(noise.prefix(5)))] {
            let expected = Self.envelope(samples)
            for blocks in [[1], [3, 1, 4], [4_096], [17, 256, 5]] {
                var envelope = TruePeakEnvelope()
                var peaks: [Float] = []
                var start = 0, turn = 0
                while start < samples.count {
                    let end = min(samples.count, start + blocks[turn % blocks.count])
                    samples[start..<end].withUnsafeBufferPointer { envelope.run($0, into: &peaks) }
                    start = end
                    turn += 1
                }
                #expect(peaks == expected, "\(name) in blocks of \(blocks)")
            }
        }
    }

    @Test("chunks 0, 9 and 18 dB down, joined and levelled, land on the target in every format by ffmpeg's own meter")
    func speechOnTarget() throws {
        let rate = 24_000
        let directory = try TemporaryFolder.make("tourpack-audio")
        defer { TemporaryFolder.remove(directory) }
        // Six sentences; each pair a level further down, as an endpoint's
        // answers might come back.
        let spoken = try (Fixtures.chunks(rate: rate, in: directory) + Fixtures.chunks(rate: rate, in: directory))
        let chunks = spoken.enumerated().map { index, chunk in
            PCMAudio(samples: chunk.samples.map { Int16((Double($0) * pow(10, -9 * Double(index / 2) / 20)).rounded()) }, sampleRate: rate)
        }
        let profiles = try chunks.map { chunk in
            var meter = ChunkMeter(rate: rate)
            try chunk.samples.withUnsafeBufferPointer { try meter.add($0) }
            return try #require(meter.finish().loudness)
        }
        #expect(profiles.allSatisfy { $0.limiting.count == LimiterSurvey.thresholdsDBFS.count })
        let joined = try PCMJoiner().joinInMemory(chunks)
        let target = LoudnessTarget.standard
        let result = try Self.leveled(joined.samples, gainDB: target.gainDB(for: profiles), ceiling: target.limiterCeilingDBTP, rate: rate)
        #expect(result.samples.count == joined.samples.count)
        let wav = directory.appendingPathComponent("leveled.wav")
        try Data(WAV.encode(PCMAudio(samples: result.samples, sampleRate: rate))).write(to: wav)
        let measured = try Fixtures.ffmpegLoudness(wav)
        #expect(abs(measured.integrated - target.integratedLUFS) <= 0.5, "ffmpeg: \(measured), \(result.report)")
        #expect(measured.truePeak <= target.truePeakDBTP, "ffmpeg: \(measured)")
        // As shipped: each encoder's overshoot stays within the margin.
        for format in AudioFormat.allCases {
            let url = directory.appendingPathComponent("leveled.\(format.fileExtension)")
            _ = try FFmpegAudioEncoder().encodeInMemory(
                PCMAudio(samples: result.samples, sampleRate: rate), as: format, metadata: Fixtures.metadata, to: url)
            let shipped = try Fixtures.ffmpegLoudness(url)
            #expect(abs(shipped.integrated - target.integratedLUFS) <= 1, "\(format): \(shipped)")
            #expect(shipped.truePeak <= target.truePeakDBTP, "\(format): ffmpeg's true peak \(shipped.truePeak) dBTP")
        }
    }
}

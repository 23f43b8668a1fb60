import Foundation
import Testing
import TourpackCore
import TourpackTesting

@testable import TourpackAudio
@testable import TourpackKit

@Suite("PCMJoiner on espeak-ng speech", .offThePool)
struct PCMJoinerTests {
    /// The gap between the last audible sample before `seam` and the first after it.
    private func gap(in samples: [Int16], after index: Int, threshold: Int) -> (last: Int, next: Int)? {
        guard let last = samples[...index].lastIndex(where: { abs(Int($0)) > threshold }),
            let next = samples[(index + 1)...].firstIndex(where: { abs(Int($0)) > threshold })
        else { return nil }
        return (last, next)
    }

    @Test("the pause between chunks is the setting, within 20 ms", arguments: [(350, 24_000), (350, 22_050), (600, 24_000), (120, 24_000)])
    func pauseLength(pauseMilliseconds: Int, rate: Int) throws {
        let directory = try TemporaryFolder.make("tourpack-audio")
        defer { TemporaryFolder.remove(directory) }
        let chunks = try Fixtures.chunks(rate: rate, in: directory)
        let joiner = PCMJoiner(pauseMilliseconds: pauseMilliseconds)
        let joined = try joiner.joinInMemory(chunks)
        #expect(joined.sampleRate == rate)

        // The first chunk is copied from its start, so its last audible sample
        // is at the same index in the output.
        let threshold = joiner.silenceThreshold
        let firstLast = try #require(chunks[0].samples.lastIndex(where: { abs(Int($0)) > threshold }))
        let seam = try #require(gap(in: joined.samples, after: firstLast, threshold: threshold))
        let pause = Double(seam.next - seam.last - 1) / Double(rate)
        #expect(abs(pause - Double(pauseMilliseconds) / 1000) <= 0.020, "pause \(pause) s")

        // The second seam: after the second chunk's speech, which starts at seam.next.
        let secondSpan = try #require(ShapeMeter.shape(of: chunks[1].samples).audible)
        let secondEnd = seam.next + secondSpan.count - 1
        let seam2 = try #require(gap(in: joined.samples, after: secondEnd, threshold: threshold))
        let pause2 = Double(seam2.next - seam2.last - 1) / Double(rate)
        #expect(abs(pause2 - Double(pauseMilliseconds) / 1000) <= 0.020, "second pause \(pause2) s")

        // Nothing of the speech was lost: the output is the audible speech plus two pauses, within the kept margins.
        let audible = try chunks.map { try #require(ShapeMeter.shape(of: $0.samples).audible).count }.reduce(0, +)
        let expected =
            audible + 2 * Int(Double(pauseMilliseconds * rate) / 1000)
            + chunks[0].samples.prefix(while: { abs(Int($0)) <= threshold }).count
            + chunks[2].samples.reversed().prefix(while: { abs(Int($0)) <= threshold }).count
        #expect(abs(joined.samples.count - expected) <= 4, "\(joined.samples.count) samples, expected \(expected)")
    }

    /// Chunks cut in the middle of a word end and start at full level: without
    /// fades the seam would step straight from speech to zero and back.
    @Test("seams have no step, even when chunks are cut mid-word")
    func noClickAtSeams() throws {
        let directory = try TemporaryFolder.make("tourpack-audio")
        defer { TemporaryFolder.remove(directory) }
        let speech = try Fixtures.speech(Fixtures.sentences[0], in: directory).resampled(to: 24_000)
        let samples = speech.samples
        // Cut where the signal is loud, so each piece ends or starts abruptly.
        let middle = samples.count / 2
        let cut = try #require(samples[middle...].firstIndex(where: { abs(Int($0)) > 6_000 }))
        let restart = try #require(samples[(cut + 2_400)...].firstIndex(where: { abs(Int($0)) > 6_000 }))
        let first = PCMAudio(samples: Array(samples[...cut]), sampleRate: 24_000)
        let second = PCMAudio(samples: Array(samples[restart...]), sampleRate: 24_000)
        #expect(abs(Int(first.samples.last!)) > 6_000 && abs(Int(second.samples.first!)) > 6_000)

        let joined = try PCMJoiner().joinInMemory([first, second]).samples
        // The inserted digital silence sits right after the first piece.
        let silenceStart = try #require(joined[(cut - 1)...].firstIndex(of: 0))
        let silenceEnd = try #require(joined[silenceStart...].firstIndex(where: { $0 != 0 }))
        #expect(silenceStart <= cut)
        let seamWindow = (silenceStart - 1)...(silenceEnd)
        let steps = seamWindow.dropLast().map { abs(Int(joined[$0 + 1]) - Int(joined[$0])) }
        let biggestStep = steps.max() ?? 0
        #expect(biggestStep < 64, "a step of \(biggestStep) at a seam")
        // The fades shaped the pieces' edges, so the pieces themselves are not copied verbatim there.
        #expect(abs(Int(joined[silenceStart - 1])) < 64)
        #expect(abs(Int(joined[silenceEnd])) < 64)
    }

    @Test("no chunks, or only empty chunks, is an error")
    func emptyInput() throws {
        #expect(throws: PCMJoiner.JoinError.empty) { try PCMJoiner().joinInMemory([]) }
        let empty = PCMAudio(samples: [], sampleRate: 24_000)
        #expect(throws: PCMJoiner.JoinError.empty) { try PCMJoiner().joinInMemory([empty, empty]) }
    }

    @Test("a single very short chunk comes back whole")
    func singleShortChunk() throws {
        let directory = try TemporaryFolder.make("tourpack-audio")
        defer { TemporaryFolder.remove(directory) }
        let speech = try Fixtures.speech("Hi.", in: directory)
        let loud = try #require(speech.samples.firstIndex(where: { abs(Int($0)) > 2_000 }))
        let short = PCMAudio(samples: Array(speech.samples[loud..<(loud + 120)]), sampleRate: speech.sampleRate)
        let joined = try PCMJoiner().joinInMemory([short])
        #expect(joined.samples.count == 120)
        #expect(joined.sampleRate == speech.sampleRate)
        #expect(joined.samples.contains { abs(Int($0)) > 1_000 })
    }

    @Test("chunks at other rates are resampled to the first chunk's rate")
    func mixedRates() throws {
        let directory = try TemporaryFolder.make("tourpack-audio")
        defer { TemporaryFolder.remove(directory) }
        let first = try Fixtures.speech(Fixtures.sentences[0], in: directory).resampled(to: 24_000)
        let second = try Fixtures.speech(Fixtures.sentences[1], in: directory)
        #expect(second.sampleRate == 22_050)
        let joined = try PCMJoiner().joinInMemory([first, second])
        #expect(joined.sampleRate == 24_000)
        let expected = first.durationSeconds + second.durationSeconds + 0.35
        // Trimmed edges can only shorten it, by the quiet lead-in and tail.
        #expect(joined.durationSeconds <= expected + 0.01)
        #expect(joined.durationSeconds >= expected - 1.0)
    }
}

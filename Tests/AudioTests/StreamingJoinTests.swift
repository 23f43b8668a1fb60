import Foundation
import Testing
import TourpackTesting

@testable import TourpackAudio
@testable import TourpackCore
@testable import TourpackKit

/// The streamed join (shapes first, then each chunk rendered block by block
/// as soon as it and the next chunk with speech are known) gives exactly the
/// samples of the whole-buffer join it replaced, on the same chunks.
@Suite("Streaming join against the whole-buffer join", .offThePool)
struct StreamingJoinTests {
    /// Renders `chunks` the way the build does: shapes recorded in
    /// `arrival` order, each ready chunk fed to its renderer in blocks of
    /// varying size, silence appended, everything collected.
    static func streamed(_ chunks: [PCMAudio], joiner: PCMJoiner = PCMJoiner(), arrival: [Int], blockSeed: Int = 1) throws -> [Int16] {
        let rate = chunks.first { !$0.samples.isEmpty }?.sampleRate ?? 24_000
        let stream = JoinStream(joiner: joiner, chunks: chunks.count, rate: rate)
        var output: [Int16] = []
        var rendered: [Int] = []
        var size = blockSeed
        for index in arrival {
            stream.record(index, ShapeMeter.shape(of: chunks[index].samples))
            while let (next, piece) = stream.next() {
                rendered.append(next)
                var renderer = PieceRenderer(piece)
                chunks[next].samples.withUnsafeBufferPointer { samples in
                    var start = 0
                    while start < samples.count {
                        let end = min(samples.count, start + size)
                        renderer.feed(UnsafeBufferPointer(rebasing: samples[start..<end])) { output.append(contentsOf: $0) }
                        start = end
                        size = size * 7 % 4_099 + 1
                    }
                }
                try renderer.finish { output.append(contentsOf: $0) }
            }
        }
        #expect(stream.isComplete)
        #expect(rendered == rendered.sorted(), "chunks rendered out of order: \(rendered)")
        return output
    }

    static func silence(_ count: Int, level: Int16 = 0) -> PCMAudio {
        PCMAudio(samples: (0..<count).map { $0 % 2 == 0 ? level : -level }, sampleRate: 24_000)
    }

    @Test("espeak speech: the same samples, whatever order the chunks arrive in", arguments: [350, 120, 0])
    func speech(pauseMilliseconds: Int) throws {
        let directory = try TemporaryFolder.make("tourpack-audio")
        defer { TemporaryFolder.remove(directory) }
        let chunks = try Fixtures.chunks(rate: 24_000, in: directory)
        let reference = try ReferenceJoin(pauseMilliseconds: pauseMilliseconds).join(chunks).samples
        let joiner = PCMJoiner(pauseMilliseconds: pauseMilliseconds)
        #expect(try joiner.joinInMemory(chunks).samples == reference)
        for (seed, arrival) in [[0, 1, 2], [2, 1, 0], [1, 2, 0], [2, 0, 1]].enumerated() {
            #expect(try Self.streamed(chunks, joiner: joiner, arrival: arrival, blockSeed: seed + 1) == reference, "arrival \(arrival)")
        }
    }

    @Test("silent, empty and very short chunks are dropped or kept exactly as before")
    func edgeChunks() throws {
        let directory = try TemporaryFolder.make("tourpack-audio")
        defer { TemporaryFolder.remove(directory) }
        let speech = try Fixtures.chunks(rate: 24_000, in: directory)
        let quiet = Self.silence(4_800, level: 40)  // below -50 dBFS: silence to the join
        let empty = PCMAudio(samples: [], sampleRate: 24_000)
        let blip = PCMAudio(samples: [0, 9_000, -9_000, 0], sampleRate: 24_000)
        let cases: [[PCMAudio]] = [
            [quiet, speech[0], empty, quiet, speech[1], quiet],
            [speech[0], quiet, quiet],
            [quiet, quiet, speech[2]],
            [quiet, empty, quiet],  // only silence: kept, a pause apart
            [quiet],
            [blip, speech[1], blip],
            [empty, blip],
        ]
        for chunks in cases {
            let reference = try ReferenceJoin().join(chunks).samples
            #expect(try PCMJoiner().joinInMemory(chunks).samples == reference)
            let orders = [Array(chunks.indices), Array(chunks.indices.reversed())]
            for arrival in orders {
                #expect(try Self.streamed(chunks, arrival: arrival) == reference, "\(chunks.map(\.samples.count)) arriving \(arrival)")
            }
        }
        #expect(throws: PCMJoiner.JoinError.empty) { try PCMJoiner().joinInMemory([empty, empty]) }
    }

    @Test("a chunk waits only for the next chunk with speech, not for the whole phase")
    func waitsOnlyForTheNextSpeech() throws {
        let directory = try TemporaryFolder.make("tourpack-audio")
        defer { TemporaryFolder.remove(directory) }
        let speech = try Fixtures.chunks(rate: 24_000, in: directory)
        let stream = JoinStream(joiner: PCMJoiner(), chunks: 4, rate: 24_000)
        stream.record(0, ShapeMeter.shape(of: speech[0].samples))
        #expect(stream.next() == nil, "chunk 0's tail depends on chunk 1")
        stream.record(1, ShapeMeter.shape(of: speech[1].samples))
        #expect(stream.next()?.index == 0)
        #expect(stream.next() == nil)
        stream.record(3, ShapeMeter.shape(of: speech[2].samples))
        #expect(stream.next() == nil, "chunk 1 still waits for chunk 2")
        stream.record(2, ShapeMeter.shape(of: Self.silence(2_400).samples))
        #expect(stream.next()?.index == 1)
        #expect(stream.next()?.index == 3, "the silent chunk 2 is skipped")
        #expect(stream.isComplete)
    }

    @Test("streamed into the encoders, every format lasts as long as the reference join, within one frame")
    func encodedDurations() throws {
        let directory = try TemporaryFolder.make("tourpack-audio")
        defer { TemporaryFolder.remove(directory) }
        let chunks = try Fixtures.chunks(rate: 24_000, in: directory)
        let reference = try ReferenceJoin().join(chunks)
        let targets = AudioFormat.allCases.map {
            EncodeTarget(
                format: $0, sampleRateHz: $0.defaultSampleRate(endpointRate: 24_000),
                url: directory.appendingPathComponent("s.\($0.fileExtension)"))
        }
        let session = try FFmpegAudioEncoder().open(targets, inputRate: 24_000, metadata: Fixtures.metadata)
        let samples = try Self.streamed(chunks, arrival: [1, 0, 2])
        try samples.withUnsafeBufferPointer { buffer in
            for start in stride(from: 0, to: buffer.count, by: 1_000) {
                try session.write(UnsafeBufferPointer(rebasing: buffer[start..<min(buffer.count, start + 1_000)]))
            }
        }
        #expect(session.samplesWritten == reference.samples.count)
        let files = try session.finish()
        for target in targets {
            let encoded = try #require(files[target.format])
            let frame =
                Double([AudioFormat.aac: 1024, .mp3: 1152, .opus: 960][target.format]!)
                / Double(target.format == .opus ? 48_000 : target.sampleRateHz)
            #expect(
                abs(encoded.durationSeconds - reference.durationSeconds) <= frame,
                "\(target.format): \(encoded.durationSeconds) s vs \(reference.durationSeconds) s")
        }
    }
}

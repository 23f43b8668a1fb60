import Foundation

@testable import TourpackAudio
@testable import TourpackCore
@testable import TourpackKit

// Whole buffers through the build's own streaming stages, for tests that
// hold their audio in memory. The library lost these once only tests used
// them (they were `PCMJoiner.join` and `AudioEncoding.encode(_:as:…)`):
// the build never holds a narration whole.

extension PCMJoiner {
    /// `chunks` joined as the build joins them: each chunk's shape measured
    /// (`ShapeMeter`), the pieces planned by `JoinStream` and rendered by
    /// `PieceRenderer`. Chunks at another rate than the first non-empty one
    /// are resampled to its rate first.
    /// - Throws: `JoinError.empty` when there is no sample at all.
    func joinInMemory(_ chunks: [PCMAudio]) throws -> PCMAudio {
        for (index, chunk) in chunks.enumerated() where chunk.sampleRate <= 0 {
            throw JoinError.invalidSampleRate(chunk: index, rate: chunk.sampleRate)
        }
        guard let rate = chunks.first(where: { !$0.samples.isEmpty })?.sampleRate else { throw JoinError.empty }
        let parts = try chunks.map { try $0.resampled(to: rate) }
        var output: [Int16] = []
        let stream = JoinStream(joiner: self, chunks: parts.count, rate: rate)
        for (index, part) in parts.enumerated() { stream.record(index, ShapeMeter.shape(of: part.samples)) }
        while let (index, piece) = stream.next() {
            var renderer = PieceRenderer(piece)
            parts[index].samples.withUnsafeBufferPointer { block in
                renderer.feed(block) { output.append(contentsOf: $0) }
            }
            try renderer.finish { output.append(contentsOf: $0) }
        }
        guard !output.isEmpty else { throw JoinError.empty }
        return PCMAudio(samples: output, sampleRate: rate)
    }
}

extension AudioEncoding {
    /// `pcm` encoded once into `format` at `temporaryURL`, at `sampleRateHz`
    /// (the format's default for the PCM's rate when nil), written into an
    /// encode session in blocks as the build writes it.
    func encodeInMemory(
        _ pcm: PCMAudio, as format: AudioFormat, sampleRateHz: Int? = nil, metadata: AudioMetadata, to temporaryURL: URL
    ) throws -> EncodedAudio {
        let rate = sampleRateHz ?? format.defaultSampleRate(endpointRate: pcm.sampleRate)
        let session = try open(
            [EncodeTarget(format: format, sampleRateHz: rate, url: temporaryURL)], inputRate: pcm.sampleRate, metadata: metadata)
        do {
            try pcm.samples.withUnsafeBufferPointer { samples in
                var start = 0
                while start < samples.count {
                    let end = min(samples.count, start + 8192)
                    try session.write(UnsafeBufferPointer(rebasing: samples[start..<end]))
                    start = end
                }
            }
            guard let encoded = try session.finish()[format] else { throw PCMJoiner.JoinError.empty }
            return encoded
        } catch {
            session.discard()
            try? FileManager.default.removeItem(at: temporaryURL)
            throw error
        }
    }
}

package import Foundation
package import TourpackAudio

/// Where a chunk's samples go as the endpoint's answer is decoded: into a
/// FLAC file (the synthesis cache's form) and past a `ChunkMeter`, after
/// converting them to the rate that was asked for when the endpoint
/// answered at another. Holds one block at a time.
///
/// Blocking (FFmpeg and file I/O): run it on a thread pool.
package final class ChunkRecorder {
    let destination: URL
    let rate: Int
    private var writer: FLACWriter?
    private var resampler: PCMResampler?
    private var meter: ChunkMeter

    /// - Parameters:
    ///   - destination: the FLAC file to write (replaced); nothing is
    ///     written there when the chunk turns out empty.
    ///   - rate: the rate the file is kept at.
    ///   - measuresLoudness: also measure the chunk's loudness (off when
    ///     the pipeline says `loudness: off`; a later build with a target
    ///     measures the cached file once).
    package init(destination: URL, rate: Int, measuresLoudness: Bool = true) {
        self.destination = destination
        self.rate = rate
        meter = ChunkMeter(rate: rate, measuresLoudness: measuresLoudness)
    }

    /// Takes the next samples, at `inputRate`.
    func take(_ samples: UnsafeBufferPointer<Int16>, inputRate: Int) throws {
        guard !samples.isEmpty else { return }
        if inputRate != rate {
            if resampler == nil || resampler?.inputRate != inputRate {
                try flushResampler()
                resampler = try PCMResampler(from: inputRate, to: rate)
            }
            try resampler?.convert(samples) { try record($0) }
        } else {
            try record(samples)
        }
    }

    private func record(_ samples: UnsafeBufferPointer<Int16>) throws {
        guard !samples.isEmpty else { return }
        if writer == nil {
            try? FileManager.default.removeItem(at: destination)
            writer = try FFmpegLogCapture.explaining { try FLACWriter(url: destination, sampleRate: rate) }
        }
        try FFmpegLogCapture.explaining { try writer?.write(samples) }
        try meter.add(samples)
    }

    private func flushResampler() throws {
        guard let resampler else { return }
        try resampler.convert(UnsafeBufferPointer(start: nil, count: 0)) { try record($0) }
        self.resampler = nil
    }

    /// Closes the file; the chunk's shape. An empty chunk leaves no file.
    func finish() throws -> ChunkShape {
        try flushResampler()
        if let writer { try FFmpegLogCapture.explaining { try writer.finish() } }
        writer = nil
        return meter.finish()
    }

    /// Removes whatever was written; for a chunk that will not be finished.
    package func discard() {
        writer = nil
        try? FileManager.default.removeItem(at: destination)
    }

    /// Decodes the spooled answer at `spool` with `decoder` into this recorder, in 64 KiB reads.
    package func decode(spool: URL, with decoder: inout some AnswerDecoder) throws -> ChunkShape {
        let handle = try FileHandle(forReadingFrom: spool)
        defer { try? handle.close() }
        while let block = try handle.read(upToCount: 1 << 16), !block.isEmpty {
            try block.withUnsafeBytes { bytes in
                try decoder.feed(bytes) { samples, rate in try take(samples, inputRate: rate) }
            }
        }
        try decoder.finish()
        return try finish()
    }
}

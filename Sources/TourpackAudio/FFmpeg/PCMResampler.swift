import CFFmpeg
import CFFmpegShims
import TourpackCore

/// Changes the sample rate of mono s16 PCM with libswresample.
///
/// Owns one `SwrContext` and frees it in `deinit`. Used where whole buffers
/// are small (a chunk from the endpoint, espeak's output); the encoder keeps
/// its own streaming resampler into the codec's sample format.
package final class PCMResampler {
    private var context: OpaquePointer?
    package let inputRate: Int
    package let outputRate: Int

    package init(from inputRate: Int, to outputRate: Int) throws {
        precondition(inputRate > 0 && outputRate > 0, "sample rates must be positive")
        self.inputRate = inputRate
        self.outputRate = outputRate
        var outLayout = AVChannelLayout()
        tp_channel_layout_mono(&outLayout)
        var inLayout = outLayout
        var swr: OpaquePointer?
        try FFmpegError.check(
            swr_alloc_set_opts2(
                &swr, &outLayout, AV_SAMPLE_FMT_S16, Int32(outputRate), &inLayout, AV_SAMPLE_FMT_S16, Int32(inputRate), 0, nil),
            "swr_alloc_set_opts2"
        )
        context = swr
        try FFmpegError.check(swr_init(swr), "swr_init")
    }

    deinit { swr_free(&context) }

    /// Converts all of `samples` and flushes the resampler's delay, so the
    /// output is the whole signal at the new rate.
    package func convertAll(_ samples: [Int16]) throws -> [Int16] {
        var output: [Int16] = []
        output.reserveCapacity(Int(clamping: Double(samples.count) * Double(outputRate) / Double(inputRate), to: 0...(1 << 32)) + 64)
        try samples.withUnsafeBufferPointer { input in
            try convert(input, into: &output)
        }
        try convert(UnsafeBufferPointer(start: nil, count: 0), into: &output)  // flush
        return output
    }

    /// Converts the next block and hands what came out to `emit`; an empty
    /// block (no base address) flushes the resampler's delay.
    package func convert(_ input: UnsafeBufferPointer<Int16>, emit: (UnsafeBufferPointer<Int16>) throws -> Void) throws {
        var block: [Int16] = []
        try convert(input, into: &block)
        try block.withUnsafeBufferPointer { try emit($0) }
    }

    private func convert(_ input: UnsafeBufferPointer<Int16>, into output: inout [Int16]) throws {
        let capacity = Int(swr_get_out_samples(context, Int32(input.count))) + 32
        let chunkCount = max(capacity, 32)
        var chunk = [Int16](repeating: 0, count: chunkCount)
        let produced = try chunk.withUnsafeMutableBytes { outBytes -> Int32 in
            var outPlane: UnsafeMutablePointer<UInt8>? = outBytes.baseAddress?.assumingMemoryBound(to: UInt8.self)
            return try withUnsafeMutablePointer(to: &outPlane) { outPlanes in
                if let base = input.baseAddress {
                    var inPlane: UnsafePointer<UInt8>? = UnsafeRawPointer(base).assumingMemoryBound(to: UInt8.self)
                    return try withUnsafeMutablePointer(to: &inPlane) { inPlanes in
                        try FFmpegError.check(
                            swr_convert(context, outPlanes, Int32(chunkCount), inPlanes, Int32(input.count)), "swr_convert")
                    }
                }
                return try FFmpegError.check(swr_convert(context, outPlanes, Int32(chunkCount), nil, 0), "swr_convert (flush)")
            }
        }
        output.append(contentsOf: chunk.prefix(Int(produced)))
    }
}

extension PCMAudio {
    /// This audio at another sample rate; itself when the rate already matches.
    package func resampled(to rate: Int) throws -> PCMAudio {
        if rate == sampleRate { return self }
        let resampler = try PCMResampler(from: sampleRate, to: rate)
        return PCMAudio(samples: try resampler.convertAll(samples), sampleRate: rate)
    }
}

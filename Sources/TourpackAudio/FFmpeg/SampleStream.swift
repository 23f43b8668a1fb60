import CFFmpeg
import CFFmpegShims
import Foundation

/// Owns one `SwrContext` that converts mono s16 PCM, block by block, to an
/// encoder's sample rate and sample format, and frees it in `deinit`.
///
/// Unlike `PCMResampler`, which converts a whole buffer into an array, this
/// streams into an `AudioSampleFIFO` through one reusable block, so a long
/// narration is never held twice.
final class SampleConverter {
    private var context: OpaquePointer?
    let inputRate: Int
    let outputRate: Int
    let outputFormat: AVSampleFormat
    private var block: [UInt8] = []

    init(inputRate: Int, outputRate: Int, outputFormat: AVSampleFormat) throws(FFmpegError) {
        self.inputRate = inputRate
        self.outputRate = outputRate
        self.outputFormat = outputFormat
        var outLayout = AVChannelLayout()
        tp_channel_layout_mono(&outLayout)
        var inLayout = outLayout
        try FFmpegError.check(
            swr_alloc_set_opts2(
                &context, &outLayout, outputFormat, Int32(outputRate), &inLayout, AV_SAMPLE_FMT_S16, Int32(inputRate), 0, nil),
            "swr_alloc_set_opts2")
        try FFmpegError.check(swr_init(context), "swr_init")
    }

    deinit { swr_free(&context) }

    /// Converts `input` and appends the result to `fifo`.
    func convert(_ input: UnsafeBufferPointer<Int16>, into fifo: AudioSampleFIFO) throws {
        guard let base = input.baseAddress, !input.isEmpty else { return }
        var inPlane: UnsafePointer<UInt8>? = UnsafeRawPointer(base).assumingMemoryBound(to: UInt8.self)
        try run(input: &inPlane, count: input.count, into: fifo)
    }

    /// Drains the samples the resampler's filter still holds.
    func flush(into fifo: AudioSampleFIFO) throws {
        try run(input: nil, count: 0, into: fifo)
    }

    private func run(input: UnsafeMutablePointer<UnsafePointer<UInt8>?>?, count: Int, into fifo: AudioSampleFIFO) throws {
        let capacity = Int(swr_get_out_samples(context, Int32(count))) + 16
        let bytesPerSample = Int(av_get_bytes_per_sample(outputFormat))
        if block.count < capacity * bytesPerSample { block = [UInt8](repeating: 0, count: capacity * bytesPerSample) }
        try block.withUnsafeMutableBytes { bytes in
            var outPlane: UnsafeMutablePointer<UInt8>? = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self)
            let converted = swr_convert(context, &outPlane, Int32(capacity), input, Int32(count))
            try FFmpegError.check(converted, "swr_convert")
            if converted > 0 {
                var rawPlane: UnsafeMutableRawPointer? = bytes.baseAddress
                try fifo.write(&rawPlane, count: Int(converted))
            }
        }
    }
}

/// Owns one `AVAudioFifo` and frees it in `deinit`: the buffer between the
/// resampler, which produces any number of samples, and the encoder, which
/// takes exactly `frame_size` samples per frame.
final class AudioSampleFIFO {
    private let fifo: OpaquePointer

    init(format: AVSampleFormat, initialCapacity: Int) throws(FFmpegError) {
        guard let fifo = av_audio_fifo_alloc(format, 1, Int32(max(1, initialCapacity))) else {
            throw FFmpegError("av_audio_fifo_alloc", code: tp_averror(ENOMEM))
        }
        self.fifo = fifo
    }

    deinit { av_audio_fifo_free(fifo) }

    var count: Int { Int(av_audio_fifo_size(fifo)) }

    /// Appends `count` samples from the single (mono) plane `plane` points at.
    func write(_ plane: UnsafeMutablePointer<UnsafeMutableRawPointer?>, count: Int) throws(FFmpegError) {
        let written = try FFmpegError.check(av_audio_fifo_write(fifo, plane, Int32(count)), "av_audio_fifo_write")
        if written != count { throw FFmpegError("av_audio_fifo_write: short write", code: tp_averror(ENOMEM)) }
    }

    /// Moves the oldest `count` samples into `frame`, which must have room for them.
    func read(_ count: Int, into frame: Frame) throws(FFmpegError) {
        let read = frame.planes.withMemoryRebound(to: UnsafeMutableRawPointer?.self, capacity: 1) { planes in
            av_audio_fifo_read(fifo, planes, Int32(count))
        }
        try FFmpegError.check(read, "av_audio_fifo_read")
        if read != count { throw FFmpegError("av_audio_fifo_read: short read", code: tp_averror_eof()) }
    }
}

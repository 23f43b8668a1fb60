import CFFmpeg
import CFFmpegShims
package import Foundation
import TourpackCore

/// Which libavcodec encoder and libavformat muxer make a clip, and how.
///
/// The pipeline's three formats have their own fixed recipe
/// (`EncoderRecipe`); this one is open, because serve-tts answers in
/// whatever the TTS services offer: MP3, Ogg Opus, ADTS AAC, FLAC, MP4 AAC
/// and G.711 in WAV.
package struct ClipRecipe: Sendable, Hashable {
    /// The libavcodec encoder (`libmp3lame`, `libopus`, `aac`, `flac`, `pcm_mulaw`…).
    package var encoder: String
    /// The libavformat muxer (`mp3`, `ogg`, `adts`, `flac`, `wav`, `ipod`…).
    package var muxer: String
    /// Bits per second asked of the encoder; nil for lossless and G.711, which have no choice.
    package var bitRate: Int?
    /// The encoder's private options; one it does not take is an error.
    package var codecOptions: [String: String]
    /// The muxer's (and the format context's) options; one nobody takes is an error.
    package var muxerOptions: [String: String]

    package init(
        encoder: String, muxer: String, bitRate: Int? = nil, codecOptions: [String: String] = [:], muxerOptions: [String: String] = [:]
    ) {
        self.encoder = encoder
        self.muxer = muxer
        self.bitRate = bitRate
        self.codecOptions = codecOptions
        self.muxerOptions = muxerOptions
    }
}

/// Encodes one whole clip of mono PCM, in one blocking call, with a
/// `ClipRecipe`, and hands back the finished file's bytes.
///
/// The muxer writes to a temporary file (the mp3, wav and mp4 muxers seek
/// back to fill in their headers), which is read back and removed. The loop
/// is the encode stage's: libswresample converts to the encoder's sample
/// format, a FIFO feeds it whole frames, the last frame is short when the
/// codec allows it and padded with silence otherwise, then the encoder is
/// drained and the trailer written. Blocking: run it on a thread pool.
package enum ClipEncoder {
    /// The sample rates `encoder` takes, as libavcodec lists them (sorted);
    /// nil when it lists none and so takes any rate, or when there is no such encoder.
    package static func sampleRates(of encoder: String) -> [Int]? {
        guard let codec = avcodec_find_encoder_by_name(encoder), var cursor = codec.pointee.supported_samplerates else { return nil }
        var rates: [Int] = []
        while cursor.pointee != 0 {
            rates.append(Int(cursor.pointee))
            cursor += 1
        }
        return rates.sorted()
    }

    /// `pcm` encoded at its own sample rate, as the bytes of the file the
    /// recipe's muxer writes. Throws `FFmpegError` (with what FFmpeg logged)
    /// when the encoder or muxer is missing, refuses the rate or an option,
    /// or a write fails; throws `TourpackError.invalidInput` for empty audio.
    package static func encode(_ pcm: PCMAudio, as recipe: ClipRecipe, scratch directory: URL = FileManager.default.temporaryDirectory)
        throws -> Data
    {
        guard !pcm.samples.isEmpty, pcm.sampleRate > 0 else {
            throw TourpackError.invalidInput(
                "no audio to encode with \(recipe.encoder) (\(pcm.samples.count) samples at \(pcm.sampleRate) Hz)")
        }
        let url = directory.appendingPathComponent("tourpack-clip-\(UUID().uuidString).\(recipe.muxer)")
        defer { try? FileManager.default.removeItem(at: url) }
        try FFmpegLogCapture.explaining {
            let run = try ClipRun(recipe: recipe, sampleRate: pcm.sampleRate, url: url)
            try pcm.samples.withUnsafeBufferPointer { try run.write($0) }
            try run.finish()
        }
        return try Data(contentsOf: url)
    }
}

/// One clip's container, encoder, converter, FIFO and frame loop.
private final class ClipRun {
    private let container: OutputContainer
    private let encoder: CodecContext
    private let converter: SampleConverter
    private let fifo: AudioSampleFIFO
    private let frame: Frame
    private let packet: Packet
    private let sampleFormat: AVSampleFormat
    private let rate: Int32
    private let frameSize: Int
    /// The next frame's pts, in samples.
    private var samplesSent: Int64 = 0

    init(recipe: ClipRecipe, sampleRate: Int, url: URL) throws {
        if let rates = ClipEncoder.sampleRates(of: recipe.encoder), !rates.contains(sampleRate) {
            throw FFmpegError(
                "\(recipe.encoder) does not encode at \(sampleRate) Hz (it takes \(rates.map(String.init).joined(separator: ", ")))",
                code: tp_averror(EINVAL))
        }
        container = try OutputContainer(muxer: recipe.muxer, url: url)
        encoder = try CodecContext(encoderNamed: recipe.encoder)
        // Mono: packed and planar are the same single plane. 16-bit first, as the PCM arrives.
        let supported = encoder.supportedSampleFormats
        let preferred = [AV_SAMPLE_FMT_S16, AV_SAMPLE_FMT_S16P, AV_SAMPLE_FMT_FLTP, AV_SAMPLE_FMT_FLT]
        guard let format = supported.isEmpty ? AV_SAMPLE_FMT_S16 : preferred.first(where: supported.contains) else {
            throw FFmpegError("\(recipe.encoder) takes none of the sample formats we convert to", code: tp_averror(EINVAL))
        }
        sampleFormat = format
        rate = Int32(sampleRate)
        let context = encoder.pointer
        context.pointee.sample_fmt = format
        context.pointee.sample_rate = rate
        tp_channel_layout_mono(&context.pointee.ch_layout)
        if let bitRate = recipe.bitRate { context.pointee.bit_rate = Int64(bitRate) }
        context.pointee.time_base = AVRational(num: 1, den: rate)
        if container.wantsGlobalHeader { context.pointee.flags |= AV_CODEC_FLAG_GLOBAL_HEADER }
        try encoder.open(options: recipe.codecOptions)
        try container.addStream(for: encoder)
        try container.writeHeader(options: recipe.muxerOptions)

        frameSize = context.pointee.frame_size > 0 ? Int(context.pointee.frame_size) : 1024
        converter = try SampleConverter(inputRate: sampleRate, outputRate: sampleRate, outputFormat: format)
        fifo = try AudioSampleFIFO(format: format, initialCapacity: frameSize * 4)
        frame = try Frame()
        packet = try Packet()
    }

    func write(_ samples: UnsafeBufferPointer<Int16>) throws {
        try converter.convert(samples, into: fifo)
        try sendWholeFrames()
    }

    func finish() throws {
        try converter.flush(into: fifo)
        try sendWholeFrames()
        let remaining = fifo.count
        if remaining > 0 {
            if encoder.hasCapability(AV_CODEC_CAP_SMALL_LAST_FRAME) || encoder.hasCapability(AV_CODEC_CAP_VARIABLE_FRAME_SIZE) {
                try sendFrame(samples: remaining)
            } else {
                try frame.allocate(sampleCount: frameSize, format: sampleFormat, sampleRate: rate)
                try fifo.read(remaining, into: frame)
                av_samples_set_silence(frame.planes, Int32(remaining), Int32(frameSize - remaining), 1, sampleFormat)
                try send(frame)
            }
        }
        try encoder.send(nil as Frame?)
        try receivePackets()
        try container.finish()
    }

    private func sendWholeFrames() throws {
        while fifo.count >= frameSize { try sendFrame(samples: frameSize) }
    }

    private func sendFrame(samples: Int) throws {
        try frame.allocate(sampleCount: samples, format: sampleFormat, sampleRate: rate)
        try fifo.read(samples, into: frame)
        try send(frame)
    }

    private func send(_ frame: Frame) throws {
        frame.pointer.pointee.pts = samplesSent
        samplesSent += Int64(frame.sampleCount)
        try encoder.send(frame)
        try receivePackets()
    }

    private func receivePackets() throws {
        let timeBase = encoder.pointer.pointee.time_base
        while try encoder.receive(into: packet) == .got {
            try container.write(packet, codecTimeBase: timeBase)
        }
    }
}

import CFFmpeg
import CFFmpegShims
public import Foundation

/// The default encode stage: joined PCM in, one AAC (.m4a), MP3 or Ogg Opus
/// file out, made in-process with libavcodec, libavformat and libswresample.
///
/// The loop follows FFmpeg's own examples: libswresample converts the PCM to
/// the codec's rate and sample format block by block into an audio FIFO; the
/// FIFO feeds the encoder exactly `frame_size` samples per frame (the last
/// frame short when the codec allows it); frame timestamps count samples and
/// each packet is rescaled to the stream's time base; at the end the
/// resampler and then the encoder are flushed. Memory stays bounded: apart
/// from the caller's PCM, only one input block, the FIFO and a frame live.
///
/// The encoder writes only to the temporary URL it is given; the store stage
/// fsyncs and renames. The returned `EncodedAudio` is measured from the file
/// that was written, not from the settings that were asked for.
public struct FFmpegAudioEncoder: AudioEncoding {
    /// The native AAC encoder's coder; `AACCoder.chosen` unless a benchmark compares.
    public var aacCoder: AACCoder
    /// How many input samples go through the resampler at a time.
    public var blockSamples: Int

    public init(aacCoder: AACCoder = .chosen, blockSamples: Int = 8192) {
        self.aacCoder = aacCoder
        self.blockSamples = max(256, blockSamples)
    }

    /// The recipe's revision: bump it whenever `EncoderRecipe` or the encode
    /// loop changes what is written, so cached files are made again.
    static let recipeRevision = 1

    /// libavcodec's and libavformat's versions, the recipe's revision and the
    /// AAC coder. The block size is left out: it does not change the output.
    public var fingerprint: String {
        "ffmpeg avcodec \(avcodec_version()) avformat \(avformat_version()) recipe \(Self.recipeRevision) aac \(aacCoder.rawValue)"
    }

    /// Encodes `pcm` once into `format` at `temporaryURL` (replacing any file there).
    public func encode(_ pcm: PCMAudio, as format: AudioFormat, metadata: AudioMetadata, to temporaryURL: URL) throws -> EncodedAudio {
        guard !pcm.samples.isEmpty, pcm.sampleRate > 0 else { throw PCMJoiner.JoinError.empty }
        try? FileManager.default.removeItem(at: temporaryURL)
        do {
            try FFmpegLogCapture.explaining { try write(pcm, as: format, metadata: metadata, to: temporaryURL) }
            return try EncodedAudio(measuring: temporaryURL, as: format)
        } catch {
            try? FileManager.default.removeItem(at: temporaryURL)
            throw error
        }
    }

    private func write(_ pcm: PCMAudio, as format: AudioFormat, metadata: AudioMetadata, to url: URL) throws {
        let recipe = EncoderRecipe(format: format, aacCoder: aacCoder)
        let container = try OutputContainer(muxer: recipe.muxerName, url: url)
        let encoder = try CodecContext(encoderNamed: recipe.encoderName)
        let supported = encoder.supportedSampleFormats
        guard let sampleFormat = recipe.sampleFormats.first(where: supported.contains) else {
            throw FFmpegError("\(recipe.encoderName) takes none of the sample formats we convert to", code: tp_averror(EINVAL))
        }
        let rate = Int32(format.sampleRateHz)
        let context = encoder.pointer
        context.pointee.sample_fmt = sampleFormat
        context.pointee.sample_rate = rate
        tp_channel_layout_mono(&context.pointee.ch_layout)
        context.pointee.bit_rate = Int64(recipe.requestedBitRate)
        context.pointee.time_base = AVRational(num: 1, den: rate)
        if container.wantsGlobalHeader { context.pointee.flags |= AV_CODEC_FLAG_GLOBAL_HEADER }
        try encoder.open(options: recipe.codecOptions)

        try container.addStream(for: encoder)
        try tag(container, metadata, recipe: recipe)
        try container.writeHeader(options: recipe.muxerOptions)

        let frameSize = context.pointee.frame_size > 0 ? Int(context.pointee.frame_size) : 1024
        let converter = try SampleConverter(inputRate: pcm.sampleRate, outputRate: format.sampleRateHz, outputFormat: sampleFormat)
        let fifo = try AudioSampleFIFO(format: sampleFormat, initialCapacity: frameSize * 4)
        let run = try EncodeRun(encoder: encoder, container: container, fifo: fifo, frameSize: frameSize, sampleFormat: sampleFormat, rate: rate)

        try pcm.samples.withUnsafeBufferPointer { samples in
            var start = 0
            while start < samples.count {
                let end = min(samples.count, start + blockSamples)
                try converter.convert(UnsafeBufferPointer(rebasing: samples[start..<end]), into: fifo)
                try run.sendWholeFrames()
                start = end
            }
        }
        try converter.flush(into: fifo)
        try run.sendWholeFrames()
        try run.sendRemainder()
        try run.drain()
        try container.finish()
    }

    private func tag(_ container: OutputContainer, _ metadata: AudioMetadata, recipe: EncoderRecipe) throws {
        if recipe.tagsOnStream {
            try container.setStreamTag("title", metadata.title)
            try container.setStreamTag("album", metadata.album)
            try container.setStreamTag("language", metadata.language)
        } else {
            try container.setFormatTag("title", metadata.title)
            try container.setFormatTag("album", metadata.album)
            // mp4 keeps the language in the track header; ID3v2 in TLAN.
            let code = LanguageTag.iso639_2(metadata.language)
            if recipe.muxerName == "ipod" {
                try container.setStreamTag("language", code)
            } else {
                try container.setFormatTag("language", code)
            }
        }
    }
}

/// One encode's frame loop: FIFO → frame → encoder → packets → muxer.
private final class EncodeRun {
    let encoder: CodecContext
    let container: OutputContainer
    let fifo: AudioSampleFIFO
    let frameSize: Int
    let sampleFormat: AVSampleFormat
    let rate: Int32
    let frame: Frame
    let packet: Packet
    /// The next frame's pts, in samples at the codec's rate.
    private var samplesSent: Int64 = 0

    init(encoder: CodecContext, container: OutputContainer, fifo: AudioSampleFIFO, frameSize: Int, sampleFormat: AVSampleFormat, rate: Int32) throws {
        self.encoder = encoder
        self.container = container
        self.fifo = fifo
        self.frameSize = frameSize
        self.sampleFormat = sampleFormat
        self.rate = rate
        self.frame = try Frame()
        self.packet = try Packet()
    }

    /// Sends every whole frame the FIFO holds.
    func sendWholeFrames() throws {
        while fifo.count >= frameSize { try sendFrame(samples: frameSize) }
    }

    /// Sends the last, short frame: as it is when the codec allows a small
    /// last frame, padded with silence otherwise.
    func sendRemainder() throws {
        let remaining = fifo.count
        guard remaining > 0 else { return }
        if encoder.hasCapability(AV_CODEC_CAP_SMALL_LAST_FRAME) || encoder.hasCapability(AV_CODEC_CAP_VARIABLE_FRAME_SIZE) {
            try sendFrame(samples: remaining)
        } else {
            try frame.allocate(sampleCount: frameSize, format: sampleFormat, sampleRate: rate)
            try fifo.read(remaining, into: frame)
            av_samples_set_silence(frame.planes, Int32(remaining), Int32(frameSize - remaining), 1, sampleFormat)
            try send(frame)
        }
    }

    /// Flushes the encoder and writes what it still held.
    func drain() throws {
        try encoder.send(nil as Frame?)
        try receivePackets()
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

extension AudioEncoding {
    /// Encodes one PCM into several formats, one file per entry of
    /// `temporaryURLs`, in the spec table's order. The build synthesizes a
    /// phase once and calls this, so each format is made from the same PCM.
    public func encode(_ pcm: PCMAudio, into temporaryURLs: [AudioFormat: URL], metadata: AudioMetadata) throws -> [AudioFormat: EncodedAudio] {
        var results: [AudioFormat: EncodedAudio] = [:]
        for (format, url) in temporaryURLs.sorted(by: { $0.key < $1.key }) {
            results[format] = try encode(pcm, as: format, metadata: metadata, to: url)
        }
        return results
    }}

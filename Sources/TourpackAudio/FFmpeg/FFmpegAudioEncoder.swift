import CFFmpeg
import CFFmpegShims
import Foundation
import TourpackCore

/// The default encode stage: a stream of PCM in, one AAC (.m4a), MP3 or Ogg
/// Opus file per format out, made in-process with libavcodec, libavformat
/// and libswresample.
///
/// The loop follows FFmpeg's own examples: libswresample converts the PCM to
/// the codec's rate and sample format block by block into an audio FIFO; the
/// FIFO feeds the encoder exactly `frame_size` samples per frame (the last
/// frame short when the codec allows it); frame timestamps count samples and
/// each packet is rescaled to the stream's time base; at the end the
/// resampler and then the encoder are flushed. Every format of a phase is
/// fed from the same blocks (`FFmpegEncodeSession`), so memory is one block,
/// the FIFOs and a frame per format, whatever the narration's length.
///
/// The encoder writes only to the temporary URLs it is given; the store
/// stage fsyncs and renames. The returned `EncodedAudio` is measured from
/// the file that was written, not from the settings that were asked for.
package struct FFmpegAudioEncoder: AudioEncoding {
    /// The native AAC encoder's coder; `AACCoder.chosen` unless a benchmark compares.
    package var aacCoder: AACCoder

    package init(aacCoder: AACCoder = .chosen) {
        self.aacCoder = aacCoder
    }

    /// The recipe's revision: bump it whenever `EncoderRecipe` or the encode
    /// loop changes what is written, so cached files are made again.
    /// 2: AAC and Opus at the endpoint's rate, AAC asked for its nominal 128k.
    /// 3: Ogg Opus bitexact, its serial number from the tags instead of a
    /// random draw (AAC and MP3 bytes unchanged).
    static let recipeRevision = 3

    /// libavcodec's and libavformat's versions, the recipe's revision and the
    /// AAC coder. Each file's rate is part of its own cache key.
    ///
    /// The versions are the headers' (`LIBAVCODEC_VERSION_INT`,
    /// `LIBAVFORMAT_VERSION_INT`), known without loading FFmpeg, so a
    /// rebuild that reuses every file never loads it. The libraries loaded
    /// to encode must be those versions, or nothing is encoded (`loader.c`).
    package var fingerprint: String {
        "ffmpeg avcodec \(tp_avcodec_built_version()) avformat \(tp_avformat_built_version()) recipe \(Self.recipeRevision) aac \(aacCoder.rawValue)"
    }

    package func open(_ targets: [EncodeTarget], inputRate: Int, metadata: AudioMetadata) throws -> any AudioEncodeSession {
        try FFmpegEncodeSession(targets: targets, inputRate: inputRate, metadata: metadata, aacCoder: aacCoder)
    }
}

/// One phase's files being encoded from one stream of PCM.
final class FFmpegEncodeSession: AudioEncodeSession {
    private var encoders: [(target: EncodeTarget, encoder: FormatEncoder)] = []
    private(set) var samplesWritten = 0
    let inputRate: Int

    init(targets: [EncodeTarget], inputRate: Int, metadata: AudioMetadata, aacCoder: AACCoder) throws {
        guard inputRate > 0 else { throw PCMJoiner.JoinError.invalidSampleRate(chunk: 0, rate: inputRate) }
        self.inputRate = inputRate
        do {
            for target in targets.sorted(by: { $0.format < $1.format }) {
                try? FileManager.default.removeItem(at: target.url)
                let encoder = try FFmpegLogCapture.explaining {
                    try FormatEncoder(target: target, inputRate: inputRate, metadata: metadata, aacCoder: aacCoder)
                }
                encoders.append((target, encoder))
            }
        } catch {
            discard()
            throw Self.naming(error, targets.first?.url)
        }
    }

    func write(_ samples: UnsafeBufferPointer<Int16>) throws {
        guard !samples.isEmpty else { return }
        for (target, encoder) in encoders {
            do { try FFmpegLogCapture.explaining { try encoder.write(samples) } } catch { throw Self.naming(error, target.url) }
        }
        samplesWritten += samples.count
    }

    func finish() throws -> [AudioFormat: EncodedAudio] {
        guard samplesWritten > 0 else { throw PCMJoiner.JoinError.empty }
        var results: [AudioFormat: EncodedAudio] = [:]
        for (target, encoder) in encoders {
            do {
                // Closing happens inside the capture too: the AAC encoder logs its statistics then.
                try FFmpegLogCapture.explaining {
                    try encoder.finish()
                    encoder.close()
                }
                results[target.format] = try EncodedAudio(measuring: target.url, as: target.format)
            } catch {
                throw Self.naming(error, target.url)
            }
        }
        encoders.removeAll()
        return results
    }

    func discard() {
        for (target, encoder) in encoders {
            _ = try? FFmpegLogCapture.explaining { encoder.close() }
            try? FileManager.default.removeItem(at: target.url)
        }
        encoders.removeAll()
    }

    /// FFmpeg's errors say what failed ("No space left on device"), not on
    /// which file: add the path.
    private static func naming(_ error: any Error, _ url: URL?) -> any Error {
        guard var ffmpeg = error as? FFmpegError, let url, !ffmpeg.operation.contains(url.path) else { return error }
        ffmpeg.operation = "\(url.path): \(ffmpeg.operation)"
        return ffmpeg
    }
}

/// One format's file: container, codec, resampler, FIFO and frame loop.
private final class FormatEncoder {
    private var parts: (container: OutputContainer, converter: SampleConverter, run: EncodeRun)?
    private var container: OutputContainer { parts!.container }
    private var converter: SampleConverter { parts!.converter }
    private var run: EncodeRun { parts!.run }

    init(target: EncodeTarget, inputRate: Int, metadata: AudioMetadata, aacCoder: AACCoder) throws {
        let format = target.format
        let recipe = EncoderRecipe(format: format, bitrateKbps: target.bitrateKbps, aacCoder: aacCoder)
        let container = try OutputContainer(muxer: recipe.muxerName, url: target.url)
        let encoder = try CodecContext(encoderNamed: recipe.encoderName)
        let supported = encoder.supportedSampleFormats
        guard let sampleFormat = recipe.sampleFormats.first(where: supported.contains) else {
            throw FFmpegError("\(recipe.encoderName) takes none of the sample formats we convert to", code: tp_averror(EINVAL))
        }
        let rate = Int32(target.sampleRateHz)
        let context = encoder.pointer
        context.pointee.sample_fmt = sampleFormat
        context.pointee.sample_rate = rate
        tp_channel_layout_mono(&context.pointee.ch_layout)
        context.pointee.bit_rate = Int64(recipe.requestedBitRate)
        context.pointee.time_base = AVRational(num: 1, den: rate)
        if container.wantsGlobalHeader { context.pointee.flags |= AV_CODEC_FLAG_GLOBAL_HEADER }
        try encoder.open(options: recipe.codecOptions)

        try container.addStream(for: encoder)
        try Self.tag(container, metadata, recipe: recipe)
        try container.writeHeader(options: recipe.muxerOptions(for: metadata))

        let frameSize = context.pointee.frame_size > 0 ? Int(context.pointee.frame_size) : 1024
        let converter = try SampleConverter(inputRate: inputRate, outputRate: target.sampleRateHz, outputFormat: sampleFormat)
        let fifo = try AudioSampleFIFO(format: sampleFormat, initialCapacity: frameSize * 4)
        let run = try EncodeRun(
            encoder: encoder, container: container, fifo: fifo, frameSize: frameSize, sampleFormat: sampleFormat, rate: rate)
        parts = (container, converter, run)
    }

    /// Frees the codec, resampler and container now (the caller captures
    /// what FFmpeg logs while they close).
    func close() { parts = nil }

    func write(_ samples: UnsafeBufferPointer<Int16>) throws {
        try converter.convert(samples, into: run.fifo)
        try run.sendWholeFrames()
    }

    func finish() throws {
        try converter.flush(into: run.fifo)
        try run.sendWholeFrames()
        try run.sendRemainder()
        try run.drain()
        try container.finish()
    }

    private static func tag(_ container: OutputContainer, _ metadata: AudioMetadata, recipe: EncoderRecipe) throws {
        if recipe.tagsOnStream {
            try container.setStreamTag("title", metadata.title)
            try container.setStreamTag("album", metadata.album)
            try container.setStreamTag("language", metadata.language)
        } else {
            try container.setFormatTag("title", metadata.title)
            try container.setFormatTag("album", metadata.album)
            // mp4 keeps the language in the track header; ID3v2 in TLAN.
            let code = LanguageTag.iso639Part2(metadata.language)
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

    init(
        encoder: CodecContext, container: OutputContainer, fifo: AudioSampleFIFO, frameSize: Int, sampleFormat: AVSampleFormat, rate: Int32
    ) throws {
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

import CFFmpeg
import CFFmpegShims
package import Foundation
import TourpackCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// What an audio file holds, as FFmpeg's own demuxer and decoder see it.
///
/// A plain value so `validate` can compare it with package.json, collect it,
/// and print it as text, JSON or JUnit.
package struct AudioInspection: Sendable, Hashable {
    /// The demuxer's name, e.g. `mov,mp4,m4a,3gp,3g2,mj2`, `mp3`, `ogg`.
    package var containerName: String
    /// The codec name as ffprobe reports it: `aac`, `mp3`, `opus`.
    package var codecName: String
    /// The rate the decoder puts out (always 48 kHz for Opus).
    package var sampleRateHz: Int
    /// The rate the file was encoded from: Opus's OpusHead records the
    /// input's rate (RFC 7845, 5.1); for the other codecs, `sampleRateHz`.
    package var encodedSampleRateHz: Int
    package var channels: Int
    /// The audio payload's bit rate: packet bytes over the encoded duration
    /// (priming and padding included, so a CBR file reads exactly its rate).
    package var bitRate: Int
    /// Playable samples at `sampleRateHz`: decoded samples when the file was
    /// decoded, otherwise packet durations; priming and end padding that the
    /// container declares (mp4 edit list, LAME tag, Ogg pre-skip and end
    /// granule) are already removed.
    package var sampleCount: Int64
    /// What the decoder put out, before the container's end trimming (which
    /// libavcodec 59 applies for mp3 and Ogg but not for an mp4 edit list); 0 when not decoded.
    package var decodedSamples: Int64
    /// Samples the container asks the player to drop at the start (encoder priming).
    package var primingSamples: Int64
    /// Samples the container asks the player to drop at the end (padding of the last frame).
    package var paddingSamples: Int64
    /// The duration the container declares, if any.
    package var containerDurationSeconds: Double?
    package var packetCount: Int
    /// Whether every packet went through the decoder.
    package var decoded: Bool
    /// How many errors the demuxer and decoder reported (returned or logged).
    package var errorCount: Int
    /// The first few of those errors, as FFmpeg worded them.
    package var errors: [String]
    /// Integrated loudness (BS.1770) of the decoded audio; nil when not
    /// decoded, or when no 400 ms block passes the gates.
    package var integratedLUFS: Double?
    /// True peak of the decoded audio; nil when not decoded, or for digital silence.
    package var truePeakDBTP: Double?

    /// `sampleCount` in seconds.
    package var durationSeconds: Double { sampleRateHz > 0 ? Double(sampleCount) / Double(sampleRateHz) : 0 }
    package var bitRateKbps: Int { Int((Double(bitRate) / 1000).rounded()) }
    /// Decoded with no error at all.
    package var isClean: Bool { decoded && errorCount == 0 }
}

/// Opens audio files in-process with libavformat and libavcodec: the check
/// behind `validate`'s "decodes cleanly", and the measurement behind
/// `EncodedAudio`. No ffprobe or ffmpeg process is involved.
package struct AudioFileInspector: Sendable {
    package init() {}

    /// Demuxes and decodes the whole first audio stream of `url`, and
    /// measures the loudness of what it decodes to.
    /// - Throws: `FFmpegError` when the file cannot be opened as audio at all;
    ///   damage found while decoding is reported in `errors` instead.
    package func inspect(_ url: URL) throws -> AudioInspection {
        try run(url, decode: true)
    }

    /// Demuxes without decoding: container, codec, duration and bit rate from
    /// packets alone, at a small fraction of a decode's cost.
    package func measure(_ url: URL) throws -> AudioInspection {
        try run(url, decode: false)
    }

    private func run(_ url: URL, decode: Bool) throws -> AudioInspection {
        var (result, messages, count) = try FFmpegLogCapture.run { try demux(url, decode: decode) }
        result.errorCount += count
        result.errors += messages
        return result
    }

    /// The input sample rate of an OpusHead (the stream's extradata):
    /// "OpusHead", version, channels, pre-skip (16 bits), then the rate (32
    /// bits, little-endian). Nil for other codecs, or when it says 0 (unknown).
    private static func opusInputRate(_ parameters: UnsafeMutablePointer<AVCodecParameters>) -> Int? {
        guard parameters.pointee.codec_id == AV_CODEC_ID_OPUS, let extradata = parameters.pointee.extradata,
            parameters.pointee.extradata_size >= 16
        else { return nil }
        let bytes = UnsafeBufferPointer(start: extradata, count: Int(parameters.pointee.extradata_size))
        guard bytes.starts(with: Array("OpusHead".utf8)) else { return nil }
        let rate = Int(bytes[12]) | Int(bytes[13]) << 8 | Int(bytes[14]) << 16 | Int(bytes[15]) << 24
        return rate > 0 ? rate : nil
    }

    private func demux(_ url: URL, decode: Bool) throws -> AudioInspection {
        let input = try InputContainer(url: url)
        let stream = try input.bestAudioStream()
        let parameters = stream.pointee.codecpar!
        let rate = Int(parameters.pointee.sample_rate)
        var result = AudioInspection(
            containerName: input.formatName, codecName: String(cString: avcodec_get_name(parameters.pointee.codec_id)),
            sampleRateHz: rate, encodedSampleRateHz: Self.opusInputRate(parameters) ?? rate,
            channels: Int(parameters.pointee.ch_layout.nb_channels), bitRate: 0, sampleCount: 0, decodedSamples: 0,
            primingSamples: 0, paddingSamples: 0, containerDurationSeconds: input.durationSeconds, packetCount: 0,
            decoded: decode, errorCount: 0, errors: [], integratedLUFS: nil, truePeakDBTP: nil)
        func record(_ operation: String, _ code: Int32) {
            result.errorCount += 1
            if result.errors.count < 8 { result.errors.append(FFmpegError(operation, code: code).description) }
        }

        let decoder: CodecContext?
        // Only the integrated loudness and the true peak are read: no gating blocks are kept.
        let meter = decode && rate > 0 ? try LoudnessMeter(rate: rate, keepsBlocks: false) : nil
        if decode {
            let context = try CodecContext(decoderFor: parameters)
            context.pointer.pointee.pkt_timebase = stream.pointee.time_base
            context.pointer.pointee.err_recognition |= AV_EF_CRCCHECK | AV_EF_BITSTREAM
            try context.open()
            decoder = context
        } else {
            decoder = nil
        }
        let packet = try Packet()
        let frame = try Frame()
        let samplesTimeBase = AVRational(num: 1, den: Int32(max(rate, 1)))
        var payloadBytes: Int64 = 0
        var encodedSamples: Int64 = 0

        func receiveFrames() {
            guard let decoder else { return }
            while true {
                let (pull, error) = decoder.receive(into: frame)
                if error < 0 { record("avcodec_receive_frame", error); return }
                guard pull == .got else { return }
                // A frame plays at most its packet's duration: the mp4 demuxer
                // shortens the last packet instead of flagging end padding.
                let samples = Int64(frame.sampleCount)
                let packetSamples = av_rescale_q(frame.pointer.pointee.pkt_duration, stream.pointee.time_base, samplesTimeBase)
                result.decodedSamples += samples
                result.sampleCount += packetSamples > 0 ? min(samples, packetSamples) : samples
                if let meter { Self.feed(frame, to: meter) }
                av_frame_unref(frame.pointer)
            }
        }

        while true {
            let code = av_read_frame(input.pointer, packet.pointer)
            if code == tp_averror_eof() { break }
            if code < 0 { record("av_read_frame", code); break }
            defer { packet.unref() }
            guard packet.pointer.pointee.stream_index == stream.pointee.index else { continue }
            result.packetCount += 1
            payloadBytes += Int64(packet.pointer.pointee.size)
            let duration = av_rescale_q(packet.pointer.pointee.duration, stream.pointee.time_base, samplesTimeBase)
            encodedSamples += duration
            let (skipStart, discardEnd) = skipSamples(of: packet)
            result.primingSamples += skipStart
            result.paddingSamples += discardEnd
            if let decoder {
                let sent = decoder.send(packet)
                if sent < 0 && sent != tp_averror_eagain() { record("avcodec_send_packet", sent) }
                receiveFrames()
            } else {
                // Demuxers differ: Ogg shortens the last packet *and* flags the
                // padding, mp3 only flags it, mp4 only shortens. The packet's
                // nominal length tells which: what plays is the shorter of its
                // duration and its nominal length less the flagged padding.
                let nominal = nominalSamples(of: packet, parameters: parameters)
                let playable = nominal > 0 ? min(duration, nominal - discardEnd) : duration - discardEnd
                result.sampleCount += max(0, playable - skipStart)
            }
        }
        if let decoder {
            _ = decoder.send(nil as Packet?)
            receiveFrames()
        }
        if let meter {
            result.integratedLUFS = meter.integratedLUFS
            result.truePeakDBTP = meter.finishedProfile.truePeakDBTP
        }
        if encodedSamples > 0 && rate > 0 {
            result.bitRate = Int(clamping: Double(payloadBytes * 8) * Double(rate) / Double(encodedSamples), to: 0...Int.max)
        }
        return result
    }

    /// Feeds a decoded frame's first channel to the loudness meter: the
    /// files are mono, and the decoders put out float or 16-bit samples.
    private static func feed(_ frame: Frame, to meter: LoudnessMeter) {
        let count = frame.sampleCount
        guard count > 0, let plane = frame.pointer.pointee.extended_data?[0] else { return }
        switch AVSampleFormat(rawValue: frame.pointer.pointee.format) {
        case AV_SAMPLE_FMT_FLT, AV_SAMPLE_FMT_FLTP:
            plane.withMemoryRebound(to: Float.self, capacity: count) { meter.add(UnsafeBufferPointer(start: $0, count: count)) }
        case AV_SAMPLE_FMT_S16, AV_SAMPLE_FMT_S16P:
            plane.withMemoryRebound(to: Int16.self, capacity: count) { meter.add(UnsafeBufferPointer(start: $0, count: count)) }
        default:
            break
        }
    }

    /// The samples a packet decodes to before any trimming; 0 when unknown.
    /// libavcodec knows fixed frame sizes (AAC, MP3) but not Opus's, which
    /// each packet declares in its TOC byte (RFC 6716, section 3.1).
    private func nominalSamples(of packet: Packet, parameters: UnsafeMutablePointer<AVCodecParameters>) -> Int64 {
        let size = Int(packet.pointer.pointee.size)
        guard parameters.pointee.codec_id == AV_CODEC_ID_OPUS else {
            return Int64(av_get_audio_frame_duration2(parameters, Int32(size)))
        }
        guard size >= 1, let data = packet.pointer.pointee.data else { return 0 }
        let config = Int(data[0] >> 3)
        let frameAt48k: Int
        switch config {
        case 0..<12: frameAt48k = [480, 960, 1920, 2880][config % 4]  // SILK
        case 12..<16: frameAt48k = [480, 960][config % 2]  // hybrid
        default: frameAt48k = [120, 240, 480, 960][config % 4]  // CELT
        }
        let frames: Int
        switch data[0] & 3 {
        case 0: frames = 1
        case 1, 2: frames = 2
        default: frames = size >= 2 ? Int(data[1] & 0x3F) : 0
        }
        return Int64(frameAt48k * frames) * Int64(parameters.pointee.sample_rate) / 48_000
    }

    /// The AV_PKT_DATA_SKIP_SAMPLES side data: samples to drop at the start and at the end.
    private func skipSamples(of packet: Packet) -> (Int64, Int64) {
        var size: Int = 0
        guard let data = av_packet_get_side_data(packet.pointer, AV_PKT_DATA_SKIP_SAMPLES, &size), size >= 8 else { return (0, 0) }
        func u32(_ offset: Int) -> Int64 {
            (0..<4).reduce(Int64(0)) { $0 | Int64(data[offset + $1]) << (8 * Int64($1)) }
        }
        return (u32(0), u32(4))
    }
}

/// Owns one demuxing `AVFormatContext` (and the file it opened) and closes it in `deinit`.
final class InputContainer {
    private var context: UnsafeMutablePointer<AVFormatContext>?

    init(url: URL) throws(FFmpegError) {
        // A regular file is opened by descriptor and given to FFmpeg as
        // /proc/self/fd/<n>: FFmpeg refuses a URL of 1,024 bytes or more
        // ("URL type isn't supported"), and a root's path may be that long.
        // Anything else goes by its path, as FFmpeg reports it.
        let descriptor = Self.openRegularFile(url.path)
        defer { if descriptor >= 0 { close(descriptor) } }
        let name = descriptor >= 0 ? "file:/proc/self/fd/\(descriptor)" : url.path
        try FFmpegError.check(avformat_open_input(&context, name, nil, nil), "avformat_open_input(\(url.lastPathComponent))")
        try FFmpegError.check(avformat_find_stream_info(context, nil), "avformat_find_stream_info")
    }

    /// A read-only descriptor of `path` when it is a regular file (and
    /// /proc/self/fd reaches it); -1 otherwise.
    private static func openRegularFile(_ path: String) -> Int32 {
        #if os(Linux)
        let descriptor = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard descriptor >= 0 else { return -1 }
        var status = stat()
        guard fstat(descriptor, &status) == 0, status.st_mode & S_IFMT == S_IFREG else {
            close(descriptor)
            return -1
        }
        return descriptor
        #else
        return -1
        #endif
    }

    deinit { avformat_close_input(&context) }

    var pointer: UnsafeMutablePointer<AVFormatContext> { context! }

    var formatName: String { String(cString: pointer.pointee.iformat.pointee.name) }

    /// The container's declared duration; nil when it declares none.
    var durationSeconds: Double? {
        let duration = pointer.pointee.duration
        return duration > 0 ? Double(duration) / Double(AV_TIME_BASE) : nil
    }

    func bestAudioStream() throws(FFmpegError) -> UnsafeMutablePointer<AVStream> {
        let index = av_find_best_stream(pointer, AVMEDIA_TYPE_AUDIO, -1, -1, nil, 0)
        guard index >= 0, let stream = pointer.pointee.streams[Int(index)] else {
            throw FFmpegError("av_find_best_stream", code: index < 0 ? index : tp_averror_stream_not_found())
        }
        return stream
    }
}

import CFFmpeg
import CFFmpegShims
import Foundation

/// Owns one `AVCodecContext`, an encoder or a decoder, and frees it in `deinit`.
///
/// The encode loop and the inspector drive it through `send` and `receive`,
/// which turn FFmpeg's EAGAIN/EOF return codes into values.
final class CodecContext {
    let pointer: UnsafeMutablePointer<AVCodecContext>
    let codec: UnsafePointer<AVCodec>

    /// The result of pulling from the codec.
    enum Pull { case got, needsInput, finished }

    private init(codec: UnsafePointer<AVCodec>) throws(FFmpegError) {
        guard let context = avcodec_alloc_context3(codec) else {
            throw FFmpegError("avcodec_alloc_context3", code: tp_averror(ENOMEM))
        }
        self.codec = codec
        self.pointer = context
    }

    /// An encoder found by name (`aac`, `libmp3lame`, `libopus`), not yet opened.
    convenience init(encoderNamed name: String) throws(FFmpegError) {
        guard let codec = avcodec_find_encoder_by_name(name) else {
            throw FFmpegError("avcodec_find_encoder_by_name(\(name))", code: tp_averror_encoder_not_found())
        }
        try self.init(codec: codec)
    }

    /// A decoder for a demuxed stream, configured from its parameters, not yet opened.
    convenience init(decoderFor parameters: UnsafePointer<AVCodecParameters>) throws(FFmpegError) {
        guard let codec = avcodec_find_decoder(parameters.pointee.codec_id) else {
            throw FFmpegError("avcodec_find_decoder", code: tp_averror_decoder_not_found())
        }
        try self.init(codec: codec)
        try FFmpegError.check(avcodec_parameters_to_context(pointer, parameters), "avcodec_parameters_to_context")
    }

    deinit {
        var context: UnsafeMutablePointer<AVCodecContext>? = pointer
        avcodec_free_context(&context)
    }

    var name: String { String(cString: codec.pointee.name) }

    /// The sample formats the codec accepts, in its order of preference.
    var supportedSampleFormats: [AVSampleFormat] {
        guard var cursor = codec.pointee.sample_fmts else { return [] }
        var formats: [AVSampleFormat] = []
        while cursor.pointee != AV_SAMPLE_FMT_NONE {
            formats.append(cursor.pointee)
            cursor += 1
        }
        return formats
    }

    func hasCapability(_ flag: Int32) -> Bool { (codec.pointee.capabilities & flag) != 0 }

    /// Opens the codec with private options; an option the codec did not take is an error,
    /// so a misspelt setting cannot silently fall back to a default.
    func open(options: [String: String] = [:]) throws {
        let dictionary = try FFmpegDictionary(options)
        try FFmpegError.check(avcodec_open2(pointer, codec, &dictionary.pointer), "avcodec_open2(\(name))")
        try dictionary.requireConsumed("avcodec_open2(\(name))")
    }

    /// Sends a frame (nil to start draining). EAGAIN never happens here because
    /// the loops always drain after each send.
    func send(_ frame: Frame?) throws(FFmpegError) {
        try FFmpegError.check(avcodec_send_frame(pointer, frame?.pointer), "avcodec_send_frame")
    }

    /// Sends a packet (nil to start draining). Returns the error code instead of
    /// throwing, because a decoder rejecting one damaged packet is a finding, not the end.
    func send(_ packet: Packet?) -> Int32 {
        avcodec_send_packet(pointer, packet?.pointer)
    }

    func receive(into packet: Packet) throws(FFmpegError) -> Pull {
        try pull(avcodec_receive_packet(pointer, packet.pointer), "avcodec_receive_packet")
    }

    /// Receives a decoded frame; a negative code other than EAGAIN/EOF is returned in `error`.
    func receive(into frame: Frame) -> (Pull, error: Int32) {
        let code = avcodec_receive_frame(pointer, frame.pointer)
        if code == tp_averror_eagain() { return (.needsInput, 0) }
        if code == tp_averror_eof() { return (.finished, 0) }
        return (.got, min(code, 0))
    }

    private func pull(_ code: Int32, _ operation: String) throws(FFmpegError) -> Pull {
        if code == tp_averror_eagain() { return .needsInput }
        if code == tp_averror_eof() { return .finished }
        try FFmpegError.check(code, operation)
        return .got
    }
}

/// Owns one `AVFrame` and frees it in `deinit`; reused for every frame of a run.
final class Frame {
    let pointer: UnsafeMutablePointer<AVFrame>

    init() throws(FFmpegError) {
        guard let frame = av_frame_alloc() else { throw FFmpegError("av_frame_alloc", code: tp_averror(ENOMEM)) }
        pointer = frame
    }

    deinit {
        var frame: UnsafeMutablePointer<AVFrame>? = pointer
        av_frame_free(&frame)
    }

    /// Drops the previous buffer (the encoder may still hold a reference to it)
    /// and allocates a fresh one for `sampleCount` mono samples.
    func allocate(sampleCount: Int, format: AVSampleFormat, sampleRate: Int32) throws(FFmpegError) {
        av_frame_unref(pointer)
        pointer.pointee.nb_samples = Int32(sampleCount)
        pointer.pointee.format = format.rawValue
        pointer.pointee.sample_rate = sampleRate
        tp_channel_layout_mono(&pointer.pointee.ch_layout)
        try FFmpegError.check(av_frame_get_buffer(pointer, 0), "av_frame_get_buffer")
    }

    /// The frame's plane pointers, as `av_audio_fifo_read` and `av_samples_set_silence` take them.
    var planes: UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?> { pointer.pointee.extended_data }

    var sampleCount: Int { Int(pointer.pointee.nb_samples) }
}

/// Owns one `AVPacket` and frees it in `deinit`; reused for every packet of a run.
final class Packet {
    let pointer: UnsafeMutablePointer<AVPacket>

    init() throws(FFmpegError) {
        guard let packet = av_packet_alloc() else { throw FFmpegError("av_packet_alloc", code: tp_averror(ENOMEM)) }
        pointer = packet
    }

    deinit {
        var packet: UnsafeMutablePointer<AVPacket>? = pointer
        av_packet_free(&packet)
    }

    func unref() { av_packet_unref(pointer) }
}

/// Owns one `AVDictionary` of options and frees it in `deinit`.
final class FFmpegDictionary {
    var pointer: OpaquePointer?

    init(_ entries: [String: String] = [:]) throws(FFmpegError) {
        for (key, value) in entries.sorted(by: { $0.key < $1.key }) {
            try FFmpegError.check(av_dict_set(&pointer, key, value, 0), "av_dict_set(\(key))")
        }
    }

    deinit { av_dict_free(&pointer) }

    /// FFmpeg leaves the options nobody consumed in the dictionary: any left is an error.
    func requireConsumed(_ operation: String) throws(FFmpegError) {
        guard av_dict_count(pointer) > 0 else { return }
        var unused: [String] = []
        var entry: UnsafeMutablePointer<AVDictionaryEntry>?
        while let next = av_dict_get(pointer, "", entry, AV_DICT_IGNORE_SUFFIX) {
            unused.append(String(cString: next.pointee.key))
            entry = next
        }
        throw FFmpegError("\(operation): unused options \(unused.joined(separator: ", "))", code: tp_averror_option_not_found())
    }
}

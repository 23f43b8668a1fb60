import CFFmpeg
import CFFmpegShims
import Crypto
import Foundation
import TourpackAudio
import TourpackCore

/// Encodes a tile's RGB pixels as PNG with libavcodec's PNG encoder, the
/// same FFmpeg the pipeline already links (no image library, no CLI).
///
/// The encoder writes no time or text chunks and runs on one thread, so the
/// bytes depend only on the pixels and the FFmpeg version. Blocking C work:
/// call it from a thread pool, never from the event loop.
enum TilePNG {
    /// The PNG file bytes of a `width`×`height` RGB24 image (rows top first, no padding).
    static func encode(rgb pixels: [UInt8], width: Int, height: Int) throws(FFmpegError) -> [UInt8] {
        precondition(pixels.count == width * height * 3, "RGB24 needs 3 bytes a pixel")
        let context = try PNGEncoderContext(width: width, height: height)
        let frame = try RGBFrame(width: width, height: height)
        frame.copy(pixels)
        try context.send(frame)
        let packet = try PNGPacket()
        try context.receive(into: packet)
        return packet.bytes
    }

    /// SHA-256 of `bytes`, lowercase hex.
    static func sha256Hex(_ bytes: [UInt8]) -> String { SHA256.hash(data: bytes).lowercaseHex }
}

/// Owns one opened PNG `AVCodecContext` and frees it in `deinit`.
private final class PNGEncoderContext {
    let pointer: UnsafeMutablePointer<AVCodecContext>

    init(width: Int, height: Int) throws(FFmpegError) {
        guard let codec = avcodec_find_encoder(AV_CODEC_ID_PNG) else {
            throw FFmpegError("avcodec_find_encoder(png)", code: tp_averror_encoder_not_found())
        }
        guard let context = avcodec_alloc_context3(codec) else {
            throw FFmpegError("avcodec_alloc_context3(png)", code: tp_averror(ENOMEM))
        }
        pointer = context
        context.pointee.width = Int32(width)
        context.pointee.height = Int32(height)
        context.pointee.pix_fmt = AV_PIX_FMT_RGB24
        // A video encoder refuses to open without a time base; a still has no timing.
        context.pointee.time_base = AVRational(num: 1, den: 1)
        // One thread: the server already renders tiles in parallel, one per pool thread.
        context.pointee.thread_count = 1
        try check(avcodec_open2(context, codec, nil), "avcodec_open2(png)")
    }

    deinit {
        var context: UnsafeMutablePointer<AVCodecContext>? = pointer
        avcodec_free_context(&context)
    }

    func send(_ frame: RGBFrame) throws(FFmpegError) {
        try check(avcodec_send_frame(pointer, frame.pointer), "avcodec_send_frame(png)")
    }

    /// PNG is intra-only with no delay: one frame in, one packet out.
    func receive(into packet: PNGPacket) throws(FFmpegError) {
        try check(avcodec_receive_packet(pointer, packet.pointer), "avcodec_receive_packet(png)")
    }
}

/// Owns one RGB24 `AVFrame` with its buffer and frees it in `deinit`.
private final class RGBFrame {
    let pointer: UnsafeMutablePointer<AVFrame>
    let width: Int, height: Int

    init(width: Int, height: Int) throws(FFmpegError) {
        guard let frame = av_frame_alloc() else { throw FFmpegError("av_frame_alloc", code: tp_averror(ENOMEM)) }
        pointer = frame
        self.width = width
        self.height = height
        frame.pointee.format = AV_PIX_FMT_RGB24.rawValue
        frame.pointee.width = Int32(width)
        frame.pointee.height = Int32(height)
        try check(av_frame_get_buffer(frame, 0), "av_frame_get_buffer")
    }

    deinit {
        var frame: UnsafeMutablePointer<AVFrame>? = pointer
        av_frame_free(&frame)
    }

    /// Copies packed rows into the frame, whose rows may be padded (`linesize`).
    func copy(_ pixels: [UInt8]) {
        let rowBytes = width * 3
        let stride = Int(pointer.pointee.linesize.0)
        guard let plane = pointer.pointee.data.0 else { return }
        pixels.withUnsafeBufferPointer { source in
            for row in 0..<height {
                (plane + row * stride).update(from: source.baseAddress! + row * rowBytes, count: rowBytes)
            }
        }
    }
}

/// Owns one `AVPacket` and frees it in `deinit`.
private final class PNGPacket {
    let pointer: UnsafeMutablePointer<AVPacket>

    init() throws(FFmpegError) {
        guard let packet = av_packet_alloc() else { throw FFmpegError("av_packet_alloc", code: tp_averror(ENOMEM)) }
        pointer = packet
    }

    deinit {
        var packet: UnsafeMutablePointer<AVPacket>? = pointer
        av_packet_free(&packet)
    }

    var bytes: [UInt8] {
        guard let data = pointer.pointee.data, pointer.pointee.size > 0 else { return [] }
        return Array(UnsafeBufferPointer(start: data, count: Int(pointer.pointee.size)))
    }
}

/// Throws when an FFmpeg return code is negative.
private func check(_ code: Int32, _ operation: @autoclosure () -> String) throws(FFmpegError) {
    if code < 0 { throw FFmpegError(operation(), code: code) }
}

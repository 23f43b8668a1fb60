import CFFmpeg
import CFFmpegShims
import Foundation

/// Owns one muxing `AVFormatContext` and its `AVIOContext` on a file, and
/// frees both in `deinit` (closing the file if `finish` was never reached).
///
/// The file is opened through libavformat's `file` protocol, which is
/// seekable: the mp3 muxer goes back to fill in the Xing/Info header, and the
/// mp4 muxer rewrites the file to move the moov atom before mdat.
///
/// Every call that opens, writes or closes the file names it in its error:
/// a full disk (ENOSPC) or a folder removed under the build surfaces as the
/// negative return of `avio_open`, `av_interleaved_write_frame` (the muxer
/// returns the AVIOContext's write error), `av_write_trailer` or
/// `avio_closep`, and each goes through `checkFile` below.
final class OutputContainer {
    let pointer: UnsafeMutablePointer<AVFormatContext>
    /// The file written, for error messages.
    let path: String
    private(set) var stream: UnsafeMutablePointer<AVStream>?
    private var ioOpen = false

    /// - Parameters:
    ///   - muxer: the libavformat muxer name (`ipod`, `mp3`, `ogg`).
    ///   - url: the file to write; its path is also the context's URL, which
    ///     the mp4 muxer reopens for faststart.
    init(muxer: String, url: URL) throws(FFmpegError) {
        var context: UnsafeMutablePointer<AVFormatContext>?
        try FFmpegError.check(avformat_alloc_output_context2(&context, nil, muxer, url.path), "avformat_alloc_output_context2(\(muxer))")
        guard let context else { throw FFmpegError("avformat_alloc_output_context2(\(muxer))", code: tp_averror(ENOMEM)) }
        pointer = context
        path = url.path
    }

    /// Throws, naming the file, when a call on it returned a negative code.
    private func checkFile(_ code: Int32, _ operation: String) throws(FFmpegError) {
        try FFmpegError.check(code, operation, path: path)
    }

    deinit {
        if ioOpen { avio_closep(&pointer.pointee.pb) }
        avformat_free_context(pointer)
    }

    /// Whether the codec must put its configuration in extradata (mp4, ogg) rather than in-band.
    var wantsGlobalHeader: Bool { (pointer.pointee.oformat.pointee.flags & AVFMT_GLOBALHEADER) != 0 }

    /// The only stream's time base, which the muxer may change in `writeHeader`.
    var streamTimeBase: AVRational { stream?.pointee.time_base ?? AVRational(num: 1, den: 1) }

    /// Adds the single audio stream, described by an opened encoder.
    func addStream(for encoder: CodecContext) throws(FFmpegError) {
        guard let stream = avformat_new_stream(pointer, nil) else {
            throw FFmpegError("avformat_new_stream", code: tp_averror(ENOMEM))
        }
        try FFmpegError.check(avcodec_parameters_from_context(stream.pointee.codecpar, encoder.pointer), "avcodec_parameters_from_context")
        stream.pointee.time_base = encoder.pointer.pointee.time_base
        self.stream = stream
    }

    /// Sets a container-level tag (ID3v2 frames for mp3, iTunes atoms for mp4).
    func setFormatTag(_ key: String, _ value: String) throws(FFmpegError) {
        try FFmpegError.check(av_dict_set(&pointer.pointee.metadata, key, value, 0), "av_dict_set(\(key))")
    }

    /// Sets a stream-level tag (OpusTags for Ogg, the track language for mp4).
    func setStreamTag(_ key: String, _ value: String) throws(FFmpegError) {
        guard let stream else { return }
        try FFmpegError.check(av_dict_set(&stream.pointee.metadata, key, value, 0), "av_dict_set(\(key))")
    }

    /// Opens the file and writes the header with muxer options (`movflags`).
    func writeHeader(options: [String: String]) throws {
        try checkFile(avio_open(&pointer.pointee.pb, pointer.pointee.url, AVIO_FLAG_WRITE), "avio_open")
        ioOpen = true
        let dictionary = try FFmpegDictionary(options)
        try checkFile(avformat_write_header(pointer, &dictionary.pointer), "avformat_write_header")
        try dictionary.requireConsumed("avformat_write_header")
    }

    /// Writes one encoded packet, taking its timestamps from `codecTimeBase` to the stream's.
    /// The muxer takes the packet's reference, so `packet` is blank afterwards.
    func write(_ packet: Packet, codecTimeBase: AVRational) throws(FFmpegError) {
        packet.pointer.pointee.stream_index = stream?.pointee.index ?? 0
        av_packet_rescale_ts(packet.pointer, codecTimeBase, streamTimeBase)
        try checkFile(av_interleaved_write_frame(pointer, packet.pointer), "av_interleaved_write_frame")
    }

    /// Writes the trailer (the mp4 moov and its faststart move, the mp3 Xing
    /// header, the last Ogg page) and closes the file; both results are checked,
    /// since a full disk surfaces here.
    func finish() throws(FFmpegError) {
        try checkFile(av_write_trailer(pointer), "av_write_trailer")
        ioOpen = false
        try checkFile(avio_closep(&pointer.pointee.pb), "avio_closep")
    }
}

import CFFmpeg
import CFFmpegShims
import Crypto
package import Foundation
import TourpackCore

/// Lossless FLAC for synthesized PCM (the synthesis cache's on-disk form).
///
/// Why FLAC: the cache keeps every synthesized phrase so a rebuild does not
/// pay the TTS endpoint again, and those phrases are re-encoded later to AAC,
/// MP3 and Opus. A lossy cache would encode twice and drift; raw PCM costs
/// 2 bytes a sample. FLAC is lossless, typically about half the size of PCM
/// for speech, and libavcodec both writes and reads it, so no new dependency
/// and no ffmpeg process are involved.
///
/// The round trip is exact: `read(write(pcm))` returns the same samples at
/// the same rate, bit for bit, or throws. `write` lets the muxer rewrite the
/// STREAMINFO block at the end, so the file records its total sample count
/// and the MD5 of the samples. `read` decodes with frame CRC checks that turn
/// a mismatch into an error (`err_recognition` CRCCHECK | EXPLODE), treats
/// anything FFmpeg logs as an error as a failure, and compares the decoded
/// samples with STREAMINFO's count and MD5 (FFmpeg's decoder does not check
/// the MD5 itself). A truncated or damaged file therefore throws; it never
/// comes back as shorter or altered audio.
package enum FLACFile {
    /// Writes `pcm` (mono Int16 at pcm.sampleRate) as a native FLAC file at `url` (replacing any file). Throws FFmpegError / TourpackError.
    package static func write(_ pcm: PCMAudio, to url: URL) throws {
        guard !pcm.samples.isEmpty else {
            throw TourpackError.internalInvariant("\(url.path): no samples to write as FLAC")
        }
        guard pcm.sampleRate > 0 else {
            throw TourpackError.internalInvariant("\(url.path): sample rate \(pcm.sampleRate) Hz cannot be written as FLAC")
        }
        try? FileManager.default.removeItem(at: url)
        do {
            try FFmpegLogCapture.explaining {
                let writer = try FLACWriter(url: url, sampleRate: pcm.sampleRate)
                try pcm.samples.withUnsafeBufferPointer { try writer.write($0) }
                try writer.finish()
            }
        } catch {
            try? FileManager.default.removeItem(at: url)
            throw error
        }
    }

    /// Reads a FLAC file written by `write` back to exactly the same samples and rate. A truncated or corrupt file throws (never returns partial audio silently).
    package static func read(_ url: URL, expecting expectation: Expectation? = nil) throws -> PCMAudio {
        var samples: [Int16] = []
        let rate = try stream(url, expecting: expectation) { samples.append(contentsOf: $0) }
        return PCMAudio(samples: samples, sampleRate: rate)
    }

    /// What a kept file must be before a sample of it is decoded: the
    /// synthesis cache records each file's size and the SHA-256 of its bytes
    /// with its entry, and a file that is not that one (swapped with
    /// another chunk's, or rewritten) is refused as `Mismatch`, which the
    /// cache treats as a miss: it is as content-addressed as git's objects.
    package struct Expectation: Sendable, Hashable {
        /// Lowercase hex SHA-256 of the file's bytes.
        package var sha256: String
        /// The file's size in bytes.
        package var bytes: Int64

        package init(sha256: String, bytes: Int64) {
            self.sha256 = sha256
            self.bytes = bytes
        }
    }

    /// A kept file that is not the one its entry records.
    package struct Mismatch: Error, CustomStringConvertible {
        package var path: String
        package var reason: String
        package var description: String { "\(path): \(reason)" }
    }

    /// Calls `body` with the file's samples in order, one decoded frame at
    /// a time, so a long chunk is never held whole. The checks are those of
    /// `read`, and the MD5 is compared at the end: a damaged file throws,
    /// possibly after some blocks were delivered, so a caller that streams
    /// must be ready to throw away what it made from them.
    /// - Returns: the sample rate.
    ///
    /// Only a regular file is read (a symlink, a device such as `/dev/zero`,
    /// a FIFO or a folder is refused before anything is decoded), so reading
    /// is bounded by the file's size; with an `expectation`, the bytes are
    /// checked against it first, from the descriptor that is then decoded.
    /// `isCancelled` is asked between blocks: a cancelled build stops
    /// reading at once, with `TourpackError.cancelled`.
    @discardableResult
    package static func stream(
        _ url: URL, expecting expectation: Expectation? = nil, isCancelled: () -> Bool = { false },
        _ body: (UnsafeBufferPointer<Int16>) throws -> Void
    ) throws -> Int {
        let descriptor = try openRegular(url)
        defer { close(descriptor) }
        if let expectation { try verify(descriptor, url: url, against: expectation, isCancelled: isCancelled) }
        // Decode what was checked: the open file, not whatever the path names by now.
        let proc = "/proc/self/fd/\(descriptor)"
        let source = FileManager.default.fileExists(atPath: proc) ? URL(fileURLWithPath: proc) : url
        let (result, messages, count) = FFmpegLogCapture.run { Result { try decode(source, named: url, isCancelled: isCancelled, body) } }
        switch result {
        case .success(let rate):
            guard count == 0 else {
                throw FFmpegError(
                    "\(operation(url)): FFmpeg reported \(count) error(s): \(messages.joined(separator: "; "))", code: invalidData)
            }
            return rate
        case .failure(var error as FFmpegError):
            if !messages.isEmpty { error.operation += " (FFmpeg: \(messages.joined(separator: "; ")))" }
            throw error
        case .failure(let error):
            throw error
        }
    }

    // MARK: Reading

    /// Opens `url` for reading when it is a regular file, without following a symlink or blocking on a FIFO.
    private static func openRegular(_ url: URL) throws -> Int32 {
        let descriptor = open(url.path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard descriptor >= 0 else {
            let code = errno
            if code == ELOOP { throw Mismatch(path: url.path, reason: "a symlink, not a regular file") }
            throw TourpackError.storageFailed(path: url.path, errno: code, operation: "open")
        }
        var info = stat()
        guard fstat(descriptor, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
            close(descriptor)
            throw Mismatch(path: url.path, reason: "not a regular file")
        }
        return descriptor
    }

    /// Reads the file once, in 64 KiB blocks, and compares its size and SHA-256 with `expectation`.
    private static func verify(_ descriptor: Int32, url: URL, against expectation: Expectation, isCancelled: () -> Bool) throws {
        var hasher = SHA256()
        var size: Int64 = 0
        var block = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            if isCancelled() { throw TourpackError.cancelled }
            let count = block.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, off_t(size)) }
            if count < 0 {
                if errno == EINTR { continue }
                throw TourpackError.storageFailed(path: url.path, errno: errno, operation: "read")
            }
            if count == 0 { break }
            size += Int64(count)
            guard size <= expectation.bytes else { break }
            block.withUnsafeBytes { hasher.update(bufferPointer: UnsafeRawBufferPointer(rebasing: $0[..<count])) }
        }
        guard size == expectation.bytes else {
            throw Mismatch(
                path: url.path,
                reason: "\(size > expectation.bytes ? "more than" : "\(size)") bytes, the cache recorded \(expectation.bytes)")
        }
        let hex = hasher.finalize().lowercaseHex
        guard hex == expectation.sha256 else {
            throw Mismatch(
                path: url.path,
                reason: "SHA-256 \(hex.prefix(16))…, the cache recorded \(expectation.sha256.prefix(16))…: not this chunk's file")
        }
    }

    private static func decode(
        _ source: URL, named url: URL, isCancelled: () -> Bool, _ body: (UnsafeBufferPointer<Int16>) throws -> Void
    ) throws -> Int {
        let input = try InputContainer(url: source)
        let stream = try input.bestAudioStream()
        let parameters = stream.pointee.codecpar!
        guard input.formatName == "flac", parameters.pointee.codec_id == AV_CODEC_ID_FLAC else {
            throw corrupt(
                url, "not a native FLAC file (\(input.formatName), \(String(cString: avcodec_get_name(parameters.pointee.codec_id))))")
        }
        let info = try StreamInfo(parameters, url: url)
        guard info.channels == 1, info.bitsPerSample == 16, info.sampleRate > 0 else {
            throw corrupt(
                url, "STREAMINFO says \(info.channels) channel(s), \(info.bitsPerSample) bits, \(info.sampleRate) Hz; expected mono 16-bit")
        }
        guard info.totalSamples > 0 else { throw corrupt(url, "STREAMINFO has no total sample count") }
        let timeBase = stream.pointee.time_base
        if stream.pointee.duration > 0, timeBase.num == 1, timeBase.den == Int32(info.sampleRate),
            stream.pointee.duration != info.totalSamples
        {
            throw corrupt(url, "stream duration \(stream.pointee.duration) disagrees with STREAMINFO's \(info.totalSamples) samples")
        }

        let decoder = try CodecContext(decoderFor: parameters)
        decoder.pointer.pointee.pkt_timebase = stream.pointee.time_base
        // Check each frame's CRC-16 and fail on a mismatch instead of concealing it.
        decoder.pointer.pointee.err_recognition |= AV_EF_CRCCHECK | AV_EF_BITSTREAM | AV_EF_EXPLODE
        try decoder.open()

        var delivered: Int64 = 0
        var digest = Insecure.MD5()
        let packet = try Packet()
        let frame = try Frame()
        func receiveFrames() throws {
            while true {
                let (pull, error) = decoder.receive(into: frame)
                try FFmpegError.check(error, "\(operation(url)): avcodec_receive_frame")
                guard pull == .got else { return }
                defer { av_frame_unref(frame.pointer) }
                let format = AVSampleFormat(rawValue: frame.pointer.pointee.format)
                guard format == AV_SAMPLE_FMT_S16 || format == AV_SAMPLE_FMT_S16P, frame.pointer.pointee.ch_layout.nb_channels == 1 else {
                    let name = av_get_sample_fmt_name(format).map { String(cString: $0) } ?? "sample format \(format.rawValue)"
                    throw corrupt(url, "decoder gave \(name) with \(frame.pointer.pointee.ch_layout.nb_channels) channel(s)")
                }
                let count = frame.sampleCount
                guard delivered + Int64(count) <= info.totalSamples else {
                    throw corrupt(url, "decoded more than STREAMINFO's \(info.totalSamples) samples")
                }
                // Mono: S16 and S16P have the same single plane.
                guard count > 0 else { continue }
                guard let plane = frame.planes[0] else { throw corrupt(url, "decoded frame has no data") }
                let samples = UnsafeBufferPointer(start: UnsafeRawPointer(plane).assumingMemoryBound(to: Int16.self), count: count)
                // FLAC's MD5 is over the samples as little-endian signed 16-bit integers.
                #if _endian(big)
                Array(samples).map(\.littleEndian).withUnsafeBytes { digest.update(bufferPointer: $0) }
                #else
                digest.update(bufferPointer: UnsafeRawBufferPointer(samples))
                #endif
                delivered += Int64(count)
                try body(samples)
            }
        }
        while true {
            if isCancelled() { throw TourpackError.cancelled }
            let code = av_read_frame(input.pointer, packet.pointer)
            if code == tp_averror_eof() { break }
            try FFmpegError.check(code, "\(operation(url)): av_read_frame")
            defer { packet.unref() }
            guard packet.pointer.pointee.stream_index == stream.pointee.index else { continue }
            try FFmpegError.check(decoder.send(packet), "\(operation(url)): avcodec_send_packet")
            try receiveFrames()
        }
        try FFmpegError.check(decoder.send(nil as Packet?), "\(operation(url)): avcodec_send_packet (drain)")
        try receiveFrames()

        guard delivered == info.totalSamples else {
            throw corrupt(url, "decoded \(delivered) samples, STREAMINFO says \(info.totalSamples)")
        }
        guard info.md5 == Array(digest.finalize()) else { throw corrupt(url, "MD5 of the decoded samples differs from STREAMINFO's") }
        return info.sampleRate
    }

    /// The fields of the 34-byte STREAMINFO block (FLAC format, section
    /// METADATA_BLOCK_STREAMINFO) that the round trip is checked against.
    /// The flac demuxer hands the block over as the stream's extradata.
    private struct StreamInfo {
        var sampleRate: Int
        var channels: Int
        var bitsPerSample: Int
        var totalSamples: Int64
        var md5: [UInt8]

        init(_ parameters: UnsafeMutablePointer<AVCodecParameters>, url: URL) throws {
            var bytes: [UInt8] = []
            if let extradata = parameters.pointee.extradata {
                bytes = Array(UnsafeBufferPointer(start: extradata, count: Int(max(0, parameters.pointee.extradata_size))))
            }
            // Some producers include the "fLaC" marker and the block header.
            if bytes.count >= 42, bytes.starts(with: Array("fLaC".utf8)) { bytes.removeFirst(8) }
            guard bytes.count >= 34 else { throw FLACFile.corrupt(url, "no STREAMINFO block") }
            sampleRate = Int(bytes[10]) << 12 | Int(bytes[11]) << 4 | Int(bytes[12]) >> 4
            channels = Int((bytes[12] >> 1) & 0x07) + 1
            bitsPerSample = (Int(bytes[12] & 0x01) << 4 | Int(bytes[13] >> 4)) + 1
            totalSamples = bytes[14..<18].reduce(Int64(bytes[13] & 0x0F)) { $0 << 8 | Int64($1) }
            md5 = Array(bytes[18..<34])
        }
    }

    private static func operation(_ url: URL) -> String { "FLACFile.read(\(url.lastPathComponent))" }

    private static func corrupt(_ url: URL, _ reason: String) -> FFmpegError {
        FFmpegError("\(operation(url)): \(reason)", code: invalidData)
    }

    /// AVERROR_INVALIDDATA, i.e. -MKTAG('I','N','D','A'): FFERRTAG is a macro
    /// Swift cannot import, and the value is part of FFmpeg's stable ABI.
    private static let invalidData: Int32 = -0x4144_4E49
}

/// Writes mono 16-bit PCM as native FLAC, block by block: what the
/// synthesis cache keeps of each chunk, written while the endpoint's answer
/// is decoded, so the chunk is never held whole.
///
/// The muxer rewrites STREAMINFO at `finish`, so the file records its total
/// sample count and the MD5 of its samples, which `FLACFile.stream` checks.
/// Not thread-safe; one owner at a time.
package final class FLACWriter {
    private let container: OutputContainer
    private let encoder: CodecContext
    private let frame: Frame
    private let packet: Packet
    private let rate: Int32
    private let frameSize: Int
    private var pending: [Int16] = []
    private var written: Int64 = 0

    package init(url: URL, sampleRate: Int) throws {
        guard sampleRate > 0 else {
            throw TourpackError.internalInvariant("\(url.path): sample rate \(sampleRate) Hz cannot be written as FLAC")
        }
        container = try OutputContainer(muxer: "flac", url: url)
        encoder = try CodecContext(encoderNamed: "flac")
        rate = Int32(sampleRate)
        let context = encoder.pointer
        context.pointee.sample_fmt = AV_SAMPLE_FMT_S16
        context.pointee.sample_rate = rate
        tp_channel_layout_mono(&context.pointee.ch_layout)
        context.pointee.time_base = AVRational(num: 1, den: rate)
        if container.wantsGlobalHeader { context.pointee.flags |= AV_CODEC_FLAG_GLOBAL_HEADER }
        try encoder.open()
        try container.addStream(for: encoder)
        // No 8 KiB PADDING block: the file is never retagged in place.
        try container.writeHeader(options: ["metadata_header_padding": "0"])
        frameSize = context.pointee.frame_size > 0 ? Int(context.pointee.frame_size) : 4096
        frame = try Frame()
        packet = try Packet()
        pending.reserveCapacity(frameSize)
    }

    /// Samples written so far.
    var sampleCount: Int64 { written + Int64(pending.count) }

    package func write(_ samples: UnsafeBufferPointer<Int16>) throws {
        var start = 0
        while start < samples.count {
            let take = min(frameSize - pending.count, samples.count - start)
            pending.append(contentsOf: UnsafeBufferPointer(rebasing: samples[start..<(start + take)]))
            start += take
            if pending.count == frameSize { try sendPending() }
        }
    }

    /// Sends the last, short frame (the flac encoder takes one), drains the
    /// encoder and closes the file. An empty stream is refused.
    package func finish() throws {
        if !pending.isEmpty { try sendPending() }
        guard written > 0 else { throw TourpackError.internalInvariant("no samples to write as FLAC") }
        // Draining yields a last, empty packet carrying the final STREAMINFO
        // (sample count, MD5), which the muxer writes back over the header.
        try encoder.send(nil as Frame?)
        try receivePackets()
        try container.finish()
    }

    private func sendPending() throws {
        let count = pending.count
        try frame.allocate(sampleCount: count, format: AV_SAMPLE_FMT_S16, sampleRate: rate)
        guard let plane = frame.planes[0] else { throw FFmpegError("av_frame_get_buffer: no plane", code: tp_averror(ENOMEM)) }
        pending.withUnsafeBytes { UnsafeMutableRawPointer(plane).copyMemory(from: $0.baseAddress!, byteCount: count * 2) }
        frame.pointer.pointee.pts = written
        try encoder.send(frame)
        try receivePackets()
        written += Int64(count)
        pending.removeAll(keepingCapacity: true)
    }

    private func receivePackets() throws {
        while try encoder.receive(into: packet) == .got {
            try container.write(packet, codecTimeBase: encoder.pointer.pointee.time_base)
        }
    }
}

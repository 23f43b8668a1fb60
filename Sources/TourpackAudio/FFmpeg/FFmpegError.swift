import CFFmpegShims

/// A failed FFmpeg call, with FFmpeg's own description of the error code.
///
/// A call on a file carries the file's path: FFmpeg's own messages (say
/// "av_interleaved_write_frame: No space left on device") do not say which
/// file, and a full disk is found only through them.
package struct FFmpegError: Error, Sendable, CustomStringConvertible {
    package var operation: String
    package var code: Int32
    /// The file being opened, written or closed, when the call was on one.
    package var path: String?

    package init(_ operation: String, code: Int32, path: String? = nil) {
        self.operation = operation
        self.code = code
        self.path = path
    }

    package var description: String {
        let call =
            tp_ffmpeg_load_error().map { "\(operation): FFmpeg's libraries could not be loaded: \(String(cString: $0))" }
            ?? "\(operation): \(FFmpegError.text(for: code)) (\(code))"
        guard let path else { return call }
        return "\(path): \(call)"
    }

    /// `av_strerror` through the shim, since `av_err2str` is a macro Swift cannot import.
    package static func text(for code: Int32) -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        buffer.withUnsafeMutableBufferPointer { tp_av_strerror(code, $0.baseAddress, $0.count) }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Throws when an FFmpeg return code is negative; returns it otherwise.
    @discardableResult
    static func check(_ code: Int32, _ operation: @autoclosure () -> String, path: String? = nil) throws(FFmpegError) -> Int32 {
        if code < 0 { throw FFmpegError(operation(), code: code, path: path) }
        return code
    }
}

/// Runs FFmpeg work with its log captured on this thread: error messages are
/// collected (decoders conceal damage and only log it; encoders explain a
/// failure only in the log), and nothing reaches stderr, where it would break
/// the build's progress display.
package enum FFmpegLogCapture {
    /// The result of `body` and the error messages FFmpeg logged meanwhile
    /// (the first eight, with the total count).
    static func run<T>(_ body: () throws -> T) rethrows -> (T, messages: [String], count: Int) {
        tp_log_capture_begin()
        let value: T
        do {
            value = try body()
        } catch {
            _ = tp_log_capture_end()
            throw error
        }
        let count = Int(tp_log_capture_end())
        return (value, captured(count), count)
    }

    /// Like `run`, but a thrown `FFmpegError` carries the logged messages in its operation.
    package static func explaining<T>(_ body: () throws -> T) throws -> T {
        tp_log_capture_begin()
        do {
            let value = try body()
            _ = tp_log_capture_end()
            return value
        } catch var error as FFmpegError {
            let messages = captured(Int(tp_log_capture_end()))
            if !messages.isEmpty { error.operation += " (FFmpeg: \(messages.joined(separator: "; ")))" }
            throw error
        } catch {
            _ = tp_log_capture_end()
            throw error
        }
    }

    private static func captured(_ count: Int) -> [String] {
        (0..<min(count, 8)).compactMap { index in
            var buffer = [CChar](repeating: 0, count: 256)
            guard tp_log_captured_message(Int32(index), &buffer, buffer.count) != 0 else { return nil }
            return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
    }
}

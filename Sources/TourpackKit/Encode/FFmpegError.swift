import CFFmpegShims

/// A failed FFmpeg call, with FFmpeg's own description of the error code.
public struct FFmpegError: Error, Sendable, CustomStringConvertible {
    public var operation: String
    public var code: Int32

    public init(_ operation: String, code: Int32) {
        self.operation = operation
        self.code = code
    }

    public var description: String { "\(operation): \(FFmpegError.text(for: code)) (\(code))" }

    /// `av_strerror` through the shim, since `av_err2str` is a macro Swift cannot import.
    public static func text(for code: Int32) -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        buffer.withUnsafeMutableBufferPointer { tp_av_strerror(code, $0.baseAddress, $0.count) }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Throws when an FFmpeg return code is negative; returns it otherwise.
    @discardableResult
    static func check(_ code: Int32, _ operation: @autoclosure () -> String) throws(FFmpegError) -> Int32 {
        if code < 0 { throw FFmpegError(operation(), code: code) }
        return code
    }
}

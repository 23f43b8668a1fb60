import Foundation
import HTTPTypes
import Hummingbird
import NIOPosix

/// A regular file answered whole or as the one range a request asks for
/// (RFC 9110 §14), streamed a piece at a time, each piece read on a thread
/// pool: what `review` answers for audio and captions, and `web` for a
/// site's objects. A 30-minute narration asked for whole costs one piece of
/// memory, not the file.
enum RangedFile {
    /// How much of a file is read and sent at a time.
    static let pieceBytes = 256 * 1024

    /// The file shrank while it was being sent (it was replaced): the
    /// response is cut short rather than padded.
    struct Changed: Error, CustomStringConvertible {
        var path: String
        var description: String { "\(path) changed while it was being sent" }
    }

    /// The answer for `url` (`size` bytes): 200 whole, 206 for a satisfiable
    /// `range` (unless `ignoreRange`, as after a failed `If-Range`), 416
    /// for one that is not. `headers` are sent with it.
    static func response(
        _ url: URL, size: Int, headers given: HTTPFields, range: String?, head: Bool, pool: NIOThreadPool, shown: String,
        ignoreRange: Bool = false
    ) -> (response: Response, span: Range<Int>?) {
        var headers = given
        headers[.acceptRanges] = "bytes"
        var status = HTTPResponse.Status.ok
        var span = 0..<size
        if let range, !ignoreRange {
            guard let asked = ByteRange.parse(range, size: size) else {
                headers[.contentRange] = "bytes */\(size)"
                headers[.contentType] = "text/plain; charset=utf-8"
                return (
                    Response(
                        status: .rangeNotSatisfiable, headers: headers,
                        body: .init(byteBuffer: ByteBuffer(string: "range not satisfiable\n"))), nil
                )
            }
            span = asked
            status = .partialContent
            headers[.contentRange] = "bytes \(span.lowerBound)-\(span.upperBound - 1)/\(size)"
        }
        if head {
            headers[.contentLength] = String(span.count)
            return (Response(status: status, headers: headers), span)
        }
        let asked = span
        let body = ResponseBody(contentLength: asked.count) { writer in
            var offset = asked.lowerBound
            while offset < asked.upperBound {
                let piece = offset..<min(asked.upperBound, offset + Self.pieceBytes)
                let bytes = try await pool.runIfActive { try ReviewFiles.read(url, span: piece) }
                guard bytes.count == piece.count else { throw Changed(path: shown) }
                try await writer.write(ByteBuffer(bytes: bytes))
                offset = piece.upperBound
            }
            try await writer.finish(nil)
        }
        return (Response(status: status, headers: headers, body: body), span)
    }
}

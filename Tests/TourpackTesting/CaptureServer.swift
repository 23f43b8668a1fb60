import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A loopback HTTP/1.1 server that keeps every request head (what libcurl
/// actually sent, to compare its SigV4 `Authorization` with AWS's published
/// vectors) and body (a TTS dialect's wire format), and answers `200` with
/// an empty body, or what `answer` says (an S3 error that echoes the
/// request, say; a provider's canned answer, chosen by the request's body).
///
/// One connection at a time on its own thread; closed with `stop()`.
package final class CaptureServer: @unchecked Sendable {
    package let port: Int
    private let listener: Int32
    private let lock = NSLock()
    private var heads: [String] = []
    private var bodies: [[UInt8]] = []
    private let answer: @Sendable (String, [UInt8]) -> (status: Int, headers: [String], body: [UInt8])

    package convenience init(answer: @escaping @Sendable (String) -> (status: Int, body: String) = { _ in (200, "") }) throws {
        try self.init(answerRequest: { head, _ in
            let (status, body) = answer(head)
            return (status, [], Array(body.utf8))
        })
    }

    /// - Parameter answerRequest: the status, extra header lines and body
    ///   for a request's head and body.
    package init(answerRequest: @escaping @Sendable (_ head: String, _ body: [UInt8]) -> (status: Int, headers: [String], body: [UInt8]))
        throws
    {
        self.answer = answerRequest
        (listener, port) = try LoopbackListener.open(backlog: 8)
        let thread = Thread { [self] in self.serve() }
        thread.start()
    }

    /// The request heads received so far (request line and headers, CRLF-separated).
    package var received: [String] { lock.withLock { heads } }

    /// The request bodies received so far, in the order of `received`.
    package var receivedBodies: [[UInt8]] { lock.withLock { bodies } }

    package func stop() { shutdown(listener, Int32(SHUT_RDWR)); close(listener) }

    private func serve() {
        while true {
            let connection = accept(listener, nil, nil)
            guard connection >= 0 else { return }
            handle(connection)
            close(connection)
        }
    }

    private func handle(_ connection: Int32) {
        var data = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            // One request per connection: read the head, then the body it announces.
            if let end = data.firstRange(of: Array("\r\n\r\n".utf8)) {
                let head = String(decoding: data[..<end.lowerBound], as: UTF8.self)
                let length =
                    head.split(separator: "\r\n").compactMap { line -> Int? in
                        let parts = line.split(separator: ":", maxSplits: 1)
                        guard parts.count == 2, parts[0].lowercased() == "content-length" else { return nil }
                        return Int(parts[1].trimmingCharacters(in: .whitespaces))
                    }.first ?? 0
                if data.count - end.upperBound >= length {
                    let body = Array(data[end.upperBound..<end.upperBound + length])
                    lock.withLock {
                        heads.append(head)
                        bodies.append(body)
                    }
                    let (status, headers, answerBody) = answer(head, body)
                    let extra = headers.map { "\($0)\r\n" }.joined()
                    let reply =
                        Array(
                            "HTTP/1.1 \(status) Answer\r\nContent-Length: \(answerBody.count)\r\n\(extra)Connection: close\r\n\r\n".utf8)
                        + answerBody
                    _ = Sockets.sendAll(connection, reply)
                    return
                }
            }
            let count = recv(connection, &buffer, buffer.count, 0)
            guard count > 0 else { return }
            data.append(contentsOf: buffer[..<count])
        }
    }
}

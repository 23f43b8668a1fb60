import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A loopback HTTP/1.1 server that keeps every request head (what libcurl
/// actually sent, to compare its SigV4 `Authorization` with AWS's published
/// vectors) and answers `200` with an empty body, or what `answer` says
/// (an S3 error that echoes the request, say).
///
/// One connection at a time on its own thread; closed with `stop()`.
package final class CaptureServer: @unchecked Sendable {
    package let port: Int
    private let listener: Int32
    private let lock = NSLock()
    private var heads: [String] = []
    private let answer: @Sendable (String) -> (status: Int, body: String)

    package init(answer: @escaping @Sendable (String) -> (status: Int, body: String) = { _ in (200, "") }) throws {
        self.answer = answer
        (listener, port) = try LoopbackListener.open(backlog: 8)
        let thread = Thread { [self] in self.serve() }
        thread.start()
    }

    /// The request heads received so far (request line and headers, CRLF-separated).
    package var received: [String] { lock.withLock { heads } }

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
                    lock.withLock { heads.append(head) }
                    let (status, body) = answer(head)
                    let reply = "HTTP/1.1 \(status) Answer\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)"
                    _ = reply.withCString { send(connection, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
                    return
                }
            }
            let count = recv(connection, &buffer, buffer.count, 0)
            guard count > 0 else { return }
            data.append(contentsOf: buffer[..<count])
        }
    }
}

import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A loopback HTTP/1.1 proxy that puts faults in front of a real server
/// (Piper's has no fault options of its own): each request is answered by
/// an injected fault or forwarded whole to `upstream`, whose answer is sent
/// back (or cut short). It logs every request and whether it was forwarded.
///
/// Plain sockets, a thread per connection, `Connection: close` both ways;
/// closed with `stop()`.
package final class FaultProxy: @unchecked Sendable {
    package enum Fault: Sendable, Equatable {
        /// Answers this status without asking upstream.
        case status(Int)
        /// 429 with `Retry-After: 0`, without asking upstream.
        case tooMany
        /// Forwards, then sends this share of upstream's body and closes.
        case cut(fraction: Double)
    }

    package struct Request: Sendable {
        package var path: String
        package var body: [UInt8]
        package var fault: Fault?
        /// Whether upstream saw it.
        package var forwarded: Bool
    }

    package let port: Int
    let upstreamPort: Int
    private let listener: Int32
    private let lock = NSLock()
    private var log: [Request] = []
    private var stopped = false
    private var picker: @Sendable (_ index: Int) -> Fault?

    package var endpoint: String { "http://127.0.0.1:\(port)" }

    /// - Parameter picker: the fault for the request at `index` (from 0), nil to forward it.
    package init(upstreamPort: Int, picker: @escaping @Sendable (_ index: Int) -> Fault? = { _ in nil }) throws {
        self.upstreamPort = upstreamPort
        self.picker = picker
        (listener, port) = try LoopbackListener.open(backlog: 64)
        Thread { [self] in self.serve() }.start()
    }

    package func inject(_ picker: @escaping @Sendable (_ index: Int) -> Fault?) { lock.withLock { self.picker = picker } }
    package var requests: [Request] { lock.withLock { log } }
    package var forwardedCount: Int { requests.filter(\.forwarded).count }
    package func resetLog() { lock.withLock { log.removeAll() } }

    package func stop() {
        let first = lock.withLock {
            defer { stopped = true }
            return !stopped
        }
        guard first else { return }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    deinit { stop() }

    private func serve() {
        while true {
            let connection = accept(listener, nil, nil)
            guard connection >= 0 else { return }
            Thread { [self] in
                handle(connection)
                close(connection)
            }.start()
        }
    }

    private func handle(_ connection: Int32) {
        guard let (head, body) = Self.readMessage(connection) else { return }
        let lines = head.components(separatedBy: "\r\n")
        let parts = lines[0].split(separator: " ")
        guard parts.count >= 2 else { return }
        // The index is taken and logged in one step: two requests at once never share it.
        let fault = lock.withLock {
            let fault = picker(log.count)
            let forwarded = fault == nil || fault.map { if case .cut = $0 { true } else { false } } == true
            log.append(Request(path: String(parts[1]), body: body, fault: fault, forwarded: forwarded))
            return fault
        }
        switch fault {
        case .status(let code):
            _ = Self.send(connection, Array("HTTP/1.1 \(code) Injected\r\nContent-Length: 8\r\nConnection: close\r\n\r\ninjected".utf8))
        case .tooMany:
            _ = Self.send(
                connection,
                Array("HTTP/1.1 429 Too Many Requests\r\nRetry-After: 0\r\nContent-Length: 4\r\nConnection: close\r\n\r\nslow".utf8))
        case .cut(let fraction):
            guard let answer = forward(lines: lines, body: body) else { return }
            let headEnd = answer.firstRange(of: Array("\r\n\r\n".utf8))?.upperBound ?? answer.count
            let keep = headEnd + Int(Double(answer.count - headEnd) * fraction)
            _ = Self.send(connection, Array(answer[..<keep]))
            shutdown(connection, Int32(SHUT_RDWR))
        case nil:
            guard let answer = forward(lines: lines, body: body) else { return }
            _ = Self.send(connection, answer)
        }
    }

    /// The request again, to upstream, with `Connection: close`; its whole answer.
    private func forward(lines: [String], body: [UInt8]) -> [UInt8]? {
        let upstream = Sockets.tcp()
        defer { close(upstream) }
        guard Sockets.connect(upstream, port: upstreamPort) else { return nil }
        var head = lines.filter { !$0.lowercased().hasPrefix("connection:") && !$0.isEmpty }.joined(separator: "\r\n")
        head += "\r\nConnection: close\r\n\r\n"
        guard Self.send(upstream, Array(head.utf8) + body) else { return nil }
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = recv(upstream, &buffer, buffer.count, 0)
            guard count > 0 else { break }
            answer.append(contentsOf: buffer[..<count])
        }
        return answer.isEmpty ? nil : answer
    }

    /// One request's head (without its blank line) and its `Content-Length` body.
    private static func readMessage(_ connection: Int32) -> (String, [UInt8])? {
        var data = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 16_384)
        let separator = Array("\r\n\r\n".utf8)
        while data.firstRange(of: separator) == nil {
            let count = recv(connection, &buffer, buffer.count, 0)
            guard count > 0 else { return nil }
            data.append(contentsOf: buffer[..<count])
        }
        let end = data.firstRange(of: separator)!
        let head = String(decoding: data[..<end.lowerBound], as: UTF8.self)
        var length = 0
        for line in head.components(separatedBy: "\r\n") where line.lowercased().hasPrefix("content-length:") {
            length = Int(line.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) ?? 0
        }
        var body = Array(data[end.upperBound...])
        while body.count < length {
            let count = recv(connection, &buffer, buffer.count, 0)
            guard count > 0 else { return nil }
            body.append(contentsOf: buffer[..<count])
        }
        return (head, body)
    }

    private static func send(_ connection: Int32, _ bytes: [UInt8]) -> Bool { Sockets.sendAll(connection, bytes) }
}

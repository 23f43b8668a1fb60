import Crypto
package import Foundation
import TourpackCore

#if canImport(Glibc)
import Glibc
#endif

/// A loopback HTTP/1.1 server for a published site folder, as a CDN would
/// serve it: `ETag` (the SHA-256 of the file) and `Last-Modified`,
/// `If-None-Match` answered 304, `Range: bytes=N-` (and `N-M`) answered 206
/// unless `If-Range` names another version, and faults injected per
/// request: a body cut short, a 5xx, a 429 with `Retry-After`, a range
/// ignored or answered with a wrong `Content-Range`, a body trickled a byte at a time. It counts the body bytes it sends and logs every request.
/// InstallTests install from it, and so does `tourpack-bench install`.
///
/// Plain sockets, a thread per connection, `Connection: close` on every
/// answer; closed with `stop()`.
package final class SiteServer: @unchecked Sendable {
    package enum Fault: Sendable, Equatable {
        /// Sends the head and this share of the body, then closes the connection.
        case cut(fraction: Double)
        case status(Int)
        /// 429 with this `Retry-After`.
        case tooMany(retryAfter: String)
        /// Answers a range request with 200 and the whole body.
        case ignoreRange
        /// Sends half the body, waits this long, then the rest (an install to interrupt).
        case stall(seconds: Double)
        /// Answers a range request with 206, a `Content-Range` from byte 0
        /// (not the byte asked for) and the whole body: a range a resumed
        /// download must not append. A request without a range is served as usual.
        case wrongRange
        /// Answers a range request with 200 and this share of the whole body
        /// (a server that ignores ranges and cuts every answer short).
        case ignoreRangeAndCut(fraction: Double)
        /// Sends the body one byte every `interval` seconds (slow retrieval),
        /// until it is sent or the client leaves.
        case trickle(interval: Double)
        /// Sends the body at about this rate, in 8 KiB pieces, until it is
        /// sent or the client leaves (a phone's slow link).
        case throttle(bytesPerSecond: Int)
        /// Sends the body in 8 KiB pieces through one link of this rate that
        /// every answer with this fault shares, piece by piece in turn: a
        /// phone's one bar of signal, where four files at once each get a quarter.
        case link(bytesPerSecond: Int)
    }

    package struct Request: Sendable {
        package var method: String
        package var path: String
        /// Names lowercased.
        package var headers: [String: String]
        package var status: Int
        package var bodyBytes: Int
        package var fault: Fault?
    }

    package let port: Int
    package let root: URL
    private let listener: Int32
    private let lock = NSLock()
    private var log: [Request] = []
    /// Requests since the log was last reset, counted as they arrive: the
    /// picker's index, never shared by two requests at once.
    private var arrivals = 0
    private var faultPicker: @Sendable (_ index: Int, _ method: String, _ path: String, _ headers: [String: String]) -> Fault?

    package var base: String { "http://127.0.0.1:\(port)" }
    /// When the shared link (`Fault.link`) is free again.
    private var linkFree = ContinuousClock.now

    package init(root: URL) throws {
        self.root = root
        faultPicker = { _, _, _, _ in nil }
        (listener, port) = try LoopbackListener.open(backlog: 64)
        Thread { [self] in self.serve() }.start()
    }

    private var stopped = false

    /// Stops accepting; a second call does nothing (the descriptor may be someone else's by then).
    package func stop() {
        let first = lock.withLock {
            defer { stopped = true }
            return !stopped
        }
        guard first else { return }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    /// Decides each request's fault from now on (nil: none).
    package func inject(
        _ picker: @escaping @Sendable (_ index: Int, _ method: String, _ path: String, _ headers: [String: String]) -> Fault?
    ) {
        lock.withLock { faultPicker = picker }
    }

    package var requests: [Request] { lock.withLock { log } }
    package var bodyBytesSent: Int { requests.reduce(0) { $0 + $1.bodyBytes } }
    /// Body bytes the kernel took for the clients since the log was last
    /// reset: what a client that left mid-answer cost, not what was planned.
    package var bodyBytesDelivered: Int { lock.withLock { delivered } }
    private var delivered = 0

    /// Connections accepted whose request is not yet logged (nor dropped unread).
    private var unsettled = 0
    private static let quiescePath = "/.site-server-quiesce"

    /// Waits until every connection a client made before this call has been
    /// read and logged, or closed unread. A client killed mid-download may
    /// leave requests in the listen queue that the server reads only later;
    /// a test calls this before `resetLog()`, so that what it counts next
    /// is what the next client asked for, not a dead one's last requests.
    /// The kernel accepts connections in order: once this call's own
    /// request is answered, every earlier one has been accepted.
    package func quiesce() async throws {
        try await Task.detached { [port] in try Self.ask(port: port, for: Self.quiescePath) }.value
        let deadline = ContinuousClock.now + .seconds(30)
        while lock.withLock({ unsettled }) > 0 {
            guard ContinuousClock.now < deadline else { throw QuiesceTimeout() }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    private struct QuiesceTimeout: Error, CustomStringConvertible {
        var description: String { "SiteServer: requests still unread after 30 s" }
    }

    private struct QuiesceFailed: Error, CustomStringConvertible {
        var operation: String
        var code: Int32
        var description: String { "SiteServer: quiesce could not \(operation): errno \(code)" }
    }

    /// Sends a GET for `path` on a connection of its own and reads the answer to its end. Blocking.
    private static func ask(port: Int, for path: String) throws {
        let client = Sockets.tcp()
        guard client >= 0 else { throw QuiesceFailed(operation: "open a socket", code: errno) }
        defer { close(client) }
        guard Sockets.connect(client, port: port) else { throw QuiesceFailed(operation: "connect", code: errno) }
        let request = Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".utf8)
        guard Sockets.sendAll(client, request) else { throw QuiesceFailed(operation: "send", code: errno) }
        var buffer = [UInt8](repeating: 0, count: 1_024)
        while recv(client, &buffer, buffer.count, 0) > 0 {}
    }

    package func resetLog() {
        lock.withLock {
            log.removeAll()
            arrivals = 0
            delivered = 0
        }
    }

    // MARK: Serving

    private func serve() {
        while true {
            let connection = accept(listener, nil, nil)
            guard connection >= 0 else { return }
            lock.withLock { unsettled += 1 }
            Thread { [self] in
                handle(connection)
                close(connection)
            }.start()
        }
    }

    private func handle(_ connection: Int32) {
        var settled = false
        func settle() {
            guard !settled else { return }
            settled = true
            lock.withLock { unsettled -= 1 }
        }
        defer { settle() }
        var data = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 16_384)
        while data.firstRange(of: Array("\r\n\r\n".utf8)) == nil {
            let count = recv(connection, &buffer, buffer.count, 0)
            guard count > 0 else { return }
            data.append(contentsOf: buffer[..<count])
        }
        let head = String(decoding: data[..<data.firstRange(of: Array("\r\n\r\n".utf8))!.lowerBound], as: UTF8.self)
        let lines = head.components(separatedBy: "\r\n")
        let requestLine = lines[0].split(separator: " ")
        guard requestLine.count >= 2 else { return }
        let method = String(requestLine[0])
        let path = String(String(requestLine[1]).split(separator: "?", maxSplits: 1)[0])
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        if path == Self.quiescePath {
            settle()
            _ = send(connection, Array("HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n".utf8))
            return
        }
        let fault = lock.withLock {
            defer { arrivals += 1 }
            return faultPicker(arrivals, method, path, headers)
        }
        let (status, extra, body, sendBytes) = answer(path: path, headers: headers, fault: fault)
        var reply = "HTTP/1.1 \(status) \(Self.reason(status))\r\n"
        for (name, value) in extra { reply += "\(name): \(value)\r\n" }
        reply += "Content-Length: \(body.count)\r\nConnection: close\r\n\r\n"
        let sent = method == "HEAD" ? 0 : min(body.count, sendBytes)
        lock.withLock {
            log.append(Request(method: method, path: path, headers: headers, status: status, bodyBytes: sent, fault: fault))
        }
        settle()
        guard send(connection, Array(reply.utf8)) else { return }
        if case .throttle(let rate) = fault {
            var offset = 0
            while offset < sent {
                let piece = Array(body[offset..<min(sent, offset + 8_192)])
                guard send(connection, piece) else { break }
                offset += piece.count
                lock.withLock { delivered += piece.count }
                Thread.sleep(forTimeInterval: Double(piece.count) / Double(max(1, rate)))
            }
        } else if case .link(let rate) = fault {
            var offset = 0
            while offset < sent {
                let piece = Array(body[offset..<min(sent, offset + 8_192)])
                // The piece takes the link after every piece reserved before it.
                let done = lock.withLock {
                    linkFree = max(linkFree, ContinuousClock.now) + .seconds(Double(piece.count) / Double(max(1, rate)))
                    return linkFree
                }
                let wait = ContinuousClock.now.duration(to: done)
                if wait > .zero { Thread.sleep(forTimeInterval: wait.seconds) }
                guard send(connection, piece) else { break }
                offset += piece.count
                lock.withLock { delivered += piece.count }
            }
        } else if case .trickle(let interval) = fault {
            for index in 0..<sent {
                guard send(connection, [body[index]]) else { break }
                Thread.sleep(forTimeInterval: interval)
            }
        } else if case .stall(let seconds) = fault, sent > 1 {
            guard send(connection, Array(body[..<(sent / 2)])) else { return }
            Thread.sleep(forTimeInterval: seconds)
            _ = send(connection, Array(body[(sent / 2)..<sent]))
        } else if sent > 0 {
            if send(connection, Array(body[..<sent])) { lock.withLock { delivered += sent } }
        }
        if sent < body.count, method != "HEAD" { shutdown(connection, Int32(SHUT_RDWR)) }
    }

    private func send(_ connection: Int32, _ bytes: [UInt8]) -> Bool { Sockets.sendAll(connection, bytes) }

    /// The status, extra headers, full body and how many body bytes to send.
    private func answer(path: String, headers: [String: String], fault: Fault?) -> (Int, [(String, String)], [UInt8], Int) {
        switch fault {
        case .status(let code): return (code, [], Array("injected \(code)".utf8), .max)
        case .tooMany(let retryAfter): return (429, [("Retry-After", retryAfter)], Array("slow down".utf8), .max)
        default: break
        }
        let relative = path.hasPrefix("/") ? String(path.dropFirst()) : path
        guard !relative.split(separator: "/").contains(".."),
            let data = FileManager.default.contents(atPath: root.appendingPathComponent(relative).path)
        else { return (404, [], Array("not found".utf8), .max) }
        let bytes = Array(data)
        let etag = "\"\(SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined())\""
        let modified = Self.lastModified(root.appendingPathComponent(relative))
        var extra: [(String, String)] = [("ETag", etag), ("Last-Modified", modified), ("Accept-Ranges", "bytes")]
        if let match = headers["if-none-match"], match == etag { return (304, extra, [], 0) }
        var status = 200
        var body = bytes
        let ignoresRange = fault == .ignoreRange || { if case .ignoreRangeAndCut = fault { true } else { false } }()
        if let range = headers["range"], !ignoresRange, headers["if-range"].map({ $0 == etag || $0 == modified }) ?? true,
            let (start, end) = Self.parse(range, size: bytes.count)
        {
            guard start < bytes.count else {
                return (416, [("Content-Range", "bytes */\(bytes.count)")], [], 0)
            }
            status = 206
            body = Array(bytes[start...end])
            extra.append(("Content-Range", "bytes \(start)-\(end)/\(bytes.count)"))
            if fault == .wrongRange {
                body = bytes
                extra[extra.count - 1] = ("Content-Range", "bytes 0-\(bytes.count - 1)/\(bytes.count)")
            }
        }
        if case .cut(let fraction) = fault { return (status, extra, body, Int(Double(body.count) * fraction)) }
        if case .ignoreRangeAndCut(let fraction) = fault { return (status, extra, body, Int(Double(body.count) * fraction)) }
        return (status, extra, body, .max)
    }

    private static func parse(_ range: String, size: Int) -> (Int, Int)? {
        guard range.hasPrefix("bytes=") else { return nil }
        let parts = range.dropFirst(6).split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 2, let start = Int(parts[0]) else { return nil }
        let end = parts[1].isEmpty ? size - 1 : min(size - 1, Int(parts[1]) ?? size - 1)
        return (start, max(start, end))
    }

    private static func lastModified(_ url: URL) -> String {
        let date =
            (try? FileManager.default.attributesOfItem(atPath: url.path)[.modificationDate] as? Date) ?? Date(timeIntervalSince1970: 0)
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter.string(from: date)
    }

    private static func reason(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 206: "Partial Content"
        case 304: "Not Modified"
        case 404: "Not Found"
        case 416: "Range Not Satisfiable"
        case 429: "Too Many Requests"
        default: "Status"
        }
    }
}

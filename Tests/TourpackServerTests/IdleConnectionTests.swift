import Foundation
import Testing
import TourpackServer
import TourpackTesting

#if canImport(Glibc)
import Glibc
#endif

/// serve-tts closes a connection that sits idle, or half a request that
/// never completes, after `idleTimeoutSeconds` (issue 27, defect 16: 3,000
/// such connections were held for 65 s and more).
@Suite struct IdleConnectionTests {
    /// Connects to the port, sends `bytes`, and waits up to `seconds` for the
    /// server to close: how long it took, or nil when it kept the connection.
    static func closedAfter(port: Int, sending bytes: String, within seconds: Int) -> Double? {
        let fd = Sockets.tcp()
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        guard Sockets.connect(fd, port: port) else { return nil }
        if !bytes.isEmpty { _ = Sockets.sendAll(fd, Array(bytes.utf8)) }
        let started = Date()
        var ready = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        var buffer = [UInt8](repeating: 0, count: 4096)
        while Date().timeIntervalSince(started) < Double(seconds) {
            guard poll(&ready, 1, 200) >= 0 else { return nil }
            guard ready.revents != 0 else { continue }
            if recv(fd, &buffer, buffer.count, 0) <= 0 { return Date().timeIntervalSince(started) }
        }
        return nil
    }

    @Test("An idle connection and a half-sent request are closed after the idle timeout")
    func idleConnectionsAreClosed() async throws {
        try await withServer(configure: { $0.idleTimeoutSeconds = 1 }) { port, _ in
            let (idle, half) = try await OffThePool.run {
                (
                    Self.closedAfter(port: port, sending: "", within: 8),
                    Self.closedAfter(port: port, sending: "POST /v1/text:syn", within: 8)
                )
            }
            #expect(idle.map { $0 < 4 } == true, "an idle connection was kept: \(idle.map { "\($0) s" } ?? "open after 8 s")")
            #expect(half.map { $0 < 4 } == true, "half a request was kept: \(half.map { "\($0) s" } ?? "open after 8 s")")
        }
    }
}

import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The socket calls the loopback servers and the tests make, spelled once
/// for Linux and Apple's systems (where the app's library's tests run on
/// macOS): `SOCK_STREAM` is an enum in Glibc and an `Int32` in Darwin, and
/// a write to a closed connection must not raise SIGPIPE on either.
package enum Sockets {
    /// A new TCP socket's descriptor, or -1.
    package static func tcp() -> Int32 {
        #if canImport(Darwin)
        let descriptor = socket(AF_INET, SOCK_STREAM, 0)
        var one: Int32 = 1
        if descriptor >= 0 { setsockopt(descriptor, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size)) }
        return descriptor
        #else
        return socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #endif
    }

    /// 127.0.0.1 at `port` (0: a port the kernel picks on `bind`).
    static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        #if canImport(Darwin)
        address.sin_len = UInt8(MemoryLayout<sockaddr_in>.size)
        #endif
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        return address
    }

    /// Connects `descriptor` to 127.0.0.1 at `port`.
    package static func connect(_ descriptor: Int32, port: Int) -> Bool {
        var address = loopback(port: port)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                systemConnect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }

    /// One `send(2)` that never raises SIGPIPE: the bytes taken, or -1.
    package static func send(_ descriptor: Int32, _ bytes: UnsafeRawBufferPointer) -> Int {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return 0 }
        #if canImport(Darwin)
        return Darwin.send(descriptor, base, bytes.count, 0)
        #else
        return Glibc.send(descriptor, base, bytes.count, Int32(MSG_NOSIGNAL))
        #endif
    }

    /// Sends all of `bytes`; false when the connection ends first.
    package static func sendAll(_ descriptor: Int32, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { send(descriptor, UnsafeRawBufferPointer(rebasing: $0[offset...])) }
            guard written > 0 else { return false }
            offset += written
        }
        return true
    }

    private static func systemConnect(_ descriptor: Int32, _ address: UnsafePointer<sockaddr>, _ length: socklen_t) -> Int32 {
        #if canImport(Darwin)
        Darwin.connect(descriptor, address, length)
        #else
        Glibc.connect(descriptor, address, length)
        #endif
    }
}

import Foundation
import PostgresTestServer

#if canImport(Glibc)
import Glibc
#endif

/// An S3-compatible server for `tourpack-bench fleet`: `python3 -m
/// moto.server` (PyPI `moto[server]`, which `make setup-test` installs) on
/// a loopback port, stopped with SIGKILL. The bench's copy of the tests'
/// `MotoProcess` (a test target's sources cannot be shared): start, a
/// bucket made with boto3, stop. Its `Process` is only started and
/// stopped; builds on other threads only read the port.
final class MotoServer: @unchecked Sendable {
    private let process = Process()
    let port: Int
    var endpoint: String { "http://127.0.0.1:\(port)" }

    init() throws {
        guard try Self.python(["-c", "import moto.server, flask, boto3"]).status == 0 else {
            throw BenchFailure("python3 cannot import moto.server; install it with `make setup-test` (or `python3 -m pip install 'moto[server]'`)")
        }
        port = try PostgresTestServer.freePort()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-m", "moto.server", "-H", "127.0.0.1", "-p", String(port)]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        // Ready when it accepts a connection; moto takes a few seconds to import.
        for _ in 0..<300 {
            if Self.canConnect(port) { return }
            guard process.isRunning else { break }
            Thread.sleep(forTimeInterval: 0.1)
        }
        stop()
        throw BenchFailure("moto.server did not start on port \(port)")
    }

    func stop() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    deinit { stop() }

    /// A new bucket (moto checks no signature: throwaway keys do).
    func createBucket(_ name: String) throws {
        let script = """
            import boto3, sys
            s3 = boto3.client("s3", endpoint_url="\(endpoint)", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
            s3.create_bucket(Bucket=sys.argv[1])
            """
        let result = try Self.python(["-c", script, name])
        guard result.status == 0 else { throw BenchFailure("boto3 create_bucket \(name): \(result.output)") }
    }

    private static func python(_ arguments: [String]) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3"] + arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    private static func canConnect(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }
}

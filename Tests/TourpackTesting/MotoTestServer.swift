import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A real S3-compatible server for the tests and the fleet bench:
/// `python3 -m moto.server` (PyPI `moto[server]`, installed by `make
/// setup-test`) on a free loopback port, with boto3 (which moto brings
/// along) to make buckets and look inside them.
///
/// It is stopped with SIGKILL: moto keeps nothing worth a clean exit, and
/// a server started from a test thread inherits its blocked signals, so it
/// would never see SIGTERM. moto checks no signature unless
/// `INITIAL_NO_AUTH_ACTION_COUNT` is in `environment`; throwaway keys do.
package final class MotoTestServer: @unchecked Sendable {
    private let process = Process()
    package let port: Int
    package var endpoint: String { "http://127.0.0.1:\(port)" }

    /// Starts the server and waits until it accepts connections (moto takes
    /// a few seconds to import). Blocks: call it off Swift's cooperative
    /// pool, or use `start(environment:)`.
    package convenience init(environment: [String: String] = [:]) throws {
        OffThePool.checkNotOnThePool("MotoTestServer(environment:)")
        try self.init(launching: environment)
        try waitUntilReady { Thread.sleep(forTimeInterval: 0.1) }
    }

    /// Starts the server and waits, sleeping as a task, until it accepts connections.
    package static func start(environment: [String: String] = [:]) async throws -> MotoTestServer {
        let server = try MotoTestServer(launching: environment)
        try await server.waitUntilReady()
        return server
    }

    private init(launching environment: [String: String]) throws {
        guard try Self.python(["-c", "import moto.server, flask, boto3"]).status == 0 else {
            throw Self.failure(
                "python3 cannot import moto.server; install it with `make setup-test` (or `python3 -m pip install 'moto[server]'`)")
        }
        port = try PostgresTestServer.freePort()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-m", "moto.server", "-H", "127.0.0.1", "-p", String(port)]
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
    }

    private func waitUntilReady(sleeping: () throws -> Void) throws {
        for _ in 0..<300 {
            if Self.canConnect(port) { return }
            guard process.isRunning else { break }
            try sleeping()
        }
        stop()
        throw Self.failure("moto.server did not start on port \(port)")
    }

    private func waitUntilReady() async throws {
        for _ in 0..<300 {
            if Self.canConnect(port) { return }
            guard process.isRunning else { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        stop()
        throw Self.failure("moto.server did not start on port \(port)")
    }

    package func stop() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    deinit { stop() }

    // MARK: boto3

    /// Runs `script` with `s3`, a boto3 client of this server, and `sys` in
    /// scope (throwaway keys); its standard output.
    package func boto(_ script: String, _ arguments: [String] = []) throws -> String {
        let prelude = """
            import boto3, sys
            s3 = boto3.client("s3", endpoint_url="\(endpoint)", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")

            """
        let result = try Self.python(["-c", prelude + script] + arguments)
        guard result.status == 0 else { throw Self.failure("boto3 failed: \(result.stderr)") }
        return result.stdout
    }

    package func createBucket(_ name: String) throws {
        _ = try boto("s3.create_bucket(Bucket=sys.argv[1])", [name])
    }

    /// Object keys in the bucket, sorted.
    package func keys(_ bucket: String) throws -> [String] {
        try boto(
            """
            for page in s3.get_paginator("list_objects_v2").paginate(Bucket=sys.argv[1]):
                for item in page.get("Contents", []): print(item["Key"])
            """, [bucket]
        ).split(separator: "\n").map(String.init).sorted()
    }

    /// Flips one byte in the middle of the object and stores it back under
    /// its original `sha256` metadata: what a bit rot or a bad copy does.
    package func damage(_ bucket: String, _ key: String) throws {
        _ = try boto(
            """
            got = s3.get_object(Bucket=sys.argv[1], Key=sys.argv[2])
            body = bytearray(got["Body"].read())
            body[len(body) // 2] ^= 0xFF
            s3.put_object(Bucket=sys.argv[1], Key=sys.argv[2], Body=bytes(body), Metadata=got["Metadata"])
            """, [bucket, key])
    }

    // MARK: Plumbing

    /// Runs `python3` with `arguments`; its status and both outputs.
    package static func python(_ arguments: [String]) throws -> Tool.Result {
        try Tool.run("python3", arguments)
    }

    /// Whether something accepts connections on the loopback port.
    package static func canConnect(_ port: Int) -> Bool {
        let fd = Sockets.tcp()
        defer { close(fd) }
        return Sockets.connect(fd, port: port)
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    static func failure(_ message: String) -> Failure {
        Failure(description: "test S3 server: \(message)")
    }
}

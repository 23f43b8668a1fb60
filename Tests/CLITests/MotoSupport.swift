import Foundation
import PostgresTestServer

#if canImport(Glibc)
import Glibc
#endif

/// A real S3-compatible server for the command-line tests: `python3 -m
/// moto.server` (PyPI `moto[server]`, installed by `make setup-test`) on a
/// loopback port, always stopped with SIGKILL. The same harness as
/// TourpackKitTests' `MotoServer`; test targets cannot share sources, and
/// this one only needs a bucket and a way to damage an object, both done
/// with boto3, which moto brings along.
final class MotoProcess {
    let process = Process()
    let port: Int
    var endpoint: String { "http://127.0.0.1:\(port)" }

    init() throws {
        let check = try Self.python(["-c", "import moto.server, flask, boto3"])
        guard check.status == 0 else {
            throw SetupFailure("python3 cannot import moto.server; install it with `make setup-test` (or `python3 -m pip install 'moto[server]'`)")
        }
        port = try Self.freePort()
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
        throw SetupFailure("moto.server did not start on port \(port)")
    }

    /// SIGKILL: moto keeps nothing worth a clean exit, and a test thread's
    /// blocked signals would keep SIGTERM from reaching it.
    func stop() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    deinit { stop() }

    /// boto3 against this server, with throwaway keys (moto checks no signature by default).
    func boto(_ script: String, _ arguments: [String] = []) throws -> String {
        let prelude = """
            import boto3, sys
            s3 = boto3.client("s3", endpoint_url="\(endpoint)", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")

            """
        let result = try Self.python(["-c", prelude + script] + arguments)
        guard result.status == 0 else { throw SetupFailure("boto3 failed: \(result.stderr)") }
        return result.stdout
    }

    func createBucket(_ name: String) throws {
        _ = try boto("s3.create_bucket(Bucket=sys.argv[1])", [name])
    }

    /// Object keys in the bucket, sorted.
    func keys(_ bucket: String) throws -> [String] {
        try boto("""
            for page in s3.get_paginator("list_objects_v2").paginate(Bucket=sys.argv[1]):
                for item in page.get("Contents", []): print(item["Key"])
            """, [bucket]).split(separator: "\n").map(String.init).sorted()
    }

    /// Flips one byte in the middle of the object and stores it back under
    /// its original `sha256` metadata: what a bit rot or a bad copy does.
    func damage(_ bucket: String, _ key: String) throws {
        _ = try boto("""
            got = s3.get_object(Bucket=sys.argv[1], Key=sys.argv[2])
            body = bytearray(got["Body"].read())
            body[len(body) // 2] ^= 0xFF
            s3.put_object(Bucket=sys.argv[1], Key=sys.argv[2], Body=bytes(body), Metadata=got["Metadata"])
            """, [bucket, key])
    }

    private static func python(_ arguments: [String]) throws -> (status: Int32, stdout: String, stderr: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3"] + arguments
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        let errData = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: outData, as: UTF8.self), String(decoding: errData, as: UTF8.self))
    }

    /// A port the kernel just handed out; moto binds it a moment later.
    static func freePort() throws -> Int {
        try PostgresTestServer.freePort()
    }

    static func canConnect(_ port: Int) -> Bool {
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

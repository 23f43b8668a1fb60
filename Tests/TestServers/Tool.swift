import Foundation

/// A command-line tool the tests check output with (ffmpeg, ffprobe,
/// mp3val, opusinfo, python3 and its libraries), found on `PATH`.
public enum Tool {
    public struct Result: Sendable {
        public var status: Int32
        public var stdout: String
        public var stderr: String
    }

    /// Runs `tool` to its end. Both outputs are read before waiting, stdout
    /// first, so a tool cannot stall on a full pipe unless it writes more
    /// than a pipe holds to stderr before it closes stdout.
    public static func run(_ tool: String, _ arguments: [String]) throws -> Result {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [tool] + arguments
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        let errData = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Result(
            status: process.terminationStatus, stdout: String(decoding: outData, as: UTF8.self),
            stderr: String(decoding: errData, as: UTF8.self))
    }

    /// `run` on a thread of its own, for async tests: the cooperative pool
    /// is not held while the tool runs.
    public static func runOffThePool(_ tool: String, _ arguments: [String]) async throws -> Result {
        try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Swift.Result { try run(tool, arguments) }) }.start()
        }
    }
}

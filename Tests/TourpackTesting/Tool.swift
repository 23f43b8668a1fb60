import Foundation
package import Testing

/// A command-line tool the tests check output with (ffmpeg, ffprobe,
/// mp3val, opusinfo, python3 and its libraries), found on `PATH`.
package enum Tool {
    package struct Result: Sendable {
        package var status: Int32
        package var stdout: String
        package var stderr: String
    }

    /// Runs `tool` to its end. Both outputs are read before waiting, stdout
    /// first, so a tool cannot stall on a full pipe unless it writes more
    /// than a pipe holds to stderr before it closes stdout.
    package static func run(_ tool: String, _ arguments: [String], sourceLocation: SourceLocation = #_sourceLocation) throws -> Result {
        OffThePool.checkNotOnThePool("Tool.run(\(tool))", sourceLocation: sourceLocation)
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
    package static func runOffThePool(_ tool: String, _ arguments: [String]) async throws -> Result {
        try await OffThePool.run { try run(tool, arguments) }
    }
}

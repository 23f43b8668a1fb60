package import Foundation
package import Testing

/// Runs the real `tourpack` executable, as a user or a job would.
package struct Executable {
    package static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// `TOURPACK_BIN` when set, else the `tourpack` that SwiftPM built beside
    /// these tests, in whichever configuration (`debug`, `release`) and build
    /// folder (`--scratch-path`) they were built.
    package static var tourpack: URL {
        if let path = ProcessInfo.processInfo.environment["TOURPACK_BIN"] { return URL(fileURLWithPath: path) }
        return productsFolder.appendingPathComponent("tourpack")
    }

    /// The folder SwiftPM puts a build's products in. The test bundle is one
    /// of them: on Linux it is the running executable, so `Bundle.main` sits
    /// in that folder; on macOS it is an `.xctest` bundle loaded into a runner
    /// that lives elsewhere, so the bundle's own folder is the one.
    package static var productsFolder: URL {
        #if os(macOS)
        if let tests = Bundle.allBundles.first(where: { $0.bundleURL.pathExtension == "xctest" }) {
            return tests.bundleURL.deletingLastPathComponent()
        }
        #endif
        return Bundle.main.bundleURL
    }

    package struct Result: Sendable {
        /// The exit status, or the signal's number when `signalled`.
        package var status: Int32
        package var stdout: String
        package var stderr: String
        /// Whether a signal ended the run (a trap is SIGILL or SIGTRAP), rather than an exit.
        package var signalled = false
    }

    /// Runs `tourpack` with `arguments` to its end. Blocks: call it from a
    /// `.offThePool` suite or through `OffThePool.run`.
    ///
    /// - Parameter fileSizeLimit: bytes no file the run writes may grow past
    ///   (`RLIMIT_FSIZE`, set by `/bin/sh`'s `ulimit -f` in 512-byte blocks,
    ///   with SIGXFSZ ignored so a write past it fails with EFBIG instead of
    ///   killing the process): `SmallDisk`'s stand-in for a full disk.
    package static func run(
        _ arguments: [String], in directory: URL = packageRoot, environment: [String: String] = [:], fileSizeLimit: Int? = nil,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> Result {
        OffThePool.checkNotOnThePool("Executable.run", sourceLocation: sourceLocation)
        let process = Process()
        if let fileSizeLimit {
            process.executableURL = URL(fileURLWithPath: "/bin/sh")
            let blocks = max(1, fileSizeLimit / 512)
            process.arguments = ["-c", "ulimit -f \(blocks) && trap '' XFSZ && exec \"$0\" \"$@\"", tourpack.path] + arguments
        } else {
            process.executableURL = tourpack
            process.arguments = arguments
        }
        process.currentDirectoryURL = directory
        var env = ProcessInfo.processInfo.environment
        env.merge(environment) { $1 }
        process.environment = env
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        // Read both pipes to the end before waiting, so a full pipe can't stall the child.
        let group = DispatchGroup()
        nonisolated(unsafe) var outData = Data(), errData = Data()
        group.enter()
        DispatchQueue.global().async {
            outData = out.fileHandleForReading.readDataToEndOfFile(); group.leave()
        }
        errData = err.fileHandleForReading.readDataToEndOfFile()
        group.wait()
        process.waitUntilExit()
        return Result(
            status: process.terminationStatus, stdout: String(decoding: outData, as: UTF8.self),
            stderr: String(decoding: errData, as: UTF8.self), signalled: process.terminationReason == .uncaughtSignal)
    }
}

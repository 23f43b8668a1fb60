import Foundation
import Testing
import TourpackAudio
import TourpackCore
import TourpackKit
import TourpackTesting

/// The real `tourpack serve-tts` executable, as scripts and `make tour` run it.
@Suite(.offThePool) struct ExecutableTests {
    /// The `tourpack` that SwiftPM built next to the test bundle (the running
    /// test binary's folder, or a folder above it).
    static func tourpackExecutable() -> URL? {
        var candidates: [URL] = []
        let testBinary = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        var folder = testBinary.deletingLastPathComponent()
        for _ in 0..<4 {
            candidates.append(folder.appendingPathComponent("tourpack"))
            folder.deleteLastPathComponent()
        }
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0.path) && !$0.hasDirectoryPath }
    }

    /// Reads the first line of `handle` on a thread of its own: blocking reads stay off the cooperative pool.
    static func firstLine(of handle: FileHandle) async -> String? {
        await withCheckedContinuation { continuation in
            Thread {
                var bytes: [UInt8] = []
                while true {
                    let next = handle.readData(ofLength: 1)
                    guard let byte = next.first else { break }
                    if byte == UInt8(ascii: "\n") { break }
                    bytes.append(byte)
                }
                continuation.resume(returning: bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self))
            }.start()
        }
    }

    static func waitForExit(_ process: Process) async -> Int32? {
        await withCheckedContinuation { continuation in
            Thread {
                let deadline = Date().addingTimeInterval(10)
                while process.isRunning, Date() < deadline { usleep(20_000) }
                continuation.resume(returning: process.isRunning ? nil : process.terminationStatus)
            }.start()
        }
    }

    @Test func serveTTSPrintsItsPortServesAndStopsOnSIGTERM() async throws {
        let executable = try #require(Self.tourpackExecutable(), "build the tourpack product first (swift build)")
        let process = Process()
        process.executableURL = executable
        process.arguments = ["serve-tts", "--port", "0"]
        let stdout = Pipe()
        process.standardOutput = stdout
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer { if process.isRunning { process.interrupt() } }

        let line = await Self.firstLine(of: stdout.fileHandleForReading)
        let port = try #require(line.flatMap { Int($0) }, "first stdout line should be the port, got \(line ?? "nothing")")
        #expect(port > 0)
        // Start-up time is a speed target: measured by `make bench`, not asserted here.

        let synthesizer = try HTTPSpeechSynthesizer(settings: fastSettings(port: port), apiKey: nil)
        let pcm = try await synthesizer.synthesize(speechRequest("Served by a separate process."))
        #expect(pcm.durationSeconds > 1)
        #expect(rms(pcm) > 300)

        kill(process.processIdentifier, SIGTERM)
        let status = await Self.waitForExit(process)
        #expect(status == 0, "clean exit after SIGTERM")
        #expect(process.terminationReason == .exit)
    }
}

import Foundation
import Testing
import TourpackCore
import TourpackPublish
import TourpackTesting

#if canImport(Glibc)
import Glibc
#endif

/// `tourpack install` and `tourpack installed`, run as a script would run them.
@Suite(.serialized, .offThePool) struct InstallCommandTests {
    static func run(_ arguments: [String]) throws -> Executable.Result {
        try Executable.run(arguments, environment: ["TOURPACK_NOW": ""])
    }

    static func lines(_ stdout: String) -> [[String: Any]] {
        stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    @Test func installWithJobEventsThenNoReinstall() async throws {
        let fixture = try SiteFixture()
        let alps = try fixture.addTour(name: "Alps", formats: [.aac, .opus], files: 4, bytes: 20_000, pack: 30_000)
        try await fixture.publish()
        let server = try SiteServer(root: fixture.site)
        defer { server.stop() }
        let documents = fixture.documents().path
        let key = fixture.key.verifyingKey.base64

        var result = try Self.run([
            "install", server.base, "--into", documents, "--tour", alps[0].tourId, "--format", "opus", "--json", "--public-key", key,
        ])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        let events = Self.lines(result.stdout)
        let jobs = events.filter { $0["event"] as? String == "job" }
        #expect(!jobs.isEmpty)
        for job in jobs {
            for field in ["packageId", "status", "progress", "currentStep", "totalBytes", "downloadedBytes", "errorMessage"] {
                #expect(job.keys.contains(field), "a job event without \(field): \(job)")
            }
        }
        #expect(jobs.last?["status"] as? String == "completed" && jobs.last?["progress"] as? Double == 1)
        #expect(jobs.last?["packageId"] as? String == alps[1].packageId)
        #expect(events.last?["event"] as? String == "finished")
        try InstallTests.expectInstalled(fixture, alps[1], in: URL(fileURLWithPath: documents))

        result = try Self.run(["install", fixture.site.path, "--into", documents, "--tour", alps[0].tourId, "--no-reinstall"])
        #expect(result.status == 1)
        #expect(result.stderr.contains("alreadyDownloaded"), "\(result.stderr)")
    }

    @Test func badUsageExitsTwo() async throws {
        let fixture = try SiteFixture()
        try fixture.addTour(name: "Alps", formats: [.aac], files: 1, bytes: 1_000)
        try await fixture.publish()
        let documents = fixture.documents().path
        for arguments in [
            ["install", fixture.site.path, "--into", documents],
            ["install", fixture.site.path, "--into", documents, "--all", "--public-key", "not base64!"],
            ["install", fixture.site.path, "--into", documents, "--tour", UUID().uuidString.lowercased()],
            ["install", "ftp://example.com/site", "--into", documents, "--all"],
            ["install", fixture.work.appendingPathComponent("nowhere").path, "--into", documents, "--all"],
        ] {
            let result = try Self.run(arguments)
            #expect(result.status == 2, "\(arguments): \(result.status) \(result.stderr)")
        }
        // Signed by another key: refused, exit 1, nothing installed.
        let other = fixture.documents("Other")
        let result = try Self.run([
            "install", fixture.site.path, "--into", other.path, "--all", "--public-key", SigningKey.generate().verifyingKey.base64,
        ])
        #expect(result.status == 1)
        #expect(result.stderr.contains("integrity"), "\(result.stderr)")
        #expect(SiteFixture.snapshot(other).isEmpty)
    }

    @Test func sigintCancelsAndRemovesThePartialDownloads() async throws {
        let fixture = try SiteFixture()
        let package = try fixture.addTour(name: "Alps", formats: [.aac], files: 2, bytes: 300_000)[0]
        try await fixture.publish()
        let server = try SiteServer(root: fixture.site)
        defer { server.stop() }
        server.inject { _, _, path, _ in path.hasPrefix("/blobs/") ? .stall(seconds: 3) : nil }
        let documents = fixture.documents()
        let process = Process()
        process.executableURL = Executable.tourpack
        process.arguments = ["install", server.base, "--into", documents.path, "--all", "--json"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        let downloads = documents.appendingPathComponent("\(Layout.installFolder)/downloads")
        let partial = { ((try? FileManager.default.contentsOfDirectory(atPath: downloads.path)) ?? []).filter { $0.hasSuffix(".part") } }
        let deadline = Date().addingTimeInterval(20)
        while partial().isEmpty, Date() < deadline { try await Task.sleep(for: .milliseconds(50)) }
        #expect(!partial().isEmpty, "no download began")
        kill(process.processIdentifier, SIGINT)
        process.waitUntilExit()
        #expect(process.terminationStatus == 130)
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: downloads.path)) ?? []).isEmpty, "partial data left")
        #expect(SiteFixture.snapshot(documents).isEmpty)
        _ = package
    }
}

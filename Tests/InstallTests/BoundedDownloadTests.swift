import Foundation
import Testing
import TourpackCore
import TourpackTesting

#if canImport(Glibc)
import Glibc
#endif

/// `tourpack install` (libcurl) against a hostile or slow site served over
/// loopback: it gives up within its tries and its deadline, fails with
/// `networkUnavailable`, leaves in `downloads` only files a plan names, and
/// the installed package stays valid. And SIGINT or SIGTERM, once or
/// several times, always removes the partial downloads before exit 130.
@Suite(.serialized, .offThePool) struct BoundedDownloadTests {
    /// A site with one tour installed, then republished with two new files,
    /// so that the next install is an update of those two.
    static func updatedSite() async throws -> (SiteFixture, SiteServer, SiteFixture.Package, [String]) {
        let fixture = try SiteFixture()
        let package = try fixture.addTour(name: "Alps", formats: [.aac], files: 3, bytes: 60_000)[0]
        try await fixture.publish()
        let server = try SiteServer(root: fixture.site)
        // The key is remembered in Documents: every later install of the suite verifies with it.
        let first = try InstallCommandTests.run([
            "install", server.base, "--into", fixture.documents().path, "--all", "--public-key", fixture.publicKeyBase64,
        ])
        try #require(first.status == 0, "\(first.stderr)")
        let findings = try ValidateFindings.of(fixture.documents())
        for index in 0..<2 { _ = try fixture.changeFile(of: fixture.package(package.packageId), index: index) }
        try await fixture.publish()
        return (fixture, server, fixture.package(package.packageId), findings)
    }

    /// The names in the install's downloads folder that are not a file of
    /// `package` (whole, `.part`, or a part's `.validator`).
    static func unnamedDownloads(_ documents: URL, _ fixture: SiteFixture, _ package: SiteFixture.Package) throws -> [String] {
        let named = Set(try fixture.files(of: package).values.map { SiteFixture.sha256($0) })
        let folder = documents.appendingPathComponent("\(Layout.installFolder)/downloads")
        return ((try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []).filter { name in
            !named.contains { name == $0 || name == "\($0).part" || name == "\($0).part.validator" }
        }
    }

    static func partials(_ documents: URL) -> [String] {
        let folder = documents.appendingPathComponent("\(Layout.installFolder)/downloads")
        return ((try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []).filter { $0.hasSuffix(".part") }
    }

    /// `validate` finds what it found on the package installed before, and nothing more (`ValidateFindings`).
    static func expectValid(_ documents: URL, as before: [String]) throws {
        let found = try ValidateFindings.of(documents)
        #expect(found == before, "validate: new findings \(Set(found).subtracting(before).sorted())")
        #expect(!found.contains { $0.contains(Layout.installFolder) || $0.contains(".part") }, "\(found)")
    }

    /// What a hostile server does to a range request, after cutting the first plain answer in half.
    static func rangeFault(_ name: String) -> SiteServer.Fault {
        name == "wrongRange" ? .wrongRange : .ignoreRangeAndCut(fraction: 0.3)
    }

    @Test(
        "Cut plain answers, and every range answered with a wrong Content-Range or ignored and cut: the install gives up within --attempts tries a file, with networkUnavailable",
        arguments: ["wrongRange", "ignoredRange"])
    func aWrongContentRangeGivesUpWithinItsAttempts(_ hostile: String) async throws {
        let (fixture, server, package, findings) = try await Self.updatedSite()
        defer { server.stop() }
        let documents = fixture.documents()
        let old = SiteFixture.appView(documents, manifestPath: "OfflineTours/\(package.packageId)/package.json")
        // A stray of an earlier install that no plan names: swept when the install starts.
        let stray = documents.appendingPathComponent("\(Layout.installFolder)/downloads/\(String(repeating: "ab", count: 32)).part")
        try Data("left over".utf8).write(to: stray)
        let fault = Self.rangeFault(hostile)
        server.inject { _, _, path, headers in
            guard path.hasPrefix("/blobs/") else { return nil }
            return headers["range"] != nil ? fault : .cut(fraction: 0.5)
        }
        server.resetLog()
        let started = ContinuousClock.now
        let result = try InstallCommandTests.run(["install", server.base, "--into", documents.path, "--all", "--json", "--attempts", "3"])
        let elapsed = started.duration(to: .now)
        #expect(result.status == 1, "\(result.stdout)\(result.stderr)")
        let error = try #require(InstallCommandTests.lines(result.stdout).last { $0["event"] as? String == "error" }, "\(result.stdout)")
        #expect(error["error"] as? String == "networkUnavailable", "\(error)")
        if fault == .wrongRange { #expect((error["message"] as? String)?.contains("Content-Range") == true, "\(error)") }
        let blobs = server.requests.filter { $0.path.hasPrefix("/blobs/") }
        let perFile = Dictionary(grouping: blobs, by: \.path).mapValues(\.count)
        #expect(!perFile.isEmpty)
        #expect(perFile.values.allSatisfy { $0 <= 3 }, "requests per file: \(perFile)")
        #expect(blobs.contains { $0.fault == fault }, "no range was asked for: the test proved nothing")
        #expect(elapsed < .seconds(120), "gave up after \(elapsed)")

        #expect(!FileManager.default.fileExists(atPath: stray.path), "a download no plan names was not swept")
        #expect(try Self.unnamedDownloads(documents, fixture, package).isEmpty)
        #expect(SiteFixture.appView(documents, manifestPath: "OfflineTours/\(package.packageId)/package.json") == old)
        try Self.expectValid(documents, as: findings)

        // The lock is free, and the next install with a well-behaved site finishes the update.
        server.inject { _, _, _, _ in nil }
        let next = try InstallCommandTests.run(["install", server.base, "--into", documents.path, "--all"])
        #expect(next.status == 0, "\(next.stderr)")
        #expect(try Self.unnamedDownloads(documents, fixture, package).isEmpty)
        try InstallTests.expectInstalled(fixture, package, in: documents)
    }

    @Test("A 1 B/s trickle is abandoned by the rate floor, tried again, and given up at the file's deadline with networkUnavailable")
    func aTrickleIsGivenUpByTheDeadline() async throws {
        let (fixture, server, package, findings) = try await Self.updatedSite()
        defer { server.stop() }
        let documents = fixture.documents()
        server.inject { _, _, path, _ in path.hasPrefix("/blobs/") ? .trickle(interval: 1) : nil }
        server.resetLog()
        let started = ContinuousClock.now
        let result = try InstallCommandTests.run([
            "install", server.base, "--into", documents.path, "--all", "--json", "--min-rate", "512", "--rate-window", "2",
            "--file-deadline", "8", "--attempts", "50",
        ])
        let elapsed = started.duration(to: .now)
        #expect(result.status == 1, "\(result.stdout)\(result.stderr)")
        let error = try #require(InstallCommandTests.lines(result.stdout).last { $0["event"] as? String == "error" }, "\(result.stdout)")
        #expect(error["error"] as? String == "networkUnavailable", "\(error)")
        #expect((error["message"] as? String)?.contains("deadline") == true, "\(error)")
        // A trickle brings bytes, so its tries never run out: the deadline ends it, not a 24 h timeout.
        #expect(elapsed < .seconds(90), "gave up after \(elapsed)")
        let perFile = Dictionary(grouping: server.requests.filter { $0.path.hasPrefix("/blobs/") }, by: \.path).mapValues(\.count)
        #expect(perFile.values.contains { $0 >= 2 }, "the rate floor abandoned no try: \(perFile)")
        #expect(try Self.unnamedDownloads(documents, fixture, package).isEmpty)
        try Self.expectValid(documents, as: findings)
    }

    /// `tourpack install` started as a job runner starts it, downloading a trickled blob.
    static func startInstall(_ server: SiteServer, _ documents: URL, under prefix: [String] = []) throws -> Process {
        let process = Process()
        process.executableURL = prefix.isEmpty ? Executable.tourpack : URL(fileURLWithPath: "/usr/bin/env")
        process.arguments =
            prefix + (prefix.isEmpty ? [] : [Executable.tourpack.path]) + ["install", server.base, "--into", documents.path, "--all"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        return process
    }

    /// Waits for `process` to end; one still running after `seconds` is killed, and the wait fails.
    static func finish(_ process: Process, within seconds: Double, _ name: String) async throws {
        let started = ContinuousClock.now
        while process.isRunning, started.duration(to: .now) < .seconds(seconds) { try await Task.sleep(for: .milliseconds(50)) }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            Issue.record("\(name): still running \(seconds) s after the signals")
        }
        process.waitUntilExit()
    }

    @Test("SIGINT or SIGTERM, once or several times, and timeout's two SIGTERMs: exit 130 with no partial download left")
    func repeatedSignalsStillRemoveThePartialDownloads() async throws {
        let (fixture, server, package, findings) = try await Self.updatedSite()
        defer { server.stop() }
        let documents = fixture.documents()
        server.inject { _, _, path, _ in path.hasPrefix("/blobs/") ? .trickle(interval: 0.05) : nil }
        let rounds: [(name: String, signals: [Int32], gapMilliseconds: Int)] = [
            ("one SIGTERM", [SIGTERM], 0),
            ("one SIGINT", [SIGINT], 0),
            ("two SIGTERMs at once", [SIGTERM, SIGTERM], 0),
            // Apart by as little as `timeout`'s two (the first is being handled when the second comes), and by more.
            ("two SIGTERMs 1 ms apart", [SIGTERM, SIGTERM], 1),
            ("two SIGTERMs 3 ms apart", [SIGTERM, SIGTERM], 3),
            ("two SIGTERMs 10 ms apart", [SIGTERM, SIGTERM], 10),
            ("two SIGTERMs 100 ms apart", [SIGTERM, SIGTERM], 100),
            ("SIGINT, SIGTERM, SIGINT", [SIGINT, SIGTERM, SIGINT], 30),
            ("five SIGINTs", [SIGINT, SIGINT, SIGINT, SIGINT, SIGINT], 20),
        ]
        for round in rounds {
            let process = try Self.startInstall(server, documents)
            var partial = false
            for _ in 0..<400 where !partial {
                try await Task.sleep(for: .milliseconds(25))
                partial = !Self.partials(documents).isEmpty
            }
            try #require(partial, "\(round.name): no partial download was seen before the signal")
            for signal in round.signals {
                kill(process.processIdentifier, signal)
                if round.gapMilliseconds > 0 { try await Task.sleep(for: .milliseconds(round.gapMilliseconds)) }
            }
            try await Self.finish(process, within: 60, round.name)
            #expect(process.terminationReason == .exit && process.terminationStatus == 130, "\(round.name): \(process.terminationStatus)")
            #expect(Self.partials(documents).isEmpty, "\(round.name): partial downloads left: \(Self.partials(documents))")
            #expect(try Self.unnamedDownloads(documents, fixture, package).isEmpty, "\(round.name)")
        }
        // The second signal lands while the first one's clean-up runs: the
        // install is stopped right after the first (SIGSTOP), given the
        // second, and let go (SIGCONT), in several rounds.
        for round in 1...4 {
            let process = try Self.startInstall(server, documents)
            var partial = false
            for _ in 0..<400 where !partial {
                try await Task.sleep(for: .milliseconds(25))
                partial = !Self.partials(documents).isEmpty
            }
            try #require(partial, "stopped round \(round): no partial download was seen before the signal")
            kill(process.processIdentifier, SIGTERM)
            try await Task.sleep(for: .milliseconds(round))
            kill(process.processIdentifier, SIGSTOP)
            try await Task.sleep(for: .milliseconds(20))
            kill(process.processIdentifier, SIGTERM)
            kill(process.processIdentifier, SIGCONT)
            try await Self.finish(process, within: 60, "stopped round \(round)")
            #expect(
                process.terminationReason == .exit && process.terminationStatus == 130,
                "stopped round \(round): \(process.terminationStatus)")
            #expect(Self.partials(documents).isEmpty, "stopped round \(round): partial downloads left: \(Self.partials(documents))")
        }
        // As the issue measured it: under `timeout`, which sends SIGTERM to the child and then to its process group.
        for round in 1...3 {
            let process = try Self.startInstall(server, documents, under: ["timeout", "--preserve-status", "-s", "TERM", "3"])
            try await Self.finish(process, within: 60, "timeout round \(round)")
            #expect(process.terminationStatus == 130, "timeout round \(round): \(process.terminationStatus)")
            #expect(Self.partials(documents).isEmpty, "timeout round \(round): partial downloads left: \(Self.partials(documents))")
        }
        try Self.expectValid(documents, as: findings)
    }
}

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

    @Test func checkInstallUpdateInstalledAndRemove() async throws {
        let fixture = try SiteFixture()
        let alps = try fixture.addTour(name: "Alps", formats: [.aac, .opus], files: 4, bytes: 20_000, pack: 30_000)
        let lakes = try fixture.addTour(name: "Lakes", formats: [.mp3], files: 3, bytes: 15_000)
        try await fixture.publish()
        let server = try SiteServer(root: fixture.site)
        defer { server.stop() }
        let documents = fixture.documents().path
        let key = fixture.key.verifyingKey.base64

        // Nothing installed: asked about every tour, both are not downloaded (11); asked about none, nothing to update (0).
        var result = try Self.run(["install", server.base, "--into", documents, "--check", "--all", "--public-key", key])
        #expect(result.status == 11, "\(result.stdout)\(result.stderr)")
        #expect(result.stdout.contains("not downloaded    Alps"), "\(result.stdout)")
        #expect(result.stdout.contains("opus 96 kbps"), "each offered format with its size: \(result.stdout)")
        result = try Self.run(["install", server.base, "--into", documents, "--check"])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")

        // Install one tour in Opus, with job events.
        result = try Self.run([
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
        #expect(Set(jobs.compactMap { $0["status"] as? String }).isSubset(of: ["queued", "downloading", "completed"]))
        #expect(events.last?["event"] as? String == "finished")
        try InstallTests.expectInstalled(fixture, alps[1], in: URL(fileURLWithPath: documents))

        result = try Self.run(["install", server.base, "--into", documents, "--check", "--tour", alps[0].tourId])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        #expect(result.stdout.contains("up to date        Alps"), "\(result.stdout)")

        // A new build of the Alps in Opus: an update of one file.
        let changed = try fixture.changeFile(of: alps[1], index: 1)
        try await fixture.publish()
        let size = try Data(contentsOf: fixture.source.appendingPathComponent(changed)).count
        result = try Self.run(["install", server.base, "--into", documents, "--check", "--json"])
        #expect(result.status == 10, "\(result.stdout)\(result.stderr)")
        let report = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as! [String: Any]
        let tours = report["tours"] as! [[String: Any]]
        let alpsState = tours.first { $0["tourId"] as? String == alps[0].tourId }!
        #expect(alpsState["status"] as? String == "updateAvailable")
        let installed = (alpsState["installed"] as! [[String: Any]])[0]
        #expect(installed["updateBytes"] as? Int == size && installed["updateFiles"] as? Int == 1)
        #expect(tours.first { $0["tourId"] as? String == lakes[0].tourId }?["status"] as? String == "notDownloaded")

        // --no-reinstall: the lakes are new, so they install; then again, refused.
        result = try Self.run(["install", fixture.site.path, "--into", documents, "--tour", lakes[0].tourId, "--no-reinstall"])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        result = try Self.run(["install", fixture.site.path, "--into", documents, "--tour", lakes[0].tourId, "--no-reinstall"])
        #expect(result.status == 1)
        #expect(result.stderr.contains("alreadyDownloaded"), "\(result.stderr)")

        // installed: two packages; then the Alps go, with their files and nothing else.
        result = try Self.run(["installed", documents, "--json"])
        #expect(result.status == 0, "\(result.stderr)")
        let statistics = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as! [String: Any]
        #expect(statistics["packages"] as? Int == 2)
        #expect(statistics["expired"] as? Int == 0)
        let onDisk = SiteFixture.snapshot(URL(fileURLWithPath: documents)).values.reduce(0) { $0 + $1.count }
        #expect(statistics["bytes"] as? Int == onDisk, "the statistics count every file once")
        result = try Self.run(["installed", documents, "--remove", alps[1].packageId])
        #expect(result.status == 0, "\(result.stderr)")
        let left = SiteFixture.snapshot(URL(fileURLWithPath: documents))
        #expect(left.keys.allSatisfy { !$0.contains(alps[0].tourId) && !$0.contains(alps[1].packageId) }, "\(left.keys.sorted())")
        #expect(Set(left.keys) == Set(try fixture.files(of: lakes[0]).keys))
        result = try Self.run(["installed", documents])
        #expect(result.stdout.contains("1 package(s)"), "\(result.stdout)")
        result = try Self.run(["installed", documents, "--remove", alps[1].packageId])
        #expect(result.status == 2, "an unknown ID is bad input: \(result.stderr)")
    }

    @Test func oneInstallOfTwoToursThatShareBlobsInstallsBothAndFetchesEachBlobOnce() async throws {
        let fixture = try SiteFixture()
        var twins = try fixture.addTwinTours(files: 3, bytes: 30_000)
        try await fixture.publish()
        let server = try SiteServer(root: fixture.site)
        defer { server.stop() }
        let documents = fixture.documents()
        for round in ["install", "update"] {
            if round == "update" {
                // The same sentence edited in both tours: audio and captions alike.
                let body = Data((0..<31_000).map { _ in UInt8.random(in: .min ... .max) })
                for package in twins {
                    try fixture.changeFile(of: fixture.package(package.packageId), index: 1, body: body)
                    try fixture.changeCaptions(of: fixture.package(package.packageId), index: 2, text: "The same new sentence.")
                }
                try await fixture.publish()
                twins = twins.map { fixture.package($0.packageId) }
            }
            server.resetLog()
            let result = try Self.run(["install", server.base, "--into", documents.path, "--all", "--public-key", fixture.publicKeyBase64])
            #expect(result.status == 0, "\(round): \(result.stdout)\(result.stderr)")
            for package in twins {
                let seen = SiteFixture.appView(documents, manifestPath: "OfflineTours/\(package.packageId)/package.json")
                let expected = try fixture.files(of: package)
                #expect(seen == expected, "\(round): \(package.tourId) is not installed whole")
            }
            let blobs = server.requests.filter { $0.path.hasPrefix("/blobs/") && $0.status == 200 }.map(\.path)
            #expect(!blobs.isEmpty && blobs.count == Set(blobs).count, "\(round): a shared blob was fetched twice: \(blobs.sorted())")
        }
    }

    @Test func installedKeepsABudgetByLeastRecentUseAndSparesPinnedTours() async throws {
        let fixture = try SiteFixture()
        var tours: [SiteFixture.Package] = []
        for name in ["A", "B", "C"] { tours += try fixture.addTour(name: name, formats: [.aac], files: 2, bytes: 40_000) }
        try await fixture.publish()
        let documents = fixture.documents().path
        var result = try Self.run(["install", fixture.site.path, "--into", documents, "--all", "--public-key", fixture.publicKeyBase64])
        try #require(result.status == 0, "\(result.stderr)")
        let onDisk = SiteFixture.snapshot(URL(fileURLWithPath: documents)).values.reduce(0) { $0 + $1.count }

        // Nothing used yet: the oldest builds go first, but A is pinned; room for one package.
        result = try Self.run([
            "installed", documents, "--max-storage", "\(onDisk / 3 + 4_000)", "--pin", tours[0].tourId.uppercased(), "--json",
        ])
        #expect(result.status == 0, "\(result.stderr)")
        let statistics = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as! [String: Any]
        let left = (statistics["tours"] as! [[String: Any]]).map { $0["tourId"] as! String }
        #expect(left == [tours[0].tourId], "only the pinned tour stays: \(left)")
        #expect((statistics["bytes"] as! Int) <= onDisk / 3 + 4_000)
        result = try Self.run(["installed", documents])
        #expect(result.stdout.contains("never used"), "\(result.stdout)")

        // A budget the pinned tour alone passes is refused, and nothing goes.
        result = try Self.run(["installed", documents, "--max-storage", "1KB", "--pin", tours[0].tourId])
        #expect(result.status == 1, "\(result.stdout)\(result.stderr)")
        #expect(result.stderr.contains("pinned"), "\(result.stderr)")
        #expect(FileManager.default.fileExists(atPath: "\(documents)/OfflineTours/\(tours[0].packageId)/package.json"))
        result = try Self.run(["installed", documents, "--max-storage", "lots"])
        #expect(result.status == 2, "\(result.stderr)")
    }

    @Test func badUsageExitsTwo() async throws {
        let fixture = try SiteFixture()
        try fixture.addTour(name: "Alps", formats: [.aac], files: 1, bytes: 1_000)
        try await fixture.publish()
        let documents = fixture.documents().path
        for arguments in [
            ["install", fixture.site.path, "--into", documents],
            ["install", fixture.site.path, "--into", documents, "--all", "--public-key", "not base64!"],
            ["install", fixture.site.path, "--into", documents, "--tour", UUID().uuidString.lowercased(), "--insecure-unsigned"],
            ["install", "ftp://example.com/site", "--into", documents, "--all", "--insecure-unsigned"],
            ["install", fixture.work.appendingPathComponent("nowhere").path, "--into", documents, "--all", "--insecure-unsigned"],
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
        process.arguments = ["install", server.base, "--into", documents.path, "--all", "--json", "--public-key", fixture.publicKeyBase64]
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

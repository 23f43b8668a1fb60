import Foundation
import Testing
import TourpackClient
import TourpackCore
import TourpackHTTP
import TourpackInstall
import TourpackKit
import TourpackPublish
import TourpackTesting

/// `Installer` against a real loopback site server: faults, resumes,
/// conditional catalogue reads, updates, tampering, and what stays when an
/// install fails.
@Suite(.serialized) struct InstallTests {
    /// Waits the retry policy asks for, recorded and cut short, so a test of a
    /// 429 or a 503 does not sleep its seconds.
    final class Waits: @unchecked Sendable {
        private let lock = NSLock()
        private var recorded: [Double] = []
        var all: [Double] { lock.withLock { recorded } }
        func record(_ duration: Duration) {
            lock.withLock { recorded.append(duration.seconds) }
        }
    }

    static func installer(_ fixture: SiteFixture, _ documents: URL, server: SiteServer?, verify: Bool = true, waits: Waits = Waits())
        throws -> Installer
    {
        let source: any SiteSource
        if let server {
            source = try HTTPSiteSource(
                base: server.base,
                policy: TransferPolicy(
                    maximumAttempts: 8, fileDeadlineSeconds: 60, initialBackoffSeconds: 0.01, maximumBackoffSeconds: 0.05),
                sleep: { duration in
                    waits.record(duration)
                    try await Task.sleep(for: min(duration, .milliseconds(20)))
                })
        } else {
            source = FolderSiteSource(root: fixture.site)
        }
        return Installer(documents: documents, source: source, publicKey: verify ? fixture.key.verifyingKey : nil)
    }

    /// The installed copy of every file of `package` equals the published one, byte for byte.
    static func expectInstalled(_ fixture: SiteFixture, _ package: SiteFixture.Package, in documents: URL) throws {
        for (path, bytes) in try fixture.files(of: package) {
            let installed = try? Data(contentsOf: documents.appendingPathComponent(path))
            #expect(installed == bytes, "\(path) differs from the published file")
        }
    }

    static func blobRequests(_ server: SiteServer) -> [SiteServer.Request] {
        server.requests.filter { $0.path.hasPrefix("/blobs/") }
    }

    /// The CLI's libcurl source and the app's URLSession source read a
    /// site's address alike, and show it without its user info or query.
    @Test func bothSiteSourcesShowAnAddressWithoutItsSecrets() throws {
        for address in [
            "https://reader:hunter2@cdn.example.org/tours/catalog.json?token=s3cret#top",
            "https://cdn.example.org/tours/?token=s3cret",
        ] {
            let curl = try HTTPSiteSource(base: address)
            let session = URLSessionSiteSource(base: try #require(URL(string: address)))
            #expect(curl.location == "https://cdn.example.org/tours", "\(address)")
            #expect(session.location == curl.location, "\(address)")
        }
    }

    @Test func installsThroughTenPercentFaultsByteForByte() async throws {
        let fixture = try SiteFixture()
        let alps = try fixture.addTour(name: "Alps", formats: [.aac, .mp3], files: 12, bytes: 60_000, pack: 150_000)
        let lakes = try fixture.addTour(name: "Lakes", formats: [.opus], files: 10, bytes: 45_000, pack: 90_000)
        try await fixture.publish()
        let server = try SiteServer(root: fixture.site)
        defer { server.stop() }
        // A fixed draw, so the run is the same every time: one request in ten fails one of five ways.
        let draws = SeededDraws(seed: 24)
        server.inject { _, _, path, headers in
            let roll = draws.next()
            guard roll < 0.10 else { return nil }
            switch Int(roll * 50) % 5 {
            case 0: return .cut(fraction: 0.5)
            case 1: return .status(503)
            case 2: return .tooMany(retryAfter: "1")
            case 3: return headers["range"] != nil ? .ignoreRange : .cut(fraction: 0.3)
            default: return .status(500)
            }
        }
        let documents = fixture.documents()
        let waits = Waits()
        let outcome = try await Self.installer(fixture, documents, server: server, waits: waits).install(PackageChoice(all: true))
        #expect(Set(outcome.installed) == [alps[0].packageId, lakes[0].packageId], "AAC for the Alps, the only format for the lakes")
        try Self.expectInstalled(fixture, alps[0], in: documents)
        try Self.expectInstalled(fixture, lakes[0], in: documents)
        #expect(!FileManager.default.fileExists(atPath: documents.appendingPathComponent("OfflineTours/\(alps[1].packageId)").path))
        let faults = server.requests.compactMap(\.fault)
        #expect(faults.count >= 3, "the draw injected \(faults.count) faults")
        let payload = try fixture.payloadBytes(of: alps[0]) + fixture.payloadBytes(of: lakes[0])
        #expect(Double(server.bodyBytesSent) <= 1.1 * Double(payload), "sent \(server.bodyBytesSent) bytes for \(payload)")
        if faults.contains(.tooMany(retryAfter: "1")) { #expect(waits.all.contains { $0 >= 1 }, "Retry-After: 1 was not honoured") }
        #expect(outcome.jobs.allSatisfy { $0.status == .completed && $0.progress == 1 })
    }

    @Test func aSecondInstallCostsOneConditionalRequest() async throws {
        let fixture = try SiteFixture()
        try fixture.addTour(name: "Alps", formats: [.aac], files: 4, bytes: 20_000, pack: 30_000)
        try await fixture.publish()
        let server = try SiteServer(root: fixture.site)
        defer { server.stop() }
        let documents = fixture.documents()
        let installer = try Self.installer(fixture, documents, server: server)
        _ = try await installer.install(PackageChoice(all: true))
        let before = SiteFixture.snapshot(documents)
        server.resetLog()
        let again = try await installer.install(PackageChoice(all: true))
        #expect(server.requests.map(\.path) == ["/catalog.json"])
        #expect(server.requests.first?.headers["if-none-match"] != nil)
        #expect(server.requests.first?.status == 304)
        #expect(again.catalog.notModified)
        #expect(again.upToDate.count == 1 && again.installed.isEmpty && again.downloadedBytes == 0)
        #expect(SiteFixture.snapshot(documents) == before)
    }

    @Test func anUpdateDownloadsExactlyTheChangedFile() async throws {
        let fixture = try SiteFixture()
        let package = try fixture.addTour(name: "Alps", formats: [.aac], files: 6, bytes: 20_000, pack: 30_000)[0]
        try await fixture.publish()
        let server = try SiteServer(root: fixture.site)
        defer { server.stop() }
        let documents = fixture.documents()
        let installer = try Self.installer(fixture, documents, server: server)
        _ = try await installer.install(PackageChoice(all: true))
        let changed = try fixture.changeFile(of: package, index: 2)
        let dropped = try fixture.dropLastFile(of: fixture.package(package.packageId))
        try await fixture.publish()
        server.resetLog()
        let outcome = try await installer.install(PackageChoice(all: true))
        #expect(outcome.updated == [package.packageId])
        let blobs = Self.blobRequests(server)
        #expect(blobs.count == 1, "\(blobs.map(\.path))")
        let newSHA = SiteFixture.sha256(try Data(contentsOf: fixture.source.appendingPathComponent(changed)))
        #expect(blobs.first?.path.hasSuffix(newSHA) == true)
        try Self.expectInstalled(fixture, fixture.package(package.packageId), in: documents)
        #expect(
            !FileManager.default.fileExists(atPath: documents.appendingPathComponent(dropped).path),
            "a file the new version no longer lists stays")
        #expect(outcome.removedFiles == 1)
    }

    @Test(arguments: ["blob", "manifest", "catalogue"])
    func tamperedContentIsRefusedWithNothingInstalled(_ what: String) async throws {
        let fixture = try SiteFixture()
        let package = try fixture.addTour(name: "Alps", formats: [.aac], files: 4, bytes: 20_000, pack: 30_000)[0]
        try await fixture.publish()
        let server = try SiteServer(root: fixture.site)
        defer { server.stop() }
        let target: URL
        switch what {
        case "blob":
            let entry = (package.json["audio"] as! [[String: Any]])[1]
            let sha = entry["sha256"] as! String
            target = fixture.site.appendingPathComponent("blobs/sha256/\(sha.prefix(2))/\(sha)")
        case "manifest":
            let folder = fixture.site.appendingPathComponent("packages/\(package.packageId)")
            target = folder.appendingPathComponent(try FileManager.default.contentsOfDirectory(atPath: folder.path)[0])
        default:
            target = fixture.site.appendingPathComponent("catalog.json")
        }
        var bytes = try Data(contentsOf: target)
        // One byte changed, the size the same: only a digest or the signature can tell.
        let index = what == "catalogue" ? bytes.firstIndex(of: UInt8(ascii: "7")) ?? 40 : bytes.count / 2
        bytes[index] = bytes[index] == UInt8(ascii: "7") ? UInt8(ascii: "8") : bytes[index] ^ 0x01
        try bytes.write(to: target)
        let documents = fixture.documents()
        await #expect {
            try await Self.installer(fixture, documents, server: server).install(PackageChoice(all: true))
        } throws: { error in
            (error as? TourpackError)?.kind == .integrityFailed
        }
        #expect(SiteFixture.snapshot(documents).isEmpty, "something was installed: \(SiteFixture.snapshot(documents).keys.sorted())")
        if what == "catalogue" {
            // A bad signature is read again, with its catalogue, once, before the refusal.
            #expect(server.requests.filter { $0.path == "/catalog.json" }.count == 2)
            #expect(server.requests.filter { $0.path == "/catalog.json.sig" }.count == 2)
        }
    }

    @Test func aFailedUpdateLeavesThePreviousPackageByteForByte() async throws {
        let fixture = try SiteFixture()
        let package = try fixture.addTour(name: "Alps", formats: [.aac], files: 5, bytes: 20_000, pack: 30_000)[0]
        try await fixture.publish()
        let server = try SiteServer(root: fixture.site)
        defer { server.stop() }
        let documents = fixture.documents()
        let installer = try Self.installer(fixture, documents, server: server)
        _ = try await installer.install(PackageChoice(all: true))
        let before = SiteFixture.snapshot(documents)
        // The update's first new file arrives damaged; the second would be fine.
        try fixture.changeFile(of: package, index: 0)
        let changed = try fixture.changeFile(of: fixture.package(package.packageId), index: 3)
        try await fixture.publish()
        let sha = SiteFixture.sha256(try Data(contentsOf: fixture.source.appendingPathComponent(changed)))
        let blob = fixture.site.appendingPathComponent("blobs/sha256/\(sha.prefix(2))/\(sha)")
        var bytes = try Data(contentsOf: blob)
        bytes[0] ^= 0xFF
        try bytes.write(to: blob)
        await #expect(throws: TourpackError.self) { try await installer.install(PackageChoice(all: true)) }
        #expect(SiteFixture.snapshot(documents) == before)
        // Unreachable, the same.
        server.stop()
        await #expect(throws: TourpackError.self) {
            try await Self.installer(fixture, documents, server: server).install(PackageChoice(all: true))
        }
        #expect(SiteFixture.snapshot(documents) == before)
    }

    @Test func aCutDownloadResumesWithRangeAndIfRangeAndStartsOverWhenTheRangeIsIgnored() async throws {
        let fixture = try SiteFixture()
        // Two files: 200,000 and 200,997 bytes.
        let package = try fixture.addTour(name: "Alps", formats: [.aac], files: 2, bytes: 200_000)[0]
        try await fixture.publish()
        let audio = package.json["audio"] as! [[String: Any]]
        let first = "/blobs/sha256/" + (audio[0]["sha256"] as! String).prefix(2) + "/" + (audio[0]["sha256"] as! String)
        let server = try SiteServer(root: fixture.site)
        defer { server.stop() }
        let counts = PathCounts()
        server.inject { _, _, path, _ in
            guard path.hasPrefix("/blobs/") else { return nil }
            let faults: [SiteServer.Fault?] =
                path == first
                ? [.cut(fraction: 0.4), .cut(fraction: 0.5), nil]  // 80,000 bytes, then 60,000 of the 120,000 left, then the rest
                : [.cut(fraction: 0.25), .ignoreRange]  // 50,249 bytes, then the whole body from byte 0
            let index = counts.next(path)
            return index < faults.count ? faults[index] : nil
        }
        let documents = fixture.documents()
        _ = try await Self.installer(fixture, documents, server: server).install(PackageChoice(all: true))
        try Self.expectInstalled(fixture, package, in: documents)
        let resumed = Self.blobRequests(server).filter { $0.path == first }
        #expect(resumed.map { $0.headers["range"] } == [nil, "bytes=80000-", "bytes=140000-"])
        #expect(resumed.map(\.status) == [200, 206, 206])
        #expect(resumed.dropFirst().allSatisfy { $0.headers["if-range"]?.hasPrefix("\"") == true }, "If-Range carries the ETag")
        let restarted = Self.blobRequests(server).filter { $0.path != first }
        #expect(restarted.map { $0.headers["range"] } == [nil, "bytes=50249-"])
        #expect(restarted.map(\.status) == [200, 200])
        let sent = Self.blobRequests(server).map(\.bodyBytes).reduce(0, +)
        #expect(sent == 80_000 + 60_000 + 60_000 + 50_249 + 200_997)
    }

    @Test func aFolderSiteInstallsToo() async throws {
        let fixture = try SiteFixture()
        let package = try fixture.addTour(name: "Alps", formats: [.mp3], files: 3, bytes: 10_000, pack: 20_000)[0]
        try await fixture.publish()
        let documents = fixture.documents()
        let installer = try Self.installer(fixture, documents, server: nil)
        let first = try await installer.install(PackageChoice(tours: [package.tourId]))
        #expect(first.installed == [package.packageId])
        try Self.expectInstalled(fixture, package, in: documents)
        let second = try await installer.install(PackageChoice(tours: [package.tourId]))
        #expect(second.catalog.notModified && second.upToDate == [package.packageId])
    }

    @Test func noReinstallRefusesAnInstalledPackage() async throws {
        let fixture = try SiteFixture()
        try fixture.addTour(name: "Alps", formats: [.aac], files: 2, bytes: 5_000)
        try await fixture.publish()
        let documents = fixture.documents()
        let installer = try Self.installer(fixture, documents, server: nil)
        _ = try await installer.install(PackageChoice(all: true))
        await #expect {
            try await installer.install(PackageChoice(all: true), noReinstall: true)
        } throws: { error in
            (error as? TourpackError)?.kind == .alreadyDownloaded
        }
    }

    @Test func oneInstallPerDocumentsRoot() async throws {
        let fixture = try SiteFixture()
        try fixture.addTour(name: "Alps", formats: [.aac], files: 2, bytes: 5_000)
        try await fixture.publish()
        let documents = fixture.documents()
        let held = try InstallLock.acquire(documents: documents)
        defer { held.release() }
        await #expect {
            try await Self.installer(fixture, documents, server: nil).install(PackageChoice(all: true))
        } throws: { error in
            (error as? TourpackError)?.kind == .alreadyDownloading
        }
    }

    @Test(
        "A symlink in the place of the install folder's downloads, staging or journal is refused before anything is read or written",
        arguments: ["downloads", "staging", "journal"])
    func aSymlinkedInstallFolderIsRefused(_ name: String) async throws {
        let fixture = try SiteFixture()
        try fixture.addTour(name: "Alps", formats: [.aac], files: 2, bytes: 10_000)
        try await fixture.publish()
        let documents = fixture.documents()
        let elsewhere = fixture.documents("Elsewhere")
        try FileManager.default.createDirectory(at: elsewhere, withIntermediateDirectories: true)
        let state = documents.appendingPathComponent(Layout.installFolder)
        try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(at: state.appendingPathComponent(name), withDestinationURL: elsewhere)
        do {
            _ = try await Self.installer(fixture, documents, server: nil).install(PackageChoice(all: true))
            Issue.record("an install through a symlinked \(name) succeeded")
        } catch let error as TourpackError {
            #expect(error.kind == .invalidInput, "\(error)")
            #expect(error.description.contains("\(Layout.installFolder)/\(name)") && error.description.contains("symlink"), "\(error)")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: elsewhere.path).isEmpty, "written through the link")
        #expect(!FileManager.default.fileExists(atPath: documents.appendingPathComponent("OfflineTours").path))
    }

    @Test func validateIgnoresTheInstallFolderButNotOtherStrays() async throws {
        let fixture = try SiteFixture()
        let documents = fixture.documents()
        try FileManager.default.createDirectory(
            at: documents.appendingPathComponent("\(Layout.installFolder)/downloads"), withIntermediateDirectories: true)
        try Data("partial".utf8).write(to: documents.appendingPathComponent("\(Layout.installFolder)/downloads/x.part"))
        try Data("stray".utf8).write(to: documents.appendingPathComponent(".stray"))
        let report = try await BundleValidator(options: ValidationOptions(strict: true, limits: nil)).validate(root: documents)
        let paths = report.findings.map(\.path)
        #expect(!paths.contains { $0.contains(Layout.installFolder) }, "\(report.text())")
        #expect(paths.contains { $0.contains(".stray") }, "\(report.text())")
    }
}

/// 0, 1, 2, … per path, across threads.
final class PathCounts: @unchecked Sendable {
    private let lock = NSLock()
    private var counts: [String: Int] = [:]

    func next(_ path: String) -> Int {
        lock.withLock {
            defer { counts[path, default: 0] += 1 }
            return counts[path, default: 0]
        }
    }
}

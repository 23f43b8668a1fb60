import Foundation
import Testing
import TourpackCore
import TourpackTesting

#if canImport(Glibc)
import Glibc
#endif

/// `kill -9` at random instants during an update, as a phone's OS kills an
/// app: what the app can see in Documents (the package.json in force, and
/// every file it lists) is always the old package or the new one, whole;
/// and the next install finishes without fetching finished files again.
@Suite(.serialized, .offThePool) struct KilledInstallTests {
    @Test(
        "kill -9 mid-update leaves the old package or the new one, never a mix, and the next install finishes without downloading finished files again"
    )
    func killedUpdatesLeaveOldOrNew() async throws {
        let fixture = try SiteFixture()
        let id = try fixture.addTour(name: "Alps", formats: [.aac], files: 6, bytes: 150_000, captions: true)[0].packageId
        try await fixture.publish()
        let server = try SiteServer(root: fixture.site)
        defer { server.stop() }
        let documents = fixture.documents()
        let manifestPath = "OfflineTours/\(id)/package.json"
        let first = try InstallCommandTests.run([
            "install", server.base, "--into", documents.path, "--all", "--public-key", fixture.publicKeyBase64,
        ])
        try #require(first.status == 0, "\(first.stderr)")

        var seeds = SystemRandomNumberGenerator()
        var killedMidway = 0
        for round in 1...6 {
            let old = try fixture.files(of: fixture.package(id))
            var changed = 0
            for index in 0..<3 { changed += try Self.size(of: fixture.changeFile(of: fixture.package(id), index: index), in: fixture) }
            // Captions change too: one narration's whole, another's as it goes with its audio's edit.
            for index in [1, 4] { changed += try Self.size(of: fixture.changeCaptions(of: fixture.package(id), index: index), in: fixture) }
            try await fixture.publish()
            let new = try fixture.files(of: fixture.package(id))

            // Blobs arrive slowly (half, a pause, the rest), so a kill lands mid-download as often as mid-commit.
            // The first round's pause lasts seconds, so its early kill always lands before the update is in place.
            let stall = round == 1 ? 3.0 : 0.2
            server.inject { _, _, path, _ in path.hasPrefix("/blobs/") ? .stall(seconds: stall) : nil }
            server.resetLog()
            let process = Process()
            process.executableURL = Executable.tourpack
            process.arguments = ["install", server.base, "--into", documents.path, "--all", "--public-key", fixture.publicKeyBase64]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            // The first kill lands early, while the blobs stall, so at least
            // one round proves an update cut short; the others anywhere,
            // the commit included.
            let instant = round == 1 ? Int.random(in: 0...300, using: &seeds) : Int.random(in: 0...1_500, using: &seeds)
            try await Task.sleep(for: .milliseconds(instant))
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            let seen = Self.appView(documents, manifestPath: manifestPath)
            #expect(seen == old || seen == new, "round \(round): the app sees a mix: \(Self.describe(seen, old: old, new: new))")
            if seen == old { killedMidway += 1 }
            // No caption file at a final name but the whole ones the package.json in force lists.
            let captions = documents.appendingPathComponent("OfflineTours/\(id)/captions")
            let named = ((try? FileManager.default.contentsOfDirectory(atPath: captions.path)) ?? []).filter { !$0.hasPrefix(".") }
            #expect(
                named.allSatisfy { seen["OfflineTours/\(id)/captions/\($0)"] != nil }, "round \(round): caption files \(named.sorted())")

            // The next install finishes, fetching only what had not arrived:
            // not the verified downloads, nor the bytes of a partial one.
            let arrived = Self.downloadedBytes(documents)
            let held = Self.downloadsListing(documents)
            server.inject { _, _, _, _ in nil }
            // The killed install's last requests, still queued at the server, are not the next one's.
            try await server.quiesce()
            server.resetLog()
            let next = try InstallCommandTests.run([
                "install", server.base, "--into", documents.path, "--all", "--public-key", fixture.publicKeyBase64,
            ])
            #expect(next.status == 0, "round \(round): \(next.stderr)")
            #expect(Self.appView(documents, manifestPath: manifestPath) == new, "round \(round): the new package, whole")
            let fetched = Self.blobBytes(server)
            #expect(
                fetched <= max(0, changed - arrived) + changed / 10,
                Comment(
                    rawValue:
                        "round \(round): fetched \(fetched) bytes after the kill; \(arrived) of the \(changed) changed bytes had arrived; "
                        + "downloads held \(held); asked for \(server.requests.map { "\($0.path.suffix(14)) \($0.headers["range"] ?? "")" }); "
                        + "stderr: \(next.stderr.suffix(600))"))
        }
        #expect(killedMidway > 0, "no kill landed before the update was in place; the test proved nothing about a mix")
    }

    /// Whether this machine lets the tests mount a tmpfs (root in a container
    /// that allows it, as CI and the development machine are). Elsewhere the
    /// full-disk test does not run.
    static let canMountTmpfs: Bool = {
        let probe = TemporaryFolder.path("tourpack-tmpfs-probe")
        defer { TemporaryFolder.remove(probe) }
        guard (try? FileManager.default.createDirectory(at: probe, withIntermediateDirectories: true)) != nil,
            (try? Tool.run("mount", ["-t", "tmpfs", "-o", "size=64k", "tmpfs", probe.path]))?.status == 0
        else { return false }
        _ = try? Tool.run("umount", [probe.path])
        return true
    }()

    @Test(
        "A full disk (a small tmpfs) is storageFailed naming the path, and the installed package stays as it was",
        .enabled(if: canMountTmpfs, "needs a tmpfs mount (root)"))
    func aFullDiskIsStorageFailedAndKeepsTheOldPackage() async throws {
        let fixture = try SiteFixture()
        let id = try fixture.addTour(name: "Alps", formats: [.aac], files: 2, bytes: 60_000)[0].packageId
        try await fixture.publish()
        // A file system of 512 KiB for the device's Documents: root may mount one (CI and this machine run as root).
        let disk = fixture.documents("disk")
        try FileManager.default.createDirectory(at: disk, withIntermediateDirectories: true)
        let mounted = try Tool.run("mount", ["-t", "tmpfs", "-o", "size=512k", "tmpfs", disk.path])
        try #require(mounted.status == 0, "cannot mount a tmpfs here (\(mounted.stderr)); this test needs root")
        defer { _ = try? Tool.run("umount", [disk.path]) }
        let documents = disk.appendingPathComponent("Documents")
        let manifestPath = "OfflineTours/\(id)/package.json"
        let first = try InstallCommandTests.run([
            "install", fixture.site.path, "--into", documents.path, "--all", "--public-key", fixture.publicKeyBase64,
        ])
        try #require(first.status == 0, "\(first.stderr)")
        let old = Self.appView(documents, manifestPath: manifestPath)
        try #require(old.count == 3)

        // The next version's first file is larger than the disk.
        var json = fixture.package(id).json
        var audio = json["audio"] as! [[String: Any]]
        let path = audio[0]["path"] as! String
        let body = Data((0..<700_000).map { _ in UInt8.random(in: .min ... .max) })
        try body.write(to: fixture.source.appendingPathComponent(path))
        audio[0]["sha256"] = SiteFixture.sha256(body)
        audio[0]["sizeBytes"] = body.count
        json["audio"] = audio
        try fixture.replaceForTests(fixture.package(id), json: json)
        try await fixture.publish()

        let full = try InstallCommandTests.run([
            "install", fixture.site.path, "--into", documents.path, "--all", "--json", "--public-key", fixture.publicKeyBase64,
        ])
        #expect(full.status == 1, "\(full.stdout)\n\(full.stderr)")
        let failure = try #require(InstallCommandTests.lines(full.stdout).last { $0["event"] as? String == "error" }, "\(full.stdout)")
        #expect(failure["error"] as? String == "storageFailed", "the app's name for it: \(failure)")
        #expect((failure["message"] as? String)?.contains(documents.path) == true, "the error names the path: \(failure)")
        #expect(Self.appView(documents, manifestPath: manifestPath) == old, "the installed package stays byte for byte")
    }

    /// What the app reads (`SiteFixture.appView`).
    static func appView(_ documents: URL, manifestPath: String) -> [String: Data] {
        SiteFixture.appView(documents, manifestPath: manifestPath)
    }

    /// The bytes in the install's downloads folder: verified files and partial ones.
    static func downloadedBytes(_ documents: URL) -> Int {
        let folder = documents.appendingPathComponent("\(Layout.installFolder)/downloads")
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        return names.filter { !$0.hasSuffix(".validator") }.reduce(0) { total, name in
            total + ((try? FileManager.default.attributesOfItem(atPath: folder.appendingPathComponent(name).path)[.size] as? Int) ?? 0)
        }
    }

    /// What `downloads` holds, name and size, for a failure's message.
    static func downloadsListing(_ documents: URL) -> [String] {
        let folder = documents.appendingPathComponent("\(Layout.installFolder)/downloads")
        return ((try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []).sorted().map { name in
            let size = (try? FileManager.default.attributesOfItem(atPath: folder.appendingPathComponent(name).path)[.size] as? Int) ?? -1
            return "\(name.suffix(20)) \(size)"
        }
    }

    static func size(of path: String, in fixture: SiteFixture) throws -> Int {
        try Data(contentsOf: fixture.source.appendingPathComponent(path)).count
    }

    static func blobBytes(_ server: SiteServer) -> Int {
        server.requests.filter { $0.path.hasPrefix("/blobs/") }.reduce(0) { $0 + $1.bodyBytes }
    }

    static func describe(_ seen: [String: Data], old: [String: Data], new: [String: Data]) -> String {
        seen.keys.sorted().map { path in
            let state = seen[path] == old[path] ? (seen[path] == new[path] ? "same" : "old") : (seen[path] == new[path] ? "new" : "neither")
            return "\(path): \(state)"
        }.joined(separator: "; ")
    }
}

import Foundation
import Testing
import TourpackCore
import TourpackKit
import TourpackTesting

/// A disk that fills, on a real small file system (`SmallDisk`: a
/// size-limited tmpfs where the tests may mount one, else a file-size
/// limit on `tourpack`): a build, a prune, a publish or an install that
/// runs out of room fails with `storageFailed` naming the path and exit 1,
/// leaves what was there byte for byte, leaves no partial file at a final
/// path, loses no settled ledger row, and the next run on a freed disk
/// completes (issue 27, item 3 and defect 13).
@Suite(.serialized, .offThePool) struct DiskFullTests {
    /// A map workspace whose state or output is a small disk of `bytes`, with a first build done on it.
    struct Setup {
        let voice: LocalVoiceServer
        let tiles: LocalTileServer
        let workspace: BuildWorkspace
        let disk: SmallDisk

        init(diskOn folder: (BuildWorkspace) -> URL, bytes: Int = 24 << 20) throws {
            voice = try LocalVoiceServer()
            // Slow tiles: the maps are still being fetched when the first
            // item finds the disk full, so the build stops with maps in flight.
            tiles = try LocalTileServer(flags: ["--latency-ms", "40"])
            workspace = try MapBuildTests.workspace(source: MapBuildTests.source(tiles))
            disk = try SmallDisk(folder(workspace), bytes: bytes)
            let first = try build()
            try #require(first.status == 0, "the first build, on a disk with room: \(first.stdout)\n\(first.stderr)")
        }

        func build(_ extra: [String] = []) throws -> Executable.Result {
            try disk.run(["build", workspace.pipeline.path, "--endpoint", voice.endpoint, "--json"] + extra, in: workspace.root)
        }

        /// New words for both tours and a deeper zoom: the next build speaks, encodes and fetches tiles again.
        func change(_ words: String) throws {
            for (file, id, name, from, to, poi) in [
                (
                    "north", MapBuildTests.northID, "North Ridge \(words)", (46.50, 7.60), (46.53, 7.66),
                    "9c5e4f6b-1d74-4e8a-8f88-4a5b6c7d8ea1"
                ),
                (
                    "south", MapBuildTests.southID, "South Valley \(words)", (46.48, 7.62), (46.45, 7.70),
                    "9c5e4f6b-1d74-4e8a-8f88-4a5b6c7d8ea2"
                ),
            ] {
                try MapBuildTests.tour(id: id, name: name, from: from, to: to, poi: poi)
                    .write(to: workspace.root.appendingPathComponent("tours/\(file).json"), atomically: true, encoding: .utf8)
            }
            let yaml = try String(contentsOf: workspace.pipeline, encoding: .utf8)
                .replacingOccurrences(of: "maxZoom: 13", with: "maxZoom: 14")
            try yaml.write(to: workspace.pipeline, atomically: true, encoding: .utf8)
        }

        /// The characters the ledger holds as used this month, all tiers.
        func ledgerUsed() throws -> Int {
            let quota = try Executable.run(
                ["quota", workspace.pipeline.path, "--endpoint", voice.endpoint, "--json"], in: workspace.root)
            let object = try #require(try JSONSerialization.jsonObject(with: Data(quota.stdout.utf8)) as? [String: Any], "\(quota.stderr)")
            return (object["tiers"] as? [[String: Any]] ?? []).reduce(0) { $0 + ($1["used"] as? Int ?? 0) }
        }
    }

    static func events(_ stdout: String) -> [[String: Any]] {
        stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    /// The output root without the disk's filler.
    static func output(_ setup: Setup) throws -> [String: Data] {
        try RootCheck.snapshot(setup.workspace.output).filter { !$0.key.hasPrefix(".small-disk") }
    }

    /// What stopped the build and its words: the finished event's `stoppedBy`, or the error event's kind.
    static func stop(_ result: Executable.Result) -> (kind: String?, message: String, billed: Int) {
        let events = events(result.stdout)
        if let finished = events.last(where: { $0["event"] as? String == "finished" }) {
            return (finished["stoppedBy"] as? String, finished["stoppedEarly"] as? String ?? "", finished["charactersBilled"] as? Int ?? 0)
        }
        let error = events.last { $0["event"] as? String == "error" }
        return (error?["error"] as? String, error?["message"] as? String ?? result.stderr, 0)
    }

    @Test(
        "A state disk that fills is storageFailed naming the path, exit 1 (never 'cancelled', 130); the packages stay; the next build completes",
        arguments: [1_500_000, 600_000, 250_000, 60_000])
    func aStateDiskThatFills(leaving free: Int) throws {
        let setup = try Setup(diskOn: \.state)
        defer { setup.disk.unmount() }
        let before = try Self.output(setup)
        let usedBefore = try setup.ledgerUsed()
        #expect(usedBefore > 0, "the ledger counts the local tier's characters (never refusing them), so a lost row would show")
        try setup.change("in spring")
        try setup.disk.fill(leaving: free)

        let full = try setup.build()
        let stop = Self.stop(full)
        #expect(full.status == 1, "leaving \(free) bytes: \(full.stdout.suffix(1500))\n\(full.stderr)")
        #expect(stop.kind == "storageFailed", "stopped by \(stop.kind ?? "nothing"): \(stop.message)")
        #expect(stop.message.contains(setup.workspace.state.path), "names the path: \(stop.message)")
        // Each package is the previous one byte for byte, or the new one whole:
        // a tour that was whole before the disk filled may have been published
        // (its commit can land just before the state write that records it
        // finds no room, so its tourPackaged event may never come).
        let stopped = try Self.output(setup)
        for path in stopped.keys.filter({ $0.hasSuffix("/" + Layout.manifestFileName) }) where stopped[path] != before[path] {
            let manifest = try PackageManifest.read(from: setup.workspace.output.appendingPathComponent(path))
            #expect(manifest.tourName.hasSuffix("in spring"), "\(path) is neither the previous package nor the new one")
        }
        #expect(
            Set(stopped.keys.filter { $0.hasSuffix(Layout.manifestFileName) })
                == Set(before.keys.filter { $0.hasSuffix(Layout.manifestFileName) }))
        let validate = try Executable.run(["validate", setup.workspace.output.path])
        #expect(validate.status == 0, "every package whole, its files as its package.json lists them: \(validate.stdout)")
        #expect(RootCheck.problems(in: setup.workspace.output).isEmpty, "\(RootCheck.problems(in: setup.workspace.output))")

        setup.disk.makeRoom()
        // Every character the full build paid for is in the ledger: no settled row was lost.
        #expect(try setup.ledgerUsed() >= usedBefore + stop.billed)
        let next = try setup.build()
        #expect(next.status == 0, "on a freed disk: \(next.stdout.suffix(1500))\n\(next.stderr)")
        let after = try Self.output(setup)
        #expect(after != before && RootCheck.problems(in: setup.workspace.output).isEmpty)
        #expect(try MapBuildTests.manifests(setup.workspace).values.allSatisfy { $0.tourName.hasSuffix("in spring") })
    }

    @Test("An output disk that fills is storageFailed naming the path, exit 1; the packages stay byte for byte; the next build completes")
    func anOutputDiskThatFills() throws {
        let setup = try Setup(diskOn: \.output, bytes: 4 << 20)
        defer { setup.disk.unmount() }
        let before = try Self.output(setup)
        try setup.change("in autumn")
        try setup.disk.fill(leaving: 16_384)

        let full = try setup.build()
        let stop = Self.stop(full)
        #expect(full.status == 1, "\(full.stdout.suffix(1500))\n\(full.stderr)")
        let failures = Self.events(full.stdout).filter { ["itemFailed", "tourFailed"].contains($0["event"] as? String) }
        let words = ([stop.message] + failures.map { "\($0["message"] ?? $0["reason"] ?? "")" }).joined(separator: "\n")
        #expect(words.contains(setup.workspace.output.path) && words.contains("No space left on device"), "\(words)")
        #expect(stop.kind == nil || stop.kind == "storageFailed", "\(stop)")
        #expect(try Self.output(setup) == before, "the previous packages, byte for byte")
        #expect(RootCheck.problems(in: setup.workspace.output).isEmpty, "\(RootCheck.problems(in: setup.workspace.output))")

        setup.disk.makeRoom()
        let next = try setup.build()
        #expect(next.status == 0, "on a freed disk: \(next.stdout.suffix(1500))\n\(next.stderr)")
        #expect(RootCheck.problems(in: setup.workspace.output).isEmpty)
        #expect(try MapBuildTests.manifests(setup.workspace).values.allSatisfy { $0.tourName.hasSuffix("in autumn") })
    }

    @Test(
        "cache prune on a full state disk fails as storageFailed naming the path, or frees room; never a crash; the next prune and build complete"
    )
    func cachePruneOnAFullStateDisk() throws {
        let setup = try Setup(diskOn: \.state)
        defer { setup.disk.unmount() }
        let before = try Self.output(setup)
        let usedBefore = try setup.ledgerUsed()
        try setup.disk.fill(leaving: 0)
        let prune = try setup.disk.run(["cache", "prune", setup.workspace.pipeline.path], in: setup.workspace.root)
        #expect([0, 1].contains(prune.status), "\(prune.stdout)\n\(prune.stderr)")
        if prune.status == 1 {
            #expect(
                prune.stderr.contains(setup.workspace.state.path) && prune.stderr.contains("No space left on device"), "\(prune.stderr)")
        }
        #expect(try Self.output(setup) == before)
        setup.disk.makeRoom()
        #expect(try setup.ledgerUsed() == usedBefore, "the ledger lost nothing")
        let again = try setup.disk.run(["cache", "prune", setup.workspace.pipeline.path], in: setup.workspace.root)
        #expect(again.status == 0, "\(again.stderr)")
        let build = try setup.build()
        #expect(build.status == 0, "\(build.stdout.suffix(800))\n\(build.stderr)")
        #expect(try Self.output(setup) == before, "nothing changed: the same packages")
    }

    @Test(
        "A publish to a folder site on a full disk is storageFailed naming the path; the site stays as it was; the next publish completes")
    func aPublishToAFullSite() throws {
        let voice = try LocalVoiceServer()
        let key = try SigningPair.generate()
        let workspace = try BuildWorkspace()
        try workspace.setPublish(PublishSection.folder())
        let disk = try SmallDisk(workspace.site, bytes: 8 << 20)
        defer { disk.unmount() }
        try #require(try workspace.build(voice).status == 0)
        let first = try disk.run(["publish", workspace.pipeline.path], in: workspace.root, environment: key.environment)
        try #require(first.status == 0, "\(first.stderr)")
        let site = { try RootCheck.snapshot(workspace.site).filter { !$0.key.hasPrefix(".small-disk") } }
        let before = try site()

        try workspace.editTour("alps.json", replacing: "first hairpin", with: "first of the hairpins")
        try #require(try workspace.build(voice).status == 0)
        try disk.fill(leaving: 4096)
        let full = try disk.run(["publish", workspace.pipeline.path], in: workspace.root, environment: key.environment)
        #expect(full.status == 1, "\(full.stdout)\n\(full.stderr)")
        #expect(full.stderr.contains(workspace.site.path) && full.stderr.contains("No space left on device"), "\(full.stderr)")
        let after = try site()
        // Every file the site had is as it was; a blob that fitted before the disk filled (a
        // small caption file) may stay, named by nothing, until `publish --gc`.
        #expect(
            after.filter { before[$0.key] != nil } == before && after.keys.allSatisfy { before[$0] != nil || $0.hasPrefix("blobs/") },
            "the site, byte for byte: \(Set(after.keys).symmetricDifference(before.keys).sorted())")

        disk.makeRoom()
        let next = try disk.run(["publish", workspace.pipeline.path], in: workspace.root, environment: key.environment)
        #expect(next.status == 0, "\(next.stderr)")
        try SiteAudit.check(workspace.site, key: key).expectSound("after a freed disk")
    }

    @Test("An install into a full disk is storageFailed naming the path; the installed packages stay; the next install completes")
    func anInstallIntoAFullDisk() throws {
        let voice = try LocalVoiceServer()
        let key = try SigningPair.generate()
        let workspace = try BuildWorkspace()
        try workspace.setPublish(PublishSection.folder())
        try #require(try workspace.build(voice).status == 0)
        try #require(try workspace.publish(environment: key.environment).status == 0)
        let device = workspace.root.appendingPathComponent("device")
        let disk = try SmallDisk(device, bytes: 8 << 20)
        defer { disk.unmount() }
        let documents = device.appendingPathComponent("Documents")
        let install = ["install", workspace.site.path, "--into", documents.path, "--all", "--public-key", key.publicKey]
        try #require(try disk.run(install, in: workspace.root).status == 0)
        let installed = { try RootCheck.snapshot(documents).filter { !$0.key.hasPrefix(".tourpack") && !$0.key.hasPrefix(".install") } }
        let before = try installed()

        try workspace.editTour("alps.json", replacing: "first hairpin", with: "first of the hairpins")
        try #require(try workspace.build(voice).status == 0)
        try #require(try workspace.publish(environment: key.environment).status == 0)
        try disk.fill(leaving: 4096)
        let full = try disk.run(install + ["--json"], in: workspace.root)
        #expect(full.status == 1, "\(full.stdout)\n\(full.stderr)")
        #expect(full.stdout.contains("storageFailed") && full.stdout.contains(device.path), "\(full.stdout.suffix(1200))")
        #expect(try installed() == before, "the installed packages, byte for byte")

        disk.makeRoom()
        let next = try disk.run(install, in: workspace.root)
        #expect(next.status == 0, "\(next.stderr)")
        #expect(try installed() != before)
    }
}

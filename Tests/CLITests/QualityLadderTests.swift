import Foundation
import Testing
import TourpackCore
import TourpackKit
import TourpackTesting

/// A quality ladder end to end, through the real executable and `serve-tts`:
/// `formats: [aac, {opus 32 low}, {opus 64 medium}]` builds three Documents
/// roots from one synthesis, each validates, the catalogue offers the three
/// with their sizes, and a device installs the quality it asks for.
@Suite(.serialized, .offThePool) struct QualityLadderTests {
    static let ladder = ["aac", "{format: opus, bitrateKbps: 32, quality: low}", "{format: opus, bitrateKbps: 64, quality: medium}"]

    /// The package.json files of a root, by package ID.
    static func manifests(_ root: URL) throws -> [String: [String: Any]] {
        let folder = root.appendingPathComponent(Layout.offlineToursFolder)
        var manifests: [String: [String: Any]] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: folder.path) where !name.hasPrefix(".") {
            let data = try Data(contentsOf: folder.appendingPathComponent(name).appendingPathComponent(Layout.manifestFileName))
            manifests[name] = try JSONSerialization.jsonObject(with: data) as? [String: Any]
        }
        return manifests
    }

    @Test("plan --json lists every quality of the ladder: its root, and per format the rate and the estimated bytes")
    func planJSONListsEveryQuality() throws {
        let workspace = try BuildWorkspace(formats: Self.ladder)
        let plan = try Executable.run(["plan", workspace.pipeline.path, "--json"], in: workspace.root)
        try #require(plan.status == 0, "\(plan.stdout)\n\(plan.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(plan.stdout.utf8)) as? [String: Any])
        let qualities = try #require(object["qualities"] as? [[String: Any]], "\(plan.stdout)")
        #expect(qualities.map { $0["quality"] as? String } == ["high", "low", "medium"])
        #expect(
            qualities.map { ($0["output"] as? String).map { URL(fileURLWithPath: $0).lastPathComponent } }
                == ["Documents", "Documents-low", "Documents-medium"])
        let rates = qualities.map { ($0["formats"] as? [String: [String: Int]])?.mapValues { $0["bitrateKbps"] ?? 0 } }
        #expect(rates == [["aac": 128], ["opus": 32], ["opus": 64]])
        let bytes = qualities.map { ($0["formats"] as? [String: [String: Int]])?.values.first?["estimatedBytes"] ?? 0 }
        #expect(bytes[1] > 0 && bytes[1] < bytes[2] && bytes[2] < bytes[0], "a lower rate estimates fewer bytes: \(bytes)")
    }

    @Test(
        "Three variants from one synthesis: the endpoint hears each chunk once, each quality's root validates at its own rate, and the signed catalogue offers all three with their sizes"
    )
    func threeVariantsFromOneSynthesis() throws {
        let server = try LocalVoiceServer()
        let workspace = try BuildWorkspace(formats: Self.ladder)
        let build = try workspace.build(server, ["--json"])
        try #require(build.status == 0, "\(build.stdout)\n\(build.stderr)")

        // Three builds, one per root; only the first asks the endpoint, once per chunk.
        let summaries = build.stdout.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }.filter { $0["event"] as? String == "finished" }
        try #require(summaries.count == 3, "\(build.stdout)")
        let requests = summaries.map { $0["requests"] as? Int ?? -1 }
        let chunks = requests[0]
        #expect(chunks > 0 && requests == [chunks, 0, 0], "\(requests)")
        #expect(summaries.dropFirst().allSatisfy { $0["cacheHits"] as? Int ?? 0 >= chunks && $0["encodes"] as? Int ?? 0 > 0 })
        let stats = try server.stats()
        #expect(stats["synthesizeRequests"] as? Int == chunks && stats["repeatedRequests"] as? Int == 0, "\(stats)")

        let roots = ["Documents", "Documents-low", "Documents-medium"].map { workspace.root.appendingPathComponent($0) }
        let expected: [(format: String, kbps: Int, quality: String?)] = [("aac", 128, nil), ("opus", 32, "low"), ("opus", 64, "medium")]
        var audioBytes: [Int] = []
        var ids: Set<String> = []
        for (root, want) in zip(roots, expected) {
            let validate = try Executable.run(["validate", root.path, "--strict"])
            #expect(validate.status == 0, "\(root.lastPathComponent): \(validate.stdout)")
            let manifests = try Self.manifests(root)
            #expect(manifests.count == 2, "\(root.lastPathComponent): one package per tour")
            var bytes = 0
            for (id, manifest) in manifests {
                ids.insert(id)
                #expect(manifest["quality"] as? String == want.quality, "\(root.lastPathComponent)")
                for entry in manifest["audio"] as? [[String: Any]] ?? [] {
                    #expect(entry["format"] as? String == want.format && entry["bitrateKbps"] as? Int == want.kbps)
                    #expect((entry["path"] as? String)?.hasSuffix(want.format == "aac" ? ".m4a" : ".opus") == true)
                    bytes += entry["sizeBytes"] as? Int ?? 0
                }
            }
            audioBytes.append(bytes)
        }
        #expect(ids.count == 6, "each variant of each tour is a package of its own")
        // The AAC packages keep the IDs they had before ladders existed.
        let voice = VoicePreset(provider: "local", languageCode: "en-US", name: "en-us", tier: .local)
        let alps = SafeID(validating: BuildWorkspace.alpsID)!
        #expect(try Self.manifests(roots[0]).keys.contains(PackageID.make(tourID: alps, voice: voice, format: .aac).value))
        #expect(
            try Self.manifests(roots[1]).keys.contains(PackageID.make(tourID: alps, voice: voice, format: .opus, bitrateKbps: 32).value))
        // 32 kbps takes less than 64, and both less than AAC at 128.
        #expect(audioBytes[1] < audioBytes[2] && audioBytes[2] < audioBytes[0], "\(audioBytes)")

        // validate holds each file to its declared rate: the 64 kbps files declared as 32 are refused.
        let mislabelled = workspace.root.appendingPathComponent("Mislabelled")
        try FileManager.default.copyItem(at: roots[2], to: mislabelled)
        for id in try Self.manifests(mislabelled).keys {
            let url = mislabelled.appendingPathComponent("\(Layout.offlineToursFolder)/\(id)/\(Layout.manifestFileName)")
            let text = try String(contentsOf: url, encoding: .utf8).replacingOccurrences(
                of: "\"bitrateKbps\": 64", with: "\"bitrateKbps\": 32")
            try text.write(to: url, atomically: true, encoding: .utf8)
        }
        let refused = try Executable.run(["validate", mislabelled.path])
        #expect(refused.status == ExitStatus.failure)
        #expect(refused.stdout.contains("more than") && refused.stdout.contains("above the nominal 32 kbps"), "\(refused.stdout)")
        try FileManager.default.removeItem(at: mislabelled)

        // A rebuild changes nothing in any root.
        let before = try roots.map { try RootCheck.snapshot($0) }
        let again = try workspace.build(server)
        #expect(again.status == 0)
        #expect(try roots.map { try RootCheck.snapshot($0) } == before)
        #expect(try server.stats()["synthesizeRequests"] as? Int == chunks)

        // cache stats (and prune and clear) look after every root.
        let cacheStats = try Executable.run(["cache", "stats", workspace.pipeline.path, "--json"], in: workspace.root)
        let reports = try #require(try JSONSerialization.jsonObject(with: Data(cacheStats.stdout.utf8)) as? [[String: Any]])
        #expect(
            reports.map { ($0["output"] as? String).map { URL(fileURLWithPath: $0).lastPathComponent } } == roots.map(\.lastPathComponent))

        // One signed catalogue offers every variant, with its quality and size.
        try workspace.setPublish(PublishSection.folder())
        let key = try SigningPair.generate()
        let publish = try workspace.publish([], environment: key.environment)
        try #require(publish.status == 0, "\(publish.stdout)\n\(publish.stderr)")
        let audit = try SiteAudit.check(workspace.site, key: key)
        audit.expectSound()
        #expect(Set(audit.packages.keys) == ids)
        for (root, want) in zip(roots, expected) {
            for (id, manifest) in try Self.manifests(root) {
                let offered = try #require(audit.packages[id])
                #expect(offered["quality"] as? String == (want.quality ?? "high"))
                #expect(offered["bitrateKbps"] as? Int == want.kbps && offered["format"] as? String == want.format)
                #expect(offered["audioBytes"] as? Int == manifest["sizeBytes"] as? Int)
            }
        }

        // A device asks for low: it gets the 32 kbps packages, in the app's exact layout.
        let device = workspace.root.appendingPathComponent("Device")
        let install = try Executable.run(
            ["install", workspace.site.path, "--into", device.path, "--all", "--quality", "low", "--public-key", key.publicKey])
        try #require(install.status == 0, "\(install.stdout)\n\(install.stderr)")
        #expect(try Set(Self.manifests(device).keys) == Set(Self.manifests(roots[1]).keys))
        #expect(try Executable.run(["validate", device.path, "--strict"]).status == 0)
        let check = try Executable.run(["install", workspace.site.path, "--into", device.path, "--check"])
        #expect(check.status == 0, "\(check.stdout)")
        #expect(check.stdout.contains("opus 32 kbps low") || check.stdout.contains("up to date"), "\(check.stdout)")
        // A quality no tour offers in the chosen format is a usage error naming what is offered.
        let missing = try Executable.run(
            ["install", workspace.site.path, "--into", device.path, "--tour", BuildWorkspace.alpsID, "--format", "aac", "--quality", "low"])
        #expect(missing.status == ExitStatus.badInput)
        #expect(missing.stderr.contains("--quality low") && missing.stderr.contains("it is at high"), "\(missing.stderr)")
    }
}

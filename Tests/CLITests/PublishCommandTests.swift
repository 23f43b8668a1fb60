import Foundation
import Testing
import TourpackCore
import TourpackKit
import TourpackTesting

/// `tourpack publish` to a folder target, end to end: a real build through
/// the real `serve-tts` (and `serve-tiles` for tile packs), then the real
/// executable, and the site checked from outside (`SiteAudit`: Python's
/// jsonschema and cryptography, SHA-256 of the files on disk).
@Suite(.serialized, .offThePool) struct PublishCommandTests {
    /// A small map for each tour (zoom 11–12, one mile around the route).
    static func maps(_ tiles: LocalTileServer) -> String {
        """
        maps:
          minZoom: 11
          maxZoom: 12
          bufferMiles: 1
          source:
            url: \(tiles.urlTemplate)
            attribution: Test tiles
            userAgent: tourpack-tests (maps@example.com)
            concurrency: 4
            requestsPerSecond: 0

        """
    }

    static func built(_ workspace: BuildWorkspace, _ server: LocalVoiceServer, _ extra: [String] = []) throws {
        let result = try workspace.build(server, extra)
        try #require(result.status == 0, "build failed: \(result.stdout)\n\(result.stderr)")
    }

    @Test(
        "A signed publish to a folder passes both schemas, names only objects whose bytes match their hashes, and its signature holds until a byte changes"
    )
    func folderPublishIsCompleteAndSigned() throws {
        let server = try LocalVoiceServer()
        let tiles = try LocalTileServer()
        defer { tiles.stop() }
        let workspace = try BuildWorkspace(formats: ["aac", "opus"], extraYAML: Self.maps(tiles))
        try Self.built(workspace, server)
        try workspace.setPublish(PublishSection.folder())
        let key = try SigningPair.generate()

        let result = try workspace.publish(["--json"], environment: key.environment)
        try #require(result.status == 0, "\(result.stdout)\n\(result.stderr)")
        let log = PublishLog(result)
        #expect(log.published == 1)
        let audit = try SiteAudit.check(workspace.site, key: key, allGenerations: true)
        audit.expectSound()

        // The catalogue names every package built, each by the package.json bytes the build wrote.
        let local = try workspace.localPackages()
        #expect(Set(audit.packages.keys) == Set(local.keys) && local.count == 4)
        for (id, package) in local {
            let reference = audit.packages[id]?["manifest"] as? [String: Any]
            let path = try #require(reference?["path"] as? String)
            #expect(FileManager.default.contents(atPath: workspace.site.appendingPathComponent(path).path) == package.bytes, "\(id)")
            #expect((audit.packages[id]?["mapBytes"] as? Int ?? 0) > 0, "\(id) has its tile pack")
        }
        // Nothing else is on the site, and each blob and manifest was uploaded once, reported with its size and source.
        let files = Set(RootCheck.allFiles(under: workspace.site))
        let generation = ["catalog.json", "catalog.json.sig", "generations/1.json", "generations/1.json.sig"]
        #expect(files == audit.named.union(generation), "\(files.symmetricDifference(audit.named.union(generation)))")
        #expect(Set(log.uploaded.keys) == audit.named)
        #expect(log.named("uploaded").count == audit.named.count, "an object was uploaded twice")
        // Publish's events are lines of the one NDJSON form build and install print: each with its time.
        let lines = result.stdout.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
        #expect(
            !lines.isEmpty && lines.allSatisfy { $0["event"] is String && ($0["elapsedSeconds"] as? Double) != nil }, "\(result.stdout)")
        for (key, event) in log.uploaded {
            let size = try FileManager.default.attributesOfItem(atPath: workspace.site.appendingPathComponent(key).path)[.size] as? Int
            #expect(event["bytes"] as? Int == size, "\(key)")
            let source = try #require(event["file"] as? String)
            #expect(
                source == "package.json" || FileManager.default.fileExists(atPath: workspace.output.appendingPathComponent(source).path))
        }

        // One byte of the catalogue changed: the signature no longer holds.
        var tampered = try #require(audit.catalogBytes)
        tampered[tampered.count / 2] ^= 0x01
        try tampered.write(to: workspace.site.appendingPathComponent("catalog.json"))
        #expect(
            try SignatureCheck.verdicts(workspace.site, [("catalog.json", "catalog.json.sig")], publicKey: key.publicKey) == ["invalid"])
    }

    @Test(
        "A package renewed by build --refresh-expiring is published with its new package.json, whose sha256 is the one the catalogue gives")
    func renewedPackageIsPublishedWithItsOwnManifest() throws {
        let server = try LocalVoiceServer()
        let workspace = try BuildWorkspace(extraYAML: "budgets: {packageMaxAgeDays: 10}")
        try Self.built(workspace, server)
        try workspace.setPublish(PublishSection.folder())
        let key = try SigningPair.generate()
        let first = try workspace.publish(["--json"], environment: key.environment)
        try #require(first.status == 0, "\(first.stderr)")
        try SiteAudit.check(workspace.site, key: key).expectSound("after the first publish")

        // Tomorrow's build renews both packages: the same content (contentHash), new dates, new package.json bytes.
        let tomorrow = PackageManifest.timestamp(Date().addingTimeInterval(86_400))
        let renewed = try Executable.run(
            ["build", workspace.pipeline.path, "--endpoint", server.endpoint, "--refresh-expiring", "10"], in: workspace.root,
            environment: ["TOURPACK_NOW": tomorrow])
        try #require(renewed.status == 0, "\(renewed.stderr)")
        let local = try workspace.localPackages()
        #expect(local.values.allSatisfy { $0.manifest["createdAt"] as? String == tomorrow })

        let second = try workspace.publish(["--json"], environment: key.environment)
        try #require(second.status == 0, "\(second.stderr)")
        #expect(PublishLog(second).published == 2)
        let audit = try SiteAudit.check(workspace.site, key: key)
        audit.expectSound("after the renewal")
        for (id, package) in local {
            // The audit holds the catalogue's sha256 to the bytes on the site: these are the renewed bytes.
            let path = try #require((audit.packages[id]?["manifest"] as? [String: Any])?["path"] as? String)
            #expect(
                FileManager.default.contents(atPath: workspace.site.appendingPathComponent(path).path) == package.bytes,
                "\(id): the catalogue names the renewed package.json")
            #expect(audit.packages[id]?["expiresAt"] as? String == package.manifest["expiresAt"] as? String)
        }
    }

    @Test("An expired package is left out of the catalogue with a warning, and the rest is published: expiry alone does not stop a publish")
    func anExpiredPackageIsLeftOutAndTheRestPublished() throws {
        let server = try LocalVoiceServer()
        let workspace = try BuildWorkspace()
        // The lakes tour was built 100 days ago (its package lives 90), the alps tour now.
        let old = PackageManifest.timestamp(Date().addingTimeInterval(-100 * 86_400))
        let lakes = try Executable.run(
            ["build", workspace.pipeline.path, "--endpoint", server.endpoint, "--tour", BuildWorkspace.lakesID], in: workspace.root,
            environment: ["TOURPACK_NOW": old])
        try #require(lakes.status == 0, "\(lakes.stderr)")
        try Self.built(workspace, server, ["--tour", BuildWorkspace.alpsID])
        let local = try workspace.localPackages()
        let expired = try #require(local.first { $0.value.manifest["tourId"] as? String == BuildWorkspace.lakesID }?.key)
        let fresh = try #require(local.first { $0.value.manifest["tourId"] as? String == BuildWorkspace.alpsID }?.key)
        #expect(try Executable.run(["validate", workspace.output.path]).status == 1, "validate calls the expired package an error")

        try workspace.setPublish(PublishSection.folder())
        let key = try SigningPair.generate()
        let result = try workspace.publish([], environment: key.environment)
        #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
        #expect(result.stderr.contains("warning: \(expired) (Lake Test Loop) expired at"), "\(result.stderr)")
        // A quiet publish: off a terminal, no line per object, and one summary line.
        #expect(!result.stderr.contains("uploaded "), "\(result.stderr)")
        #expect(result.stdout.split(separator: "\n").count == 1, "\(result.stdout)")
        let verbose = try workspace.publish(
            ["--site", workspace.root.appendingPathComponent("verbose-site").path, "--verbose"], environment: key.environment)
        #expect(verbose.status == 0 && verbose.stderr.contains("uploaded package.json → packages/"), "\(verbose.stderr)")
        let audit = try SiteAudit.check(workspace.site, key: key)
        audit.expectSound()
        #expect(Set(audit.packages.keys) == [fresh], "only the unexpired package is in the catalogue")
    }

    @Test("--rollback N publishes generation N's packages as a new, higher generation, and refuses a generation the site does not have")
    func rollbackPublishesAGenerationAgainAsANewOne() throws {
        let server = try LocalVoiceServer()
        let workspace = try BuildWorkspace()
        try Self.built(workspace, server)
        try workspace.setPublish(PublishSection.folder())
        let key = try SigningPair.generate()
        #expect(try workspace.publish(["--json"], environment: key.environment).status == 0)
        try workspace.editTour("alps.json", replacing: "built in 1899", with: "built in 1901")
        try Self.built(workspace, server)
        let second = try workspace.publish(["--json"], environment: key.environment)
        #expect(PublishLog(second).published == 2, "\(second.stdout)\n\(second.stderr)")

        let site = workspace.site
        func bytes(_ key: String) -> Data? { FileManager.default.contents(atPath: site.appendingPathComponent(key).path) }
        #expect(bytes("catalog.json") == bytes("generations/2.json") && bytes("catalog.json.sig") == bytes("generations/2.json.sig"))

        let dry = try workspace.publish(["--rollback", "1", "--dry-run", "--json"], environment: key.environment)
        #expect(dry.status == 0 && bytes("catalog.json") == bytes("generations/2.json"), "a dry run changes nothing")

        let rollback = try workspace.publish(["--rollback", "1", "--json"], environment: key.environment)
        #expect(rollback.status == 0, "\(rollback.stderr)")
        #expect(PublishLog(rollback).named("rolledBack").first?["from"] as? Int == 1)
        #expect(PublishLog(rollback).named("rolledBack").first?["generation"] as? Int == 3)
        // A new generation (devices refuse a lower one) with generation 1's packages.
        #expect(bytes("catalog.json") != nil && bytes("catalog.json") == bytes("generations/3.json"))
        #expect(bytes("catalog.json.sig") != nil && bytes("catalog.json.sig") == bytes("generations/3.json.sig"))
        let first = try Catalog.decode(try #require(bytes("generations/1.json")))
        let third = try Catalog.decode(try #require(bytes("generations/3.json")))
        #expect(third.tours == first.tours && third.previousGeneration == 2)
        let audit = try SiteAudit.check(site, key: key)
        audit.expectSound("after the rollback")
        #expect(audit.generation == 3)

        let missing = try workspace.publish(["--rollback", "9"], environment: key.environment)
        #expect(missing.status == 2)
        #expect(missing.stderr.contains("generations/9.json does not exist") && missing.stderr.contains("1, 2"), "\(missing.stderr)")
        // Joined as a path: the site's folder, one "/", the key (issue 35: "…/sitegenerations/9.json").
        #expect(missing.stderr.contains(site.standardizedFileURL.path + "/generations/9.json does not exist"), "\(missing.stderr)")
        #expect(bytes("catalog.json") == bytes("generations/3.json"))

        // The next publish puts the built packages back on top, as a generation newer than any.
        let next = try workspace.publish(["--json"], environment: key.environment)
        #expect(PublishLog(next).published == 4, "\(next.stdout)")
        let after = try SiteAudit.check(site, key: key, allGenerations: true)
        after.expectSound("after publishing again")
        #expect(after.catalog?["previousGeneration"] as? Int == 3)
    }

    @Test("--gc deletes nothing within graceDays; with graceDays 0 it deletes exactly what only generations older than the kept ones named")
    func garbageCollectionKeepsWhatKeptGenerationsName() throws {
        let server = try LocalVoiceServer()
        let workspace = try BuildWorkspace()
        try Self.built(workspace, server)
        try workspace.setPublish(PublishSection.folder())
        let key = try SigningPair.generate()
        var audits: [SiteAudit] = []
        for (round, year) in ["1899", "1901", "1905"].enumerated() {
            if round > 0 {
                try workspace.editTour("alps.json", replacing: ["1899", "1901", "1905"][round - 1], with: year)
                try Self.built(workspace, server)
            }
            let result = try workspace.publish(["--json"], environment: key.environment)
            #expect(PublishLog(result).published == round + 1, "\(result.stdout)\n\(result.stderr)")
            audits.append(try SiteAudit.check(workspace.site, key: key))
        }
        let site = workspace.site
        let all = Set(RootCheck.allFiles(under: site))
        func keeping(_ generations: [Int]) -> Set<String> {
            var kept: Set<String> = ["catalog.json", "catalog.json.sig"]
            for number in generations {
                kept.formUnion(audits[number - 1].named.union(["generations/\(number).json", "generations/\(number).json.sig"]))
            }
            return kept
        }
        // Only the old alps packages and their changed audio are garbage; lakes is named by every generation.
        #expect(all.subtracting(keeping([3])).contains { $0.hasPrefix("blobs/") && audits[0].named.contains($0) })

        func gc(keep: Int, graceDays: Int, _ extra: [String] = []) throws -> PublishLog {
            try workspace.setPublish(PublishSection.folder(keepGenerations: keep, graceDays: graceDays))
            let result = try workspace.publish(["--gc", "--json"] + extra, environment: key.environment)
            #expect(result.status == 0, "\(result.stderr)")
            return PublishLog(result)
        }
        let before = try RootCheck.snapshot(site)
        #expect(try gc(keep: 1, graceDays: 7).named("deleted").isEmpty)
        #expect(try RootCheck.snapshot(site) == before, "within graceDays nothing goes")

        let dry = try gc(keep: 1, graceDays: 0, ["--dry-run"])
        let wouldDelete = Set(
            dry.named("planned").compactMap { ($0["message"] as? String)?.replacingOccurrences(of: "would delete ", with: "") })
        #expect(wouldDelete == all.subtracting(keeping([3])))
        #expect(try RootCheck.snapshot(site) == before, "a dry run deletes nothing")

        // keepGenerations 2: generation 1's leftovers go, generation 2's stay.
        let deletedFirst = Set(try gc(keep: 2, graceDays: 0).named("deleted").compactMap { $0["key"] as? String })
        #expect(deletedFirst == all.subtracting(keeping([2, 3])))
        #expect(Set(RootCheck.allFiles(under: site)) == keeping([2, 3]))

        let deletedThen = Set(try gc(keep: 1, graceDays: 0).named("deleted").compactMap { $0["key"] as? String })
        #expect(deletedThen == keeping([2, 3]).subtracting(keeping([3])))
        #expect(Set(RootCheck.allFiles(under: site)) == keeping([3]))
        for key in keeping([3]) {
            #expect(FileManager.default.contents(atPath: site.appendingPathComponent(key).path) == before[key], "\(key)")
        }
        try SiteAudit.check(site, key: key).expectSound("after gc")

        let rollback = try workspace.publish(["--rollback", "1"], environment: key.environment)
        #expect(rollback.status == 2 && rollback.stderr.contains("generations 3"), "\(rollback.stderr)")
        let again = try workspace.publish(["--json"], environment: key.environment)
        #expect(PublishLog(again).unchanged == 3 && PublishLog(again).named("uploaded").isEmpty, "\(again.stdout)")
    }

    @Test("Usage errors exit 2 naming what is wrong, print no key and write nothing; --dry-run lists the uploads and writes nothing")
    func usageErrorsAndDryRun() throws {
        let server = try LocalVoiceServer()
        let workspace = try BuildWorkspace()
        try Self.built(workspace, server)
        let key = try SigningPair.generate()
        let site = workspace.site

        let noSection = try workspace.publish([], environment: key.environment)
        #expect(noSection.status == 2)
        #expect(noSection.stderr.contains("publish: the pipeline has no publish section"), "\(noSection.stderr)")

        // --site stands in for the section: an unsigned catalogue that says so, and no signature beside it.
        let elsewhere = workspace.root.appendingPathComponent("elsewhere")
        let unsigned = try workspace.publish(["--site", elsewhere.path, "--json"])
        #expect(unsigned.status == 0, "\(unsigned.stderr)")
        let audit = try SiteAudit.check(elsewhere, key: nil)
        #expect(audit.problems.isEmpty, "\(audit.problems)")
        #expect(audit.catalog?["unsigned"] as? Bool == true && audit.catalog?["signedBy"] == nil)
        #expect(!FileManager.default.fileExists(atPath: elsewhere.appendingPathComponent("catalog.json.sig").path))
        #expect(PublishLog(try workspace.publish(["--site", elsewhere.path, "--json"])).unchanged == 1)

        try workspace.setPublish(PublishSection.folder())
        let notBase64 = "sentinel-signing-key-%%-not-base64"
        let shortKey = Data("sentinel-short-signing-key".utf8).base64EncodedString()
        for (value, words) in [(nil, "is not set"), (notBase64, "is not base64"), (shortKey, "decodes to 26 bytes, not 32")] {
            let result = try workspace.publish([], environment: value.map { [SigningPair.variable: $0] } ?? [:])
            #expect(result.status == 2)
            #expect(result.stderr.contains("publish.signingKeyEnv: signing key: \(SigningPair.variable) \(words)"), "\(result.stderr)")
            for secret in [notBase64, shortKey, key.privateKey] {
                #expect(!result.stdout.contains(secret) && !result.stderr.contains(secret))
            }
        }
        let both = try workspace.publish(["--rollback", "1", "--gc"], environment: key.environment)
        #expect(both.status == 2 && both.stderr.contains("--rollback, --refresh and --gc are separate runs"), "\(both.stderr)")
        #expect(RootCheck.allFiles(under: site).isEmpty, "nothing was written")

        // A dry run names every blob and manifest a publish then uploads, and writes none of them.
        let dry = try workspace.publish(["--dry-run", "--json"], environment: key.environment)
        #expect(dry.status == 0, "\(dry.stderr)")
        let planned = PublishLog(dry).planned
        let summary = PublishLog(dry).named("finished").first?["message"] as? String ?? ""
        #expect(summary.hasPrefix("would publish generation 1"), "\(summary)")
        #expect(RootCheck.allFiles(under: site).isEmpty, "a dry run uploads nothing")
        var expected: Set<String> = []
        for package in try workspace.localPackages().values {
            for entry in package.manifest["audio"] as? [[String: Any]] ?? [] {
                // The audio file and its captions.
                for sha256 in [entry["sha256"] as? String ?? "", (entry["captions"] as? [String: Any])?["sha256"] as? String ?? ""] {
                    expected.insert("blobs/sha256/\(sha256.prefix(2))/\(sha256)")
                }
            }
        }
        #expect(planned.filter { $0.hasPrefix("blobs/") } == expected)
        #expect(planned.filter { $0.hasPrefix("packages/") }.count == 2)

        let real = try workspace.publish(["--json"], environment: key.environment)
        #expect(real.status == 0)
        #expect(Set(PublishLog(real).uploaded.keys) == planned, "the dry run listed what the publish uploaded")
    }
}

import Foundation
import Testing
import TourpackCore
import TourpackTesting

#if canImport(Glibc)
import Glibc
#endif

/// `tourpack publish` to an S3 target, end to end: a real build through the
/// real `serve-tts`, the real executable against a real S3-compatible server
/// (moto), and the bucket read back with boto3 and audited as a device
/// would (`SiteAudit`).
@Suite(.serialized, .offThePool) struct PublishBucketTests {
    static let bucket = "tourpack-site"
    static let prefix = "v1/"

    /// A moto server with the site's bucket, and a built workspace publishing into it.
    static func setUp(formats: [String] = ["aac"], server: LocalVoiceServer) throws -> (MotoTestServer, BuildWorkspace) {
        let moto = try MotoTestServer()
        try moto.createBucket(bucket)
        let workspace = try BuildWorkspace(formats: formats)
        try PublishCommandTests.built(workspace, server)
        try workspace.setPublish(PublishSection.bucket(endpoint: moto.endpoint, bucket: bucket, prefix: prefix))
        return (moto, workspace)
    }

    @Test(
        "A republish with nothing new writes nothing; a one-narration edit uploads its blob, one manifest, one generation and the catalogue"
    )
    func republishUploadsOnlyWhatChanged() throws {
        let server = try LocalVoiceServer()
        let (moto, workspace) = try Self.setUp(server: server)
        let key = try SigningPair.generate()
        let environment = key.environment.merging(PublishSection.bucketKeys) { $1 }

        let first = try workspace.publish(["--json"], environment: environment)
        try #require(first.status == 0, "\(first.stdout)\n\(first.stderr)")
        #expect(PublishLog(first).published == 1)
        try moto.audit(Self.bucket, prefix: Self.prefix, key: key).expectSound("after the first publish")
        let before = try moto.objects(Self.bucket, prefix: Self.prefix)
        #expect(try moto.keys(Self.bucket).allSatisfy { $0.hasPrefix(Self.prefix) })

        // moto's LastModified has whole seconds: wait one, so that a rewrite of the same bytes would show.
        Thread.sleep(forTimeInterval: 1.1)
        let again = try workspace.publish(["--json"], environment: environment)
        #expect(again.status == 0, "\(again.stderr)")
        let log = PublishLog(again)
        #expect(log.named("uploaded").isEmpty && log.published == nil && log.unchanged == 1, "\(again.stdout)")
        #expect(try moto.objects(Self.bucket, prefix: Self.prefix) == before, "no object was written again")

        // One narration of one POI changes: one audio file differs.
        let old = try workspace.localPackages()
        try workspace.editTour("lakes.json", replacing: "40 metres deep", with: "41 metres deep")
        try PublishCommandTests.built(workspace, server)
        let new = try workspace.localPackages()
        let lakes = try #require(new.first { $0.value.manifest["tourId"] as? String == BuildWorkspace.lakesID }?.key)
        #expect(old[lakes]?.bytes != new[lakes]?.bytes)
        func audio(_ package: (bytes: Data, manifest: [String: Any])?) -> [String: [String: Any]] {
            Dictionary(
                uniqueKeysWithValues: (package?.manifest["audio"] as? [[String: Any]] ?? []).map { ($0["sha256"] as? String ?? "", $0) })
        }
        let added = audio(new[lakes]).filter { audio(old[lakes])[$0.key] == nil }
        try #require(added.count == 1, "one audio file changed: \(added.keys)")
        let (sha256, entry) = try #require(added.first)
        let blob = "blobs/sha256/\(sha256.prefix(2))/\(sha256)"
        // Its captions changed with it.
        let captionsSHA = try #require((entry["captions"] as? [String: Any])?["sha256"] as? String)
        let captionsBlob = "blobs/sha256/\(captionsSHA.prefix(2))/\(captionsSHA)"

        let dry = try workspace.publish(["--dry-run", "--json"], environment: environment)
        #expect(dry.status == 0, "\(dry.stderr)")
        #expect(try moto.objects(Self.bucket, prefix: Self.prefix) == before, "a dry run writes nothing")

        let edit = try workspace.publish(["--json"], environment: environment)
        #expect(edit.status == 0, "\(edit.stderr)")
        let editLog = PublishLog(edit)
        #expect(editLog.published == 2)
        let audit = try moto.audit(Self.bucket, prefix: Self.prefix, key: key)
        audit.expectSound("after the edit")
        let manifest = try #require((audit.packages[lakes]?["manifest"] as? [String: Any])?["path"] as? String)
        #expect(Set(editLog.uploaded.keys) == [blob, captionsBlob, manifest], "\(editLog.uploaded.keys)")
        #expect(editLog.uploaded[blob]?["file"] as? String == entry["path"] as? String)
        #expect(editLog.uploaded[blob]?["bytes"] as? Int == entry["sizeBytes"] as? Int)
        #expect(Set(PublishLog(dry).planned) == [blob, captionsBlob, manifest], "the dry run listed the same uploads")

        let after = try moto.objects(Self.bucket, prefix: Self.prefix)
        let created = Set(after.keys).subtracting(before.keys)
        let rewritten = Set(before.keys.filter { after[$0] != nil && after[$0] != before[$0] })
        #expect(created == [blob, captionsBlob, manifest, "generations/2.json", "generations/2.json.sig"], "\(created)")
        #expect(rewritten == ["catalog.json", "catalog.json.sig"], "\(rewritten)")
        #expect(Set(before.keys).isSubset(of: after.keys), "nothing was removed")
    }

    @Test("A publish killed at random instants leaves the catalogue in force whole: schema, signature and every object it names")
    func killedPublishesLeaveASoundCatalogue() throws {
        let server = try LocalVoiceServer()
        let (moto, workspace) = try Self.setUp(server: server)
        let key = try SigningPair.generate()
        let environment = key.environment.merging(PublishSection.bucketKeys) { $1 }
        // The first publish runs whole: every kill after it has a catalogue in force to spoil. It times the
        // whole publish and its commit (from the last upload to the end), which bound the random delays.
        let started = Date()
        let first = try workspace.startPublish(environment: environment)
        var lastUpload = started
        while first.waitForEvent("uploaded") != nil { lastUpload = Date() }
        try #require(first.finish() == 0)
        let (duration, commit) = (Date().timeIntervalSince(started), Date().timeIntervalSince(lastUpload))
        var lastGeneration = try #require(PublishLog(events: first.events).published)
        var (midway, completed) = (0, 0)
        var record: [String] = []
        for round in 1...6 {
            // Every narration of both tours changes: each publish has five blobs and two manifests to upload.
            try workspace.writeTours(alps: "Round \(round) of the road.", lakes: "Round \(round) at the lake.")
            try PublishCommandTests.built(workspace, server)
            let local = try workspace.localPackages()
            let blobs = Set(
                local.values.flatMap { ($0.manifest["audio"] as? [[String: Any]] ?? []).compactMap { $0["sha256"] as? String } })
            let publish = try workspace.startPublish(environment: environment)
            func afterUpload(_ count: Int, thenWithin seconds: Double) {
                while publish.events.filter({ $0["event"] as? String == "uploaded" }).count < count, publish.waitForEvent("uploaded") != nil
                {}
                Thread.sleep(forTimeInterval: Double.random(in: 0..<seconds))
            }
            switch round % 3 {
            // Right after the k-th upload: in the middle of the uploads.
            case 0: afterUpload(Int.random(in: 1..<blobs.count), thenWithin: 0.01)
            // After the last upload: while the generation, the catalogue and their signatures are written, or just after.
            case 1: afterUpload(blobs.count + local.count, thenWithin: commit * 1.5)
            // Anywhere, from before validation to after the end.
            default: Thread.sleep(forTimeInterval: Double.random(in: 0..<(duration * 1.3)))
            }
            publish.signal(SIGKILL)
            let status = publish.finish()
            let log = PublishLog(events: publish.events)
            let uploads = log.named("uploaded").count
            if status == -SIGKILL, uploads > 0, log.published == nil { midway += 1 }
            if log.published != nil { completed += 1 }
            record.append("round \(round): exit \(status), \(uploads) uploads, published \(log.published.map(String.init) ?? "no")")

            let audit = try moto.audit(Self.bucket, prefix: Self.prefix, key: key)
            let generation = try #require(audit.generation, "the catalogue vanished: \(record)")
            #expect(audit.problems.isEmpty, "\(record)\n\(audit.problems.joined(separator: "\n"))")
            #expect(generation >= lastGeneration, "a killed publish put an older catalogue in force: \(record)")
            if let published = log.published { #expect(generation == published, "\(record)") }
            lastGeneration = generation
            // generations/<n>.json.sig is written before catalog.json, so it always holds for the catalogue in force.
            #expect(audit.generationSignature == "ok", "\(record)")
            if audit.signature != "ok" {
                // Killed between catalog.json and catalog.json.sig: the one window two objects leave. The next publish mends it.
                record.append("round \(round): catalog.json.sig \(audit.signature)")
                let mend = try workspace.publish(["--json"], environment: environment)
                #expect(PublishLog(mend).named("warning").contains { ($0["message"] as? String)?.contains("signed it again") == true })
                try moto.audit(Self.bucket, prefix: Self.prefix, key: key).expectSound("after mending: \(record)")
            }
        }
        print(
            "\(completed) of 6 killed publishes got to the end (a whole one took \(Int(duration * 1000)) ms, its commit \(Int(commit * 1000)) ms): "
                + record.joined(separator: "; ")
        )
        #expect(midway > 0, "no publish was killed in the middle: \(record)")

        let last = try workspace.publish(["--json"], environment: environment)
        #expect(last.status == 0, "\(last.stderr)")
        let audit = try moto.audit(Self.bucket, prefix: Self.prefix, key: key)
        audit.expectSound("after the last publish: \(record)")
        let local = try workspace.localPackages()
        #expect(Set(audit.packages.keys) == Set(local.keys) && local.count == 2)
        for (id, package) in local {
            #expect(audit.packages[id]?["contentHash"] as? String == package.manifest["contentHash"] as? String, "\(id) is the last build")
        }
    }

    @Test("Two publishers racing into one bucket both keep their packages: distinct generations, every package in the final catalogue")
    func racingPublishersKeepEachOthersPackages() throws {
        let server = try LocalVoiceServer()
        let moto = try MotoTestServer()
        try moto.createBucket(Self.bucket)
        let key = try SigningPair.generate()
        let environment = key.environment.merging(PublishSection.bucketKeys) { $1 }
        // The same tours in two formats: different package IDs, no blob in common.
        let workspaces = [try BuildWorkspace(formats: ["aac"]), try BuildWorkspace(formats: ["mp3"])]
        for workspace in workspaces { try PublishCommandTests.built(workspace, server) }

        var raced = 0
        for round in 0..<5 {
            // Rounds 0–3 race into an empty site; round 4 races edits of both onto round 0's site.
            let prefix = "race\(round % 4)/"
            if round == 4 {
                try workspaces[0].editTour("alps.json", replacing: "built in 1899", with: "built in 1901")
                try workspaces[1].editTour("lakes.json", replacing: "40 metres deep", with: "41 metres deep")
                for workspace in workspaces { try PublishCommandTests.built(workspace, server) }
            }
            for workspace in workspaces {
                try workspace.setPublish(PublishSection.bucket(endpoint: moto.endpoint, bucket: Self.bucket, prefix: prefix))
            }
            let running = try workspaces.map { try $0.startPublish(environment: environment) }
            let statuses = running.map { $0.finish() }
            let logs = running.map { PublishLog(events: $0.events) }
            #expect(statuses == [0, 0], "round \(round): \(running.map(\.transcript))")
            raced += logs.reduce(0) { $0 + $1.named("raced").count }
            let generations = logs.compactMap(\.published)
            #expect(generations.count == 2 && Set(generations).count == 2, "round \(round): \(generations)")

            let audit = try moto.audit(Self.bucket, prefix: prefix, key: key)
            audit.expectSound("round \(round)")
            #expect(audit.generation == generations.max())
            let local = try workspaces.map { try $0.localPackages() }
            #expect(Set(audit.packages.keys) == Set(local[0].keys).union(local[1].keys) && audit.packages.count == 4, "round \(round)")
            for packages in local {
                for (id, package) in packages {
                    #expect(
                        audit.packages[id]?["contentHash"] as? String == package.manifest["contentHash"] as? String, "round \(round): \(id)"
                    )
                }
            }
        }
        print("racing publishers: \(raced) commit(s) lost a race and merged again, in 5 rounds")
        #expect(raced > 0, "no round raced; the test did not test the race")
    }

    @Test("A root with a validate error is refused: exit 1, the file named, and nothing uploaded to the bucket or a folder")
    func invalidRootIsRefused() throws {
        let server = try LocalVoiceServer()
        let (moto, workspace) = try Self.setUp(server: server)
        let key = try SigningPair.generate()
        let environment = key.environment.merging(PublishSection.bucketKeys) { $1 }
        let package = try #require(try workspace.localPackages().values.first)
        let path = try #require((package.manifest["audio"] as? [[String: Any]])?.first?["path"] as? String)
        let file = workspace.output.appendingPathComponent(path)
        var bytes = try Data(contentsOf: file)
        bytes[bytes.count / 2] ^= 0xFF
        try bytes.write(to: file)

        let result = try workspace.publish(["--json"], environment: environment)
        #expect(result.status == 1)
        #expect(result.stderr.contains(path) && result.stderr.contains("sha256"), "\(result.stderr)")
        #expect(result.stderr.contains("nothing was uploaded"))
        #expect(PublishLog(result).named("uploaded").isEmpty)
        #expect(try moto.keys(Self.bucket).isEmpty, "the bucket is empty")

        let folder = try workspace.publish(["--site", workspace.site.path], environment: environment)
        #expect(folder.status == 1 && folder.stderr.contains(path))
        #expect(RootCheck.allFiles(under: workspace.site).isEmpty, "the folder is empty")
    }

    @Test("Neither the S3 secret nor the signing key appears in any output, any file under the root, state or site, or any object")
    func secretsStayOut() throws {
        let server = try LocalVoiceServer()
        let (moto, workspace) = try Self.setUp(server: server)
        let key = try SigningPair.generate()
        let environment = key.environment.merging(PublishSection.bucketKeys) { $1 }
        var results: [Executable.Result] = []
        for arguments in [
            ["--json"], [], ["--dry-run"], ["--rollback", "1", "--json"], ["--gc", "--json"], ["--site", workspace.site.path],
        ] {
            results.append(try workspace.publish(arguments, environment: environment))
            #expect(results.last?.status == 0, "\(arguments): \(results.last?.stderr ?? "")")
        }
        try workspace.editTour("alps.json", replacing: "built in 1899", with: "built in 1901")
        try PublishCommandTests.built(workspace, server)
        results.append(try workspace.publish([], environment: environment))
        #expect(results.last?.status == 0)
        // Failures too: a bucket that does not exist, a key that is not one.
        try workspace.setPublish(PublishSection.bucket(endpoint: moto.endpoint, bucket: "no-such-bucket", prefix: Self.prefix))
        results.append(try workspace.publish(["--json"], environment: environment))
        #expect(results.last?.status == 1, "\(results.last?.stderr ?? "")")
        let badKey = "sentinel-signing-key-that-is-not-base64!"
        results.append(try workspace.publish([], environment: PublishSection.bucketKeys.merging([SigningPair.variable: badKey]) { $1 }))
        #expect(results.last?.status == 2)

        let secrets = [PublishSection.secretKey, PublishSection.accessKey, key.privateKey, badKey]
        let rawKey = try #require(Data(base64Encoded: key.privateKey))
        for result in results {
            for secret in secrets { #expect(!result.stdout.contains(secret) && !result.stderr.contains(secret), "\(result.stderr)") }
        }
        let objects = TemporaryFolder.path("tourpack-bucket")
        defer { TemporaryFolder.remove(objects) }
        let stored = try moto.objects(Self.bucket, prefix: "", downloadingInto: objects)
        #expect(stored.count > 10)
        for (root, files) in [(workspace.root, RootCheck.allFiles(under: workspace.root)), (objects, Array(stored.keys))] {
            #expect(!files.isEmpty)
            for path in files {
                let bytes = try Data(contentsOf: root.appendingPathComponent(path))
                for secret in secrets.map({ Data($0.utf8) }) + [rawKey] {
                    #expect(bytes.range(of: secret) == nil, "\(path) holds a secret")
                }
            }
        }
    }
}

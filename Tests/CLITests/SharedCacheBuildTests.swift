import Foundation
import Testing
import TourpackCore
import TourpackKit
import TourpackState
import TourpackTesting

/// The state a fleet shares, end to end: `state.objects` (the synthesis
/// cache in an S3-compatible bucket, here a real moto server) and
/// `state.scratch`, with the real `tourpack build` against the real
/// `serve-tts`, whose request counter proves what was (not) spoken.
@Suite(.serialized, .offThePool) struct SharedCacheBuildTests {
    /// Obviously fake keys; both are searched for in every output.
    static let accessKey = "FAKEACCESSKEYFORCLITESTS"
    static let secretKey = "sentinel-secret-cli-0123456789-never-print-me"
    static let keys = ["TP_S3_ACCESS": accessKey, "TP_S3_SECRET": secretKey]

    /// Replaces the workspace's `state: state` with a mapping.
    static func useState(_ workspace: BuildWorkspace, _ mapping: String) throws {
        let text = try String(contentsOf: workspace.pipeline, encoding: .utf8)
        precondition(text.contains("\nstate: state\n"))
        try text.replacingOccurrences(of: "\nstate: state\n", with: "\nstate:\n  path: state\n\(mapping)\n")
            .write(to: workspace.pipeline, atomically: true, encoding: .utf8)
    }

    static func useBucket(_ workspace: BuildWorkspace, endpoint: String, bucket: String) throws {
        try useState(
            workspace,
            """
              objects:
                endpoint: \(endpoint)
                bucket: \(bucket)
                prefix: synthesis/
                region: us-east-1
                accessKeyEnv: TP_S3_ACCESS
                secretKeyEnv: TP_S3_SECRET
            """)
    }

    static func expectNoKey(_ results: [Executable.Result], sourceLocation: SourceLocation = #_sourceLocation) {
        for result in results {
            for key in [accessKey, secretKey] {
                #expect(
                    !result.stdout.contains(key) && !result.stderr.contains(key), "a key appeared in the output",
                    sourceLocation: sourceLocation)
            }
        }
    }

    static func sharedCache(_ summary: [String: Any]) throws -> [String: Int] {
        try #require(summary["sharedCache"] as? [String: Int], "no sharedCache in \(summary)")
    }

    /// Machine A speaks every chunk and puts it in the bucket; machine B,
    /// with a fresh state folder, builds the same tours from the bucket with
    /// no request at all; machine C finds one object damaged, which is a
    /// miss: that one chunk is spoken again, the rest restored.
    @Test func aFreshStateBuildsFromTheBucketWithoutARequest() throws {
        let moto = try MotoTestServer()
        let bucket = "tourpack-fleet"
        try moto.createBucket(bucket)
        let server = try LocalVoiceServer()
        let first = try BuildWorkspace()
        try Self.useBucket(first, endpoint: moto.endpoint, bucket: bucket)

        // Without its keys the bucket is a configuration error naming the variable, before anything is opened or spoken.
        let unset = try first.build(server, ["--json"])
        #expect(unset.status == 2, "\(unset.stdout)\n\(unset.stderr)")
        #expect(unset.stderr.contains("state.objects: the access key variable $TP_S3_ACCESS is not set"), "\(unset.stderr)")
        let secretOnly = try first.build(server, [], environment: ["TP_S3_ACCESS": Self.accessKey])
        #expect(secretOnly.status == 2)
        #expect(secretOnly.stderr.contains("the secret key variable $TP_S3_SECRET is not set"), "\(secretOnly.stderr)")
        #expect(try IncrementalBuildTests.requests(server) == 0)
        #expect(!FileManager.default.fileExists(atPath: first.state.appendingPathComponent("state.sqlite").path))

        let a = try first.build(server, ["--json"], environment: Self.keys)
        #expect(a.status == 0, "\(a.stdout)\n\(a.stderr)")
        let spoken = try IncrementalBuildTests.requests(server)
        let aSummary = try IncrementalBuildTests.summary(a)
        #expect(spoken > 0 && aSummary["requests"] as? Int == spoken)
        #expect(try Self.sharedCache(aSummary) == ["restored": 0, "shared": spoken, "failures": 0, "waited": 0])
        let objects = try moto.keys(bucket)
        #expect(objects.count == spoken)
        #expect(
            objects.allSatisfy { $0.hasPrefix("synthesis/") && $0.hasSuffix(".flac") && $0.count == "synthesis/".count + 64 + 5 },
            "\(objects)")

        let second = try BuildWorkspace()
        try Self.useBucket(second, endpoint: moto.endpoint, bucket: bucket)
        let b = try second.build(server, [], environment: Self.keys)
        #expect(b.status == 0, "\(b.stdout)\n\(b.stderr)")
        #expect(try IncrementalBuildTests.requests(server) == spoken, "machine B sent no request")
        #expect(
            b.stdout.contains(
                "0 requests (0 retries), 0 characters billed, 0 chunks from cache, \(spoken) chunks from the shared cache, 0 added to it"),
            "\(b.stdout)")
        let validateB = try Executable.run(["validate", second.output.path, "--strict"], in: second.root)
        #expect(validateB.status == 0, "\(validateB.stdout)")
        // The restored chunks are the spoken ones, sample for sample: the audio is the same bytes.
        let (made, restored) = (try RootCheck.snapshot(first.output), try RootCheck.snapshot(second.output))
        #expect(restored.keys.sorted() == made.keys.sorted())
        for (path, bytes) in made where path.hasPrefix(Layout.audioCacheFolder) {
            #expect(restored[path] == bytes, "\(path) differs between the machine that spoke it and the one that restored it")
        }

        try moto.damage(bucket, objects[0])
        let third = try BuildWorkspace()
        try Self.useBucket(third, endpoint: moto.endpoint, bucket: bucket)
        let c = try third.build(server, ["--json"], environment: Self.keys)
        #expect(c.status == 0, "\(c.stdout)\n\(c.stderr)")
        #expect(try IncrementalBuildTests.requests(server) == spoken + 1, "the damaged chunk, and only it, was spoken again")
        let cSummary = try IncrementalBuildTests.summary(c)
        #expect(try Self.sharedCache(cSummary)["restored"] == spoken - 1)
        #expect((cSummary["warnings"] as? [String])?.isEmpty == true, "a damaged object is a miss, not a failure: \(cSummary)")
        let validateC = try Executable.run(["validate", third.output.path, "--strict"], in: third.root)
        #expect(validateC.status == 0, "\(validateC.stdout)")
        // Machine C removed the damaged object and put its fresh copy in its
        // place (a share never overwrites): machine D pays for nothing.
        #expect(try Self.sharedCache(cSummary)["shared"] == 1, "\(cSummary)")
        let fourth = try BuildWorkspace()
        try Self.useBucket(fourth, endpoint: moto.endpoint, bucket: bucket)
        let d = try fourth.build(server, ["--json"], environment: Self.keys)
        #expect(d.status == 0, "\(d.stdout)\n\(d.stderr)")
        #expect(try IncrementalBuildTests.requests(server) == spoken + 1, "the replaced object restores")
        #expect(try Self.sharedCache(IncrementalBuildTests.summary(d))["restored"] == spoken)
        Self.expectNoKey([unset, secretOnly, a, b, c, d])
    }

    /// A new worker (an empty state folder) on the fleet's PostgreSQL and
    /// bucket, with the month's quota spent to the last character by the
    /// worker that spoke the tours: its plan counts the fleet's chunks as
    /// cached, so the budget check lets it build, and it builds from the
    /// bucket without a request. Counting only its own empty disk, it
    /// would be refused with exit 3.
    @Test func aNewWorkerIsNotRefusedForChunksTheFleetPaidFor() throws {
        let moto = try MotoTestServer()
        let bucket = "tourpack-fleet-quota"
        try moto.createBucket(bucket)
        let server = try LocalVoiceServer()
        let database = try PostgresTestServer.shared().createDatabase()
        let environment = Self.keys.merging(StateCommandTests.environment) { $1 }
        func join(_ workspace: BuildWorkspace) throws -> String {
            try Self.useState(
                workspace,
                """
                  postgres: '\(database)'
                  passwordEnv: TP_TEST_PG_PASSWORD
                  objects:
                    endpoint: \(moto.endpoint)
                    bucket: \(bucket)
                    prefix: synthesis/
                    accessKeyEnv: TP_S3_ACCESS
                    secretKeyEnv: TP_S3_SECRET
                """)
            return try IncrementalBuildTests.writeStandardVoice(in: workspace)
        }
        // The characters these tours need, from a plan on a scratch workspace.
        let probe = try BuildWorkspace()
        defer { probe.remove() }
        let probeVoice = try IncrementalBuildTests.writeStandardVoice(in: probe)
        let planned = try Executable.run(["plan", probe.pipeline.path, "--voice", probeVoice, "--json"], in: probe.root)
        let plan = try #require(try JSONSerialization.jsonObject(with: Data(planned.stdout.utf8)) as? [String: Any], "\(planned.stderr)")
        let needed = try #require((plan["quota"] as? [String: Any])?["thisBuild"] as? Int)
        let budget = "budgets: {monthlyCharacters: {standard: \(needed)}}"

        let first = try BuildWorkspace(extraYAML: budget)
        let firstVoice = try join(first)
        let a = try Executable.run(
            ["build", first.pipeline.path, "--voice", firstVoice, "--endpoint", server.endpoint, "--json"], in: first.root,
            environment: environment)
        #expect(a.status == 0, "\(a.stdout)\n\(a.stderr)")
        #expect(try IncrementalBuildTests.characters(server) == needed, "the month is now spent to the last character")

        let second = try BuildWorkspace(extraYAML: budget)
        let secondVoice = try join(second)
        let secondPlan = try Executable.run(
            ["plan", second.pipeline.path, "--voice", secondVoice, "--json"], in: second.root, environment: environment)
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(secondPlan.stdout.utf8)) as? [String: Any], "\(secondPlan.stderr)")
        #expect((object["totals"] as? [String: Any])?["billableCharacters"] as? Int == 0, "\(secondPlan.stdout)")
        let b = try Executable.run(
            ["build", second.pipeline.path, "--voice", secondVoice, "--endpoint", server.endpoint, "--json"], in: second.root,
            environment: environment)
        #expect(b.status == 0, "\(b.stdout)\n\(b.stderr)")
        #expect(try IncrementalBuildTests.characters(server) == needed, "the new worker sent nothing")
        #expect(try Self.sharedCache(IncrementalBuildTests.summary(b))["restored"] ?? 0 > 0)
        Self.expectNoKey([a, b, planned, secondPlan])
    }

    /// A bucket nobody answers for costs requests, never the build: every
    /// tour is packaged, and the summary warns once, naming the object.
    @Test func aBucketThatCannotBeReachedIsAWarningNotAFailure() throws {
        let server = try LocalVoiceServer()
        let workspace = try BuildWorkspace()
        try Self.useBucket(workspace, endpoint: "http://127.0.0.1:\(try PostgresTestServer.freePort())", bucket: "nobody-home")
        let result = try workspace.build(server, ["--json"], environment: Self.keys)
        #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
        let summary = try IncrementalBuildTests.summary(result)
        #expect(summary["toursBuilt"] as? Int == 2)
        let spoken = try IncrementalBuildTests.requests(server)
        let shared = try Self.sharedCache(summary)
        // Three failures in a row (and the restores already in flight beside
        // them) and the build stops asking: far fewer than a restore and a
        // share for every chunk.
        let failures = try #require(shared["failures"])
        #expect(shared["restored"] == 0 && shared["shared"] == 0, "\(shared)")
        #expect(failures >= 3 && failures < 2 * spoken, "\(failures) failures for \(spoken) chunks")
        let warnings = summary["warnings"] as? [String] ?? []
        #expect(warnings.count == 1, "\(warnings)")
        #expect(
            warnings.first?.contains(
                "the shared synthesis cache (state.objects) failed \(failures) times; after 3 failures in a row the build stopped using it")
                == true,
            "\(warnings)")
        #expect(warnings.first?.contains("/nobody-home/synthesis/") == true, "names the object: \(warnings)")
        let validate = try Executable.run(["validate", workspace.output.path, "--strict"], in: workspace.root)
        #expect(validate.status == 0, "\(validate.stdout)")
        Self.expectNoKey([result])
    }

    /// `state.scratch`: the root's lock, staged temps and journals go to the
    /// worker's local disk; the database and the caches stay in the state folder.
    @Test func scratchHoldsTheRootsLockStagingAndJournals() throws {
        let server = try LocalVoiceServer()
        let workspace = try BuildWorkspace()
        try Self.useState(workspace, "  scratch: scratch")
        let result = try workspace.build(server)
        #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
        #expect(result.stdout.contains("scratch"), "the settled configuration prints it: \(result.stdout)")
        let scratch = workspace.root.appendingPathComponent("scratch")
        let roots = try FileManager.default.contentsOfDirectory(atPath: scratch.appendingPathComponent("roots").path)
        #expect(roots.count == 1 && roots[0].hasPrefix("Documents-"), "\(roots)")
        let root = scratch.appendingPathComponent("roots/\(roots[0])")
        for name in ["build.lock", "staging", "journal"] {
            #expect(FileManager.default.fileExists(atPath: root.appendingPathComponent(name).path), "\(name)")
        }
        #expect(root == StateLayout(state: workspace.state, output: workspace.output, scratch: scratch).rootFolder.standardizedFileURL)
        #expect(
            !FileManager.default.fileExists(atPath: workspace.state.appendingPathComponent("roots").path),
            "nothing per-root in the state folder")
        #expect(FileManager.default.fileExists(atPath: workspace.state.appendingPathComponent("state.sqlite").path))
        #expect(FileManager.default.fileExists(atPath: workspace.state.appendingPathComponent("synthesis").path))
        #expect(try Executable.run(["validate", workspace.output.path, "--strict"], in: workspace.root).status == 0)
    }
}

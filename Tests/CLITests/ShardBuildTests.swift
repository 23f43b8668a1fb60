import Foundation
import Testing
import TourpackCore
import TourpackKit
import TourpackState
import TourpackTesting

/// Workers of one fleet (`build --shards N`), end to end: the real
/// `tourpack` against the real `serve-tts`, several shard builds into one
/// output root, and `validate` on what they made together.
///
/// The workspace's two tours split 2 ways as alps → 0, lakes → 1, and 3
/// ways as 0, 1 and an empty shard 2 (SHA-256 of the ID; see ShardTests).
@Suite(.serialized, .offThePool) struct ShardBuildTests {
    static let alps = SafeID(validating: BuildWorkspace.alpsID)!
    static let lakes = SafeID(validating: BuildWorkspace.lakesID)!

    @Test func aWrongShardIsAUsageErrorNamingTheFlagOrTheVariable() throws {
        let workspace = try BuildWorkspace()
        let cases: [(arguments: [String], environment: [String: String], message: String)] = [
            (["--shard", "1"], [:], "--shard 1 needs --shards N"),
            (["--shards", "2", "--shard", "2"], [:], "--shard 2 is out of range for --shards 2: shards are numbered 0 to 1"),
            (["--shards", "2", "--shard", "-1"], [:], "--shard -1 is out of range for --shards 2"),
            (["--shards", "0", "--shard", "0"], [:], "--shards must be 1 or more, not 0"),
            (
                ["--shards", "2"], ["JOB_COMPLETION_INDEX": "one"],
                "JOB_COMPLETION_INDEX='one' is not a shard number: it must be an integer from 0 to 1"
            ),
            (["--shards", "2"], ["JOB_COMPLETION_INDEX": "2"], "JOB_COMPLETION_INDEX=2 is out of range for --shards 2"),
            (["--shards", "2", "--shard", "0", "--tour", BuildWorkspace.alpsID], [:], "--tour and --shards cannot be combined"),
        ]
        for command in ["build", "plan"] {
            for (arguments, environment, message) in cases where command == "build" || !arguments.contains("--tour") {
                let result = try Executable.run(
                    [command, workspace.pipeline.path] + arguments, in: workspace.root, environment: environment)
                #expect(result.status == 2, "\(command) \(arguments): \(result.stderr)")
                #expect(result.stderr.contains(message), "\(command) \(arguments): \(result.stderr)")
            }
        }
        #expect(!FileManager.default.fileExists(atPath: workspace.state.path), "refused before the state is opened")
        #expect(!FileManager.default.fileExists(atPath: workspace.output.path))
    }

    /// Two shards build into one output, one by `--shard`, one by
    /// `JOB_COMPLETION_INDEX`, and the second leaves the first's package
    /// alone, even a leftover-looking temp in its folder. Together they are
    /// the whole bundle: `validate --strict` passes with both tours, and a
    /// whole-pipeline build finds nothing to do.
    @Test func twoShardsBuildOneOutputThatValidates() throws {
        let server = try LocalVoiceServer()
        let workspace = try BuildWorkspace()

        let planned = try Executable.run(["plan", workspace.pipeline.path, "--shards", "2", "--shard", "1", "--json"], in: workspace.root)
        #expect(planned.status == 0, "\(planned.stderr)")
        let plan = try #require(try JSONSerialization.jsonObject(with: Data(planned.stdout.utf8)) as? [String: Any])
        #expect((plan["tours"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == [BuildWorkspace.lakesID])
        #expect(plan["shard"] as? [String: Int] == ["index": 1, "count": 2, "tours": 1, "toursInPipeline": 2])
        let planText = try Executable.run(["plan", workspace.pipeline.path, "--shards", "2", "--shard", "0"], in: workspace.root)
        #expect(planText.stdout.contains("shard 0 of 2: 1 of 2 tours"), "\(planText.stdout)")
        #expect(planText.stdout.contains("Alpine Test Road") && !planText.stdout.contains("Lake Test Loop"), "\(planText.stdout)")

        let first = try workspace.build(server, ["--shards", "2", "--shard", "0"])
        #expect(first.status == 0, "\(first.stdout)\n\(first.stderr)")
        #expect(first.stdout.contains("shard 0 of 2: 1 of 2 tours (the tours whose ID hashes to this shard"), "\(first.stdout)")
        #expect(first.stdout.contains("1 built, 0 up to date, 0 failed, 0 skipped"), "\(first.stdout)")
        let alpsFolder = workspace.output.appendingPathComponent("AudioCache/\(Self.alps.value)")
        #expect(FileManager.default.fileExists(atPath: alpsFolder.path))
        #expect(!FileManager.default.fileExists(atPath: workspace.output.appendingPathComponent("AudioCache/\(Self.lakes.value)").path))
        let requestsAfterFirst = try IncrementalBuildTests.requests(server)

        // What another worker would have in flight in the alps folder.
        let inFlight = alpsFolder.appendingPathComponent(
            ".\(BuildWorkspace.alpsPOIs[0])_Detailed.m4a\(AtomicFile.temporaryMarker)0123456789abcdef")
        try Data([0]).write(to: inFlight)
        let alpsBefore = try RootCheck.snapshot(workspace.output)

        let second = try workspace.build(server, ["--shards", "2", "--json"], environment: ["JOB_COMPLETION_INDEX": "1"])
        #expect(second.status == 0, "\(second.stdout)\n\(second.stderr)")
        let summary = try IncrementalBuildTests.summary(second)
        #expect(summary["toursBuilt"] as? Int == 1)
        #expect(summary["shard"] as? [String: Int] == ["index": 1, "count": 2, "tours": 1, "toursInPipeline": 2])
        #expect(FileManager.default.fileExists(atPath: inFlight.path), "another shard's temp is not a leftover of this one")
        let after = try RootCheck.snapshot(workspace.output)
        for (path, bytes) in alpsBefore {
            #expect(after[path] == bytes, "\(path) changed under another shard's build")
        }
        try FileManager.default.removeItem(at: inFlight)

        let validate = try Executable.run(["validate", workspace.output.path, "--strict", "--format", "json"], in: workspace.root)
        #expect(validate.status == 0, "\(validate.stdout)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(validate.stdout.utf8)) as? [String: Any])
        let tours = Set((report["packages"] as? [[String: Any]] ?? []).compactMap { $0["tourId"] as? String })
        #expect(tours == [BuildWorkspace.alpsID, BuildWorkspace.lakesID])
        #expect(RootCheck.problems(in: workspace.output).isEmpty)

        // A shard no tour falls in succeeds and says so, touching nothing.
        let before = try RootCheck.snapshot(workspace.output)
        let empty = try workspace.build(server, ["--shards", "3", "--shard", "2"])
        #expect(empty.status == 0, "\(empty.stdout)\n\(empty.stderr)")
        #expect(
            empty.stdout.contains("shard 2 of 3: 0 of 2 tours: no tour of the pipeline hashes to this shard; nothing to build"),
            "\(empty.stdout)")
        #expect(empty.stdout.contains("\nshard 2 of 3: 0 of 2 tours, nothing to build\n0 built, 0 up to date"), "\(empty.stdout)")
        #expect(try RootCheck.snapshot(workspace.output) == before)

        // The shards made what one whole build makes: it has nothing left to do.
        let whole = try workspace.build(server, ["--json"])
        #expect(whole.status == 0)
        #expect(try IncrementalBuildTests.summary(whole)["toursUnchanged"] as? Int == 2)
        #expect(try IncrementalBuildTests.requests(server) > requestsAfterFirst, "the second shard did speak its tour")
        let requestsAfterShards = try IncrementalBuildTests.requests(server)
        #expect(try IncrementalBuildTests.summary(whole)["requests"] as? Int == 0)
        #expect(try IncrementalBuildTests.requests(server) == requestsAfterShards)
    }

    /// Shards of one fleet hold the root's lock shared, so they build side
    /// by side (each with its own state, as on separate machines); a
    /// whole-root build, which sweeps and evicts the whole root, still
    /// waits for every one of them.
    @Test func shardsBuildSideBySideButAWholeBuildWaits() async throws {
        let server = try LocalVoiceServer()
        let workspace = try BuildWorkspace()
        // Another worker's shard 0, mid-build, with its own state folder.
        let otherState = workspace.root.appendingPathComponent("worker-0-state")
        let worker = try await BuildLock.acquire(
            stateFolder: StateLayout(state: otherState, output: workspace.output).rootFolder, root: workspace.output, sharingRoot: true,
            wait: false)
        defer { worker.release() }

        let shard = try workspace.build(server, ["--shards", "2", "--shard", "1", "--no-wait"])
        #expect(shard.status == 0, "\(shard.stdout)\n\(shard.stderr)")
        let whole = try workspace.build(server, ["--no-wait"])
        #expect(whole.status == 1)
        #expect(whole.stderr.contains("another build is running on this output root"), "\(whole.stderr)")
        worker.release()
        #expect(try workspace.build(server, ["--no-wait"]).status == 0)
    }
}

extension BuildWorkspace {
    /// `tourpack build` with extra environment variables.
    func build(_ server: LocalVoiceServer, _ extra: [String], environment: [String: String]) throws -> Executable.Result {
        try Executable.run(["build", pipeline.path, "--endpoint", server.endpoint] + extra, in: root, environment: environment)
    }
}

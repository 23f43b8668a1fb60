import Foundation
import Testing
import TourpackCore
import TourpackKit
import TourpackTesting

#if canImport(Glibc)
import Glibc
#endif

/// `tourpack build` end to end: the real executable against the real
/// `serve-tts` over loopback, checked with ffprobe, the JSON Schema and the
/// package's own hashes. Serialized: each test runs two processes that
/// together keep both cores busy.
@Suite(.serialized, .offThePool) struct BuildCommandTests {
    @Test func buildWritesTheExactLayoutAndPackagesThatPlay() throws {
        let server = try LocalVoiceServer()
        let workspace = try BuildWorkspace(formats: ["aac", "mp3", "opus"])
        let result = try workspace.build(server)
        #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
        #expect(result.stdout.contains("2 built, 0 up to date, 0 failed, 0 skipped · 15 files written"), "\(result.stdout)")

        // Exactly the contract's paths: 5 items × 3 formats, and 2 tours × 3 formats of package.json.
        var expected: Set<String> = []
        let items: [(String, String, [String])] = [
            (BuildWorkspace.alpsID, BuildWorkspace.alpsPOIs[0], ["Approaching", "Guided Tour"]),
            (BuildWorkspace.alpsID, BuildWorkspace.alpsPOIs[1], ["Detailed"]),
            (BuildWorkspace.lakesID, BuildWorkspace.lakesPOI, ["Approaching", "Detailed"]),
        ]
        for (tour, poi, phases) in items {
            for phase in phases {
                for ext in ["m4a", "mp3", "opus"] { expected.insert("AudioCache/\(tour)/\(poi)_\(phase).\(ext)") }
            }
        }
        let voice = try VoiceLoader.load(Executable.packageRoot.appendingPathComponent("voices/local-en-us.yaml"), displayName: "voice")
        for tour in [BuildWorkspace.alpsID, BuildWorkspace.lakesID] {
            for format in AudioFormat.allCases {
                let id = PackageID.make(tourID: SafeID(validating: tour)!, voice: voice, format: format)
                expected.insert("OfflineTours/\(id.value)/package.json")
                // Each package's captions, one per narration (on by default for Google).
                for (itemTour, poi, phases) in items where itemTour == tour {
                    for phase in phases { expected.insert("OfflineTours/\(id.value)/captions/\(poi)_\(phase).vtt") }
                }
            }
        }
        #expect(Set(RootCheck.allFiles(under: workspace.output)) == expected)
        #expect(RootCheck.problems(in: workspace.output).isEmpty, "\(RootCheck.problems(in: workspace.output))")
        #expect(RootCheck.allFiles(under: workspace.rootState.appendingPathComponent("staging")).isEmpty)

        // Every listed file plays, with the format table's codec and rate, for as long as the package says.
        for path in expected where path.hasSuffix("package.json") {
            let url = workspace.output.appendingPathComponent(path)
            let schemaErrors = try Self.schemaErrors(url)
            #expect(schemaErrors.isEmpty, "\(path): \(schemaErrors)")
            let manifest = try PackageManifest.read(from: url)
            for entry in manifest.audio {
                let stream = try FFprobe.probe(workspace.output.appendingPathComponent(entry.path))
                #expect(stream.codec == entry.format.codecName && stream.codec == entry.codec, "\(entry.path)")
                // AAC and Opus at the endpoint's 24 kHz, MP3 at 44.1 kHz; an Opus decoder always puts out 48 kHz.
                #expect(entry.sampleRateHz == entry.format.defaultSampleRate(endpointRate: 24_000), "\(entry.path)")
                #expect(stream.sampleRate == (entry.format == .opus ? 48_000 : entry.sampleRateHz) && stream.channels == 1, "\(entry.path)")
                #expect(
                    stream.duration > 1 && abs(stream.duration - entry.durationSeconds) < 0.1,
                    "\(entry.path): \(stream.duration) vs \(entry.durationSeconds)")
            }
        }
    }

    @Test func aTourThatFailsKeepsItsOldPackageWhileTheOtherIsRebuilt() throws {
        let workspace = try BuildWorkspace()
        do {
            let server = try LocalVoiceServer()
            #expect(try workspace.build(server).status == 0)
        }
        let before = try RootCheck.snapshot(workspace.output)
        let lakesPackage = try #require(
            before.keys.first { $0.hasSuffix("package.json") && String(decoding: before[$0]!, as: UTF8.self).contains("Lake Test Loop") })
        let alpsPackage = try #require(before.keys.first { $0.hasSuffix("package.json") && $0 != lakesPackage })

        // The lake's new narration is refused by the endpoint every time (400), the alps' is fine.
        try workspace.writeTours(alps: "Now with a new sentence.", lakes: "Unobtainium glitters here.")
        let server = try LocalVoiceServer(faults: ["--refuse-text", "Unobtainium"])
        let result = try workspace.build(server)
        #expect(result.status == 1)
        #expect(
            result.stdout.contains("FAILED Lake Test Loop / Blue Lake / Approaching: audio generation failed: HTTP 400: Input refused"),
            "\(result.stdout)")
        #expect(result.stdout.contains("not packaged Lake Test Loop"))
        #expect(result.stdout.contains("1 built, 0 up to date, 1 failed"))

        let after = try RootCheck.snapshot(workspace.output)
        for (path, bytes) in before where path.contains(BuildWorkspace.lakesID) || path == lakesPackage {
            #expect(after[path] == bytes, "\(path) of the failed tour changed")
        }
        #expect(after[lakesPackage] == before[lakesPackage])
        #expect(after[alpsPackage] != before[alpsPackage], "the other tour was not rebuilt")
        #expect(RootCheck.problems(in: workspace.output).isEmpty, "\(RootCheck.problems(in: workspace.output))")
    }

    @Test func aSecondBuildRefusesWithNoWaitAndOtherwiseWaitsForTheLock() async throws {
        let server = try LocalVoiceServer()
        let workspace = try BuildWorkspace()
        let lock = try await BuildLock.acquire(stateFolder: workspace.rootState, wait: false)

        let refused = try workspace.build(server, ["--no-wait"])
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("another build is running on this output root"), "\(refused.stderr)")
        #expect(!FileManager.default.fileExists(atPath: workspace.output.appendingPathComponent("OfflineTours").path))

        let waiting = try workspace.startBuild(server)
        let waited = waiting.waitForEvent("waitingForLock", timeout: 30)
        #expect(waited?["lock"] as? String == workspace.rootState.appendingPathComponent("build.lock").path)
        try await Task.sleep(for: .milliseconds(500))
        #expect(waiting.process.isRunning, "the second build did not wait")
        lock.release()
        #expect(waiting.finish() == 0)
        #expect(waiting.events.last?["toursBuilt"] as? Int == 2)
    }

    @Test func sigtermMidBuildRemovesItsTempsAndExits130() async throws {
        let workspace = try BuildWorkspace(formats: ["aac", "opus"])
        do {
            let server = try LocalVoiceServer()
            #expect(try workspace.build(server).status == 0)
        }
        let before = try RootCheck.snapshot(workspace.output)
        try workspace.writeTours(alps: "A slower second edition.", lakes: "Also slower.")
        let slow = try LocalVoiceServer(faults: ["--latency-ms", "700"])
        let build = try workspace.startBuild(slow, ["--concurrency", "1"])
        #expect(build.waitForEvent("itemDone") != nil)
        build.signal(SIGTERM)
        #expect(build.finish() == 130)
        let last = try #require(build.events.last)
        #expect(last["event"] as? String == "finished")
        #expect(last["stoppedEarly"] as? String == "cancelled")

        #expect(try RootCheck.snapshot(workspace.output) == before, "a cancelled build changed the root")
        #expect(RootCheck.problems(in: workspace.output).isEmpty)
        #expect(RootCheck.allFiles(under: workspace.rootState.appendingPathComponent("staging")).isEmpty, "temps left in staging")
    }

    @Test func aBuildKilledWithSigkillThenRunAgainLeavesAConsistentRoot() async throws {
        let workspace = try BuildWorkspace(formats: ["aac", "mp3"])
        do {
            let server = try LocalVoiceServer()
            let first = try workspace.build(server)
            #expect(first.status == 0, "\(first.stdout)\n\(first.stderr)")
        }
        try workspace.writeTours(alps: "Killed mid-way.", lakes: "Killed as well.")
        let slow = try LocalVoiceServer(faults: ["--latency-ms", "300"])
        for event in ["itemDone", "tourPackaged"] {
            let build = try workspace.startBuild(slow, ["--concurrency", "2"])
            #expect(build.waitForEvent(event) != nil)
            build.signal(SIGKILL)
            _ = build.finish()
            // Killed at any instant, the root holds only whole packages that
            // match their files, unless the kill landed inside a tour's burst
            // of renames: then its journal is there for the next run to finish.
            let journal = RootCheck.allFiles(under: workspace.rootState.appendingPathComponent("journal"))
            if journal.isEmpty {
                #expect(
                    RootCheck.problems(in: workspace.output).isEmpty,
                    "after a kill at \(event): \(RootCheck.problems(in: workspace.output))")
            }
        }
        let rerun = try workspace.build(slow, ["--json"])
        #expect(rerun.status == 0, "\(rerun.stdout)")
        #expect(RootCheck.problems(in: workspace.output).isEmpty, "\(RootCheck.problems(in: workspace.output))")
        #expect(RootCheck.allFiles(under: workspace.rootState.appendingPathComponent("staging")).isEmpty)
        #expect(RootCheck.allFiles(under: workspace.rootState.appendingPathComponent("journal")).isEmpty)
        let packages = RootCheck.allFiles(under: workspace.output).filter { $0.hasSuffix("package.json") }
        #expect(packages.count == 4)
        for path in packages {
            let text = try String(contentsOf: workspace.output.appendingPathComponent(path), encoding: .utf8)
            #expect(text.contains("Tour") || text.contains("Loop"))
        }
    }

    @Test func networkUnavailableStopsTheBuildWithExit1AndNamesTheEndpoint() throws {
        let workspace = try BuildWorkspace()
        // Port 9 (discard) on loopback: nothing listens there.
        let result = try Executable.run(["build", workspace.pipeline.path, "--endpoint", "http://127.0.0.1:9"], in: workspace.root)
        #expect(result.status == 1)
        // Captions ask Google's v1beta1 for timepoints.
        #expect(result.stdout.contains("network unavailable: http://127.0.0.1:9/v1beta1/text:synthesize"), "\(result.stdout)")
        #expect(result.stdout.contains("stopped early"))
        #expect(
            !FileManager.default.fileExists(atPath: workspace.output.appendingPathComponent("OfflineTours").path)
                || RootCheck.allFiles(under: workspace.output.appendingPathComponent("OfflineTours")).isEmpty)
    }

    @Test func anOutputThatCannotBeWrittenIsAStorageFailureWithPathAndErrno() throws {
        let server = try LocalVoiceServer()
        let workspace = try BuildWorkspace()
        // A file where the output folder should be: creating AudioCache under it fails with ENOTDIR.
        let blocker = workspace.root.appendingPathComponent("blocked")
        try Data("not a folder".utf8).write(to: blocker)
        let result = try workspace.build(server, ["--output", blocker.path, "--json"])
        #expect(result.status == 1)
        #expect(result.stderr.contains("\(blocker.path)"), "\(result.stderr)")
        #expect(result.stderr.contains("(errno 20)"), "\(result.stderr)")
        let last = try #require(result.stdout.split(separator: "\n").last)
        let event = try #require(try JSONSerialization.jsonObject(with: Data(last.utf8)) as? [String: Any])
        #expect(event["event"] as? String == "error")
        #expect(event["exitCode"] as? Int == 1)
        // The keys install's error event uses too (KilledInstallTests): `error`, `message`, `exitCode`.
        #expect(event["error"] as? String == "storageFailed", "\(event)")
        #expect((event["message"] as? String)?.contains(blocker.path) == true, "\(event)")
    }

    @Test func dryRunListsTheFilesAndWritesNothing() throws {
        let workspace = try BuildWorkspace(formats: ["aac", "opus"])
        let result = try Executable.run(["build", workspace.pipeline.path, "--dry-run", "--json"], in: workspace.root)
        #expect(result.status == 0, "\(result.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        #expect(object["dryRun"] as? Bool == true)
        let writes = try #require(object["writes"] as? [String])
        // Five narrations' audio and captions in each of two formats' packages, and two package.json each.
        #expect(writes.count == 5 * 2 + 5 * 2 + 2 * 2)
        #expect(writes.contains { $0.hasSuffix("/captions/\(BuildWorkspace.alpsPOIs[0])_Guided Tour.vtt") })
        #expect(writes.contains("AudioCache/\(BuildWorkspace.alpsID)/\(BuildWorkspace.alpsPOIs[0])_Guided Tour.opus"))
        #expect(!FileManager.default.fileExists(atPath: workspace.output.path))
        #expect(!FileManager.default.fileExists(atPath: workspace.state.path))
    }

    @Test func tourSelectsOneTourAndAnUnknownIDIsABadInput() throws {
        let server = try LocalVoiceServer()
        let workspace = try BuildWorkspace()
        let one = try workspace.build(server, ["--tour", BuildWorkspace.lakesID.uppercased()])
        #expect(one.status == 0, "\(one.stdout)\n\(one.stderr)")
        #expect(one.stdout.contains("1 built, 0 up to date, 0 failed, 1 skipped"))
        #expect(RootCheck.allFiles(under: workspace.output).filter { $0.hasSuffix("package.json") }.count == 1)

        let unknown = try workspace.build(server, ["--tour", "00000000-0000-4000-8000-000000000000"])
        #expect(unknown.status == 2)
        #expect(
            unknown.stderr.contains("no such tour in the pipeline; it has \(BuildWorkspace.alpsID) (Alpine Test Road)"), "\(unknown.stderr)"
        )
    }

    // MARK: Helpers

    /// Checks a package.json against `schemas/package.schema.json` with Python's jsonschema.
    static func schemaErrors(_ file: URL) throws -> [String] {
        try JSONSchemaCheck.errors(in: file, schema: JSONSchemaCheck.schema("package.schema.json"))
    }
}

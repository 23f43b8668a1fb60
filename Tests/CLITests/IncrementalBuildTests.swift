import Foundation
import Testing
import TourpackCore
import TourpackKit
import TourpackState
import TourpackTesting

#if canImport(Glibc)
import Glibc
#endif

/// Incremental builds and budgets, end to end: the real `tourpack build`
/// against the real `serve-tts`, whose `/debug/stats` counters prove what
/// was (not) requested.
@Suite(.serialized, .offThePool) struct IncrementalBuildTests {
    /// A third tour whose one narration is long enough for two chunks
    /// (the Google limit minus the 100-byte headroom is 4,900 bytes).
    static let longID = "8b4f3e5a-0c63-4d9f-9e77-3f4a5b6c7d82"
    static let longPOI = "8b4f3e5a-0c63-4d9f-9e77-3f4a5b6c7d83"
    static let lastSentence = "The valley ends at the old customs house."

    static func writeLongTour(in workspace: BuildWorkspace, lastSentence: String = lastSentence) throws {
        let sentence = "The pass road was built by hand over many summers, stone by stone, and the walls still stand along every bend. "
        let text = String(repeating: sentence, count: 48) + lastSentence
        precondition(text.utf8.count > 5000 && text.utf8.count < 9000)
        try """
        {"id": "\(longID)", "name": "Long Valley", "language": "en-US", "version": 1,
         "route": {"waypoints": [{"latitude": 46.0, "longitude": 9.0}, {"latitude": 46.02, "longitude": 9.03}],
                   "segments": [{"from": 0, "to": 1, "distanceMeters": 3000, "durationSeconds": 300}]},
         "pois": [{"id": "\(longPOI)", "name": "Customs House", "location": {"latitude": 46.01, "longitude": 9.01},
                   "triggerRadiusMeters": 300, "narrations": {"detailed": "\(text)"}}]}
        """.write(to: workspace.root.appendingPathComponent("tours/long.json"), atomically: true, encoding: .utf8)
    }

    /// A preset of the local voice billed as `standard`, so the quota applies.
    static func writeStandardVoice(in workspace: BuildWorkspace) throws -> String {
        let url = workspace.root.appendingPathComponent("standard-voice.yaml")
        try "version: 1\nprovider: local\nlanguageCode: en-US\nname: en-us\ntier: standard\nspeakingRate: 1.0\npitch: 0\n"
            .write(to: url, atomically: true, encoding: .utf8)
        return url.path
    }

    static func requests(_ server: LocalVoiceServer) throws -> Int { try server.stats()["synthesizeRequests"] as? Int ?? -1 }
    static func characters(_ server: LocalVoiceServer) throws -> Int { try server.stats()["characters"] as? Int ?? -1 }

    /// The `finished` event of a `--json` build.
    static func summary(_ result: Executable.Result) throws -> [String: Any] {
        let events = result.stdout.split(separator: "\n").compactMap { line in
            try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
        }
        return try #require(
            events.last { $0["event"] as? String == "finished" }, "no finished event in: \(result.stdout)\n\(result.stderr)")
    }

    static func quota(_ workspace: BuildWorkspace, _ extra: [String] = []) throws -> [String: [String: Any]] {
        let result = try Executable.run(["quota", workspace.pipeline.path, "--json"] + extra, in: workspace.root)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any], "\(result.stderr)")
        let tiers = try #require(object["tiers"] as? [[String: Any]])
        return Dictionary(uniqueKeysWithValues: tiers.map { ($0["tier"] as? String ?? "", $0) })
    }

    @Test func rebuildsPayOnlyForWhatChanged() throws {
        let server = try LocalVoiceServer()
        let workspace = try BuildWorkspace()
        try Self.writeLongTour(in: workspace)

        let first = try workspace.build(server, ["--json"])
        #expect(first.status == 0, "\(first.stderr)")
        let firstRequests = try Self.requests(server)
        #expect(firstRequests == 7, "3 + 2 short items and a long one in two chunks")
        let before = try RootCheck.snapshot(workspace.output)

        // Nothing changed: no request, no encode, not one byte rewritten.
        let warm = try workspace.build(server, ["--json"])
        #expect(warm.status == 0, "\(warm.stderr)")
        let warmSummary = try Self.summary(warm)
        #expect(try Self.requests(server) == firstRequests)
        #expect(warmSummary["requests"] as? Int == 0)
        #expect(warmSummary["encodes"] as? Int == 0)
        #expect(warmSummary["reusedFiles"] as? Int == 6)
        #expect(warmSummary["toursUnchanged"] as? Int == 3)
        #expect(try RootCheck.snapshot(workspace.output) == before)

        // One sentence of the long narration edited: one request, one encode.
        try Self.writeLongTour(in: workspace, lastSentence: "The valley ends at the old stone customs house.")
        let edited = try workspace.build(server, ["--json"])
        #expect(edited.status == 0, "\(edited.stderr)")
        let editedSummary = try Self.summary(edited)
        #expect(try Self.requests(server) == firstRequests + 1)
        #expect(editedSummary["cacheHits"] as? Int == 1, "the unchanged first chunk of the long narration")
        #expect(editedSummary["encodes"] as? Int == 1)
        #expect(editedSummary["toursBuilt"] as? Int == 1 && editedSummary["toursUnchanged"] as? Int == 2)
        #expect(RootCheck.problems(in: workspace.output).isEmpty, "\(RootCheck.problems(in: workspace.output))")

        // A new format is made from the synthesis cache: no request at all.
        let widened = try workspace.build(server, ["--json", "--format", "aac,opus"])
        #expect(widened.status == 0, "\(widened.stderr)")
        let widenedSummary = try Self.summary(widened)
        #expect(try Self.requests(server) == firstRequests + 1)
        #expect(widenedSummary["encodes"] as? Int == 6 && widenedSummary["reusedFiles"] as? Int == 6)
        #expect(widenedSummary["cacheHits"] as? Int == 7)
        let opus = RootCheck.allFiles(under: workspace.output).filter { $0.hasSuffix(".opus") }
        #expect(opus.count == 6)
        let stream = try FFprobe.probe(workspace.output.appendingPathComponent(opus[0]))
        #expect(stream.codec == "opus")
        #expect(RootCheck.problems(in: workspace.output).isEmpty, "\(RootCheck.problems(in: workspace.output))")
    }

    /// Two POIs that say the same words: one request serves both, and the plan charges it once.
    @Test func aChunkInTwoNarrationsIsSpokenOnce() throws {
        let server = try LocalVoiceServer()
        // Captions off: a chunk then costs its characters, the sums this test makes (with them,
        // Google's plain chunks go as SSML and cost their `<speak>` too).
        let workspace = try BuildWorkspace(extraYAML: "captions: off")
        let twin = "Both stops share this sentence about the old mule track."
        try """
        {"id": "5d6e7f80-1a2b-4c3d-8e9f-0a1b2c3d4e5f", "name": "Twins", "language": "en-US", "version": 1,
         "route": {"waypoints": [{"latitude": 46.0, "longitude": 9.0}, {"latitude": 46.02, "longitude": 9.03}]},
         "pois": [{"id": "5d6e7f80-1a2b-4c3d-8e9f-0a1b2c3d4e60", "name": "One", "location": {"latitude": 46.0, "longitude": 9.0},
                   "triggerRadiusMeters": 300, "narrations": {"detailed": "\(twin)"}},
                  {"id": "5d6e7f80-1a2b-4c3d-8e9f-0a1b2c3d4e61", "name": "Two", "location": {"latitude": 46.01, "longitude": 9.0},
                   "triggerRadiusMeters": 300, "narrations": {"detailed": "\(twin)"}}]}
        """.write(to: workspace.root.appendingPathComponent("tours/twins.json"), atomically: true, encoding: .utf8)
        let planned = try Executable.run(["plan", workspace.pipeline.path, "--json"], in: workspace.root)
        let plan = try #require(try JSONSerialization.jsonObject(with: Data(planned.stdout.utf8)) as? [String: Any])
        let totals = try #require(plan["totals"] as? [String: Any])
        #expect(totals["chunks"] as? Int == 7 && totals["requests"] as? Int == 6)
        #expect(totals["billableCharacters"] as? Int == (totals["characters"] as? Int ?? 0) - twin.count)

        let built = try workspace.build(server, ["--json"])
        #expect(built.status == 0, "\(built.stderr)")
        #expect(try Self.requests(server) == 6)
        #expect(try Self.summary(built)["charactersBilled"] as? Int == totals["billableCharacters"] as? Int)
    }

    @Test func aTamperedFileIsMadeAgainWithoutARequest() throws {
        let server = try LocalVoiceServer()
        let workspace = try BuildWorkspace()
        #expect(try workspace.build(server).status == 0)
        let requests = try Self.requests(server)
        let victim = try #require(RootCheck.allFiles(under: workspace.output).first { $0.hasSuffix(".m4a") })
        let url = workspace.output.appendingPathComponent(victim)
        let original = try Data(contentsOf: url)
        var tampered = original
        tampered[tampered.count / 2] ^= 0x20
        try tampered.write(to: url)

        let rebuilt = try workspace.build(server, ["--json"])
        #expect(rebuilt.status == 0, "\(rebuilt.stderr)")
        let summary = try Self.summary(rebuilt)
        #expect(summary["encodes"] as? Int == 1 && summary["reusedFiles"] as? Int == 4)
        #expect(try Self.requests(server) == requests, "made again from the synthesis cache")
        #expect(try Data(contentsOf: url) == original, "the same PCM encodes to the same bytes")
        #expect(RootCheck.problems(in: workspace.output).isEmpty, "\(RootCheck.problems(in: workspace.output))")
        // Its package.json says the same, but a file was written: not up to date.
        #expect(summary["toursRewritten"] as? Int == 1 && summary["toursUnchanged"] as? Int == 1 && summary["toursBuilt"] as? Int == 0)

        try tampered.write(to: url)
        let plain = try workspace.build(server)
        #expect(plain.status == 0, "\(plain.stderr)")
        #expect(plain.stdout.contains("rewrote files of "), "\(plain.stdout)")
        #expect(plain.stdout.contains("0 built, 1 rewritten, 1 up to date, 0 failed, 0 skipped · 1 files written"), "\(plain.stdout)")
    }

    /// Issue 50: a project folder built, then moved with `mv` (a CI
    /// workspace, a pod mounting it elsewhere), rebuilds nothing: the
    /// state knows each file by its place under the output root, and the
    /// moved files keep their signatures, so not one is even hashed again.
    /// The rows move with the project: the output files', the package.json
    /// files' signatures (so no package is even compared again), and the
    /// root's lock folder, keyed by the output's place beside the state.
    @Test func aMovedProjectRebuildsNothing() throws {
        let server = try LocalVoiceServer()
        let workspace = try BuildWorkspace()
        let first = try workspace.build(server, ["--json"])
        #expect(first.status == 0, "\(first.stderr)")
        #expect(try Self.summary(first)["encodes"] as? Int == 5)
        // A package.json is noted sound once its change time has settled.
        Thread.sleep(forTimeInterval: 2.2)
        #expect(try workspace.build(server).status == 0)
        // Where the project is now.
        var database: URL { workspace.state.appendingPathComponent(StateDatabase.fileName) }
        func packageRows() throws -> [String] {
            try MapBuildTests.sqlite(database, "SELECT root, path, signature FROM packageFile ORDER BY path")
        }
        let signatures = try packageRows()
        #expect(signatures.count == 2 && signatures.allSatisfy { $0.hasPrefix("\(workspace.output.path)|OfflineTours/") }, "\(signatures)")
        let rootFolders = try FileManager.default.contentsOfDirectory(atPath: workspace.state.appendingPathComponent("roots").path)
        #expect(rootFolders.count == 1)
        let requests = try Self.requests(server)
        let before = try RootCheck.snapshot(workspace.output)
        let oldRoot = workspace.output.path

        try workspace.move(to: TemporaryFolder.path("tourpack-moved"))
        let moved = try workspace.build(server, ["--json"])
        #expect(moved.status == 0, "\(moved.stderr)")
        let summary = try Self.summary(moved)
        #expect(summary["encodes"] as? Int == 0 && summary["files"] as? Int == 0 && summary["requests"] as? Int == 0, "\(summary)")
        #expect(summary["reusedFiles"] as? Int == 5)
        #expect(summary["toursUnchanged"] as? Int == 2 && summary["toursBuilt"] as? Int == 0 && summary["toursRewritten"] as? Int == 0)
        #expect(try Self.requests(server) == requests)
        #expect(try RootCheck.snapshot(workspace.output) == before)
        #expect(try MapBuildTests.sqlite(database, "SELECT DISTINCT root FROM outputFile") == [workspace.output.path])
        #expect(workspace.output.path != oldRoot)
        // The same signatures, adopted by the new root: no package.json was written, or even noted again.
        let adopted = try packageRows()
        #expect(adopted == signatures.map { workspace.output.path + $0.dropFirst(oldRoot.count) }, "\(adopted)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: workspace.state.appendingPathComponent("roots").path) == rootFolders)

        let text = try workspace.build(server)
        #expect(text.status == 0, "\(text.stderr)")
        #expect(text.stdout.contains("0 built, 2 up to date, 0 failed, 0 skipped · 0 files written"), "\(text.stdout)")
    }

    /// Issue 50, part 4: a rebuild cuts no narration it cut before (the
    /// plans kept in `<state>/plans.kept`); a lexicon edit plans again just
    /// the narration it rewrites, and only that narration's file is made again.
    @Test func aLexiconEditPlansAgainOnlyTheNarrationItRewrites() throws {
        let server = try LocalVoiceServer()
        let workspace = try BuildWorkspace(extraYAML: "lexicons: [glacier.pls]")
        let lexicon = workspace.root.appendingPathComponent("glacier.pls")
        func writeLexicon(_ alias: String) throws {
            try """
            <lexicon version="1.0" xmlns="http://www.w3.org/2005/01/pronunciation-lexicon" alphabet="ipa" xml:lang="en-US">
            <lexeme><grapheme>glacier</grapheme><alias>\(alias)</alias></lexeme></lexicon>
            """.write(to: lexicon, atomically: true, encoding: .utf8)
        }
        func started(_ result: Executable.Result) throws -> [String: Any] {
            let events = result.stdout.split(separator: "\n").compactMap {
                try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
            }
            return try #require(events.first { $0["event"] as? String == "started" }, "\(result.stdout)\n\(result.stderr)")
        }
        try writeLexicon("ice river")
        let cold = try workspace.build(server, ["--json"])
        #expect(try started(cold)["narrationsPlanned"] as? Int == 5)
        #expect(FileManager.default.fileExists(atPath: workspace.state.appendingPathComponent("plans.kept").path))
        let warm = try workspace.build(server, ["--json"])
        #expect(try started(warm)["narrationsPlanned"] as? Int == 0)
        #expect(try Self.summary(warm)["encodes"] as? Int == 0)
        let before = try RootCheck.snapshot(workspace.output)
        let requests = try Self.requests(server)

        try writeLexicon("frozen river")
        let edited = try workspace.build(server, ["--json"])
        #expect(edited.status == 0, "\(edited.stderr)")
        #expect(try started(edited)["narrationsPlanned"] as? Int == 1)
        let summary = try Self.summary(edited)
        #expect(summary["encodes"] as? Int == 1 && summary["reusedFiles"] as? Int == 4, "\(summary)")
        #expect(try Self.requests(server) > requests, "the rewritten sentence is spoken")
        let after = try RootCheck.snapshot(workspace.output)
        let changed = after.keys.filter { after[$0] != before[$0] }.sorted()
        #expect(
            changed.contains { $0.hasSuffix("_Guided Tour.m4a") } && !changed.contains { $0.hasSuffix("_Approaching.m4a") }, "\(changed)")
        #expect(try started(try workspace.build(server, ["--json"]))["narrationsPlanned"] as? Int == 0)
    }

    /// A state an older tourpack wrote, whose rows name each file by its
    /// absolute path, is migrated when a build opens it: its rows, split
    /// at their AudioCache folder, go on serving the root they describe,
    /// and the rebuild encodes nothing.
    @Test func aStateKeyedByAbsolutePathsIsMigratedAndKeepsItsFiles() throws {
        let server = try LocalVoiceServer()
        let workspace = try BuildWorkspace()
        #expect(try workspace.build(server).status == 0)
        let database = workspace.state.appendingPathComponent(StateDatabase.fileName)
        try MapHostileInputTests.sqliteWrite(database, LegacyOutputIndex.sqlite)
        #expect(try MapBuildTests.sqlite(database, "SELECT COUNT(*) FROM outputFile WHERE path LIKE '/%/AudioCache/%'") == ["5"])

        let rebuilt = try workspace.build(server, ["--json"])
        #expect(rebuilt.status == 0, "\(rebuilt.stderr)")
        let summary = try Self.summary(rebuilt)
        #expect(summary["encodes"] as? Int == 0 && summary["files"] as? Int == 0 && summary["toursUnchanged"] as? Int == 2, "\(summary)")
        #expect(try MapBuildTests.sqlite(database, "SELECT DISTINCT root FROM outputFile") == [workspace.output.path])
        #expect(try MapBuildTests.sqlite(database, "SELECT COUNT(*) FROM outputFile WHERE path LIKE 'AudioCache/%'") == ["5"])
    }

    /// A package.json a rebuild found exactly as the store writes it is
    /// noted with its `lstat` signature, and later rebuilds keep it without
    /// encoding the package to compare: until something writes it. Then it
    /// is compared again, and a hand edit that says the same thing in other
    /// bytes is written back in the canonical form.
    @Test func aPackageFoundSoundIsComparedAgainOnceWritten() throws {
        let server = try LocalVoiceServer()
        let workspace = try BuildWorkspace()
        #expect(try workspace.build(server).status == 0)
        let database = workspace.state.appendingPathComponent(StateDatabase.fileName)
        func signatures() throws -> [String] { try MapBuildTests.sqlite(database, "SELECT path FROM packageFile ORDER BY path") }
        let manifests = RootCheck.allFiles(under: workspace.output).filter { $0.hasSuffix("/package.json") }.sorted()
        #expect(manifests.count == 2)

        let quick = try Self.summary(try workspace.build(server, ["--json"]))
        #expect(quick["toursUnchanged"] as? Int == 2)
        #expect(try signatures().isEmpty, "written within the last 2 s: compared, not noted")
        Thread.sleep(forTimeInterval: 2.2)  // `FileSignature.settleSeconds`, and a little
        #expect(try Self.summary(try workspace.build(server, ["--json"]))["toursUnchanged"] as? Int == 2)
        let noted = try signatures()
        #expect(noted == manifests, "each by its path under the output root")
        #expect(try Self.summary(try workspace.build(server, ["--json"]))["toursUnchanged"] as? Int == 2)

        // The same content in other bytes: one more space, which JSON ignores.
        let edited = workspace.output.appendingPathComponent(manifests[0])
        let canonical = try Data(contentsOf: edited)
        try (Data("{ ".utf8) + canonical.dropFirst()).write(to: edited)
        let rebuilt = try workspace.build(server, ["--json"])
        #expect(try Self.summary(rebuilt)["toursUnchanged"] as? Int == 1, "\(rebuilt.stderr)")
        let rewritten = try Data(contentsOf: edited)
        #expect(rewritten.first == UInt8(ascii: "{") && rewritten.dropFirst().first == UInt8(ascii: "\n"))
        let validate = try Executable.run(["validate", workspace.output.path, "--strict"])
        #expect(validate.status == 0, "\(validate.stdout)\(validate.stderr)")
    }

    /// Issue 39: FFmpeg's libraries (about 110 shared objects with their
    /// dependencies) are loaded when something is encoded or decoded, not
    /// when tourpack starts: `--help`, `plan` and a rebuild that reuses every
    /// file never map them. The dynamic loader's own trace (`LD_DEBUG=files`)
    /// names every object it maps.
    @Test func ffmpegIsLoadedOnlyWhenAudioIsMade() throws {
        let server = try LocalVoiceServer()
        let workspace = try BuildWorkspace()
        let trace = ["LD_DEBUG": "files"]
        func loadsFFmpeg(_ result: Executable.Result) -> Bool { result.stderr.contains("file=libavcodec.so") }

        let help = try Executable.run(["--help"], environment: trace)
        #expect(help.status == 0 && help.stderr.contains("file=libc.so"), "the trace is on: \(help.stderr.prefix(300))")
        #expect(!loadsFFmpeg(help))
        let cold = try Executable.run(
            ["build", workspace.pipeline.path, "--endpoint", server.endpoint], in: workspace.root, environment: trace)
        #expect(cold.status == 0 && loadsFFmpeg(cold), "a cold build encodes, so it loads FFmpeg")
        let warm = try Executable.run(
            ["build", workspace.pipeline.path, "--endpoint", server.endpoint, "--json"], in: workspace.root, environment: trace)
        #expect(warm.status == 0, "\(warm.stderr.suffix(2_000))")
        #expect(try Self.summary(warm)["reusedFiles"] as? Int == 5)
        #expect(!loadsFFmpeg(warm), "every file reused: nothing to encode")
        let plan = try Executable.run(["plan", workspace.pipeline.path], in: workspace.root, environment: trace)
        #expect(plan.status == 0 && !loadsFFmpeg(plan))
        // validate decodes every file: it loads FFmpeg, and its checks pass.
        let validate = try Executable.run(["validate", workspace.output.path], environment: trace)
        #expect(validate.status == 0 && loadsFFmpeg(validate), "\(validate.stdout)")
    }

    /// Issue 27, defect 12: an Opus file made again from the synthesis
    /// cache is the same bytes, its Ogg serial number coming from its tags
    /// rather than chance, so neither its sha256 nor the package's
    /// contentHash changes for nothing.
    @Test func opusFilesMadeAgainFromTheCacheAreTheSameBytes() throws {
        let server = try LocalVoiceServer()
        let workspace = try BuildWorkspace(formats: ["opus"])
        let first = try workspace.build(server)
        #expect(first.status == 0, "\(first.stderr)")
        let requests = try Self.requests(server)
        let files = RootCheck.allFiles(under: workspace.output).filter { $0.hasSuffix(".opus") }
        try #require(!files.isEmpty)
        let originals = try files.map { try Data(contentsOf: workspace.output.appendingPathComponent($0)) }
        let hashes = try Self.contentHashes(workspace)
        for (path, bytes) in zip(files, originals) {
            var tampered = bytes
            tampered[tampered.count / 2] ^= 0x20
            try tampered.write(to: workspace.output.appendingPathComponent(path))
        }

        let rebuilt = try workspace.build(server, ["--json"])
        #expect(rebuilt.status == 0, "\(rebuilt.stderr)")
        #expect(try Self.requests(server) == requests, "made again from the synthesis cache")
        for (path, original) in zip(files, originals) {
            let now = try Data(contentsOf: workspace.output.appendingPathComponent(path))
            #expect(now == original, "\(path) changed")
        }
        #expect(try Self.contentHashes(workspace) == hashes)
    }

    /// Each package.json's contentHash, by its path.
    static func contentHashes(_ workspace: BuildWorkspace) throws -> [String: String] {
        var hashes: [String: String] = [:]
        for path in RootCheck.allFiles(under: workspace.output) where path.hasSuffix("package.json") {
            let data = try Data(contentsOf: workspace.output.appendingPathComponent(path))
            let object = try JSONSerialization.jsonObject(with: data) as? [String: Any]
            hashes[path] = object?["contentHash"] as? String
        }
        return hashes
    }

    @Test func aPlanOverTheQuotaIsRefusedBeforeAnyRequest() throws {
        let server = try LocalVoiceServer()
        let probe = try BuildWorkspace()
        let voice = try Self.writeStandardVoice(in: probe)
        let planned = try Executable.run(["plan", probe.pipeline.path, "--voice", voice, "--json"], in: probe.root)
        let plan = try #require(try JSONSerialization.jsonObject(with: Data(planned.stdout.utf8)) as? [String: Any], "\(planned.stderr)")
        let needed = try #require((plan["quota"] as? [String: Any])?["thisBuild"] as? Int)

        let workspace = try BuildWorkspace(extraYAML: "budgets: {monthlyCharacters: {standard: \(needed - 1)}}")
        let standard = try Self.writeStandardVoice(in: workspace)
        let refused = try workspace.build(server, ["--voice", standard])
        #expect(refused.status == 3)
        #expect(refused.stderr.contains("monthly quota is \(PlanReport.grouped(needed - 1)) characters"), "\(refused.stderr)")
        #expect(refused.stderr.contains("1 over"), "\(refused.stderr)")
        #expect(try Self.requests(server) == 0)
        #expect(!FileManager.default.fileExists(atPath: workspace.output.appendingPathComponent("OfflineTours").path))
        let tiers = try Self.quota(workspace, ["--voice", standard, "--endpoint", server.endpoint])
        #expect(tiers["standard"]?["used"] as? Int == 0 && tiers["standard"]?["reserved"] as? Int == 0)

        // Exactly the plan fits, and the ledger then holds exactly what the server spoke.
        let fits = try BuildWorkspace(extraYAML: "budgets: {monthlyCharacters: {standard: \(needed)}}")
        let fitsVoice = try Self.writeStandardVoice(in: fits)
        let built = try fits.build(server, ["--voice", fitsVoice])
        #expect(built.status == 0, "\(built.stderr)")
        let after = try Self.quota(fits, ["--voice", fitsVoice, "--endpoint", server.endpoint])
        #expect(after["standard"]?["used"] as? Int == needed)
        #expect(after["standard"]?["left"] as? Int == 0)
        #expect(try Self.characters(server) == needed)
        let replanned = try Executable.run(
            ["plan", fits.pipeline.path, "--voice", fitsVoice, "--endpoint", server.endpoint], in: fits.root)
        #expect(replanned.stdout.contains("this build 0; 0 left after this build"), "\(replanned.stdout)")
    }

    /// The output root itself is locked too: a pipeline naming the same
    /// output with another state folder takes its turn.
    @Test func aSecondStateFolderCannotBuildTheSameRootAtOnce() async throws {
        let server = try LocalVoiceServer()
        let workspace = try BuildWorkspace()
        let otherState = workspace.root.appendingPathComponent("other-state")
        let lock = try await BuildLock.acquire(
            stateFolder: StateLayout(state: otherState, output: workspace.output).rootFolder,
            root: workspace.output, wait: false)
        let refused = try workspace.build(server, ["--no-wait"])
        #expect(refused.status == 1)
        #expect(
            refused.stderr.contains("another build is running on this output root (lock \(workspace.output.path))"), "\(refused.stderr)")
        #expect(try Self.requests(server) == 0)
        lock.release()
        #expect(try workspace.build(server, ["--no-wait"]).status == 0)
    }

    /// About 70 minutes of narration estimates at ~68 MB of AAC: more than a
    /// 50 MB cache can ever hold, so the build is refused before any request.
    @Test func aBuildWhoseOwnAudioCannotFitTheCacheIsRefusedUpFront() throws {
        let server = try LocalVoiceServer()
        let workspace = try BuildWorkspace(extraYAML: "budgets: {cacheMaxMB: 50}")
        let sentence = "The glacier has lost half of its length since the road was opened to cars in the summer of 1935. "
        let narration = String(repeating: sentence, count: 20)
        let pois = (0..<10).map { index in
            """
            {"id": "9c5a4f6b-1d74-4eaf-8f88-\(String(format: "%012d", index))", "name": "Stop \(index)",
             "location": {"latitude": 46.0, "longitude": 9.0}, "triggerRadiusMeters": 300,
             "narrations": {"approaching": "\(narration)", "detailed": "\(narration)", "guidedTour": "\(narration)"}}
            """
        }.joined(separator: ",\n")
        try """
        {"id": "9c5a4f6b-1d74-4eaf-8f88-4a5b6c7d8e9f", "name": "Very Long Tour", "language": "en-US", "version": 1,
         "route": {"waypoints": [{"latitude": 46.0, "longitude": 9.0}, {"latitude": 46.02, "longitude": 9.03}]},
         "pois": [\(pois)]}
        """.write(to: workspace.root.appendingPathComponent("tours/long.json"), atomically: true, encoding: .utf8)
        let refused = try workspace.build(server)
        #expect(refused.status == 3, "\(refused.stdout)\n\(refused.stderr)")
        #expect(refused.stderr.contains("more than cacheMaxMB (50.0 MB)"), "\(refused.stderr)")
        #expect(try Self.requests(server) == 0)
        #expect(!FileManager.default.fileExists(atPath: workspace.output.appendingPathComponent("OfflineTours").path))
    }

    /// Two jobs on two output roots share one state folder, so one ledger.
    /// Together they need more than the month has: what they spend stays
    /// within the limit, equals what the server spoke, and one is refused (exit 3).
    @Test func twoConcurrentBuildsShareOneLedgerAndNeverPassTheLimit() throws {
        let server = try LocalVoiceServer(faults: ["--latency-ms", "150"])
        let probe = try BuildWorkspace()
        let voice = try Self.writeStandardVoice(in: probe)
        let planned = try Executable.run(["plan", probe.pipeline.path, "--voice", voice, "--json"], in: probe.root)
        let plan = try #require(try JSONSerialization.jsonObject(with: Data(planned.stdout.utf8)) as? [String: Any])
        let each = try #require((plan["quota"] as? [String: Any])?["thisBuild"] as? Int)
        let limit = each * 3 / 2

        let first = try BuildWorkspace(extraYAML: "budgets: {monthlyCharacters: {standard: \(limit)}}")
        let second = try BuildWorkspace(extraYAML: "budgets: {monthlyCharacters: {standard: \(limit)}}")
        // Different words, so the two jobs share no chunk through the synthesis cache.
        try second.writeTours(alps: "The road climbs in forty-eight hairpins.", lakes: "The tarn lies still below the col.")
        let shared = first.state.path
        let builds = [
            try first.startBuild(server, ["--voice", try Self.writeStandardVoice(in: first), "--concurrency", "1"]),
            try second.startBuild(server, ["--voice", try Self.writeStandardVoice(in: second), "--concurrency", "1", "--state", shared]),
        ]
        let codes = builds.map { $0.finish() }
        let outcome = builds.map { build in
            build.events.filter { ["itemFailed", "tourFailed", "finished", "error"].contains($0["event"] as? String ?? "") }
                .map { "\($0)" }.joined(separator: "\n")
        }.joined(separator: "\n---\n")
        #expect(codes.contains(3), "\(outcome)")
        #expect(codes.contains(3), "together they need \(2 * each) of \(limit): one must be refused; got \(codes)")
        #expect(codes.allSatisfy { $0 == 0 || $0 == 3 }, "\(codes)")

        let tiers = try Self.quota(first, ["--voice", try Self.writeStandardVoice(in: first), "--endpoint", server.endpoint])
        let used = try #require(tiers["standard"]?["used"] as? Int)
        #expect(used <= limit)
        #expect(used == (try Self.characters(server)), "the ledger holds exactly what the server spoke")
        #expect(tiers["standard"]?["reserved"] as? Int == 0)
    }

    /// Two jobs on two output roots share one state folder and want the same
    /// chunks at the same moment: each chunk is claimed by one of them and
    /// spoken once; the other waits for its audio. Both publish every tour,
    /// and the server spoke exactly what one job alone would have paid for.
    @Test func twoConcurrentBuildsOfTheSameToursPayForEachChunkOnce() throws {
        let server = try LocalVoiceServer(faults: ["--latency-ms", "250"])
        let first = try BuildWorkspace()
        let second = try BuildWorkspace()
        let planned = try Executable.run(["plan", first.pipeline.path, "--json"], in: first.root)
        let plan = try #require(try JSONSerialization.jsonObject(with: Data(planned.stdout.utf8)) as? [String: Any])
        let totals = try #require(plan["totals"] as? [String: Any])
        let requests = try #require(totals["requests"] as? Int)
        let billable = try #require(totals["billableCharacters"] as? Int)
        #expect(requests > 3)

        let builds = [
            try first.startBuild(server, ["--concurrency", "2"]),
            try second.startBuild(server, ["--concurrency", "2", "--state", first.state.path]),
        ]
        let codes = builds.map { $0.finish() }
        #expect(codes == [0, 0], "\(builds.map { $0.events.map { "\($0)" }.joined(separator: "\n") })")
        #expect(try Self.requests(server) == requests, "each chunk spoken once by the two jobs together")
        #expect(try Self.characters(server) == billable)
        let summaries = builds.compactMap { $0.events.last { $0["event"] as? String == "finished" } }
        #expect(summaries.map { $0["toursBuilt"] as? Int } == [2, 2])
        #expect(summaries.compactMap { $0["requests"] as? Int }.reduce(0, +) == requests)
        let local = try Self.quota(first, ["--endpoint", server.endpoint])["local"]
        #expect(local?["used"] as? Int == billable)
        #expect(local?["reserved"] as? Int == 0)
    }

    /// Answers cut short or garbled are retried, and the provider bills each
    /// one: the ledger counts every answer, as the server does.
    @Test func theLedgerCountsEveryAnswerARetryCostIncludingBadOnes() throws {
        let server = try LocalVoiceServer(faults: ["--truncate-rate", "0.35", "--garbage-rate", "0.2", "--fault-seed", "11"])
        let workspace = try BuildWorkspace()
        // Which chunk meets which fault depends on the order requests land
        // in. About half the answers are bad, so with the default 5 attempts
        // some chunk failed all of them in about one run in seven; with 15,
        // about one in ten thousand.
        let pipeline = try String(contentsOf: workspace.pipeline, encoding: .utf8)
        try pipeline.replacingOccurrences(
            of: "  timeoutSeconds: 30\n", with: "  timeoutSeconds: 30\n  maxAttempts: 15\n  initialBackoffMs: 5\n"
        )
        .write(to: workspace.pipeline, atomically: true, encoding: .utf8)
        let built = try workspace.build(server, ["--json"])
        #expect(built.status == 0, "\(built.stderr)")
        let faults = (try server.stats()["faultsInjected"] as? [String: Int] ?? [:]).values.reduce(0, +)
        #expect(faults > 0, "the seed must inject at least one bad answer")
        let spoken = try Self.characters(server)
        let local = try Self.quota(workspace, ["--endpoint", server.endpoint])["local"]
        #expect(local?["used"] as? Int == spoken)
        #expect(try Self.summary(built)["charactersBilled"] as? Int == spoken)
        let planned = try Executable.run(["plan", workspace.pipeline.path, "--json"], in: workspace.root)
        let plan = try #require(try JSONSerialization.jsonObject(with: Data(planned.stdout.utf8)) as? [String: Any])
        #expect(spoken > (plan["totals"] as? [String: Any])?["characters"] as? Int ?? .max, "bad answers were billed too")
    }

    /// Killed while the server holds one request it will never answer with
    /// audio. That reservation was sent, so the endpoint might have billed
    /// it: the rerun settles it rather than releasing it (reserved → sent →
    /// settled). The ledger over-counts by exactly that one chunk and never
    /// under-counts; every other chunk is paid once.
    @Test func aKilledBuildLeavesTheLedgerExactAfterTheRerun() throws {
        let server = try LocalVoiceServer(faults: ["--hold-text", "HELD-HERE", "--stall-ms", "6000"])
        // Captions off: each chunk costs its narration's characters, which the sums below count.
        let workspace = try BuildWorkspace(extraYAML: "captions: off")
        try workspace.writeTours(alps: "The road climbs in thirty-six hairpins.", lakes: "HELD-HERE is the lake.")
        let build = try workspace.startBuild(server, ["--concurrency", "1"])
        #expect(build.waitForEvent("itemDone") != nil)
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline, (try server.stats()["faultsInjected"] as? [String: Int])?["held"] != 1 {
            Thread.sleep(forTimeInterval: 0.05)
        }
        #expect((try server.stats()["faultsInjected"] as? [String: Int])?["held"] == 1)
        // With one request in flight at a time, the held one is the only one:
        // wait until every answer before it is kept and settled (the ledger
        // says what the server spoke), not for a fixed time.
        let settledBy = Date().addingTimeInterval(60)
        while Date() < settledBy,
            (try Self.quota(workspace, ["--endpoint", server.endpoint])["local"]?["used"] as? Int) != (try Self.characters(server))
        {
            Thread.sleep(forTimeInterval: 0.05)
        }
        build.signal(SIGKILL)
        _ = build.finish()
        let spokenBeforeKill = try Self.characters(server)
        let local = try Self.quota(workspace, ["--endpoint", server.endpoint])["local"]
        // `quota` reconciled the dead build's reservations: the held one had been sent, so it is settled in full.
        let held = ["Soon you will see the lake. HELD-HERE is the lake.", "The lake is 40 metres deep. HELD-HERE is the lake."].map(\.count)
        let overCount = (local?["used"] as? Int ?? 0) - spokenBeforeKill
        #expect(held.contains(overCount), "every answered request was settled before the kill, and the held one since: \(overCount) over")

        let rerun = try workspace.build(server, ["--json"])
        #expect(rerun.status == 0, "\(rerun.stderr)")
        let planned = try Executable.run(["plan", workspace.pipeline.path, "--json"], in: workspace.root)
        let plan = try #require(try JSONSerialization.jsonObject(with: Data(planned.stdout.utf8)) as? [String: Any])
        let total = try #require((plan["totals"] as? [String: Any])?["characters"] as? Int)
        let after = try Self.quota(workspace, ["--endpoint", server.endpoint])["local"]
        #expect(after?["used"] as? Int == total + overCount, "each chunk paid once, plus the one the crash left in doubt")
        #expect(try Self.characters(server) == total)
        #expect((after?["used"] as? Int ?? 0) >= (try Self.characters(server)), "never under what the endpoint billed")
        #expect(after?["reserved"] as? Int == 0, "the dead build's reservation was closed")
    }

    /// Time moves by `TOURPACK_NOW`: a plain build leaves a fresh package
    /// alone, `--refresh-expiring` renews one near its end without a
    /// request, and audio past audioMaxAgeDays is spoken again.
    @Test func refreshExpiringRenewsPackagesAndOldAudioIsSpokenAgain() throws {
        let server = try LocalVoiceServer()
        let workspace = try BuildWorkspace(extraYAML: "budgets: {packageMaxAgeDays: 10, audioMaxAgeDays: 20}")
        func build(at time: String, _ extra: [String] = []) throws -> [String: Any] {
            let result = try Executable.run(
                ["build", workspace.pipeline.path, "--endpoint", server.endpoint, "--json"] + extra, in: workspace.root,
                environment: ["TOURPACK_NOW": time])
            #expect(result.status == 0, "\(result.stderr)")
            return try Self.summary(result)
        }
        func createdAt() throws -> Set<String> {
            Set(
                try RootCheck.allFiles(under: workspace.output).filter { $0.hasSuffix("package.json") }.map { path in
                    let object =
                        try JSONSerialization.jsonObject(with: Data(contentsOf: workspace.output.appendingPathComponent(path)))
                        as? [String: Any]
                    return object?["createdAt"] as? String ?? ""
                })
        }
        _ = try build(at: "2027-01-01T00:00:00Z")
        #expect(try createdAt() == ["2027-01-01T00:00:00Z"])
        let requests = try Self.requests(server)

        let plain = try build(at: "2027-01-06T00:00:00Z")
        #expect(plain["toursUnchanged"] as? Int == 2)
        #expect(try createdAt() == ["2027-01-01T00:00:00Z"], "a package that does not expire soon is left alone")

        let refreshed = try build(at: "2027-01-06T00:00:00Z", ["--refresh-expiring", "7"])
        #expect(refreshed["toursBuilt"] as? Int == 2 && refreshed["encodes"] as? Int == 0)
        #expect(try createdAt() == ["2027-01-06T00:00:00Z"])
        #expect(try Self.requests(server) == requests, "renewing a package costs no request")

        let late = try build(at: "2027-02-01T00:00:00Z")
        #expect(try Self.requests(server) == requests + 5, "audio older than 20 days is spoken again")
        #expect(late["cacheHits"] as? Int == 0)
        #expect(try createdAt() == ["2027-02-01T00:00:00Z"])
    }
}

import Foundation
import Testing

@testable import TourpackCore
@testable import TourpackKit
@testable import TourpackLoad
@testable import TourpackPlan
@testable import TourpackState

/// `--shards N --shard I`: which tours a worker builds, and what it may
/// touch in a root it shares with the other shards.
@Suite struct ShardTests {
    static let alps = SafeID(validating: "6f2d1c3e-8a41-4b7e-9c55-1d2e3f4a5b60")!
    static let lakes = SafeID(validating: "7a3e2d4f-9b52-4c8f-8d66-2e3f4a5b6c71")!
    static let glockner = SafeID(validating: "0B7C2F0E-5D1A-4F55-9A0E-2F3B8F6C1D42")!
    static let voice = VoicePreset(provider: "local", languageCode: "en-US", name: "en-us", tier: .local)

    /// Golden values from Python, an implementation that shares nothing with
    /// ours: `int.from_bytes(hashlib.sha256(id.encode()).digest()[:8], "big") % n`.
    /// A release that changed them would move tours between the workers of
    /// a fleet running two versions side by side.
    @Test func theHashIsSHA256OfTheLowercaseIDAndTheSameEverywhere() {
        #expect((1...8).map { Shard.index(of: Self.alps, count: $0) } == [0, 0, 0, 0, 0, 0, 6, 4])
        #expect((1...8).map { Shard.index(of: Self.lakes, count: $0) } == [0, 1, 1, 1, 3, 1, 1, 5])
        #expect((1...8).map { Shard.index(of: Self.glockner, count: $0) } == [0, 0, 2, 0, 2, 2, 4, 0], "the ID is lowercased first")
    }

    @Test func everyTourFallsInExactlyOneShard() throws {
        let ids = (0..<200).map { SafeID(validating: String(format: "%08x-0000-4000-8000-%012x", $0 * 7919, $0))! }
        for count in [1, 2, 3, 7] {
            let shards = try (0..<count).map { try Shard(index: $0, count: count) }
            for id in ids {
                #expect(shards.filter { $0.contains(id) }.count == 1)
            }
            if count > 1 {
                // Spread, not all in one: a bad hash would leave workers idle.
                let sizes = shards.map { shard in ids.filter(shard.contains).count }
                #expect(sizes.allSatisfy { $0 > 200 / count / 2 }, "\(sizes)")
            }
        }
    }

    @Test func theFlagsAndTheEnvironmentResolveToOneShard() throws {
        #expect(
            try Shard.resolve(count: nil, index: nil, environment: [Shard.indexVariable: "3"]) == nil,
            "JOB_COMPLETION_INDEX alone splits nothing")
        #expect(try Shard.resolve(count: 4, index: 2, environment: [:]) == Shard(index: 2, count: 4))
        #expect(try Shard.resolve(count: 4, index: nil, environment: [Shard.indexVariable: "3"]) == Shard(index: 3, count: 4))
        #expect(
            try Shard.resolve(count: 4, index: 1, environment: [Shard.indexVariable: "3"]) == Shard(index: 1, count: 4), "the flag wins")
        #expect(try Shard.resolve(count: 1, index: nil, environment: [Shard.indexVariable: "0"]) == Shard(index: 0, count: 1))
    }

    @Test func everyWrongShardIsRefusedNamingWhatIsWrong() {
        func message(_ count: Int?, _ index: Int?, _ environment: [String: String] = [:]) -> String {
            do {
                _ = try Shard.resolve(count: count, index: index, environment: environment)
                return "accepted"
            } catch { return error.message }
        }
        #expect(message(nil, 1) == "--shard 1 needs --shards N, the number of shards the tours are split into")
        #expect(message(0, 0) == "--shards must be 1 or more, not 0")
        #expect(message(-2, nil) == "--shards must be 1 or more, not -2")
        #expect(message(4, 4) == "--shard 4 is out of range for --shards 4: shards are numbered 0 to 3")
        #expect(message(4, -1) == "--shard -1 is out of range for --shards 4: shards are numbered 0 to 3")
        #expect(message(4, nil).contains("--shards 4 needs --shard I (0 to 3) or the JOB_COMPLETION_INDEX variable"))
        for bad in ["two", "", "1.5", "-1", "+1", "0x2"] {
            #expect(message(4, nil, [Shard.indexVariable: bad]).hasPrefix("JOB_COMPLETION_INDEX='\(bad)' is not a shard number"), "\(bad)")
        }
        #expect(
            message(4, nil, [Shard.indexVariable: "7"])
                == "JOB_COMPLETION_INDEX=7 is out of range for --shards 4: shards are numbered 0 to 3")
    }

    @Test func aShardsPlanHoldsItsToursAndSaysWhichShardItIs() throws {
        let fixture = try ConfigFixture()
        defer { fixture.remove() }
        for (index, id) in [Self.alps, Self.lakes, Self.glockner].enumerated() {
            try fixture.write(
                "tours/t\(index).json",
                """
                {"id": "\(id.value)", "name": "Tour \(index)", "language": "en-US", "version": 1,
                 "route": {"waypoints": [{"latitude": 47.0, "longitude": 12.0}, {"latitude": 47.1, "longitude": 12.1}], "segments": []},
                 "pois": [{"id": "11111111-2222-4333-8444-00000000000\(index)", "name": "Stop", "location": {"latitude": 47.05, "longitude": 12.05},
                           "triggerRadiusMeters": 300, "narrations": {"detailed": "Hello from tour \(index)."}}]}
                """)
        }
        let config = try fixture.load(PipelineConfigTests.minimal)
        let tours = try TourLoader().loadAll(globs: config.tourGlobs)
        let planner = Planner(config: config)
        #expect(try planner.plan(tours).shard == nil)
        // Of 3: alps 0, lakes 1, glockner 2; of 5: 0, 3 and 2.
        let shard = try Shard(index: 1, count: 3)
        let first = try planner.plan(tours, shard: shard)
        #expect(first.tours.map(\.tour.id) == [Self.lakes])
        #expect(first.shard == ShardSlice(shard: shard, tours: 1, toursInPipeline: 3))
        #expect(first.shard?.description == "shard 1 of 3: 1 of 3 tours")
        #expect(
            PlanReport(plan: first, config: config).text().hasPrefix("shard 1 of 3: 1 of 3 tours (the tours whose ID hashes to this shard"))
        let empty = try planner.plan(tours, shard: try Shard(index: 4, count: 5))
        #expect(empty.tours.isEmpty && empty.shard?.tours == 0)
        #expect(
            PlanReport(plan: empty, config: config).text().hasPrefix(
                "shard 4 of 5: 0 of 3 tours: no tour of the pipeline hashes to this shard"))
        let json = try #require(
            try JSONSerialization.jsonObject(with: Data(try PlanReport(plan: first, config: config).json().utf8)) as? [String: Any])
        #expect(json["shard"] as? [String: Int] == ["index": 1, "count": 3, "tours": 1, "toursInPipeline": 3])
        let whole = try #require(
            try JSONSerialization.jsonObject(with: Data(try PlanReport(plan: try planner.plan(tours), config: config).json().utf8))
                as? [String: Any])
        #expect(whole["shard"] is NSNull, "written out as null, like refused")
    }

    // MARK: What a shard's build may touch

    @Test func aScopeOwnsItsToursFoldersAndNoOneElses() {
        let scope = OutputScope(tours: [Self.alps], voice: Self.voice, formats: [.aac, .opus])
        let packages = [AudioFormat.aac, .opus].map { PackageID.make(tourID: Self.alps, voice: Self.voice, format: $0).value }
        #expect(scope.owns(Self.alps.value, in: Layout.audioCacheFolder))
        #expect(scope.owns(".\(Self.alps.value)\(Layout.nextFolderMarker)123", in: Layout.audioCacheFolder))
        #expect(!scope.owns(Self.lakes.value, in: Layout.audioCacheFolder))
        #expect(!scope.owns(".\(Self.lakes.value)\(Layout.nextFolderMarker)123", in: Layout.audioCacheFolder))
        #expect(!scope.owns(".\(Self.alps.value)", in: Layout.audioCacheFolder))
        #expect(packages.allSatisfy { scope.owns($0, in: Layout.offlineToursFolder) })
        #expect(!scope.owns(PackageID.make(tourID: Self.lakes, voice: Self.voice, format: .aac).value, in: Layout.offlineToursFolder))
        #expect(!scope.owns(Self.alps.value, in: Layout.offlineToursFolder), "a tour ID is not a package ID")
        #expect(scope.ownsAudio(at: "AudioCache/\(Self.alps.value)/x_Detailed.m4a"))
        #expect(!scope.ownsAudio(at: "AudioCache/\(Self.lakes.value)/x_Detailed.m4a"))
        #expect(!scope.ownsAudio(at: "OfflineTours/\(Self.alps.value)/x_Detailed.m4a"))
    }

    /// Two shards' tours, each with audio that no package lists, over the
    /// budget: a shard evicts only its own; a whole-root build evicts both.
    @Test func aShardEvictsOnlyItsOwnUnlistedAudio() throws {
        let scratch = StateScratch()
        defer { scratch.remove() }
        let layout = Layout(root: scratch.output)
        for (tour, poi) in [(Self.alps, "11111111-2222-4333-8444-000000000001"), (Self.lakes, "11111111-2222-4333-8444-000000000002")] {
            let url = layout.audioFile(tourID: tour, poiID: SafeID(validating: poi)!, phase: .detailed, format: .aac).url
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data(repeating: 7, count: 700_000).write(to: url)
        }
        let inventory = try CacheInventory.scan(layout, now: Date())
        #expect(inventory.files.count == 2)
        let budgets = Budgets(cacheMaxMB: 1)
        let scope = OutputScope(tours: [Self.alps], voice: Self.voice, formats: [.aac])
        let shard = CachePrunePlan(inventory: inventory, budgets: budgets, now: Date(), overBudgetOnly: true, scope: scope)
        #expect(shard.removals.map(\.path) == ["AudioCache/\(Self.alps.value)/11111111-2222-4333-8444-000000000001_Detailed.m4a"])
        let whole = CachePrunePlan(inventory: inventory, budgets: budgets, now: Date(), overBudgetOnly: true)
        #expect(whole.removals.count == 1, "the whole root needs one removal to fit")
        let tight = CachePrunePlan(inventory: inventory, budgets: Budgets(cacheMaxMB: 0), now: Date(), overBudgetOnly: true)
        #expect(tight.removals.count == 2)
        let tightShard = CachePrunePlan(
            inventory: inventory, budgets: Budgets(cacheMaxMB: 0), now: Date(), overBudgetOnly: true, scope: scope)
        #expect(tightShard.removals.count == 1, "never another shard's, however far over")
    }

    @Test func aShardSweepsLeftoversOnlyInItsOwnFolders() throws {
        let scratch = StateScratch()
        defer { scratch.remove() }
        let root = scratch.root.appendingPathComponent("Documents")
        let layout = Layout(root: root)
        let fm = FileManager.default
        var planted: [String: URL] = [:]
        for tour in [Self.alps, Self.lakes] {
            let folder = root.appendingPathComponent("AudioCache/\(tour.value)")
            try fm.createDirectory(at: folder, withIntermediateDirectories: true)
            let temp = folder.appendingPathComponent(".x_Detailed.m4a\(AtomicFile.temporaryMarker)0123456789abcdef")
            try Data([1]).write(to: temp)
            let next = root.appendingPathComponent("AudioCache/.\(tour.value)\(Layout.nextFolderMarker)42")
            try fm.createDirectory(at: next, withIntermediateDirectories: true)
            planted[tour.value] = temp
            planted[tour.value + "next"] = next
        }
        // The staging folder lies on another path than the root: temps sit beside their final paths.
        let staging = try StagingArea(state: scratch.state.appendingPathComponent("roots/r"), output: root)
        let scope = OutputScope(tours: [Self.lakes], voice: Self.voice, formats: [.aac])
        #expect(try staging.removeLeftovers(in: layout, scope: scope) >= 2)
        #expect(!fm.fileExists(atPath: planted[Self.lakes.value]!.path))
        #expect(!fm.fileExists(atPath: planted[Self.lakes.value + "next"]!.path))
        #expect(fm.fileExists(atPath: planted[Self.alps.value]!.path), "another shard's temp is a publish in flight")
        #expect(fm.fileExists(atPath: planted[Self.alps.value + "next"]!.path))
        _ = try staging.removeLeftovers(in: layout)
        #expect(!fm.fileExists(atPath: planted[Self.alps.value]!.path), "a whole-root build sweeps everything")
        #expect(!fm.fileExists(atPath: planted[Self.alps.value + "next"]!.path))
    }

    // MARK: Scratch and the root's lock

    @Test func scratchHoldsTheRootsLockStagingAndJournalsAndTheDefaultIsUnchanged() throws {
        let state = URL(fileURLWithPath: "/var/tp/state"), output = URL(fileURLWithPath: "/var/tp/Documents")
        let plain = StateLayout(state: state, output: output)
        #expect(plain.rootFolder.path.hasPrefix("/var/tp/state/roots/Documents-"))
        let scratched = StateLayout(state: state, output: output, scratch: URL(fileURLWithPath: "/scratch/tp"))
        #expect(scratched.rootFolder.path.hasPrefix("/scratch/tp/roots/Documents-"))
        #expect(scratched.rootFolder.lastPathComponent.hasPrefix("Documents-"))
        // Named by the output's place beside the folder that holds `roots/`: a
        // project moved whole keeps its root's folder; one under a shared
        // scratch folder is told apart from another project's of the same shape.
        let moved = StateLayout(state: URL(fileURLWithPath: "/srv/moved/state"), output: URL(fileURLWithPath: "/srv/moved/Documents"))
        #expect(moved.rootFolder.lastPathComponent == plain.rootFolder.lastPathComponent)
        let other = StateLayout(
            state: URL(fileURLWithPath: "/srv/other/state"), output: URL(fileURLWithPath: "/srv/other/Documents"),
            scratch: URL(fileURLWithPath: "/scratch/tp"))
        #expect(other.rootFolder.lastPathComponent != scratched.rootFolder.lastPathComponent)
        #expect(
            scratched.stagingFolder.path.hasPrefix("/scratch/tp/roots/") && scratched.journalFolder.path.hasPrefix("/scratch/tp/roots/"))
        #expect(scratched.lockFile.path.hasPrefix("/scratch/tp/roots/"))
        #expect(scratched.synthesisFolder == plain.synthesisFolder, "the caches stay in the state folder")

        let inside = StateLayout(state: state, output: output, scratch: output.appendingPathComponent("tmp"))
        #expect(throws: TourpackError.self) { try inside.checkApart() }
        do { try inside.checkApart() } catch {
            #expect("\(error)".contains("state.scratch /var/tp/Documents/tmp lies inside the output"), "\(error)")
        }
    }

    @Test func shardsShareTheRootsLockAndAWholeRootBuildExcludesThem() async throws {
        let scratch = StateScratch()
        defer { scratch.remove() }
        let root = scratch.root.appendingPathComponent("Documents")
        let (a, b, c) = (
            scratch.root.appendingPathComponent("a"), scratch.root.appendingPathComponent("b"), scratch.root.appendingPathComponent("c")
        )
        let first = try await BuildLock.acquire(stateFolder: a, root: root, sharingRoot: true, wait: false)
        let second = try await BuildLock.acquire(stateFolder: b, root: root, sharingRoot: true, wait: false)
        await #expect(throws: TourpackError.self, "a whole-root build waits for every shard") {
            _ = try await BuildLock.acquire(stateFolder: c, root: root, wait: false)
        }
        first.release()
        second.release()
        let whole = try await BuildLock.acquire(stateFolder: c, root: root, wait: false)
        await #expect(throws: TourpackError.self, "and a shard waits for a whole-root build") {
            _ = try await BuildLock.acquire(stateFolder: a, root: root, sharingRoot: true, wait: false)
        }
        whole.release()
    }
}

import Foundation
import Testing
import TourpackTesting

@testable import TourpackCore
@testable import TourpackKit

/// The commit journal, staging and progress: the parts of the build that
/// make a killed run recoverable and a running one legible.
@Suite struct BuildCommitTests {
    /// A scratch state folder and output root on the same file system.
    struct Scratch {
        let root = TemporaryFolder.path("tourpack-commit")
        var state: URL { root.appendingPathComponent("state") }
        var output: URL { root.appendingPathComponent("Documents") }
        func remove() { TemporaryFolder.remove(root) }
    }

    @Test func aJournalLeftByAKillMidCommitIsRolledForward() throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        let staging = try StagingArea(state: scratch.state, output: scratch.output)
        #expect(staging.folder == scratch.state.appendingPathComponent("staging", isDirectory: true))

        // Three staged files of one tour; the "kill" lands after the first rename.
        let finals = (0..<3).map { scratch.output.appendingPathComponent("AudioCache/t/file\($0).m4a") }
        var moves: [CommitJournal.Move] = []
        for (index, final) in finals.enumerated() {
            let temp = try staging.temporaryURL(for: final)
            try AtomicFile.fill(temp, with: Array("new \(index)".utf8))
            if index > 0 { try AtomicFile.write(Array("old \(index)".utf8), to: final) }
            moves.append(CommitJournal.Move(from: temp.path, to: final.path))
        }
        let oldPackage = scratch.output.appendingPathComponent("OfflineTours/old-voice")
        try AtomicFile.write(Array("{}".utf8), to: oldPackage.appendingPathComponent("package.json"))
        let journal = CommitJournal(tourId: "t", moves: moves, removals: [oldPackage.path])
        try AtomicFile.write(
            try JSONEncoder().encode(journal), to: CommitJournal.folder(state: scratch.state).appendingPathComponent("t.json"))
        try AtomicFile.move(URL(fileURLWithPath: moves[0].from), to: finals[0])

        // The replay runs as the tour's publish would (under its lock, on a
        // shared root): the files move inside that call, not before or after.
        var locked: [(tourId: String, before: String, after: String)] = []
        let replayed = try CommitJournal.replayAll(state: scratch.state, root: scratch.output) { tourId, replay in
            let before = try String(contentsOf: finals[1], encoding: .utf8)
            try replay()
            locked.append((tourId, before, try String(contentsOf: finals[1], encoding: .utf8)))
        }
        #expect(replayed == 1)
        #expect(locked.map(\.tourId) == ["t"] && locked.map(\.before) == ["old 1"] && locked.map(\.after) == ["new 1"])
        for (index, final) in finals.enumerated() {
            #expect(try String(contentsOf: final, encoding: .utf8) == "new \(index)")
        }
        #expect(!FileManager.default.fileExists(atPath: oldPackage.path), "the superseded package was not removed")
        #expect(try FileManager.default.contentsOfDirectory(atPath: CommitJournal.folder(state: scratch.state).path).isEmpty)
        #expect(try CommitJournal.replayAll(state: scratch.state, root: scratch.output) == 0, "a replayed journal must be gone")
        #expect(try staging.removeLeftovers(in: Layout(root: scratch.output)) == 0)
    }

    /// A journal is replayed as written, so one that names a path outside the
    /// root's AudioCache and OfflineTours (or the staging its moves come
    /// from) is refused whole, before anything moves (issue 27, defect 1).
    @Test(
        "a journal naming a path outside the root is refused and touches nothing",
        arguments: ["removal", "move source", "move target", "deletion", "dot-dot", "swap"])
    func aJournalOutsideTheRootIsRefused(naming: String) throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        // A sibling of the output root, holding what a package folder would.
        let sibling = scratch.root.appendingPathComponent("Sibling", isDirectory: true)
        let outside = sibling.appendingPathComponent("package.json")
        try AtomicFile.write(Array("keep me".utf8), to: outside)
        // A good move goes first: refusing after it would already have moved something.
        let staging = try StagingArea(state: scratch.state, output: scratch.output)
        let manifest = scratch.output.appendingPathComponent("OfflineTours/p/package.json")
        try AtomicFile.write(Array("old".utf8), to: manifest)
        let temp = try staging.temporaryURL(for: manifest)
        try AtomicFile.fill(temp, with: Array("new".utf8))
        var moves = [CommitJournal.Move(from: temp.path, to: manifest.path)]
        var removals: [String] = []
        var deletions: [String] = []
        var swap: CommitJournal.FolderSwap?
        switch naming {
        case "removal": removals = [sibling.path]
        case "move source": moves.append(CommitJournal.Move(from: outside.path, to: manifest.path))
        case "move target":
            let second = try staging.temporaryURL(for: manifest)
            try AtomicFile.fill(second, with: Array("overwritten".utf8))
            moves.append(CommitJournal.Move(from: second.path, to: outside.path))
        case "deletion": deletions = [outside.path]
        case "dot-dot": deletions = [scratch.output.path + "/OfflineTours/p/../../../Sibling/package.json"]
        default: swap = CommitJournal.FolderSwap(live: sibling.path, next: scratch.output.path + "/AudioCache/.t.next-1", liveInode: nil)
        }
        let journal = CommitJournal(tourId: "t", moves: moves, removals: removals, deletions: deletions, swap: swap)
        let journalFile = CommitJournal.folder(state: scratch.state).appendingPathComponent("t.json")
        try AtomicFile.write(try JSONEncoder().encode(journal), to: journalFile)

        var replayed = false
        do {
            _ = try CommitJournal.replayAll(state: scratch.state, root: scratch.output) { _, replay in
                replayed = true
                try replay()
            }
            Issue.record("a journal naming \(naming) outside the root was replayed")
        } catch let error as TourpackError {
            #expect(error.kind == .invalidInput && error.exitCode == 2)
            #expect(error.description.contains(journalFile.path), "\(error)")
        }
        #expect(!replayed)
        #expect(try String(contentsOf: outside, encoding: .utf8) == "keep me")
        #expect(try String(contentsOf: manifest, encoding: .utf8) == "old")
        #expect(try String(contentsOf: temp, encoding: .utf8) == "new")
        #expect(FileManager.default.fileExists(atPath: journalFile.path), "the refused journal is left for a person to look at")
    }

    /// The tour's new audio folder is made whole beside the old one and
    /// swapped in with one exchange. Killed before the swap, after it, or
    /// with no old folder at all, the replay ends at the new package with the
    /// old folder gone; a `.next` folder without a journal is a leftover.
    @Test("a folder swap replays from wherever the kill landed", arguments: ["before the swap", "after the swap", "first package"])
    func folderSwapReplays(killed: String) throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        let live = scratch.output.appendingPathComponent("AudioCache/t", isDirectory: true)
        let next = scratch.output.appendingPathComponent("AudioCache/.t.next-1", isDirectory: true)
        try FileManager.default.createDirectory(at: next, withIntermediateDirectories: true)
        if killed != "first package" {
            try AtomicFile.write(Array("old a".utf8), to: live.appendingPathComponent("a.m4a"))
            try AtomicFile.write(Array("kept b".utf8), to: live.appendingPathComponent("b.m4a"))
            try AtomicFile.hardLink(live.appendingPathComponent("b.m4a"), to: next.appendingPathComponent("b.m4a"), under: scratch.output)
        }
        try AtomicFile.write(Array("new a".utf8), to: next.appendingPathComponent("a.m4a"))
        let manifest = scratch.output.appendingPathComponent("OfflineTours/p/package.json")
        let staging = try StagingArea(state: scratch.state, output: scratch.output)
        let temp = try staging.temporaryURL(for: manifest)
        try AtomicFile.fill(temp, with: Array("{\"new\": true}".utf8))
        let oldInode = AtomicFile.inode(of: live)
        let journal = CommitJournal(
            tourId: "t", moves: [CommitJournal.Move(from: temp.path, to: manifest.path)], removals: [],
            swap: CommitJournal.FolderSwap(live: live.path, next: next.path, liveInode: oldInode))
        try AtomicFile.write(
            try JSONEncoder().encode(journal), to: CommitJournal.folder(state: scratch.state).appendingPathComponent("t.json"))
        if killed == "after the swap" {
            #expect(try AtomicFile.exchange(next, with: live, under: scratch.output))
            #expect(
                try String(contentsOf: next.appendingPathComponent("a.m4a"), encoding: .utf8) == "old a", "the exchange swapped the folders"
            )
        }

        #expect(try CommitJournal.replayAll(state: scratch.state, root: scratch.output) == 1)
        #expect(try String(contentsOf: live.appendingPathComponent("a.m4a"), encoding: .utf8) == "new a")
        if killed != "first package" {
            #expect(try String(contentsOf: live.appendingPathComponent("b.m4a"), encoding: .utf8) == "kept b")
            #expect(AtomicFile.inode(of: live) != oldInode)
        }
        #expect(try String(contentsOf: manifest, encoding: .utf8) == "{\"new\": true}")
        #expect(!FileManager.default.fileExists(atPath: next.path), "the old folder, left at the .next name, is removed")
        #expect(try CommitJournal.replayAll(state: scratch.state, root: scratch.output) == 0)

        // A next folder with no journal is a killed run's leftover.
        let stray = scratch.output.appendingPathComponent("AudioCache/.t.next-2", isDirectory: true)
        try AtomicFile.write(Array("x".utf8), to: stray.appendingPathComponent("a.m4a"))
        #expect(try staging.removeLeftovers(in: Layout(root: scratch.output)) == 1)
        #expect(!FileManager.default.fileExists(atPath: stray.path))
    }

    @Test func leftoversOfAKilledRunAreRemovedFromStagingAndBesideFinals() throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        let staging = try StagingArea(state: scratch.state, output: scratch.output)
        let final = scratch.output.appendingPathComponent("AudioCache/t/a.mp3")
        _ = try staging.temporaryURL(for: final)
        _ = try AtomicFile.temporaryURL(for: final)
        _ = try AtomicFile.temporaryURL(for: scratch.output.appendingPathComponent("OfflineTours/p/package.json"))
        try AtomicFile.write(Array("keep".utf8), to: final)

        #expect(try staging.removeLeftovers(in: Layout(root: scratch.output)) == 3)
        #expect(try FileManager.default.contentsOfDirectory(atPath: final.deletingLastPathComponent().path) == ["a.mp3"])
    }

    @Test func cancellingDiscardsEveryTempStillHeld() throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        let staging = try StagingArea(state: scratch.state, output: scratch.output)
        let kept = try staging.temporaryURL(for: scratch.output.appendingPathComponent("x/one"))
        let dropped = try staging.temporaryURL(for: scratch.output.appendingPathComponent("x/two"))
        try AtomicFile.move(kept, to: scratch.output.appendingPathComponent("x/one"))
        staging.committed(kept)
        staging.discardAll()
        #expect(!FileManager.default.fileExists(atPath: dropped.path))
        #expect(FileManager.default.fileExists(atPath: scratch.output.appendingPathComponent("x/one").path))
    }

    @Test func progressWeighsAudioMapsAndBundling() {
        var progress = BuildProgress()
        progress.record(
            .started(
                BuildStart(
                    tours: 2, items: 4, chunks: 4, characters: 100, formats: [.aac], output: "/o", recoveredCommits: 0,
                    removedTemporaries: 0, cacheHits: 0, billableCharacters: 100)))
        #expect(progress.fraction == 0)
        let item = ItemDone(
            tourId: "a", tourName: "A", poiId: "p", poiName: "P", phase: .detailed, chunks: 1, characters: 25, durationSeconds: 1,
            bytes: [:], reusedFiles: 0)
        progress.record(.itemDone(item))
        progress.record(.itemDone(item))
        #expect(abs(progress.fraction - 0.35) < 1e-9)
        progress.record(.mapsDone(tourID: SafeID(validating: "6f2d1c3e-8a41-4b7e-9c55-1d2e3f4a5b60")!, tileCount: 10))
        progress.record(
            .tourPackaged(
                TourPackaged(
                    tourId: "a", tourName: "A", packages: [], unchangedPackages: [], files: 2, reusedFiles: 0, bytes: 1, superseded: [])))
        #expect(abs(progress.fraction - (0.35 + 0.125 + 0.025)) < 1e-9)
        #expect(progress.currentTour == "A")
        // The other tour fails on its first item and skips the second: the bar still ends at 100%.
        progress.record(.itemFailed(ItemFailure(tourId: "b", tourName: "B", poiId: "q", poiName: "Q", phase: .approaching, message: "x")))
        progress.record(.tourFailed(TourFailure(tourId: "b", tourName: "B", failedItems: 1, skippedItems: 1, reason: "x")))
        #expect(progress.fraction == 1)
        #expect(progress.secondsLeft(elapsed: 10) == 0)
    }

    @Test func summaryExitCodesFollowTheSpec() {
        var summary = BuildSummary()
        #expect(summary.exitCode == 0)
        summary.toursFailed = 1
        #expect(summary.exitCode == 1)
        summary.stoppedEarly = TourpackError.cancelled.description
        summary.stoppedBy = .cancelled
        #expect(summary.exitCode == 130)
    }
}

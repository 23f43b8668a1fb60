import Foundation
import Testing
import TourpackTesting

@testable import TourpackCore
@testable import TourpackKit

#if canImport(Glibc)
import Glibc
#endif

/// A symlink swapped into the output tree after the build's preflight: the
/// staging of a temp and the journalled renames and deletions reach each
/// folder from the root through real folders only, so the link is refused,
/// not followed, and nothing lands outside the root.
@Suite struct SymlinkSwapTests {
    struct Scratch {
        let root = TemporaryFolder.path("tourpack-swap")
        var state: URL { root.appendingPathComponent("state") }
        var output: URL { root.appendingPathComponent("Documents") }
        var outside: URL { root.appendingPathComponent("outside", isDirectory: true) }
        var tourFolder: URL { output.appendingPathComponent("AudioCache/t", isDirectory: true) }

        init() throws {
            try FileManager.default.createDirectory(at: outside, withIntermediateDirectories: true)
        }

        /// Replaces `folder` (made real if missing) with a symlink to `outside`, as a hostile user would mid-build.
        func swapForLink(_ folder: URL) throws {
            try? FileManager.default.removeItem(at: folder)
            try FileManager.default.createDirectory(at: folder.deletingLastPathComponent(), withIntermediateDirectories: true)
            try FileManager.default.createSymbolicLink(at: folder, withDestinationURL: outside)
        }

        var outsideEntries: [String] { (try? FileManager.default.contentsOfDirectory(atPath: outside.path)) ?? ["unreadable"] }
        func remove() { TemporaryFolder.remove(root) }
    }

    /// The refusal names the path and says a symlink was not followed.
    static func isRefusal(_ error: any Error, at path: String) -> Bool {
        guard let error = error as? TourpackError, error.kind == .storageFailed else { return false }
        return error.context.path == path && (error.context.operation ?? "").contains("a symlink, never followed")
    }

    @Test func aTourFolderSwappedBeforePublishIsRefused() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let staging = try StagingArea(state: scratch.state, output: scratch.output)
        let final = scratch.tourFolder.appendingPathComponent("poi_Detailed.m4a")
        let temp = try staging.temporaryURL(for: final)
        try AtomicFile.fill(temp, with: Array("audio".utf8))

        try scratch.swapForLink(scratch.tourFolder)
        let journal = CommitJournal(tourId: "t", moves: [.init(from: temp.path, to: final.path)], removals: [])
        #expect { try journal.commit(state: scratch.state) } throws: { Self.isRefusal($0, at: scratch.tourFolder.path) }
        #expect(scratch.outsideEntries.isEmpty, "written outside: \(scratch.outsideEntries)")
    }

    @Test func audioCacheSwappedBeforePublishIsRefused() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let staging = try StagingArea(state: scratch.state, output: scratch.output)
        let final = scratch.tourFolder.appendingPathComponent("poi_Detailed.m4a")
        let temp = try staging.temporaryURL(for: final)
        try AtomicFile.fill(temp, with: Array("audio".utf8))

        let audioCache = scratch.tourFolder.deletingLastPathComponent()
        try scratch.swapForLink(audioCache)
        try FileManager.default.createDirectory(at: scratch.outside.appendingPathComponent("t"), withIntermediateDirectories: true)
        let journal = CommitJournal(tourId: "t", moves: [.init(from: temp.path, to: final.path)], removals: [])
        #expect { try journal.commit(state: scratch.state) } throws: { Self.isRefusal($0, at: audioCache.path) }
        #expect(scratch.outsideEntries == ["t"])
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.outside.appendingPathComponent("t").path).isEmpty)
    }

    @Test func aTempIsNeverStagedThroughASymlinkedFolder() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let staging = try StagingArea(state: scratch.state, output: scratch.output)
        try scratch.swapForLink(scratch.tourFolder)
        let final = scratch.tourFolder.appendingPathComponent("poi_Detailed.m4a")
        #expect { try staging.temporaryURL(for: final) } throws: { Self.isRefusal($0, at: scratch.tourFolder.path) }
        // A missing folder under a swapped one is not created outside either.
        let deeper = scratch.tourFolder.appendingPathComponent("sub/poi_Detailed.m4a")
        #expect(throws: TourpackError.self) { try staging.temporaryURL(for: deeper) }
        #expect(scratch.outsideEntries.isEmpty, "written outside: \(scratch.outsideEntries)")
    }

    @Test func aSupersededPackageBehindASymlinkIsNotEmptied() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let victim = scratch.outside.appendingPathComponent("package.json")
        try Data("{}".utf8).write(to: victim)
        let package = scratch.output.appendingPathComponent("OfflineTours/old-voice", isDirectory: true)
        try scratch.swapForLink(package)
        let journal = CommitJournal(tourId: "t", moves: [], removals: [package.path])
        #expect { try journal.commit(state: scratch.state) } throws: { Self.isRefusal($0, at: package.path) }
        #expect(FileManager.default.fileExists(atPath: victim.path), "a file outside the root was deleted")
    }

    @Test func aFileIsNeverWrittenThroughASymlinkAtItsName() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let target = scratch.outside.appendingPathComponent("target")
        try Data("keep".utf8).write(to: target)
        let link = scratch.root.appendingPathComponent("link")
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: target)
        #expect(throws: TourpackError.self) { try AtomicFile.fill(link, with: Array("new".utf8)) }
        #expect(try Data(contentsOf: target) == Data("keep".utf8))
    }

    /// Eviction and `cache prune` delete through the same walk: a tour folder
    /// swapped for a link after the scan is refused, and the file it points
    /// at outside the root is left alone.
    @Test func pruningThroughASwappedInLinkIsRefused() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try FileManager.default.createDirectory(at: scratch.tourFolder, withIntermediateDirectories: true)
        try Data("stale".utf8).write(to: scratch.tourFolder.appendingPathComponent("p_Detailed.m4a"))
        let layout = Layout(root: scratch.output)
        let plan = CachePrunePlan(inventory: try CacheInventory.scan(layout, now: Date()), budgets: Budgets(cacheMaxMB: 0), now: Date())
        #expect(plan.removals.map(\.path) == ["AudioCache/t/p_Detailed.m4a"])

        try Data("precious".utf8).write(to: scratch.outside.appendingPathComponent("p_Detailed.m4a"))
        try scratch.swapForLink(scratch.tourFolder)
        #expect(throws: (any Error).self) { try plan.apply(to: layout) }
        #expect(scratch.outsideEntries == ["p_Detailed.m4a"], "a file outside the root was deleted")
    }
}

import Foundation
import GRDB
import Testing
import TourpackTesting

@testable import TourpackAudio
@testable import TourpackCore
@testable import TourpackState

#if canImport(Glibc)
import Glibc
#endif

/// Issue 50: the output index knows each file by its root and its path
/// under that root, so a root moved, copied or mounted elsewhere keeps what
/// it built, and a state an older tourpack keyed by absolute paths migrates.
@Suite(.offThePool) struct OutputRootTests {
    static let relative = "AudioCache/t/p_Detailed.m4a"

    @Test func aRecordedPathSplitsAtItsAudioCacheFolder() {
        func split(_ path: String) -> [String]? { OutputCache.splitRecordedPath(path).map { [$0.root, $0.path] } }
        #expect(split("/srv/a b/Documents/AudioCache/t1/p_Detailed.m4a") == ["/srv/a b/Documents", "AudioCache/t1/p_Detailed.m4a"])
        #expect(split("/AudioCache/x/AudioCache/t/p.m4a") == ["/AudioCache/x", "AudioCache/t/p.m4a"])
        for odd in [
            "/AudioCache/t/p.m4a", "/srv/Documents/OfflineTours/t/package.json", "/srv/AudioCache/t/", "/srv/AudioCache//p.m4a", "p.m4a",
            "",
        ] {
            #expect(split(odd) == nil, "\(odd)")
        }
        let place = OutputCache.place(of: "/elsewhere/notes.txt")
        #expect(place.root.isEmpty && place.path == "/elsewhere/notes.txt")
    }

    /// A moved root's file is the same file: its signature vouches for it
    /// unread, and the row moves with it. A copy's file is hashed, and
    /// taken only with the row's SHA-256; the row is copied, since the
    /// root it came from is still there.
    @Test(arguments: Backend.allCases) func aRootMovedOrCopiedKeepsItsRows(backend: Backend) throws {
        let fixture = try StateFixture(backend)
        defer { fixture.remove() }
        let clock = ManualClock()
        let outputs = try fixture.outputCache(clock: clock)
        let url = try OutputCacheAndEvictionTests.writeFile("p", in: fixture)
        let (audio, key) = (try OutputCacheAndEvictionTests.audio(of: url), OutputCacheAndEvictionTests.key())
        try outputs.record([(url: url, key: key, audio: audio, captions: nil)])
        // Settled, then signed by a build that hashed it.
        Thread.sleep(forTimeInterval: FileSignature.settleSeconds + 0.2)
        #expect(try outputs.reusable(url, key: key, check: .sizeAndHash) == audio)
        try outputs.touch([url])
        #expect(try outputs.entry(url)?.fileSignature != nil)
        // The row's SHA-256 made wrong: only a file that is not read passes.
        let (table, zeros) = (backend == .sqlite ? "outputFile" : "output_file", String(repeating: "0", count: 64))
        try fixture.execute("UPDATE \(table) SET sha256 = '\(zeros)'")

        let moved = fixture.scratch.root.appendingPathComponent("Moved")
        #expect(rename(fixture.scratch.output.path, moved.path) == 0)
        let movedFile = moved.appendingPathComponent(Self.relative)
        #expect(try outputs.reusable(movedFile, key: OutputCacheAndEvictionTests.key(encoder: "e2"), check: .sizeAndHash) == nil)
        #expect(try outputs.reusable(movedFile, key: key, check: .sizeAndHash)?.sha256 == zeros, "the same file: trusted unread")
        clock.advance(seconds: 60)
        try outputs.touch([movedFile])
        #expect(try outputs.lastUsed(relativeTo: moved) == [Self.relative: clock.date()])
        #expect(try outputs.lastUsed(relativeTo: fixture.scratch.output).isEmpty, "the root moved away keeps no rows")
        #expect(try outputs.entry(movedFile)?.fileSignature == FileSignature(path: movedFile.path)?.text)

        let copy = fixture.scratch.root.appendingPathComponent("Copy")
        try FileManager.default.copyItem(at: moved, to: copy)
        let copiedFile = copy.appendingPathComponent(Self.relative)
        #expect(try outputs.reusable(copiedFile, key: key, check: .size) != nil, "a plan judges another root's row by size")
        #expect(try outputs.reusable(copiedFile, key: key, check: .sizeAndHash) == nil, "another file: hashed, and not the row's SHA-256")
        try fixture.execute("UPDATE \(table) SET sha256 = '\(audio.sha256)'")
        #expect(try outputs.reusable(copiedFile, key: key, check: .sizeAndHash) == audio)
        try outputs.touch([copiedFile])
        #expect(try outputs.lastUsed(relativeTo: copy).keys.sorted() == [Self.relative])
        #expect(try outputs.lastUsed(relativeTo: moved).keys.sorted() == [Self.relative], "copied: the root it came from still has it")
        #expect(try outputs.reusable(copiedFile, key: key, check: .sizeAndHash) == audio, "now from its own row")
    }

    /// A state an older tourpack left, keyed by absolute paths, migrates:
    /// every row is split at its AudioCache folder and goes on serving the
    /// root it describes, this one or another; a row of no layout's shape
    /// is dropped.
    @Test(arguments: Backend.allCases) func aStateKeyedByAbsolutePathsMigratesRowByRow(backend: Backend) throws {
        let fixture = try StateFixture(backend)
        defer { fixture.remove() }
        let clock = ManualClock()
        let outputs = try fixture.outputCache(clock: clock)
        let url = try OutputCacheAndEvictionTests.writeFile("p", in: fixture)
        let (audio, key) = (try OutputCacheAndEvictionTests.audio(of: url), OutputCacheAndEvictionTests.key())
        let otherRoot = URL(fileURLWithPath: "/srv/other root/Documents")
        let other = otherRoot.appendingPathComponent("AudioCache/t/q_Detailed.m4a")
        let odd = URL(fileURLWithPath: "/elsewhere/notes.txt")
        try outputs.record([(url, key, audio, nil), (other, key, audio, nil), (odd, key, audio, nil)])
        try fixture.execute(backend == .sqlite ? LegacyOutputIndex.sqlite : LegacyOutputIndex.postgres)
        let absolute: [String] =
            switch backend {
            // Read outside tourpack: opening the state would migrate it.
            case .sqlite:
                try DatabaseQueue(path: fixture.scratch.state.appendingPathComponent(StateDatabase.fileName).path).read { db in
                    try String.fetchAll(db, sql: "SELECT path FROM outputFile")
                }
            case .postgres:
                try PostgresTestServer.shared().psql(fixture.databaseName!, "SELECT path FROM output_file").split(separator: "\n")
                    .map(String.init)
            }
        #expect(absolute.sorted() == ["//elsewhere/notes.txt", other.path, url.path].sorted(), "as the older tourpack kept them")

        let state = try fixture.open()
        #expect(StateFixture.appliedNow(state) == [LegacyOutputIndex.migration])
        let migrated = OutputCache(index: state.outputIndex, maxAgeDays: 30, clock: clock.date)
        #expect(try migrated.reusable(url, key: key, check: .sizeAndHash) == audio)
        #expect(try migrated.lastUsed(relativeTo: fixture.scratch.output).keys.sorted() == [Self.relative])
        #expect(try migrated.lastUsed(relativeTo: otherRoot).keys.sorted() == ["AudioCache/t/q_Detailed.m4a"])
        #expect(try state.outputIndex.entries(paths: ["/elsewhere/notes.txt", "//elsewhere/notes.txt"]).isEmpty, "dropped")
        #expect(try state.outputIndex.lastUsed(root: "").isEmpty)
    }
}

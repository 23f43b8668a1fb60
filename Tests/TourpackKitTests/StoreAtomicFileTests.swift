import Foundation
import Testing
import TourpackTesting

@testable import TourpackCore
@testable import TourpackKit

#if canImport(Glibc)
import Glibc
#endif

/// A fresh folder under the system temp folder, removed by `remove()`.
struct StoreScratch {
    let root: URL

    init() throws {
        root = try TemporaryFolder.make("tourpack-store")
    }

    func remove() { TemporaryFolder.remove(root) }

    func names(in folder: URL) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []).sorted()
    }
}

/// Runs each body on its own thread (real parallelism, off the cooperative
/// pool) and returns when all have finished.
func runOnThreads(_ bodies: [@Sendable () -> Void]) async {
    await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
        let group = DispatchGroup()
        for body in bodies {
            group.enter()
            Thread.detachNewThread {
                body()
                group.leave()
            }
        }
        group.notify(queue: .global()) { done.resume() }
    }
}

@Suite struct StoreAtomicFileTests {
    @Test func writeCreatesFoldersAndLandsCompleteWithNoTempLeft() throws {
        let scratch = try StoreScratch()
        defer { scratch.remove() }
        let target = scratch.root.appendingPathComponent("AudioCache/tour/poi_Guided Tour.m4a")
        let bytes = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        try AtomicFile.write(bytes, to: target)
        #expect(FileManager.default.contents(atPath: target.path).map(Array.init) == bytes)
        #expect(scratch.names(in: target.deletingLastPathComponent()) == ["poi_Guided Tour.m4a"])

        // Replacing keeps one file, the new one.
        try AtomicFile.write(Array("second".utf8), to: target)
        #expect(FileManager.default.contents(atPath: target.path) == Data("second".utf8))
        #expect(scratch.names(in: target.deletingLastPathComponent()) == ["poi_Guided Tour.m4a"])
    }

    @Test func adoptedTempIsInvisibleAtTheFinalPathUntilCommit() throws {
        let scratch = try StoreScratch()
        defer { scratch.remove() }
        let target = scratch.root.appendingPathComponent("a/b/file.opus")
        let temp = try AtomicFile.temporaryURL(for: target)
        #expect(temp.deletingLastPathComponent() == target.deletingLastPathComponent())
        #expect(AtomicFile.isTemporaryName(temp.lastPathComponent))
        #expect(temp.lastPathComponent.hasPrefix(".file.opus.tmp-"))
        // Half an encode: the final path does not exist yet.
        try Data("partial".utf8).write(to: temp)
        #expect(!FileManager.default.fileExists(atPath: target.path))
        try Data("partial and complete".utf8).write(to: temp)
        try AtomicFile.commit(temp: temp, to: target)
        #expect(FileManager.default.contents(atPath: target.path) == Data("partial and complete".utf8))
        #expect(!FileManager.default.fileExists(atPath: temp.path))
        // Two reservations never share a name.
        let a = try AtomicFile.temporaryURL(for: target), b = try AtomicFile.temporaryURL(for: target)
        #expect(a != b)
    }

    @Test func aFolderWhereTheFileShouldBeIsStorageFailedWithPathAndErrno() throws {
        let scratch = try StoreScratch()
        defer { scratch.remove() }
        let target = scratch.root.appendingPathComponent("package.json")
        try FileManager.default.createDirectory(at: target.appendingPathComponent("inside"), withIntermediateDirectories: true)
        do {
            try AtomicFile.write(Array("{}".utf8), to: target)
            Issue.record("writing over a non-empty folder succeeded")
        } catch let error as TourpackError {
            guard error.kind == .storageFailed else { Issue.record("wrong error \(error)"); return }
            #expect(error.context.path == target.path)
            #expect(error.context.errno == EISDIR || error.context.errno == ENOTEMPTY)
            #expect(error.context.operation == "rename")
            #expect(error.description.contains(target.path))
        }
        // The failed temp was cleaned up.
        #expect(scratch.names(in: scratch.root) == ["package.json"])
    }

    @Test func aFileWhereAFolderShouldBeIsENOTDIR() throws {
        let scratch = try StoreScratch()
        defer { scratch.remove() }
        let blocker = scratch.root.appendingPathComponent("OfflineTours")
        try Data("not a folder".utf8).write(to: blocker)
        #expect(throws: TourpackError.storageFailed(path: blocker.path, errno: ENOTDIR, operation: "mkdir")) {
            try AtomicFile.write(Array("{}".utf8), to: blocker.appendingPathComponent("id/package.json"))
        }
    }

    /// Writers filling one site at once (a publish's parallel uploads) make
    /// the same parents at the same instant: none of them may take another's
    /// new folder for a file in the way.
    @Test func writersMakingTheSameFoldersAtOnceAllSucceed() async throws {
        final class Errors: @unchecked Sendable {
            let lock = NSLock()
            var seen: [String] = []
        }
        let errors = Errors()
        let scratch = try StoreScratch()
        defer { scratch.remove() }
        for round in 0..<300 {
            // Every writer waits at the gate, so all of them look for the
            // same missing folders at the same instant.
            let writers = 6
            let gate = DispatchGroup()
            gate.enter()
            let bodies: [@Sendable () -> Void] = (0..<writers).map { writer in
                {
                    gate.wait()
                    let file = scratch.root.appendingPathComponent("r\(round)/site/blobs/sha256/a\(writer % 2)/blob-\(writer)")
                    do { try AtomicFile.createFolder(file.deletingLastPathComponent()) } catch {
                        errors.lock.lock(); errors.seen.append("\(error)"); errors.lock.unlock()
                    }
                }
            }
            let run = Task { await runOnThreads(bodies) }
            try await Task.sleep(for: .milliseconds(2))
            gate.leave()
            await run.value
        }
        #expect(errors.seen.isEmpty, "\(errors.seen.count) writers refused, e.g. \(errors.seen.prefix(2))")
        #expect(scratch.names(in: scratch.root.appendingPathComponent("r0/site/blobs/sha256")) == ["a0", "a1"])
    }

    @Test func aMissingTempFailsTheCommitAndLeavesTheOldFile() throws {
        let scratch = try StoreScratch()
        defer { scratch.remove() }
        let target = scratch.root.appendingPathComponent("x.mp3")
        try AtomicFile.write(Array("old".utf8), to: target)
        let ghost = scratch.root.appendingPathComponent(".x.mp3.tmp-0000000000000000")
        #expect(throws: TourpackError.storageFailed(path: ghost.path, errno: ENOENT, operation: "open temp")) {
            try AtomicFile.commit(temp: ghost, to: target)
        }
        #expect(FileManager.default.contents(atPath: target.path) == Data("old".utf8))
    }

    @Test func staleTempsAreRecognisedAndRemovedButNothingElse() throws {
        let scratch = try StoreScratch()
        defer { scratch.remove() }
        let folder = scratch.root.appendingPathComponent("AudioCache/t")
        try AtomicFile.write(Array("keep".utf8), to: folder.appendingPathComponent("p_Detailed.m4a"))
        let stale = try AtomicFile.temporaryURL(for: folder.appendingPathComponent("p_Approaching.m4a"))
        try Data("half".utf8).write(to: folder.appendingPathComponent(".hidden-but-not-ours"))
        #expect(!AtomicFile.isTemporaryName(".x.tmp-123"))
        #expect(!AtomicFile.isTemporaryName("x.tmp-0123456789abcdef"))
        #expect(!AtomicFile.isTemporaryName(".tmp-0123456789abcdef"))
        #expect(AtomicFile.isTemporaryName(".p_Guided Tour.m4a.tmp-0123456789abcdef"))

        let removed = try AtomicFile.removeStaleTemporaries(in: folder)
        #expect(removed == [stale])
        #expect(scratch.names(in: folder) == [".hidden-but-not-ours", "p_Detailed.m4a"])
        #expect(try AtomicFile.removeStaleTemporaries(in: scratch.root.appendingPathComponent("missing")) == [])
    }

    /// Two writers replace the same file over and over while a reader reads
    /// it: every read is one writer's complete content, never a mix or a
    /// truncated file.
    @Test func concurrentWritersNeverExposeAPartialFile() async throws {
        let scratch = try StoreScratch()
        defer { scratch.remove() }
        let target = scratch.root.appendingPathComponent("shared.bin")
        let contents: [[UInt8]] = [
            [UInt8](repeating: 0x61, count: 256 * 1024),
            [UInt8](repeating: 0x62, count: 300 * 1024 + 7),
        ]
        try AtomicFile.write(contents[0], to: target)

        final class Box: @unchecked Sendable {
            let lock = NSLock()
            var writersLeft = 2
            var reads = 0
            var bad: [String] = []
            var writeErrors: [String] = []
        }
        let box = Box()
        let writer: @Sendable (Int) -> Void = { index in
            for _ in 0..<40 {
                do { try AtomicFile.write(contents[index], to: target) } catch {
                    box.lock.lock(); box.writeErrors.append("\(error)"); box.lock.unlock()
                }
            }
            box.lock.lock(); box.writersLeft -= 1; box.lock.unlock()
        }
        let reader: @Sendable () -> Void = {
            while true {
                box.lock.lock(); let running = box.writersLeft > 0; box.lock.unlock()
                guard let data = FileManager.default.contents(atPath: target.path) else {
                    box.lock.lock(); box.bad.append("file missing"); box.lock.unlock()
                    continue
                }
                let bytes = Array(data)
                let ok = contents.contains(bytes)
                box.lock.lock()
                box.reads += 1
                if !ok { box.bad.append("read \(bytes.count) bytes, first \(bytes.first ?? 0), last \(bytes.last ?? 0)") }
                box.lock.unlock()
                if !running { break }
            }
        }
        await runOnThreads([{ writer(0) }, { writer(1) }, reader])
        #expect(box.writeErrors.isEmpty)
        let badReads = box.bad.count
        #expect(badReads == 0, "partial or mixed reads, e.g. \(box.bad.prefix(3))")
        #expect(box.reads > 0)
        #expect(scratch.names(in: scratch.root) == ["shared.bin"])
    }
}

import Foundation
import Testing
import TourpackTesting

@testable import TourpackCore
@testable import TourpackKit

#if canImport(Glibc)
import Glibc
#endif

@Suite(.offThePool) struct StoreBuildLockTests {
    @Test func aSecondHolderInTheSameProcessIsRefusedWithoutWaiting() async throws {
        let scratch = try StoreScratch()
        defer { scratch.remove() }
        let state = scratch.root.appendingPathComponent("state")
        let first = try await BuildLock.acquire(stateFolder: state, wait: false)
        #expect(first.isHeld)
        #expect(BuildLock.recordedHolder(stateFolder: state) == getpid())

        let lockPath = state.appendingPathComponent("build.lock").path
        await #expect(throws: TourpackError.alreadyBuilding(lockPath: lockPath)) {
            _ = try await BuildLock.acquire(stateFolder: state, wait: false)
        }
        #expect(TourpackError.alreadyBuilding(lockPath: lockPath).description.contains(lockPath))

        first.release()
        #expect(!first.isHeld)
        first.release()  // twice is harmless
        let second = try await BuildLock.acquire(stateFolder: state, wait: false)
        #expect(second.isHeld)
    }

    @Test func aWaiterGetsTheLockWhenTheHolderLetsGo() async throws {
        let scratch = try StoreScratch()
        defer { scratch.remove() }
        let state = scratch.root.appendingPathComponent("state")
        let holder = try await BuildLock.acquire(stateFolder: state, wait: false)
        let got = LockedCounts(false)
        let waiter = Task {
            let lock = try await BuildLock.acquire(stateFolder: state, wait: true)
            got.update { $0 = true }
            return lock
        }
        // Time for a broken lock to let the waiter through: it must still be waiting.
        try await Task.sleep(nanoseconds: 300_000_000)
        #expect(!got.snapshot, "the waiter got the lock while the holder still had it")
        holder.release()
        let acquired = try await waiter.value
        #expect(got.snapshot && acquired.isHeld)
    }

    @Test func cancellingAWaiterStopsIt() async throws {
        let scratch = try StoreScratch()
        defer { scratch.remove() }
        let state = scratch.root.appendingPathComponent("state")
        let holder = try await BuildLock.acquire(stateFolder: state, wait: false)
        let waiter = Task { try await BuildLock.acquire(stateFolder: state, wait: true) }
        try await Task.sleep(nanoseconds: 100_000_000)
        waiter.cancel()
        await #expect(throws: CancellationError.self) { _ = try await waiter.value }
        #expect(holder.isHeld)
    }

    /// Another process (util-linux `flock`) holds the lock: no-wait is refused,
    /// and a waiting acquire succeeds only after that process has let go.
    @Test func anotherProcessExcludesUsUntilItExits() async throws {
        let scratch = try StoreScratch()
        defer { scratch.remove() }
        let state = scratch.root.appendingPathComponent("state")
        try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
        let lockFile = state.appendingPathComponent(BuildLock.fileName)
        let marker = scratch.root.appendingPathComponent("child-done")

        let child = Process()
        child.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        // The child prints once it holds the lock, then writes the marker just before letting go.
        child.arguments = ["flock", "--exclusive", lockFile.path, "sh", "-c", "echo locked; sleep 1; echo done > '\(marker.path)'"]
        let output = Pipe()
        child.standardOutput = output
        try child.run()
        defer { if child.isRunning { child.terminate() } }
        let line = output.fileHandleForReading.availableData
        try #require(String(decoding: line, as: UTF8.self).hasPrefix("locked"), "flock(1) did not take the lock; is util-linux installed?")

        await #expect(throws: TourpackError.alreadyBuilding(lockPath: lockFile.path)) {
            _ = try await BuildLock.acquire(stateFolder: state, wait: false)
        }
        let lock = try await BuildLock.acquire(stateFolder: state, wait: true)
        // The child's last act before releasing was the marker, so it must exist now.
        #expect(FileManager.default.fileExists(atPath: marker.path))
        #expect(lock.isHeld)
        #expect(BuildLock.recordedHolder(stateFolder: state) == getpid())
        child.waitUntilExit()
        #expect(child.terminationStatus == 0)
    }
}

package import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// One build per output root: an exclusive `flock` on `build.lock` in the
/// state folder.
///
/// `flock` belongs to the open file, so the kernel drops it when the process
/// dies, however it dies: a `kill -9` never leaves a stale lock behind, and
/// there is no PID check to get wrong. The PID written into the file is only
/// for a person asking "who holds this?". The lock file is never deleted:
/// unlinking a lock file lets a waiter lock an orphaned inode while a newcomer
/// locks a fresh one. The descriptor is opened `O_CLOEXEC`, so child
/// processes (such as `serve-tts`) never inherit the lock.
///
/// Unchecked `Sendable`: the only mutable state, the descriptor, is guarded
/// by `state`.
package final class BuildLock: @unchecked Sendable {
    /// The lock file's name inside the state folder.
    package static let fileName = "build.lock"

    /// The lock file, for messages.
    package let lockURL: URL
    private let state = NSLock()
    private var descriptor: Int32?
    private var rootDescriptors: [Int32]

    private init(lockURL: URL, descriptor: Int32, rootDescriptors: [Int32] = []) {
        self.rootDescriptors = rootDescriptors
        self.lockURL = lockURL
        self.descriptor = descriptor
    }

    deinit { release() }

    /// Takes the lock of the build state in `stateFolder` (created if missing).
    ///
    /// With `wait`, this suspends until the holder lets go, polling with
    /// `LOCK_NB` and `Task.sleep`, so no thread of the cooperative pool is
    /// blocked and cancelling the task stops the wait (`CancellationError`).
    /// Without `wait`, a held lock is `TourpackError.alreadyBuilding` at once.
    ///
    /// - Parameters:
    ///   - root: the output root, locked too (a `flock` on the folder
    ///     itself, which writes nothing into it), so that two pipelines that
    ///     name the same output with different state folders still take turns.
    ///     Always after the state lock, so two builds never wait on each other.
    ///   - sharingRoot: take the root's lock shared (`LOCK_SH`) instead of
    ///     exclusive. For a shard's build (`--shards`): the workers of one
    ///     fleet own disjoint tours and touch only their own tours' folders,
    ///     so they publish side by side, while a whole-root build, `cache
    ///     prune` or `cache clear` (exclusive) still waits for all of them.
    ///   - command: a command that never waits (`cache prune`), for the
    ///     error's advice; nil when the caller waits unless `--no-wait`.
    package static func acquire(
        stateFolder: URL, root: URL? = nil, sharingRoot: Bool = false, wait: Bool, command: String? = nil
    ) async throws -> BuildLock {
        try await acquire(stateFolder: stateFolder, roots: root.map { [$0] } ?? [], sharingRoot: sharingRoot, wait: wait, command: command)
    }

    /// Takes the state's lock once and then each root's, in order: for
    /// `publish`, which reads every Documents root of a quality ladder. (A
    /// second `acquire` of the same state in one process would wait on itself.)
    package static func acquire(
        stateFolder: URL, roots: [URL], sharingRoot: Bool = false, wait: Bool, command: String? = nil
    ) async throws -> BuildLock {
        try AtomicFile.createFolder(stateFolder)
        let url = stateFolder.appendingPathComponent(fileName)
        let fd = open(url.path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw TourpackError.storageFailed(path: url.path, errno: errno, operation: "open lock") }
        try await hold(fd, path: url.path, wait: wait, command: command)
        var rootDescriptors: [Int32] = []
        for root in roots {
            do {
                try AtomicFile.createFolder(root)
                let folder = open(root.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                guard folder >= 0 else { throw TourpackError.storageFailed(path: root.path, errno: errno, operation: "open output root") }
                // `hold` closes `folder` when it throws.
                try await hold(folder, path: root.path, mode: sharingRoot ? LOCK_SH : LOCK_EX, wait: wait, command: command)
                rootDescriptors.append(folder)
            } catch {
                for folder in rootDescriptors {
                    _ = flock(folder, LOCK_UN)
                    _ = close(folder)
                }
                _ = close(fd)
                throw error
            }
        }
        recordHolder(fd)
        return BuildLock(lockURL: url, descriptor: fd, rootDescriptors: rootDescriptors)
    }

    /// Takes `flock` on `fd` (`LOCK_EX` or `LOCK_SH`), polling; closes it and throws when it cannot.
    package static func hold(_ fd: Int32, path: String, mode: Int32 = LOCK_EX, wait: Bool, command: String? = nil) async throws {
        var pause: UInt64 = 20_000_000
        while flock(fd, mode | LOCK_NB) != 0 {
            let code = errno
            if code == EINTR { continue }
            guard code == EWOULDBLOCK else {
                _ = close(fd)
                throw TourpackError.storageFailed(path: path, errno: code, operation: "flock")
            }
            guard wait else {
                _ = close(fd)
                throw TourpackError.alreadyBuilding(lockPath: path, command: command)
            }
            do {
                try await Task.sleep(nanoseconds: pause)
            } catch {
                _ = close(fd)
                throw error
            }
            pause = min(pause * 2, 250_000_000)
        }
    }

    /// Lets go of the lock; calling it again does nothing. `deinit` calls it too.
    package func release() {
        state.lock()
        defer { state.unlock() }
        guard let fd = descriptor else { return }
        descriptor = nil
        for root in rootDescriptors {
            _ = flock(root, LOCK_UN)
            _ = close(root)
        }
        rootDescriptors = []
        _ = flock(fd, LOCK_UN)
        _ = close(fd)
    }

    /// Whether this object still holds the lock.
    package var isHeld: Bool {
        state.lock()
        defer { state.unlock() }
        return descriptor != nil
    }

    /// The PID the last holder wrote, if the file has one. Informational:
    /// the holder may have exited since.
    package static func recordedHolder(stateFolder: URL) -> Int32? {
        let url = stateFolder.appendingPathComponent(fileName)
        guard let data = FileManager.default.contents(atPath: url.path) else { return nil }
        let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return Int32(text)
    }

    /// Writes our PID into the lock file. Best effort: the lock is what counts.
    private static func recordHolder(_ fd: Int32) {
        let line = Array("\(getpid())\n".utf8)
        guard ftruncate(fd, 0) == 0 else { return }
        _ = line.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
    }
}

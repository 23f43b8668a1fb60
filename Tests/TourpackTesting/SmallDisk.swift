package import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A small file system for the disk-full tests: a size-limited tmpfs
/// mounted on `folder` where this machine lets the tests mount one (root,
/// as CI and the development machine run), else a file-size limit
/// (`RLIMIT_FSIZE`, SIGXFSZ ignored) on every `tourpack` run through `run`,
/// which makes a write past the limit fail (EFBIG) as a full disk would.
/// `method` says which; the tests print it.
///
/// The tmpfs is unmounted by `unmount()` and, whatever happens, when the
/// value goes away.
package final class SmallDisk: @unchecked Sendable {
    package enum Method: String, Sendable {
        case tmpfs = "a size-limited tmpfs"
        case fileSizeLimit = "a file-size limit (RLIMIT_FSIZE)"
    }

    package let folder: URL
    package let bytes: Int
    package let method: Method
    private var mounted: Bool
    private let lock = NSLock()
    private var filler: URL { folder.appendingPathComponent(".small-disk-filler") }

    /// Mounts a tmpfs of `bytes` on `folder` (created if needed), or falls back to a file-size limit of `bytes`.
    package init(_ folder: URL, bytes: Int) throws {
        self.folder = folder
        self.bytes = bytes
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let mount = try? Tool.run("mount", ["-t", "tmpfs", "-o", "size=\(bytes),mode=0755", "tmpfs", folder.path])
        mounted = mount?.status == 0
        method = mounted ? .tmpfs : .fileSizeLimit
        print("SmallDisk: \(folder.path) is \(method.rawValue) of \(bytes) bytes")
    }

    deinit { unmount() }

    /// Unmounts the tmpfs (its files go with it); a second call does nothing.
    package func unmount() {
        lock.withLock {
            guard mounted else { return }
            if (try? Tool.run("umount", [folder.path]))?.status != 0 {
                // Busy (a process still has a file open): detach it now, freed when the last file closes.
                _ = try? Tool.run("umount", ["-l", folder.path])
            }
            mounted = false
        }
    }

    /// The bytes free on the tmpfs.
    package var freeBytes: Int {
        var stats = statvfs()
        guard statvfs(folder.path, &stats) == 0 else { return 0 }
        return Int(stats.f_bavail) * Int(stats.f_frsize)
    }

    /// Fills the tmpfs until at most `free` bytes are left (a filler file;
    /// `makeRoom` removes it). Under a file-size limit there is nothing to
    /// fill: every file is limited instead.
    package func fill(leaving free: Int) throws {
        guard method == .tmpfs else { return }
        let fd = open(filler.path, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        guard fd >= 0 else { throw SmallDiskError("cannot create \(filler.path): errno \(errno)") }
        defer { close(fd) }
        let block = [UInt8](repeating: 0xA5, count: 64 * 1024)
        while freeBytes > free {
            let want = min(block.count, max(4096, freeBytes - free))
            let wrote = block.withUnsafeBytes { write(fd, $0.baseAddress, want) }
            if wrote <= 0 { break }
        }
    }

    /// Removes the filler: the next run has room again.
    package func makeRoom() {
        try? FileManager.default.removeItem(at: filler)
    }

    /// `tourpack` with `arguments`, under the file-size limit when that is the method.
    package func run(_ arguments: [String], in directory: URL, environment: [String: String] = [:]) throws -> Executable.Result {
        try Executable.run(arguments, in: directory, environment: environment, fileSizeLimit: method == .fileSizeLimit ? bytes : nil)
    }
}

package struct SmallDiskError: Error, CustomStringConvertible {
    package var description: String
    init(_ description: String) { self.description = description }
}

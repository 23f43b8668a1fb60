public import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Puts files at their final paths only when they are complete.
///
/// The contract promises that a run killed at any instant leaves a root `validate`
/// accepts. So nothing is ever written in place: bytes go to a temp file in
/// the same folder (same file system, so `rename` is atomic), the temp is
/// fsynced, renamed over the final path, and then the folder is fsynced so
/// the rename itself survives a crash. A reader opening the final path sees
/// either the old file or the new one, never a mix.
///
/// Temps are named `.<final name>.tmp-<16 hex>`: hidden from the app, next to
/// the file they will become, and recognisable by `isTemporaryName(_:)` so
/// `validate` and `removeStaleTemporaries(in:)` can find leftovers of a
/// killed run. Every failure is `TourpackError.storageFailed` with the path,
/// the errno and the operation.
///
/// Files are created and opened with `O_NOFOLLOW`, so a symlink at a temp's
/// or a file's own name is refused (`ELOOP`), never written through. Under an
/// output root, `createFolder(_:under:)`, `move(_:to:under:)` and
/// `remove(_:under:)` reach the folder from the root with
/// `openat(O_NOFOLLOW | O_DIRECTORY)`, one component at a time, so a symlink
/// swapped in for `AudioCache` or a tour folder mid-build is refused too
/// (see `OutputTree`). Folders are still fsynced through symlinks: a state
/// folder may live behind one, and an fsync writes nothing.
public enum AtomicFile {
    /// The marker between the final name and the random suffix of a temp.
    public static let temporaryMarker = ".tmp-"

    /// Writes `bytes` to `url` atomically, creating missing folders.
    public static func write(_ bytes: some ContiguousBytes, to url: URL) throws {
        let temp = try temporaryURL(for: url)
        do {
            // Not synced here: `commit` syncs it once, before the rename.
            try fill(temp, with: bytes, syncing: false)
        } catch {
            discard(temp: temp)
            throw error
        }
        try commit(temp: temp, to: url)
    }

    /// Replaces the file at `url` with `bytes` through a temp and a rename,
    /// with no fsync: for a file whose latest version a power cut may lose
    /// at no cost but a redo (the app's download queue, its plays), written
    /// often on a phone, where each fsync is a flush of the drive's cache.
    /// A killed process leaves the old bytes or the new, never a mix.
    public static func replace(_ bytes: some ContiguousBytes, at url: URL) throws {
        let temp = try temporaryURL(for: url)
        do {
            let fd = try openFile(temp, flags: O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, operation: "open temp")
            defer { _ = close(fd) }
            try bytes.withUnsafeBytes { buffer in try writeAll(buffer, to: fd, path: temp.path) }
            guard rename(temp.path, url.path) == 0 else { throw failure(url, "rename") }
        } catch {
            discard(temp: temp)
            throw error
        }
    }

    /// Writes `bytes` into a temp from `temporaryURL(for:in:)` and fsyncs it,
    /// so a failed write is reported as such before any rename.
    public static func fill(_ temp: URL, with bytes: some ContiguousBytes) throws {
        try fill(temp, with: bytes, syncing: true)
    }

    private static func fill(_ temp: URL, with bytes: some ContiguousBytes, syncing: Bool) throws {
        let fd = try openFile(temp, flags: O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, operation: "open temp")
        defer { _ = close(fd) }
        try bytes.withUnsafeBytes { buffer in try writeAll(buffer, to: fd, path: temp.path) }
        guard !syncing || Platform.sync(fd) == 0 else { throw failure(temp, "fsync") }
    }

    /// Reserves a fresh, empty temp file next to `finalURL` and returns its URL.
    ///
    /// The encoder writes its output here; `commit(temp:to:)` then moves it
    /// into place. The file is created with `O_EXCL`, so two callers never
    /// share a temp. Missing folders on the way are created (and their
    /// parents fsynced). Call `discard(temp:)` if the work is abandoned.
    ///
    /// `folder` puts the temp elsewhere (a staging folder on the same file
    /// system, so the rename stays atomic); by default it sits beside the file.
    public static func temporaryURL(for finalURL: URL, in staging: URL? = nil, creatingFinalFolder: Bool = true) throws -> URL {
        let folder = staging ?? finalURL.deletingLastPathComponent()
        try createFolder(folder)
        if staging != nil, creatingFinalFolder { try createFolder(finalURL.deletingLastPathComponent()) }
        for _ in 0..<8 {
            let suffix = String(UInt64.random(in: .min ... .max), radix: 16)
            let padded = String(repeating: "0", count: 16 - suffix.count) + suffix
            let temp = folder.appendingPathComponent(".\(finalURL.lastPathComponent)\(temporaryMarker)\(padded)")
            let fd = posixOpen(temp.path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
            if fd >= 0 {
                _ = close(fd)
                return temp
            }
            if errno != EEXIST { throw failure(temp, "create temp") }
        }
        throw TourpackError.storageFailed(path: folder.path, errno: EEXIST, operation: "create temp")
    }

    /// Moves a finished temp file to `finalURL`: fsync the temp, rename it
    /// over the final path, fsync the folder.
    ///
    /// Adopts files written by someone else (the encoder). On failure the temp
    /// is removed, so a failed commit leaves the final path as it was and no
    /// leftover behind.
    public static func commit(temp: URL, to finalURL: URL) throws {
        do {
            let fd = try openFile(temp, flags: O_RDONLY | O_NOFOLLOW | O_CLOEXEC, operation: "open temp")
            let synced = Platform.sync(fd) == 0
            let syncErrno = errno
            _ = close(fd)
            guard synced else { throw TourpackError.storageFailed(path: temp.path, errno: syncErrno, operation: "fsync") }
            guard rename(temp.path, finalURL.path) == 0 else { throw failure(finalURL, "rename") }
        } catch {
            discard(temp: temp)
            throw error
        }
        try syncFolder(finalURL.deletingLastPathComponent())
    }

    /// fsyncs a finished file before it is renamed: the first half of
    /// `commit(temp:to:)`, for callers that rename many files in one go.
    public static func syncFile(_ url: URL) throws {
        let fd = try openFile(url, flags: O_RDONLY | O_NOFOLLOW | O_CLOEXEC, operation: "open")
        defer { _ = close(fd) }
        guard Platform.sync(fd) == 0 else { throw failure(url, "fsync") }
    }

    /// Renames a synced temp over its final path, without syncing the folder:
    /// the middle of `commit(temp:to:)`. The caller fsyncs each folder once
    /// afterwards (`syncFolder`), so a batch of renames lands close together.
    public static func move(_ temp: URL, to finalURL: URL) throws {
        guard rename(temp.path, finalURL.path) == 0 else { throw failure(finalURL, "rename") }
    }

    /// Renames a synced temp to `finalURL`, whose folder is reached from
    /// `root` through real folders only: the root is opened as given (it may
    /// be reached through a symlink), each folder below it with
    /// `openat(O_NOFOLLOW)`, and the rename lands in the folder that walk
    /// opened. A symlink or a file on the way is refused, naming the path
    /// and saying it is a symlink; nothing is renamed.
    public static func move(_ temp: URL, to finalURL: URL, under root: URL) throws {
        let folder = try openFolder(finalURL.deletingLastPathComponent(), under: root, create: false)
        defer { _ = close(folder) }
        guard renameat(AT_FDCWD, temp.path, folder, finalURL.lastPathComponent) == 0 else { throw failure(finalURL, "rename") }
    }

    /// `remove(_:)` of a file whose folder is reached from `root` through real folders only (see `move(_:to:under:)`).
    /// A folder that is gone holds nothing to remove.
    @discardableResult
    public static func remove(_ url: URL, under root: URL) throws -> Bool {
        let folder: Int32
        do {
            folder = try openFolder(url.deletingLastPathComponent(), under: root, create: false)
        } catch let error as TourpackError where error.kind == .storageFailed && error.context.errno == ENOENT {
            return false
        }
        defer { _ = close(folder) }
        if unlinkat(folder, url.lastPathComponent, 0) == 0 { return true }
        guard errno == ENOENT else { throw failure(url, "unlink") }
        return false
    }

    /// Creates `folder` and its missing parents below `root`, refusing a
    /// symlink or a file on the way instead of following it. Each new
    /// folder's parent is fsynced.
    public static func createFolder(_ folder: URL, under root: URL) throws {
        _ = close(try openFolder(folder, under: root, create: true))
    }

    /// Opens `folder` from `root`: the root as given, then every component
    /// below it with `O_NOFOLLOW | O_DIRECTORY`, creating missing ones when
    /// `create` is set. A folder not under `root` is opened as given.
    private static func openFolder(_ folder: URL, under root: URL, create: Bool) throws -> Int32 {
        let rootParts = root.standardizedFileURL.pathComponents
        let parts = folder.standardizedFileURL.pathComponents
        let below =
            parts.count >= rootParts.count && Array(parts.prefix(rootParts.count)) == rootParts
            ? Array(parts.dropFirst(rootParts.count)) : []
        let start = below.isEmpty && parts != rootParts ? folder : root
        if create { try createFolder(start) }
        var fd = try openFile(start, flags: O_RDONLY | O_DIRECTORY | O_CLOEXEC, operation: "open folder")
        var path = start.standardizedFileURL
        for name in below {
            path.appendPathComponent(name)
            var next = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            if next < 0, errno == ENOENT, create {
                if mkdirat(fd, name, 0o755) == 0 {
                    guard Platform.sync(fd) == 0 else {
                        let error = failure(path.deletingLastPathComponent(), "fsync folder")
                        _ = close(fd)
                        throw error
                    }
                } else if errno != EEXIST {
                    let error = failure(path, "mkdir")
                    _ = close(fd)
                    throw error
                }
                next = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            }
            guard next >= 0 else {
                // A symlink answers ENOTDIR (O_DIRECTORY) or ELOOP (O_NOFOLLOW): say which it was.
                let code = errno
                var info = stat()
                let isLink = fstatat(fd, name, &info, AT_SYMLINK_NOFOLLOW) == 0 && info.st_mode & S_IFMT == S_IFLNK
                _ = close(fd)
                throw TourpackError.storageFailed(
                    path: path.path, errno: code,
                    operation: isLink ? "open folder (a symlink, never followed under the output root)" : "open folder")
            }
            _ = close(fd)
            fd = next
        }
        return fd
    }

    /// A folder under an output root, opened once through real folders only,
    /// so that renames into it can follow one another with no walk between.
    public final class OpenedFolder {
        let descriptor: Int32
        public let url: URL

        init(descriptor: Int32, url: URL) {
            self.descriptor = descriptor
            self.url = url
        }

        deinit { _ = close(descriptor) }
    }

    /// Opens `folder` (which must exist) from `root` as `openFolder` does, for `move(_:into:)`.
    public static func openForRenames(_ folder: URL, under root: URL) throws -> OpenedFolder {
        OpenedFolder(descriptor: try openFolder(folder, under: root, create: false), url: folder)
    }

    /// Renames a synced temp to `name` in a folder opened by `openForRenames`: one `renameat`.
    public static func move(_ temp: URL, into folder: OpenedFolder, as name: String) throws {
        guard renameat(AT_FDCWD, temp.path, folder.descriptor, name) == 0 else {
            throw failure(folder.url.appendingPathComponent(name), "rename")
        }
    }

    /// Swaps `a` and `b`, two entries of one folder reached from `root`
    /// through real folders only, with one `renameat2(RENAME_EXCHANGE)`: at
    /// no moment is either name missing or half of each. Returns false, having
    /// changed nothing, where the kernel or the file system has no exchange.
    public static func exchange(_ a: URL, with b: URL, under root: URL) throws -> Bool {
        let folder = try openFolder(a.deletingLastPathComponent(), under: root, create: false)
        defer { _ = close(folder) }
        if Platform.exchange(folder, a.lastPathComponent, folder, b.lastPathComponent) == 0 { return true }
        if errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP { return false }
        throw failure(b, "rename (exchange)")
    }

    /// The inode of `url` itself (a symlink is not followed); nil when nothing is there.
    public static func inode(of url: URL) -> UInt64? {
        var info = stat()
        guard lstat(url.path, &info) == 0 else { return nil }
        return UInt64(info.st_ino)
    }

    /// Deletes a folder of files (no subfolders), reached from `root`
    /// through real folders only; one that is gone is fine.
    public static func removeFolder(_ folder: URL, under root: URL) throws {
        let parent: Int32
        do {
            parent = try openFolder(folder.deletingLastPathComponent(), under: root, create: false)
        } catch let error as TourpackError where error.kind == .storageFailed && error.context.errno == ENOENT {
            return
        }
        defer { _ = close(parent) }
        let fd = openat(parent, folder.lastPathComponent, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else {
            if errno == ENOENT { return }
            throw failure(folder, "open folder")
        }
        defer { _ = close(fd) }
        for name in (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? [] {
            guard unlinkat(fd, name, 0) == 0 || errno == ENOENT else { throw failure(folder.appendingPathComponent(name), "unlink") }
        }
        guard unlinkat(parent, folder.lastPathComponent, AT_REMOVEDIR) == 0 || errno == ENOENT else { throw failure(folder, "rmdir") }
        guard Platform.sync(parent) == 0 else { throw failure(folder.deletingLastPathComponent(), "fsync folder") }
    }

    /// Makes `source` also known as `target` (a hard link), both under `root`; for the next tour folder.
    public static func hardLink(_ source: URL, to target: URL, under root: URL) throws {
        let from = try openFolder(source.deletingLastPathComponent(), under: root, create: false)
        defer { _ = close(from) }
        let to = try openFolder(target.deletingLastPathComponent(), under: root, create: false)
        defer { _ = close(to) }
        guard linkat(from, source.lastPathComponent, to, target.lastPathComponent, 0) == 0 else { throw failure(target, "link") }
    }

    /// Removes an abandoned temp file; a temp that is already gone is fine.
    public static func discard(temp: URL) {
        _ = unlink(temp.path)
    }

    /// Deletes a file; one that is already gone counts as deleted. Returns
    /// whether it was there, so a caller knows whether its folder needs an fsync.
    @discardableResult
    public static func remove(_ url: URL) throws -> Bool {
        if unlink(url.path) == 0 { return true }
        guard errno == ENOENT else { throw failure(url, "unlink") }
        return false
    }

    /// Makes `temp` (a fresh temp from `temporaryURL`) a second name of the
    /// finished file `source`: a hard link, so a pack that two packages carry
    /// is written and synced once. Falls back to a copy where links are not allowed.
    public static func link(_ source: URL, to temp: URL) throws {
        _ = unlink(temp.path)
        #if canImport(Glibc)
        let linked = Glibc.link(source.path, temp.path)
        #elseif canImport(Musl)
        let linked = Musl.link(source.path, temp.path)
        #else
        let linked = Darwin.link(source.path, temp.path)
        #endif
        if linked == 0 { return }
        do {
            try FileManager.default.copyItem(at: source, to: temp)
            try syncFile(temp)
        } catch {
            throw TourpackError.storageFailed(
                path: temp.path, errno: errno == 0 ? EIO : errno, operation: "link or copy \(source.lastPathComponent)")
        }
    }

    /// Deletes a folder if it is empty; one that is gone or still holds files is left alone.
    public static func removeFolderIfEmpty(_ folder: URL) throws {
        guard rmdir(folder.path) == 0 || errno == ENOENT || errno == ENOTEMPTY else { throw failure(folder, "rmdir") }
    }

    /// Whether a file name is one of our temps (`.<name>.tmp-<16 hex>`).
    public static func isTemporaryName(_ name: String) -> Bool {
        guard name.hasPrefix("."), let marker = name.range(of: temporaryMarker, options: .backwards) else { return false }
        let suffix = name[marker.upperBound...]
        return marker.lowerBound > name.index(after: name.startIndex)
            && suffix.utf8.count == 16
            && suffix.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }
    }

    /// Deletes the temps a killed run left in `folder` (not recursive) and
    /// returns what it removed, sorted. A missing folder has none.
    ///
    /// Only call this while holding the `BuildLock`: another build's temps
    /// look exactly like leftovers.
    @discardableResult
    public static func removeStaleTemporaries(in folder: URL) throws -> [URL] {
        guard isDirectory(folder) else { return [] }
        let names: [String]
        do { names = try FileManager.default.contentsOfDirectory(atPath: folder.path) } catch {
            throw TourpackError.storageFailed(path: folder.path, operation: "list folder", reason: "\(error)")
        }
        var removed: [URL] = []
        for name in names.sorted() where isTemporaryName(name) {
            let url = folder.appendingPathComponent(name)
            try remove(url)
            removed.append(url)
        }
        if !removed.isEmpty { try syncFolder(folder) }
        return removed
    }

    /// Creates `folder` and any missing parents, fsyncing each new folder's
    /// parent so the new entries survive a crash. An existing folder is fine;
    /// an existing file in the way is `ENOTDIR`.
    public static func createFolder(_ folder: URL) throws {
        // There already, as it nearly always is: one stat, no path worked out.
        if isDirectory(folder) { return }
        let target = folder.standardizedFileURL
        var missing: [URL] = []
        var cursor = target
        while !isDirectory(cursor) {
            if exists(cursor) {
                // Another writer may have made it since the look above.
                if isDirectory(cursor) { break }
                throw TourpackError.storageFailed(path: cursor.path, errno: ENOTDIR, operation: "mkdir")
            }
            missing.append(cursor)
            let parent = cursor.deletingLastPathComponent()
            if parent.path == cursor.path { break }
            cursor = parent
        }
        for url in missing.reversed() {
            if mkdir(url.path, 0o755) != 0 {
                let code = errno
                // Another writer may have made it a moment ago.
                guard code == EEXIST, isDirectory(url) else {
                    throw TourpackError.storageFailed(path: url.path, errno: code == EEXIST ? ENOTDIR : code, operation: "mkdir")
                }
                continue
            }
            try syncFolder(url.deletingLastPathComponent())
        }
    }

    /// fsyncs a folder, which makes the names created or renamed in it durable.
    public static func syncFolder(_ folder: URL) throws {
        let fd = try openFile(folder, flags: O_RDONLY | O_DIRECTORY | O_CLOEXEC, operation: "open folder")
        defer { _ = close(fd) }
        guard Platform.sync(fd) == 0 else { throw failure(folder, "fsync folder") }
    }

    // MARK: POSIX plumbing

    private static func openFile(_ url: URL, flags: Int32, operation: String) throws -> Int32 {
        let fd = posixOpen(url.path, flags, 0o644)
        guard fd >= 0 else { throw failure(url, operation) }
        return fd
    }

    private static func writeAll(_ buffer: UnsafeRawBufferPointer, to fd: Int32, path: String) throws {
        var offset = 0
        while offset < buffer.count {
            let written = posixWrite(fd, buffer.baseAddress! + offset, buffer.count - offset)
            if written < 0 {
                if errno == EINTR { continue }
                throw TourpackError.storageFailed(path: path, errno: errno, operation: "write")
            }
            offset += written
        }
    }

    private static func failure(_ url: URL, _ operation: String) -> TourpackError {
        .storageFailed(path: url.path, errno: errno, operation: operation)
    }

    private static func exists(_ url: URL) -> Bool {
        var info = stat()
        return lstat(url.path, &info) == 0
    }

    private static func isDirectory(_ url: URL) -> Bool {
        var info = stat()
        return stat(url.path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR
    }
}

// `open(2)` and `write(2)` under names that `AtomicFile`'s own members cannot shadow.
private func posixOpen(_ path: String, _ flags: Int32, _ mode: mode_t) -> Int32 {
    open(path, flags, mode)
}

private func posixWrite(_ fd: Int32, _ buffer: UnsafeRawPointer, _ count: Int) -> Int {
    write(fd, buffer, count)
}

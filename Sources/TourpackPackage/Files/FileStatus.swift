#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// What `lstat` says of one entry: its kind (a symbolic link is never
/// followed), its size and the numbers that change when it is written.
///
/// `entries(of:)` reads a whole folder through one descriptor, `readdir`
/// and then `fstatat` on each name, so a folder of a thousand files costs
/// one path walk rather than a thousand: a warm rebuild checks every audio
/// and caption file of the catalogue this way.
package struct FileStatus: Sendable, Hashable {
    package enum Kind: Sendable, Hashable {
        case file, folder, symlink, other
    }

    package var kind: Kind
    /// The size of a regular file; 0 for anything else.
    package var size: Int64
    package var device: UInt64
    package var inode: UInt64
    package var modifiedSeconds: Int
    package var modifiedNanoseconds: Int
    package var changedSeconds: Int
    package var changedNanoseconds: Int

    /// The status of the entry at `path`; nil when there is none.
    package init?(path: String) {
        var info = stat()
        guard lstat(path, &info) == 0 else { return nil }
        self.init(info)
    }

    private init(_ info: stat) {
        switch info.st_mode & S_IFMT {
        case S_IFREG: kind = .file
        case S_IFDIR: kind = .folder
        case S_IFLNK: kind = .symlink
        default: kind = .other
        }
        size = kind == .file ? Int64(info.st_size) : 0
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
        #if canImport(Darwin)
        let (modified, changed) = (info.st_mtimespec, info.st_ctimespec)
        #else
        let (modified, changed) = (info.st_mtim, info.st_ctim)
        #endif
        modifiedSeconds = Int(modified.tv_sec)
        modifiedNanoseconds = Int(modified.tv_nsec)
        changedSeconds = Int(changed.tv_sec)
        changedNanoseconds = Int(changed.tv_nsec)
    }

    /// The entries of the folder at `path` (`.` and `..` left out), in no
    /// particular order, each with its status. An entry removed between the
    /// listing and its `fstatat` is left out. A folder that cannot be opened
    /// or read is `storageFailed` with its errno.
    package static func entries(of path: String) throws(TourpackError) -> [(name: String, status: FileStatus)] {
        guard let folder = opendir(path) else {
            throw .storageFailed(path: path, errno: errno, operation: "list folder")
        }
        defer { closedir(folder) }
        let descriptor = dirfd(folder)
        var found: [(name: String, status: FileStatus)] = []
        while true {
            errno = 0
            guard let entry = readdir(folder) else {
                guard errno == 0 else { throw .storageFailed(path: path, errno: errno, operation: "list folder") }
                return found
            }
            // Stated by its bytes as listed: a name that is not UTF-8 is still
            // found, and shown with its bad bytes replaced.
            var info = stat()
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw -> String? in
                let bytes = raw.prefix { $0 != 0 }
                guard !bytes.elementsEqual([0x2E]), !bytes.elementsEqual([0x2E, 0x2E]),
                    raw.withMemoryRebound(to: CChar.self, { fstatat(descriptor, $0.baseAddress!, &info, AT_SYMLINK_NOFOLLOW) }) == 0
                else { return nil }
                return String(decoding: bytes, as: UTF8.self)
            }
            if let name { found.append((name, FileStatus(info))) }
        }
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// What differs between Linux and Apple's systems for an atomic commit, in
/// one place, so the rest of the package reads the same on both: the
/// exchange of two names in one call, and an fsync that reaches the disk.
enum Platform {
    /// Swaps two names atomically: afterwards each holds what the other did,
    /// and at no moment is either missing. Returns 0, or -1 with `errno` set
    /// (EINVAL, ENOSYS or EOPNOTSUPP where the kernel or the file system has
    /// no exchange).
    static func exchange(_ fromFolder: Int32, _ from: String, _ toFolder: Int32, _ to: String) -> Int32 {
        #if canImport(Darwin)
        return renameatx_np(fromFolder, from, toFolder, to, UInt32(RENAME_SWAP))
        #else
        guard let renameat2 = LinuxRename.renameat2 else {
            errno = ENOSYS
            return -1
        }
        return renameat2(fromFolder, from, toFolder, to, LinuxRename.exchangeFlag)
        #endif
    }

    /// Flushes a file's or a folder's data to the disk. Darwin's fsync
    /// leaves it in the drive's cache; F_FULLFSYNC asks the drive too, and
    /// falls back to fsync where the file system does not support it.
    static func sync(_ descriptor: Int32) -> Int32 {
        #if canImport(Darwin)
        if fcntl(descriptor, F_FULLFSYNC) == 0 { return 0 }
        #endif
        return fsync(descriptor)
    }
}

#if !canImport(Darwin)
/// glibc declares `renameat2` only under `_GNU_SOURCE`, which Swift's Glibc
/// module is not built with, and `RENAME_EXCHANGE` is a macro. The function
/// is looked up once (RTLD_DEFAULT, a null handle on glibc) in the C library already loaded (glibc 2.28 and later
/// export it), so this package needs no C target of its own.
private enum LinuxRename {
    typealias Function = @convention(c) (Int32, UnsafePointer<CChar>, Int32, UnsafePointer<CChar>, UInt32) -> Int32

    /// `RENAME_EXCHANGE` from <linux/fs.h>: `1 << 1`.
    static let exchangeFlag: UInt32 = 1 << 1

    static let renameat2: Function? = {
        guard let symbol = dlsym(nil, "renameat2") else { return nil }
        return unsafeBitCast(symbol, to: Function.self)
    }()
}
#endif

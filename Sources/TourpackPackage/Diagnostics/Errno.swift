import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The text of a POSIX error number, for messages that name the errno.
package func errnoDescription(_ code: Int32) -> String {
    String(cString: strerror(code))
}

extension TourpackError {
    /// A disk that filled up (ENOSPC, EDQUOT), or a file that may grow no
    /// more (EFBIG, a file-size limit): a `storageFailed` whose errno says so. A build stops on one, whichever disk it was: every
    /// further item would fail the same way, after paying for its speech.
    public var isDiskFull: Bool {
        kind == .storageFailed && [ENOSPC, EDQUOT, EFBIG].contains(context.errno ?? 0)
    }
}

/// The errno under an error Foundation threw (a `CocoaError` wraps the
/// POSIX error of the call that failed), when it says one.
package func underlyingErrno(of error: any Error) -> Int32? {
    var current: NSError? = error as NSError
    while let candidate = current {
        if candidate.domain == NSPOSIXErrorDomain { return Int32(candidate.code) }
        current = candidate.userInfo[NSUnderlyingErrorKey] as? NSError
    }
    return nil
}

/// Whether the file system holding `path` has (next to) no room left: how
/// a failure that names no errno (SQLite's "disk I/O error" while it grows
/// its shared-memory file) is told to be a full disk.
package func fileSystemIsFull(at path: String) -> Bool {
    var stats = statvfs()
    guard statvfs(path, &stats) == 0 else { return false }
    return UInt64(stats.f_bavail) * UInt64(stats.f_frsize) < 64 * 1024
}

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

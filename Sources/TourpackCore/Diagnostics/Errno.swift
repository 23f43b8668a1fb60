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

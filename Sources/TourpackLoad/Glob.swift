#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Shell-style file globbing (`../tours/*.json`) through POSIX `glob(3)`.
enum Glob {
    /// Matching regular paths, sorted; a pattern without wildcards matches itself if it exists.
    static func expand(_ pattern: String) -> [String] {
        var undecodable: [String] = []
        return expand(pattern, undecodable: &undecodable)
    }

    /// `expand`, with the matches whose names are not UTF-8 kept apart in
    /// `undecodable`, their other bytes shown as `\xHH`: such a path cannot
    /// be named again from a Swift string (its bytes would be replaced), so
    /// it is reported, never opened under a mangled name.
    static func expand(_ pattern: String, undecodable: inout [String]) -> [String] {
        var result = glob_t()
        defer { globfree(&result) }
        guard glob(pattern, 0, nil, &result) == 0 else { return [] }
        var paths: [String] = []
        for i in 0..<Int(result.gl_pathc) {
            guard let cString = result.gl_pathv[i] else { continue }
            if let path = String(validatingCString: cString) {
                paths.append(path)
            } else {
                let bytes = UnsafeBufferPointer(
                    start: UnsafeRawPointer(cString).assumingMemoryBound(to: UInt8.self), count: strlen(cString))
                undecodable.append(
                    bytes.map { $0 >= 0x20 && $0 < 0x7F ? String(UnicodeScalar($0)) : "\\x" + String($0, radix: 16, uppercase: true) }
                        .joined())
            }
        }
        return paths.sorted()
    }
}

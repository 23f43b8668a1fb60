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
        var result = glob_t()
        defer { globfree(&result) }
        guard glob(pattern, 0, nil, &result) == 0 else { return [] }
        var paths: [String] = []
        for i in 0..<Int(result.gl_pathc) {
            if let cString = result.gl_pathv[i] { paths.append(String(cString: cString)) }
        }
        return paths.sorted()
    }
}

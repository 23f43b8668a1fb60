public import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The rule that keeps a build's writes inside the output root, checked
/// before the first request.
///
/// `AudioCache`, `OfflineTours` and every tour or package folder in them
/// must be real folders inside the root, or absent; a file the build will
/// replace (audio, package.json, tiles.mbtiles) must not be a symlink. A
/// symlink there would carry the build's files (and, on another file system,
/// its temps) out of the root, so it is refused with exit 2, naming the path
/// and what it is. Each entry is looked at with `lstat`, never `stat`: a link
/// is judged as the link it is. The root itself may be reached through a
/// symlink; it is resolved once (`realPath`) and the build writes under that.
///
/// This is the check up front. At publish time `AtomicFile.move(_:to:under:)`
/// reaches each folder from the root with `openat(O_NOFOLLOW)`, so a link
/// swapped in mid-build is refused too.
public enum OutputTree {
    /// `realpath(3)` of the deepest existing ancestor, then the rest as
    /// written: the real place of a path that may not exist yet.
    public static func realPath(_ url: URL) -> URL {
        var existing = url.standardizedFileURL
        var rest: [String] = []
        while true {
            if let resolved = realpath(existing.path, nil) {
                defer { free(resolved) }
                var real = URL(fileURLWithPath: String(cString: resolved), isDirectory: true)
                for component in rest.reversed() { real.appendPathComponent(component) }
                return real.standardizedFileURL
            }
            let parent = existing.deletingLastPathComponent()
            if parent.path == existing.path { return url.standardizedFileURL }
            rest.append(existing.lastPathComponent)
            existing = parent
        }
    }

    /// Whether `inner` is `outer` or lies inside it, both by their real paths.
    public static func isSameOrInside(_ inner: URL, _ outer: URL) -> Bool {
        let innerParts = realPath(inner).pathComponents
        let outerParts = realPath(outer).pathComponents
        return innerParts.count >= outerParts.count && Array(innerParts.prefix(outerParts.count)) == outerParts
    }

    /// What an entry is, by `lstat`.
    package enum Kind: Equatable {
        case absent, folder, symlink, file, other
    }

    package static func kind(_ url: URL) -> Kind {
        var info = stat()
        guard lstat(url.path, &info) == 0 else { return .absent }
        switch info.st_mode & S_IFMT {
        case S_IFDIR: return .folder
        case S_IFLNK: return .symlink
        case S_IFREG: return .file
        default: return .other
        }
    }

    /// What each entry of `folder` is, by name, from one listing: the
    /// directory entry's own type (`d_type`, which like `lstat` does not
    /// follow a link), and `lstat` only where the file system does not
    /// give it. Empty when the folder cannot be read (absent: nothing in it
    /// to refuse).
    package static func entries(of folder: URL) -> [String: Kind] {
        guard let stream = opendir(folder.path) else { return [:] }
        defer { closedir(stream) }
        var found: [String: Kind] = [:]
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name == "." || name == ".." { continue }
            switch Int32(entry.pointee.d_type) {
            case Int32(DT_DIR): found[name] = .folder
            case Int32(DT_LNK): found[name] = .symlink
            case Int32(DT_REG): found[name] = .file
            case Int32(DT_UNKNOWN): found[name] = kind(folder.appendingPathComponent(name))
            default: found[name] = .other
            }
        }
        return found
    }

    /// Why `folder` cannot take the build's files, or nil when it is a real folder or absent.
    package static func folderProblem(_ folder: URL) -> String? {
        let found = kind(folder)
        return found == .absent || found == .folder ? nil : describe(folder, as: found, wanted: "a folder")
    }

    package static func describe(_ url: URL, as found: Kind, wanted: String) -> String {
        switch found {
        case .symlink:
            let target = (try? FileManager.default.destinationOfSymbolicLink(atPath: url.path)).map { " to \($0)" } ?? ""
            return "\(url.path) is a symlink\(target), not \(wanted)"
        case .file: return "\(url.path) is a file, not \(wanted)"
        case .folder: return "\(url.path) is a folder, not \(wanted)"
        case .other, .absent: return "\(url.path) is neither a file nor a folder, not \(wanted)"
        }
    }
}

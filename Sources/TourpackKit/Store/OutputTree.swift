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

    /// Refuses (exit 2) a tree a build of `plan` in `formats` with `voice` could
    /// write through: a symlinked or non-folder `AudioCache`, `OfflineTours`,
    /// tour or package folder, or a symlink at a file the build will replace.
    /// Every problem is listed in one error. Reads only; creates nothing.
    public static func check(_ layout: Layout, plan: BuildPlan, formats: [AudioFormat], voice: VoicePreset) throws {
        var problems: [String] = []
        for top in [Layout.audioCacheFolder, Layout.offlineToursFolder] {
            let folder = layout.root.appendingPathComponent(top, isDirectory: true)
            if let problem = folderProblem(folder) {
                problems.append(problem)
                continue
            }
            // Every tour or package folder, planned or not: leftovers are
            // swept and superseded packages removed in each of them.
            let names = ((try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []).sorted()
            for name in names where kind(folder.appendingPathComponent(name)) == .symlink {
                problems.append(describe(folder.appendingPathComponent(name), as: .symlink, wanted: "a folder"))
            }
        }
        var folders: [URL: [URL]] = [:]
        for tourPlan in plan.tours {
            let tourID = tourPlan.tour.id
            let audio = layout.audioFolder(tourID: tourID).url
            folders[audio, default: []] += tourPlan.items.flatMap { item in
                formats.map { layout.audioFile(tourID: tourID, poiID: item.poiID, phase: item.phase, format: $0).url }
            }
            for format in formats {
                let packageID = PackageID.make(tourID: tourID, voice: voice, format: format)
                folders[layout.packageFolder(packageID: packageID).url, default: []] +=
                    [layout.manifest(packageID: packageID).url, layout.tilePack(packageID: packageID).url]
            }
        }
        for (folder, files) in folders.sorted(by: { $0.key.path < $1.key.path }) {
            if let problem = folderProblem(folder) {
                if !problems.contains(problem) { problems.append(problem) }
                continue
            }
            for file in files {
                let found = kind(file)
                if found == .symlink || found == .folder { problems.append(describe(file, as: found, wanted: "a file")) }
            }
        }
        guard !problems.isEmpty else { return }
        throw TourpackError.invalidInput(
            "the output tree is unsafe to write: \(problems.joined(separator: "; ")). "
                + "AudioCache, OfflineTours and their tour and package folders must be real folders inside the output root "
                + "(or absent), and the files a build replaces must not be symlinks; nothing was requested or written")
    }

    /// What an entry is, by `lstat`.
    enum Kind: Equatable {
        case absent, folder, symlink, file, other
    }

    static func kind(_ url: URL) -> Kind {
        var info = stat()
        guard lstat(url.path, &info) == 0 else { return .absent }
        switch info.st_mode & S_IFMT {
        case S_IFDIR: return .folder
        case S_IFLNK: return .symlink
        case S_IFREG: return .file
        default: return .other
        }
    }

    /// Why `folder` cannot take the build's files, or nil when it is a real folder or absent.
    private static func folderProblem(_ folder: URL) -> String? {
        let found = kind(folder)
        return found == .absent || found == .folder ? nil : describe(folder, as: found, wanted: "a folder")
    }

    private static func describe(_ url: URL, as found: Kind, wanted: String) -> String {
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

import Foundation
import TourpackCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Everything under a Documents root, listed once: the package folders to
/// check, every file under `AudioCache` with its size, the tile packs and
/// caption files in the package folders, and what does not belong (temps of an interrupted
/// write, SQLite's side files beside a pack, entries outside the layout).
/// `tourpack install`'s own folder (`Layout.installFolder`, a real folder
/// at the top) is not the app's and is passed over.
///
/// The walk never follows a symlink: a link under AudioCache or
/// OfflineTours (or either folder as a link) is listed in `symlinks` and
/// nowhere else, so a link to a folder outside the root can neither be
/// walked into nor make the walk loop. Sizes are `lstat` sizes, what the files take on the
/// phone before block rounding.
struct BundleInventory: Sendable {
    struct Entry: Sendable, Hashable {
        /// Relative to the root, slash-separated.
        var path: String
        var size: Int64
        var isSymlink: Bool
    }

    /// `OfflineTours/<name>` folders, sorted by name.
    var packageFolders: [String] = []
    /// Package folders that hold no package.json.
    var foldersWithoutManifest: [String] = []
    /// Every non-folder entry under `AudioCache`, sorted by path (temps excluded).
    var audioCacheFiles: [Entry] = []
    /// The sum of `audioCacheFiles` and the temps under `AudioCache`.
    var audioCacheBytes: Int64 = 0
    /// `OfflineTours/<name>/tiles.mbtiles` files, sorted by path: stray unless that folder's package.json names it.
    var tilePacks: [Entry] = []
    /// `OfflineTours/<name>/captions/*.vtt` files, sorted by path: stray unless that folder's package.json lists them.
    var captionFiles: [Entry] = []
    /// `tiles.mbtiles-journal`, `-wal` and `-shm` beside a pack: a pack that was
    /// opened for writing in place, or copied mid-write. The app never reads them.
    var tilePackSideFiles: [String] = []
    /// Temp files (`AtomicFile.isTemporaryName`) anywhere in the layout.
    var temporaries: [String] = []
    /// A symlink at or under AudioCache or OfflineTours.
    struct Link: Sendable, Hashable {
        /// Relative to the root, slash-separated.
        var path: String
        /// What the link says, as written (`readlink`).
        var target: String
    }

    /// Every symlink at or under AudioCache and OfflineTours, sorted by path; none is followed.
    var symlinks: [Link] = []
    /// Entries in places where the layout has none (`OfflineTours/x.txt`, `OfflineTours/<id>/notes`, `Documents/junk`).
    var misplaced: [String] = []

    init(root: URL) throws {
        let top = try Self.list(root)
        let rootPath = root.path
        for name in top {
            let info = Self.info(rootPath, name)
            if name == Layout.installFolder, info.isFolder {
                // `tourpack install`'s staging and memory of the site: not the app's, never shipped.
                continue
            } else if AtomicFile.isTemporaryName(name) {
                temporaries.append(name)
            } else if name == Layout.audioCacheFolder || name == Layout.offlineToursFolder, info.isSymlink {
                addLink(root, name, relative: name)
            } else if name == Layout.audioCacheFolder, info.isFolder {
                walkAudioCache(root.appendingPathComponent(name), relative: name)
            } else if name == Layout.offlineToursFolder, info.isFolder {
                try walkOfflineTours(root.appendingPathComponent(name))
            } else {
                misplaced.append(name)
            }
        }
        audioCacheFiles.sort { $0.path < $1.path }
        tilePacks.sort { $0.path < $1.path }
        captionFiles.sort { $0.path < $1.path }
        tilePackSideFiles.sort()
        temporaries.sort()
        misplaced.sort()
        symlinks.sort { $0.path < $1.path }
    }

    private mutating func addLink(_ folder: URL, _ name: String, relative: String) {
        let target = (try? FileManager.default.destinationOfSymbolicLink(atPath: folder.appendingPathComponent(name).path)) ?? "?"
        symlinks.append(Link(path: relative, target: target))
    }

    private mutating func walkOfflineTours(_ folder: URL) throws {
        let base = folder.path
        for name in try Self.list(folder) {
            let relative = "\(Layout.offlineToursFolder)/\(name)"
            let info = Self.info(base, name)
            if AtomicFile.isTemporaryName(name) {
                temporaries.append(relative)
                continue
            }
            if info.isSymlink {
                addLink(folder, name, relative: relative)
                continue
            }
            guard info.isFolder else {
                misplaced.append(relative)
                continue
            }
            let packageFolder = folder.appendingPathComponent(name)
            var hasManifest = false
            let packagePath = packageFolder.path
            for inner in (try? Self.list(packageFolder)) ?? [] {
                let innerInfo = Self.info(packagePath, inner)
                if innerInfo.isSymlink { addLink(packageFolder, inner, relative: "\(relative)/\(inner)") }
                if inner == Layout.manifestFileName {
                    hasManifest = true
                } else if innerInfo.isSymlink {
                    continue
                } else if inner == Layout.manifestFileName {
                    hasManifest = true
                } else if inner == Layout.captionsFolderName, innerInfo.isFolder {
                    walkCaptions(packageFolder.appendingPathComponent(inner), relative: "\(relative)/\(inner)")
                } else if inner == Layout.tilePackFileName, !innerInfo.isFolder {
                    tilePacks.append(Entry(path: "\(relative)/\(inner)", size: innerInfo.size, isSymlink: innerInfo.isSymlink))
                } else if Self.sideFileSuffixes.contains(where: { inner == Layout.tilePackFileName + $0 }) {
                    tilePackSideFiles.append("\(relative)/\(inner)")
                } else if AtomicFile.isTemporaryName(inner) {
                    temporaries.append("\(relative)/\(inner)")
                } else {
                    misplaced.append("\(relative)/\(inner)")
                }
            }
            if hasManifest { packageFolders.append(name) } else { foldersWithoutManifest.append(relative) }
        }
    }

    /// A package's `captions` folder: `.vtt` files, temps of the build's
    /// atomic writes; links are listed and not followed; anything else is misplaced.
    private mutating func walkCaptions(_ folder: URL, relative: String) {
        let base = folder.path
        for name in (try? Self.list(folder)) ?? [] {
            let path = "\(relative)/\(name)"
            let info = Self.info(base, name)
            if info.isSymlink {
                addLink(folder, name, relative: path)
            } else if AtomicFile.isTemporaryName(name) {
                temporaries.append(path)
            } else if !info.isFolder, name.hasSuffix(".vtt") {
                captionFiles.append(Entry(path: path, size: info.size, isSymlink: false))
            } else {
                misplaced.append(path)
            }
        }
    }

    /// The files SQLite keeps beside a database it writes to.
    static let sideFileSuffixes = ["-journal", "-wal", "-shm"]

    private mutating func walkAudioCache(_ folder: URL, relative: String) {
        let base = folder.path
        for name in (try? Self.list(folder)) ?? [] {
            let path = "\(relative)/\(name)"
            let info = Self.info(base, name)
            if info.isSymlink {
                addLink(folder, name, relative: path)
                continue
            }
            if info.isFolder {
                walkAudioCache(folder.appendingPathComponent(name), relative: path)
                continue
            }
            audioCacheBytes += info.size
            if AtomicFile.isTemporaryName(name) {
                temporaries.append(path)
            } else {
                audioCacheFiles.append(Entry(path: path, size: info.size, isSymlink: info.isSymlink))
            }
        }
    }

    /// The names in a folder, sorted; hidden names included (temps are hidden).
    private static func list(_ folder: URL) throws -> [String] {
        do {
            return try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
        } catch {
            throw TourpackError.storageFailed(path: folder.path, operation: "list folder", reason: "\(error)")
        }
    }

    /// `lstat` facts: a real folder (not a link to one), the size, whether it is a link.
    /// `folder` is a path: a URL per file cost more than the `lstat`.
    private static func info(_ folder: String, _ name: String) -> (isFolder: Bool, size: Int64, isSymlink: Bool) {
        var status = stat()
        guard lstat("\(folder)/\(name)", &status) == 0 else { return (false, 0, false) }
        let kind = status.st_mode & S_IFMT
        return (kind == S_IFDIR, kind == S_IFREG ? Int64(status.st_size) : 0, kind == S_IFLNK)
    }
}

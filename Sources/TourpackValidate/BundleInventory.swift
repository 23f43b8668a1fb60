package import Foundation
import TourpackCore
import TourpackPlan

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
package struct BundleInventory: Sendable {
    package struct Entry: Sendable, Hashable {
        /// Relative to the root, slash-separated.
        package var path: String
        package var size: Int64
        package var isSymlink: Bool
    }

    /// `OfflineTours/<name>` folders, sorted by name.
    package var packageFolders: [String] = []
    /// Package folders that hold no package.json.
    var foldersWithoutManifest: [String] = []
    /// Every non-folder entry under `AudioCache`, sorted by path (temps excluded).
    package var audioCacheFiles: [Entry] = []
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
    package var temporaries: [String] = []
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

    package init(root: URL) throws {
        var audioCache: URL?
        var offlineTours: URL?
        for (name, info) in try Self.list(root) {
            if name == Layout.installFolder, info.kind == .folder {
                // `tourpack install`'s staging and memory of the site: not the app's, never shipped.
                continue
            } else if AtomicFile.isTemporaryName(name) {
                temporaries.append(name)
            } else if name == Layout.audioCacheFolder || name == Layout.offlineToursFolder, info.kind == .symlink {
                addLink(root, name, relative: name)
            } else if name == Layout.audioCacheFolder, info.kind == .folder {
                audioCache = root.appendingPathComponent(name)
            } else if name == Layout.offlineToursFolder, info.kind == .folder {
                offlineTours = root.appendingPathComponent(name)
            } else {
                misplaced.append(name)
            }
        }
        // The two trees are walked side by side: each is a folder walk and
        // an `lstat` a file, and a catalogue has about as many caption files as audio files.
        let (audioCacheFolder, offlineToursFolder) = (audioCache, offlineTours)
        let parts = try sideBySide(
            {
                var part = BundleInventory()
                if let audioCacheFolder { part.walkAudioCache(audioCacheFolder, relative: Layout.audioCacheFolder) }
                return part
            },
            {
                var part = BundleInventory()
                if let offlineToursFolder { try part.walkOfflineTours(offlineToursFolder) }
                return part
            })
        add(parts.0)
        add(parts.1)
        audioCacheFiles.sort { $0.path < $1.path }
        tilePacks.sort { $0.path < $1.path }
        captionFiles.sort { $0.path < $1.path }
        tilePackSideFiles.sort()
        temporaries.sort()
        misplaced.sort()
        symlinks.sort { $0.path < $1.path }
    }

    private init() {}

    /// Takes in what a walk of one part of the tree found.
    private mutating func add(_ part: BundleInventory) {
        packageFolders += part.packageFolders
        foldersWithoutManifest += part.foldersWithoutManifest
        audioCacheFiles += part.audioCacheFiles
        audioCacheBytes += part.audioCacheBytes
        tilePacks += part.tilePacks
        captionFiles += part.captionFiles
        tilePackSideFiles += part.tilePackSideFiles
        temporaries += part.temporaries
        symlinks += part.symlinks
        misplaced += part.misplaced
    }

    private mutating func addLink(_ folder: URL, _ name: String, relative: String) {
        let target = (try? FileManager.default.destinationOfSymbolicLink(atPath: folder.appendingPathComponent(name).path)) ?? "?"
        symlinks.append(Link(path: relative, target: target))
    }

    private mutating func walkOfflineTours(_ folder: URL) throws {
        for (name, info) in try Self.list(folder) {
            let relative = "\(Layout.offlineToursFolder)/\(name)"
            if AtomicFile.isTemporaryName(name) {
                temporaries.append(relative)
                continue
            }
            if info.kind == .symlink {
                addLink(folder, name, relative: relative)
                continue
            }
            guard info.kind == .folder else {
                misplaced.append(relative)
                continue
            }
            let packageFolder = folder.appendingPathComponent(name)
            var hasManifest = false
            for (inner, innerInfo) in (try? Self.list(packageFolder)) ?? [] {
                if innerInfo.kind == .symlink { addLink(packageFolder, inner, relative: "\(relative)/\(inner)") }
                if inner == Layout.manifestFileName {
                    hasManifest = true
                } else if innerInfo.kind == .symlink {
                    continue
                } else if inner == Layout.captionsFolderName, innerInfo.kind == .folder {
                    walkCaptions(packageFolder.appendingPathComponent(inner), relative: "\(relative)/\(inner)")
                } else if inner == Layout.tilePackFileName, innerInfo.kind != .folder {
                    tilePacks.append(Entry(path: "\(relative)/\(inner)", size: innerInfo.size, isSymlink: false))
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
        for (name, info) in (try? Self.list(folder)) ?? [] {
            let path = "\(relative)/\(name)"
            if info.kind == .symlink {
                addLink(folder, name, relative: path)
            } else if AtomicFile.isTemporaryName(name) {
                temporaries.append(path)
            } else if info.kind != .folder, name.hasSuffix(".vtt") {
                captionFiles.append(Entry(path: path, size: info.size, isSymlink: false))
            } else {
                misplaced.append(path)
            }
        }
    }

    /// The files SQLite keeps beside a database it writes to.
    static let sideFileSuffixes = ["-journal", "-wal", "-shm"]

    private mutating func walkAudioCache(_ folder: URL, relative: String) {
        for (name, info) in (try? Self.list(folder)) ?? [] {
            let path = "\(relative)/\(name)"
            if info.kind == .symlink {
                addLink(folder, name, relative: path)
                continue
            }
            if info.kind == .folder {
                walkAudioCache(folder.appendingPathComponent(name), relative: path)
                continue
            }
            audioCacheBytes += info.size
            if AtomicFile.isTemporaryName(name) {
                temporaries.append(path)
            } else {
                audioCacheFiles.append(Entry(path: path, size: info.size, isSymlink: false))
            }
        }
    }

    /// The entries of a folder with their `lstat` facts, sorted by name;
    /// hidden names included (temps are hidden).
    private static func list(_ folder: URL) throws -> [(name: String, status: FileStatus)] {
        try FileStatus.entries(of: folder.path).sorted { $0.name < $1.name }
    }
}

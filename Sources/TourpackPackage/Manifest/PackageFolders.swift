package import Foundation

/// The package folders of a Documents root, and each one's package.json
/// read and decoded: the one reading of a root's packages. The app's
/// library (`PackageOnDisk`), the build's index of what a root holds, the
/// cache's inventory, the publisher and the review all start here, and
/// each then decides what a folder that does not read means to it.
///
/// A package.json read here is decoded and nothing more: that it belongs
/// in its folder and names only files in the package's own places is
/// `PackageFiles.of`'s check, which the install and the library make.
package enum PackageFolders {
    /// One package.json as it is on disk.
    package struct Manifest: Sendable {
        package var manifest: PackageManifest
        /// The file's bytes, as the catalogue hashes them.
        package var bytes: [UInt8]
    }

    /// The names under `OfflineTours`, sorted, hidden ones (a leading dot)
    /// left out: the folders that may hold a package. Throws when there is
    /// no `OfflineTours` folder to list.
    package static func names(documents: URL) throws -> [String] {
        let folder = documents.path + "/" + Layout.offlineToursFolder
        return try FileManager.default.contentsOfDirectory(atPath: folder).filter { !$0.hasPrefix(".") }.sorted()
    }

    /// `OfflineTours/<name>/package.json`, relative to the root: how a
    /// message names the file.
    package static func manifestPath(_ name: String) -> String {
        Layout.offlineToursFolder + "/" + name + "/" + Layout.manifestFileName
    }

    /// Folder `name`'s package.json, read and decoded; nil when it holds
    /// none that can be opened.
    ///
    /// - Parameter limit: the most bytes the file may have; a larger one
    ///   is refused before it is read.
    /// - Throws: `TourpackError.invalidInput`, naming the file relative to
    ///   the root, when it is larger than `limit` or is not a package.json.
    package static func read(documents: URL, folder name: String, limit: Int64? = nil) throws -> Manifest? {
        // Paths as strings: no URL built for each package.
        let relative = manifestPath(name)
        let path = documents.path + "/" + relative
        // The entry's own size (`lstat`): a symbolic link is measured, not followed.
        if let limit, let size = FileStatus(path: path)?.size, size > limit {
            throw TourpackError.invalidInput("\(relative): \(size) bytes, more than the \(limit) a package.json may have")
        }
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        let bytes = Array(data)
        do {
            return Manifest(manifest: try PackageManifest.decode(bytes), bytes: bytes)
        } catch {
            throw TourpackError.invalidInput("\(relative): not a package.json (\(error))")
        }
    }
}

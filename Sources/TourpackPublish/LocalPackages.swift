import Crypto
package import Foundation
package import TourpackCore
package import TourpackKit
import TourpackMaps

/// The packages of a Documents root, as `publish` uploads them: each
/// package.json's exact bytes, and the files it names with their SHA-256
/// (which `validate`, run first, has checked against the files).
package struct LocalPackage: Sendable {
    package var manifest: PackageManifest
    /// package.json as built: the bytes the site stores and the catalogue hashes.
    package var manifestBytes: [UInt8]
    package var manifestSHA256: String
    package var files: [File]

    /// One file a device installs.
    package struct File: Sendable, Hashable {
        /// Relative to the root, as package.json names it.
        package var path: String
        package var url: URL
        package var sha256: String
        package var sizeBytes: Int64
        package var contentType: String
    }

    /// Where the site keeps this package.json: named by its bytes' SHA-256.
    package var manifestKey: String {
        CatalogPackage.manifestPath(packageId: manifest.packageId, sha256: manifestSHA256)
    }

    /// The catalogue's entry for it.
    package var entry: CatalogEntry {
        CatalogEntry(manifest: manifest, manifestPath: manifestKey, manifestSHA256: manifestSHA256)
    }

    /// Every package under `root`'s `OfflineTours`, by package ID.
    package static func read(root: URL) throws -> [LocalPackage] {
        let layout = Layout(root: root)
        let tours = root.appendingPathComponent(Layout.offlineToursFolder)
        let names: [String]
        do { names = try FileManager.default.contentsOfDirectory(atPath: tours.path) } catch {
            throw TourpackError.invalidInput("\(tours.path): no \(Layout.offlineToursFolder) folder; is this a Documents root?")
        }
        var packages: [LocalPackage] = []
        for name in names.sorted() where !name.hasPrefix(".") {
            let url = tours.appendingPathComponent(name).appendingPathComponent(Layout.manifestFileName)
            guard let data = FileManager.default.contents(atPath: url.path) else { continue }
            let manifest = try PackageManifest.read(from: url)
            var files = try manifest.audio.map { entry in
                File(
                    path: entry.path, url: try layout.resolve(relativePath: entry.path), sha256: entry.sha256, sizeBytes: entry.sizeBytes,
                    contentType: SiteLayout.contentType(for: entry.format))
            }
            if let path = manifest.mapTiles.file, let sha256 = manifest.mapTiles.sha256, let size = manifest.mapTiles.sizeBytes {
                files.append(
                    File(
                        path: path, url: try layout.resolve(relativePath: path), sha256: sha256, sizeBytes: size,
                        contentType: SiteLayout.tilePackContentType))
            }
            packages.append(
                LocalPackage(
                    manifest: manifest, manifestBytes: Array(data),
                    manifestSHA256: SHA256.hash(data: data).map { String(format: "%02x", $0) }.joined(), files: files))
        }
        return packages
    }
}

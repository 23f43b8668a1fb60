import Crypto
package import Foundation
package import TourpackCore
import TourpackKit
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

    /// Where the site keeps this package.json.
    package var manifestKey: String {
        CatalogPackage.manifestPath(packageId: manifest.packageId, contentHash: manifest.contentHash)
    }

    /// Where the site keeps this package.json when another one of the same
    /// content (another expiry) already has `manifestKey`:
    /// `packages/<packageId>/<contentHash>.<first 12 hex of its SHA-256>.json`.
    package var alternateManifestKey: String {
        CatalogPackage.alternateManifestPath(packageId: manifest.packageId, contentHash: manifest.contentHash, sha256: manifestSHA256)
    }

    /// The catalogue's entry for it, its package.json at `manifestKey`.
    package func entry(manifestKey: String) -> CatalogEntry {
        CatalogEntry(manifest: manifest, manifestPath: manifestKey, manifestSHA256: manifestSHA256)
    }

    static func sha256(_ bytes: [UInt8]) -> String {
        SHA256.hash(data: bytes).lowercaseHex
    }

    /// Every package under `root`'s `OfflineTours`, by package ID. A
    /// package.json that is there but does not read stops the publish,
    /// with an error naming it.
    package static func read(root: URL) throws -> [LocalPackage] {
        let layout = Layout(root: root)
        let names: [String]
        do { names = try PackageFolders.names(documents: root) } catch {
            let tours = root.appendingPathComponent(Layout.offlineToursFolder)
            throw TourpackError.invalidInput("\(tours.path): no \(Layout.offlineToursFolder) folder; is this a Documents root?")
        }
        var packages: [LocalPackage] = []
        for name in names {
            guard let read = try PackageFolders.read(documents: root, folder: name) else { continue }
            let files = try SiteLayout.files(of: read.manifest).map { file in
                File(
                    path: file.path, url: try layout.resolve(relativePath: file.path), sha256: file.sha256, sizeBytes: file.sizeBytes,
                    contentType: file.contentType)
            }
            packages.append(
                LocalPackage(manifest: read.manifest, manifestBytes: read.bytes, manifestSHA256: sha256(read.bytes), files: files))
        }
        return packages
    }
}

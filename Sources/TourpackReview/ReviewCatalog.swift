package import Foundation
package import NIOPosix
package import TourpackCore
import TourpackMaps
package import TourpackValidate

/// What `tourpack review` shows of a Documents root, read once when it
/// starts: every package.json, the tiles each pack holds, and `validate`'s
/// findings, so every page is drawn from the same snapshot.
///
/// The flow of `review`:
///
///     ROOT ─▶ ReviewCatalog (package.json, tile packs, BundleValidator)
///              └▶ ReviewSite (every page, tile, audio file and asset by its path)
///                   ├▶ ReviewServer (Hummingbird on loopback, Range for audio)
///                   └▶ ReviewExport (the same paths written as a static site)
package struct ReviewCatalog: Sendable {
    /// One package as the pages show it.
    package struct Package: Sendable {
        /// The package folder's name under `OfflineTours`: its `packageId`.
        package var folder: String
        package var manifest: PackageManifest
        /// `validate`'s findings for this package's folder, its files and its tile pack.
        package var findings: [ValidationFinding]
        /// The tiles of `tiles.mbtiles`, in XYZ; empty when the package has no pack.
        package var tiles: [TileID]
        /// The pack, resolved inside the root; nil when there is none or it cannot be opened.
        package var tilePack: URL?
        /// Why a pack package.json names could not be read, for the tour page.
        package var tileProblem: String?

        /// Every audio entry's duration added up, to the millisecond as package.json states each.
        package var durationSeconds: Double { (manifest.audio.reduce(0) { $0 + $1.durationSeconds } * 1000).rounded() / 1000 }

        /// The findings about one POI's audio and caption files.
        package func findings(poiID: String) -> [ValidationFinding] {
            let paths = Set(manifest.audio.filter { $0.poiId == poiID }.flatMap(Self.narrationPaths))
            return findings.filter { paths.contains($0.path) }
        }

        /// The findings about anything but the POIs' audio and captions (package.json, the tile pack).
        package var packageFindings: [ValidationFinding] {
            let paths = Set(manifest.audio.flatMap(Self.narrationPaths))
            return findings.filter { !paths.contains($0.path) }
        }

        /// A narration's files: its audio, and its captions when it has them.
        static func narrationPaths(_ entry: PackageManifest.AudioEntry) -> [String] {
            [entry.path] + [entry.captions?.path].compactMap { $0 }
        }
    }

    package var root: URL
    package var packages: [Package]
    /// Findings about the bundle as a whole, and about package folders whose package.json cannot be read.
    package var bundleFindings: [ValidationFinding]
    package var errorCount: Int
    package var warningCount: Int
    /// The narration texts, when the tours were given (`--pipeline`): by
    /// `narrationKey(tourID:poiID:phase:)`. A Documents root holds only audio.
    package var narrations: [String: String] = [:]

    package static func narrationKey(tourID: String, poiID: String, phase: Phase) -> String {
        "\(tourID)/\(poiID)/\(phase.rawValue)"
    }

    /// The largest package.json read: `validate` refuses anything bigger, and so does review.
    static let manifestLimit: Int64 = 8 << 20

    /// Reads the root and validates it on `pool` (SQLite, FFmpeg decodes and file reads block).
    package static func load(
        root: URL, options: ValidationOptions = ValidationOptions(), on pool: NIOThreadPool = .singleton
    ) async throws -> ReviewCatalog {
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: root.path, isDirectory: &isFolder), isFolder.boolValue else {
            throw TourpackError.invalidInput("\(root.path): not a folder; expected a Documents root holding OfflineTours")
        }
        let report = try await BundleValidator(options: options).validate(root: root, on: pool)
        let packages = try await pool.runIfActive { try readPackages(root: root, report: report) }
        let shown = Set(packages.map(\.folder))
        return ReviewCatalog(
            root: root, packages: packages,
            bundleFindings: report.findings.filter { $0.package.map { !shown.contains($0) } ?? true },
            errorCount: report.errorCount, warningCount: report.warningCount)
    }

    /// The package by its folder name.
    package func package(_ folder: String) -> Package? {
        packages.first { $0.folder == folder }
    }

    /// Every readable package.json under `OfflineTours`, by tour name, then format and folder.
    static func readPackages(root: URL, report: ValidationReport) throws -> [Package] {
        let layout = Layout(root: root)
        var packages: [Package] = []
        for name in (try? PackageFolders.names(documents: root)) ?? [] {
            // Only folders named as the layout names them become pages (and so URLs),
            // and only a package.json inside the root: validate reports the rest.
            guard let id = SafeID(validating: name), id.value == name,
                (try? layout.resolve(relativePath: PackageFolders.manifestPath(name))) != nil,
                let manifest = (try? PackageFolders.read(documents: root, folder: name, limit: manifestLimit))?.manifest
            else { continue }
            var package = Package(folder: name, manifest: manifest, findings: report.findings(package: name), tiles: [])
            if let file = manifest.mapTiles.file {
                do {
                    let url = try layout.resolve(relativePath: file)
                    package.tiles = try MBTilesReader(url).tileIDs()
                    package.tilePack = url
                } catch {
                    package.tileProblem = "\(error)"
                }
            }
            packages.append(package)
        }
        return packages.sorted {
            ($0.manifest.tourName, $0.manifest.audio.first?.format.rawValue ?? "", $0.folder)
                < ($1.manifest.tourName, $1.manifest.audio.first?.format.rawValue ?? "", $1.folder)
        }
    }
}

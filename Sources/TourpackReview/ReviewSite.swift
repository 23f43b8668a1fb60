import Foundation
package import TourpackCore
import TourpackMaps

/// Every path of the review site and what answers it. The server and the
/// export share it, so the pages a browser gets from `review ROOT` and from
/// `review ROOT --export DIR` are the same bytes at the same relative paths:
///
///     index.html                        the packages
///     tours/<packageId>.html            a tour on its map
///     tours/<packageId>/<poiId>.html    a POI: its audio, numbers and findings
///     tiles/<packageId>/<z>/<x>/<y>.png a tile, exactly as the pack holds it
///     audio/AudioCache/<tourId>/<file>  an audio file a package.json lists
///     captions/OfflineTours/<packageId>/captions/<file>.vtt  a narration's captions
///     assets/review.css, assets/review.js, assets/leaflet/…
///
/// A path is a list of segments, already percent-decoded. Anything not on
/// this list is not answered: no folder listings, no other file of the root.
package struct ReviewSite: Sendable {
    package let catalog: ReviewCatalog
    package let assets: ReviewAssets
    /// POI pages carry their caption files as `data:` URIs (the export:
    /// a `file://` page may load no track from a file).
    package var inlineCaptions = false

    package init(catalog: ReviewCatalog, assets: ReviewAssets) {
        self.catalog = catalog
        self.assets = assets
    }

    /// What one path names.
    package enum Resource: Sendable, Equatable {
        /// A page, rendered from the catalogue.
        case page(String)
        /// A fixed asset: the site's own CSS or script, or a file of Leaflet's.
        case asset(bytes: [UInt8], contentType: String)
        /// One tile of a package's pack.
        case tile(folder: String, tile: TileID, contentType: String)
        /// An audio file, by its path relative to the root, as package.json lists it.
        case audio(relativePath: String, contentType: String)
        /// A narration's WebVTT captions, by the path package.json lists them at.
        case captions(relativePath: String)
    }

    /// What the review serves a caption file as (a `<track>` needs `text/vtt`).
    package static let captionsContentType = SiteLayout.captionsContentType

    /// The resource at `segments`, or nil when the site has no such path.
    package func resource(at segments: [String]) -> Resource? {
        switch segments.first {
        case nil, "index.html"?:
            return segments.count <= 1 ? .page(ReviewPages(catalog: catalog).index()) : nil
        case "tours"?:
            return tourResource(Array(segments.dropFirst()))
        case "tiles"?:
            return tileResource(Array(segments.dropFirst()))
        case "audio"?:
            let relativePath = segments.dropFirst().joined(separator: "/")
            guard let entry = catalog.packages.lazy.flatMap(\.manifest.audio).first(where: { $0.path == relativePath }) else {
                return nil
            }
            return .audio(relativePath: relativePath, contentType: Self.contentType(entry.format))
        case "captions"?:
            let relativePath = segments.dropFirst().joined(separator: "/")
            guard catalog.packages.contains(where: { $0.manifest.audio.contains { $0.captions?.path == relativePath } }) else {
                return nil
            }
            return .captions(relativePath: relativePath)
        case "assets"?:
            return assets.asset(at: Array(segments.dropFirst())).map { .asset(bytes: $0.bytes, contentType: $0.contentType) }
        default:
            return nil
        }
    }

    /// Every path of the site, for the export: pages first, then assets, tiles, audio and captions.
    package func allPaths() -> [[String]] {
        var paths: [[String]] = [["index.html"]]
        for package in catalog.packages {
            paths.append(["tours", package.folder + ".html"])
            for poi in package.manifest.pois { paths.append(["tours", package.folder, poi.id + ".html"]) }
        }
        paths += assets.allPaths().map { ["assets"] + $0 }
        for package in catalog.packages where package.tilePack != nil {
            let ext = (package.manifest.mapTiles.format ?? .png).rawValue
            paths += package.tiles.map { ["tiles", package.folder, "\($0.z)", "\($0.x)", "\($0.y).\(ext)"] }
        }
        // A package's files as every side lists them (`PackageFiles.listed`): audio, then captions.
        let files = catalog.packages.flatMap { PackageFiles.listed(in: $0.manifest) }
        var seen: Set<String> = []
        for (kind, folder) in [(PackageFile.Kind.audio, "audio"), (.captions, "captions")] {
            for file in files where file.kind == kind && seen.insert(file.path).inserted {
                paths.append([folder] + file.path.split(separator: "/").map(String.init))
            }
        }
        return paths
    }

    private func tourResource(_ rest: [String]) -> Resource? {
        let pages = ReviewPages(catalog: catalog, inlineCaptions: inlineCaptions)
        if rest.count == 1, rest[0].hasSuffix(".html"), let package = catalog.package(String(rest[0].dropLast(5))) {
            return .page(pages.tour(package))
        }
        if rest.count == 2, rest[1].hasSuffix(".html"), let package = catalog.package(rest[0]),
            let poi = package.manifest.pois.first(where: { $0.id + ".html" == rest[1] })
        {
            return .page(pages.poi(poi, of: package))
        }
        return nil
    }

    private func tileResource(_ rest: [String]) -> Resource? {
        guard rest.count == 4, let package = catalog.package(rest[0]), package.tilePack != nil else { return nil }
        let format = package.manifest.mapTiles.format ?? .png
        let suffix = "." + format.rawValue
        guard rest[3].hasSuffix(suffix), let z = Self.number(rest[1]), let x = Self.number(rest[2]),
            let y = Self.number(String(rest[3].dropLast(suffix.count)))
        else { return nil }
        let tile = TileID(z: z, x: x, y: y)
        guard package.tiles.contains(tile) else { return nil }
        return .tile(folder: package.folder, tile: tile, contentType: Self.contentType(format))
    }

    /// ASCII digits only (at most 8): no signs, spaces or other numerals.
    static func number(_ text: String) -> Int? {
        guard (1...8).contains(text.utf8.count), text.utf8.allSatisfy({ (0x30...0x39).contains($0) }) else { return nil }
        return Int(text)
    }

    static func contentType(_ format: AudioFormat) -> String { SiteLayout.contentType(for: format) }

    static func contentType(_ format: TileFormat) -> String {
        switch format {
        case .png: return "image/png"
        case .jpg: return "image/jpeg"
        case .webp: return "image/webp"
        case .pbf: return "application/x-protobuf"
        }
    }

    /// A request path as segments: split on `/`, each percent-decoded once,
    /// or nil when any segment is empty (but a trailing slash), `.` or `..`,
    /// or decodes to something holding a slash, a backslash or a control
    /// character. `/a/%2e%2e/b` is refused like `/a/../b`.
    package static func segments(ofPath path: String) -> [String]? {
        guard path.hasPrefix("/") else { return nil }
        var raw = path.dropFirst().split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        if raw.last == "" { raw.removeLast() }
        var segments: [String] = []
        for part in raw {
            guard let decoded = part.removingPercentEncoding, !decoded.isEmpty, decoded != ".", decoded != "..",
                !decoded.contains("/"), !decoded.contains("\\"),
                !decoded.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F })
            else { return nil }
            segments.append(decoded)
        }
        return segments
    }
}

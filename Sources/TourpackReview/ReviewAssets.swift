package import Foundation
import TourpackCore

/// The files every page loads: Leaflet, from Debian's `libjs-leaflet` (or
/// `TOURPACK_LEAFLET_DIR`), and the site's own stylesheet and script. They
/// are read into memory once, so nothing outside this list is ever served
/// from that folder, and no page loads anything from the internet.
package struct ReviewAssets: Sendable {
    /// Where Debian's `libjs-leaflet` installs Leaflet.
    package static let debianLeafletFolder = "/usr/share/javascript/leaflet"
    /// The Leaflet files the pages use, relative to its folder.
    static let leafletFiles = [
        "leaflet.js", "leaflet.css", "images/layers.png", "images/layers-2x.png", "images/marker-icon.png",
        "images/marker-icon-2x.png", "images/marker-shadow.png",
    ]

    private let files: [String: [UInt8]]

    /// Reads Leaflet from `leafletFolder`, else `TOURPACK_LEAFLET_DIR`, else Debian's folder.
    package init(leafletFolder: URL? = nil) throws {
        let folder =
            leafletFolder
            ?? URL(fileURLWithPath: ProcessInfo.processInfo.environment["TOURPACK_LEAFLET_DIR"] ?? Self.debianLeafletFolder)
        var files: [String: [UInt8]] = [
            "review.css": Array(ReviewStyle.css.utf8), "review.js": Array(ReviewScript.javascript.utf8),
        ]
        for name in Self.leafletFiles {
            guard let data = FileManager.default.contents(atPath: folder.appendingPathComponent(name).path) else {
                throw TourpackError.invalidInput(
                    "Leaflet not found: \(folder.appendingPathComponent(name).path) is missing; install Debian's libjs-leaflet "
                        + "(make setup does) or set TOURPACK_LEAFLET_DIR to a folder holding leaflet.js, leaflet.css and images/")
            }
            files["leaflet/" + name] = Array(data)
        }
        self.files = files
    }

    /// The asset at `segments` (below `assets/`) and its content type.
    func asset(at segments: [String]) -> (bytes: [UInt8], contentType: String)? {
        guard let bytes = files[segments.joined(separator: "/")], let last = segments.last else { return nil }
        let type: String
        switch last.split(separator: ".").last {
        case "js": type = "text/javascript; charset=utf-8"
        case "css": type = "text/css; charset=utf-8"
        default: type = "image/png"
        }
        return (bytes, type)
    }

    /// Every asset's path below `assets/`, sorted.
    func allPaths() -> [[String]] {
        files.keys.sorted().map { $0.split(separator: "/").map(String.init) }
    }
}

package import Foundation
package import NIOPosix
import TourpackCore
import TourpackMaps

/// `tourpack review ROOT --export DIR`: the review site as static files, the
/// same bytes at the same relative paths the server answers, so CI can keep
/// it as an artefact and anyone can open `DIR/index.html` from disk: the
/// pages, Leaflet, every tile of every pack as a file, and a copy of every
/// audio and caption file a package.json lists.
package struct ReviewExport: Sendable {
    package let site: ReviewSite

    package init(site: ReviewSite) {
        var site = site
        site.inlineCaptions = true
        self.site = site
    }

    /// What was written.
    package struct Summary: Sendable {
        package var pages = 0
        package var tiles = 0
        package var audioFiles = 0
        package var captionFiles = 0
        package var bytes = 0
    }

    /// Writes the site into `folder` (created if missing; files of the same
    /// name replaced, nothing else touched). A folder inside the root is
    /// refused: the export would become stray files of the bundle.
    package func write(to folder: URL, on pool: NIOThreadPool = .singleton) async throws -> Summary {
        let root = site.catalog.root
        if Layout(root: root).contains(folder) || OutputTree.realPath(folder) == OutputTree.realPath(root) {
            throw TourpackError.invalidInput("--export \(folder.path): inside the Documents root; export somewhere else")
        }
        return try await pool.runIfActive { try writeAll(to: folder) }
    }

    private func writeAll(to folder: URL) throws -> Summary {
        var summary = Summary()
        var packs: [String: MBTilesReader] = [:]
        let layout = Layout(root: site.catalog.root)
        for segments in site.allPaths() {
            guard let resource = site.resource(at: segments) else { continue }
            let bytes: [UInt8]
            switch resource {
            case .page(let html):
                bytes = Array(html.utf8)
                summary.pages += 1
            case .asset(let assetBytes, _):
                bytes = assetBytes
            case .tile(let name, let tile, _):
                guard let url = site.catalog.package(name)?.tilePack else { continue }
                let pack = try packs[name] ?? MBTilesReader(url)
                packs[name] = pack
                guard let tileBytes = try pack.tile(tile) else { continue }
                bytes = tileBytes
                summary.tiles += 1
            case .audio(let relativePath, _), .captions(let relativePath):
                // A missing file or a link out of the root is validate's finding, shown on its POI; it is not copied.
                guard let url = try? layout.resolve(relativePath: relativePath), let size = ReviewFiles.regularFileSize(url) else {
                    continue
                }
                bytes = try ReviewFiles.read(url, span: 0..<size)
                if case .audio = resource { summary.audioFiles += 1 } else { summary.captionFiles += 1 }
            }
            let target = segments.reduce(folder) { $0.appendingPathComponent($1) }
            try FileManager.default.createDirectory(at: target.deletingLastPathComponent(), withIntermediateDirectories: true)
            do {
                try Data(bytes).write(to: target, options: .atomic)
            } catch {
                throw TourpackError.storageFailed(path: target.path, operation: "write", reason: "\(error)")
            }
            summary.bytes += bytes.count
        }
        return summary
    }
}

import ArgumentParser
import Foundation
import TourpackCore
import TourpackLoad
import TourpackPlan
import TourpackReview
import TourpackValidate

/// `tourpack review ROOT`: look at and listen to what was built, in a
/// browser, as the traveller will meet it; or `--export DIR` for a static
/// copy CI can keep.
struct Review: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "review",
        abstract: "Show a Documents root's packages in a browser: tours on their own maps, every narration to play.",
        discussion: """
            Serves read-only web pages on loopback: the packages (tour, version, language, voice, \
            format and bit rate, dates, size, duration, POIs, validate's verdict); each tour on a \
            Leaflet map drawn from its own tiles.mbtiles, with the route, each POI's trigger \
            radius and the map's coverage; each POI's phases with a player, duration, \
            characters, loudness, true peak, size and validate's findings for its files. \
            Audio is served with Range, so players can seek. Only the site's own paths are \
            answered, each resolved inside ROOT: no '..', encoded or not, no symlink out.

            Prints the URL as the first line of stdout (with --port 0 it names the port it \
            took); the access log goes to stderr. Stops cleanly on SIGINT or SIGTERM.

            --export DIR writes the same pages as a static site (DIR/index.html, the tiles \
            as files, a copy of the audio) and exits. Leaflet comes from Debian's libjs-leaflet \
            (/usr/share/javascript/leaflet, or TOURPACK_LEAFLET_DIR); no page loads anything \
            from the internet. Exit codes: \(ExitStatus.ok) ok · \(ExitStatus.badInput) bad usage, no such ROOT \
            or no Leaflet.
            """
    )

    @Argument(help: "The Documents root: the folder holding AudioCache and OfflineTours.", completion: .directory)
    var root: String

    @Option(help: "Address to bind; loopback unless you mean to share the pages.") var host = "127.0.0.1"
    @Option(help: "Port to bind; 0 picks a free one.") var port = 8790

    @Option(help: "Write the pages as a static site into this folder and exit, instead of serving them.", completion: .directory)
    var export: String?

    @Option(
        help: "The pipeline the root was built from: its tours' narration texts are shown, and validate holds the root to its budgets.",
        completion: .file(extensions: ["yaml", "yml"]))
    var pipeline: String?

    func validate() throws {
        guard (0...65535).contains(port) else { throw ValidationError("--port must be within 0...65535") }
    }

    func run() async throws {
        let rootURL = URL(fileURLWithPath: root).standardizedFileURL
        let assets = try ReviewAssets()
        let config = try pipeline.map { try PipelineLoader.load(URL(fileURLWithPath: $0), overrides: PipelineOverrides()) }
        let options = ValidationOptions(now: CommandClock.now(), limits: config.map(ValidationLimits.init(pipeline:)))
        var catalog = try await ReviewCatalog.load(root: rootURL, options: options)
        if let config {
            let tours = try TourLoader().loadAll(globs: config.tourGlobs)
            for tour in tours {
                for poi in tour.pois {
                    for (phase, narration) in poi.narrations {
                        catalog.narrations[ReviewCatalog.narrationKey(tourID: tour.id.value, poiID: poi.id.value, phase: phase)] =
                            narration.text
                    }
                }
            }
        }
        let site = ReviewSite(catalog: catalog, assets: assets)
        Console.error(
            "review \(rootURL.path): \(catalog.packages.count) package(s); validate: \(catalog.errorCount) error(s), "
                + "\(catalog.warningCount) warning(s)")

        if let export {
            let folder = URL(fileURLWithPath: export).standardizedFileURL
            let summary = try await ReviewExport(site: site).write(to: folder)
            print(
                "exported \(summary.pages) page(s), \(summary.tiles) tile(s), \(summary.audioFiles) audio file(s) "
                    + (summary.captionFiles > 0 ? "and \(summary.captionFiles) caption file(s) " : "")
                    + "(\(PlanReport.bytes(summary.bytes))) to \(folder.appendingPathComponent("index.html").path)")
            return
        }
        if !(host.hasPrefix("127.") || host == "::1" || host == "localhost") {
            Console.error("review: --host \(host) is not loopback: anyone who can reach it can read these pages and hear the audio")
        }
        let server = try ReviewServer(site: site, configuration: ReviewServerConfiguration(host: host, port: port))
        let shownHost = host.contains(":") ? "[\(host)]" : host
        try await server.runUntilSignalled { port in
            // The URL alone on the first line, unbuffered: scripts and tests read it.
            FileHandle.standardOutput.write(Data("http://\(shownHost):\(port)/\n".utf8))
        }
    }
}

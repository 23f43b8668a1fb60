import Foundation
import TourpackAudio
import TourpackCore
import TourpackMaps
import TourpackPlan
import TourpackValidate

/// The review site's HTML: the packages, a tour, a POI. Every link is
/// relative, so the same bytes work served and exported (`file://`), but
/// for one thing: a browser loads no `<track>` from a `file://` page, so
/// the export's POI pages carry each caption file in its track as a
/// `data:` URI (`inlineCaptions`). Text from package.json is escaped;
/// numbers carry their exact value in a `data-` attribute beside the
/// rounded one a person reads.
struct ReviewPages {
    let catalog: ReviewCatalog
    var inlineCaptions = false

    // MARK: Pages

    /// `index.html`: every package with its numbers and its `validate` result.
    func index() -> String {
        var rows = ""
        for package in catalog.packages {
            let manifest = package.manifest
            let first = manifest.audio.first
            rows += """
                <tr class="package" data-package="\(Self.escape(package.folder))">\
                <td class="tour"><a href="tours/\(Self.escape(package.folder)).html">\(Self.escape(manifest.tourName))</a></td>\
                <td class="version number">\(manifest.tourVersion)</td>\
                <td class="language">\(Self.escape(manifest.language))</td>\
                <td class="voice">\(Self.escape(manifest.voice.name))</td>\
                <td class="format">\(Self.escape(first?.format.rawValue ?? "–"))</td>\
                <td class="bitrate number" data-kbps="\(first?.bitrateKbps ?? 0)">\(first.map { "\($0.bitrateKbps) kbps" } ?? "–")</td>\
                <td class="created">\(PackageManifest.timestamp(manifest.createdAt))</td>\
                <td class="expires">\(PackageManifest.timestamp(manifest.expiresAt))</td>\
                <td class="size number" data-bytes="\(manifest.sizeBytes)">\(PlanReport.bytes(Int(manifest.sizeBytes)))</td>\
                <td class="duration number" data-seconds="\(Self.number(package.durationSeconds))">\(Self.clock(package.durationSeconds))</td>\
                <td class="pois number">\(manifest.pois.count)</td>\
                \(Self.verdict(package.findings))</tr>

                """
        }
        let summary =
            catalog.errorCount == 0 && catalog.warningCount == 0
            ? "<span class=\"passed\">validate passed</span>"
            : "<span class=\"\(catalog.errorCount > 0 ? "failed" : "passed")\">validate: \(catalog.errorCount) error(s), \(catalog.warningCount) warning(s)</span>"
        let bundle =
            catalog.bundleFindings.isEmpty
            ? "" : "<h2>The bundle</h2>\n" + Self.findingsList(catalog.bundleFindings, id: "bundle-findings")
        return Self.document(
            title: "Packages", depth: 0,
            body: """
                <header><h1>Packages</h1>
                <p class="summary">\(catalog.packages.count) package(s) in <code>\(Self.escape(catalog.root.path))</code> · \(summary)</p></header>
                <table class="packages"><thead><tr><th>tour</th><th class="number">version</th><th>language</th><th>voice</th>\
                <th>format</th><th class="number">bit rate</th><th>created</th><th>expires</th><th class="number">size</th>\
                <th class="number">duration</th><th class="number">POIs</th><th>validate</th></tr></thead>
                <tbody>
                \(rows)</tbody></table>
                \(bundle)
                """)
    }

    /// `tours/<packageId>.html`: the map, the POIs and the package's own findings.
    func tour(_ package: ReviewCatalog.Package) -> String {
        let manifest = package.manifest
        let coverage = manifest.mapTiles
        let mapNote: String
        if package.tilePack != nil {
            mapNote =
                "<p class=\"tiles\">Map: the package's own tile pack, \(package.tiles.count) tile(s), "
                + "zoom \(coverage.minZoom)–\(coverage.maxZoom). The dashed box is the coverage.</p>"
        } else if let problem = package.tileProblem {
            mapNote =
                "<p class=\"notice no-tiles\">The tile pack cannot be read (\(Self.escape(problem))): the route is drawn on a plain background.</p>"
        } else {
            mapNote = "<p class=\"notice no-tiles\">This package has no tile pack: the route is drawn on a plain background.</p>"
        }
        var poiRows = ""
        for poi in manifest.pois {
            let entries = manifest.audio.filter { $0.poiId == poi.id }
            let findings = package.findings(poiID: poi.id)
            poiRows += """
                <tr class="poi" data-poi="\(Self.escape(poi.id))"><td><a href="\(Self.escape(package.folder))/\(Self.escape(poi.id)).html">\
                \(Self.escape(poi.name))</a></td><td class="number">\(Self.number(poi.triggerRadiusMeters)) m</td>\
                <td>\(entries.map { Self.escape($0.phase.fileLabel) }.joined(separator: ", "))</td>\
                <td class="number">\(Self.clock(entries.reduce(0) { $0 + $1.durationSeconds }))</td>\(Self.verdict(findings))</tr>

                """
        }
        let own = package.packageFindings
        var tiles: Any = NSNull()
        if package.tilePack != nil {
            tiles =
                [
                    "template": "../tiles/\(package.folder)/{z}/{x}/{y}.\((coverage.format ?? .png).rawValue)",
                    "minZoom": coverage.minZoom, "maxZoom": coverage.maxZoom, "attribution": coverage.attribution ?? "",
                    "present": package.tiles.map { "\($0.z)/\($0.x)/\($0.y)" },
                ] as [String: Any]
        }
        let pois: [[String: Any]] = manifest.pois.map {
            [
                "id": $0.id, "name": $0.name, "lat": $0.location.latitude, "lon": $0.location.longitude,
                "radius": $0.triggerRadiusMeters, "href": "\(package.folder)/\($0.id).html",
            ]
        }
        let data = Self.json([
            "coverage": [[coverage.bounds.south, coverage.bounds.west], [coverage.bounds.north, coverage.bounds.east]],
            "route": manifest.route.waypoints.map { [$0.latitude, $0.longitude] }, "pois": pois, "tiles": tiles,
        ])
        return Self.document(
            title: manifest.tourName, depth: 1, leaflet: true,
            body: """
                <header><p><a href="../index.html">Packages</a></p><h1>\(Self.escape(manifest.tourName))</h1>
                <p class="summary">\(Self.packageLine(package))</p></header>
                \(mapNote)
                <div id="map"></div>
                <h2>Points of interest</h2>
                <table class="pois"><thead><tr><th>POI</th><th class="number">trigger radius</th><th>phases</th>\
                <th class="number">duration</th><th>validate</th></tr></thead><tbody>
                \(poiRows)</tbody></table>
                \(own.isEmpty ? "" : "<h2>The package</h2>\n" + Self.findingsList(own, id: "package-findings"))
                <script type="application/json" id="tour-data">\(data)</script>
                """)
    }

    /// `tours/<packageId>/<poiId>.html`: each phase with its player, its numbers and its findings.
    func poi(_ poi: PackageManifest.POIEntry, of package: ReviewCatalog.Package) -> String {
        let manifest = package.manifest
        var sections = ""
        for entry in manifest.audio where entry.poiId == poi.id {
            let findings = package.findings.filter { ReviewCatalog.Package.narrationPaths(entry).contains($0.path) }
            let src = "../../audio/" + entry.path.split(separator: "/").map { Self.percentEncoded(String($0)) }.joined(separator: "/")
            let key = ReviewCatalog.narrationKey(tourID: manifest.tourId, poiID: poi.id, phase: entry.phase)
            let narration =
                catalog.narrations[key].map { "<p class=\"narration\">\(Self.escape($0))</p>" }
                ?? "<p class=\"narration missing\">The narration text is not in the package; run review with --pipeline to show it.</p>"
            let loudness = entry.loudness
            // The captions ride on the player as a `<track>`; review.js shows
            // the cue being spoken under it (`cuechange`), as text, never markup.
            let track = entry.captions.map { captions in
                let src =
                    (inlineCaptions ? captionsDataURI(captions.path) : nil)
                    ?? "../../captions/"
                    + captions.path.split(separator: "/").map { Self.percentEncoded(String($0)) }.joined(separator: "/")
                return "<track kind=\"captions\" src=\"\(Self.escape(src))\" srclang=\"\(Self.escape(manifest.language))\" "
                    + "label=\"\(Self.escape("Captions (\(manifest.language))"))\" default>"
            }
            let cue = entry.captions.map { "<p class=\"caption-cue\" aria-live=\"polite\" data-cues=\"\($0.cues)\"></p>\n" } ?? ""
            let captionsFact =
                entry.captions.map {
                    "<dt>captions</dt><dd class=\"captions\" data-cues=\"\($0.cues)\">\($0.cues) cue(s), \(Self.escape($0.timing.rawValue)) timing</dd>"
                } ?? ""
            sections += """
                <section class="phase\(findings.isEmpty ? "" : " has-findings")" data-phase="\(entry.phase.rawValue)">
                <h2>\(Self.escape(entry.phase.fileLabel))</h2>
                <audio controls preload="metadata" src="\(Self.escape(src))" data-duration="\(Self.number(entry.durationSeconds))">\(track ?? "")</audio>
                \(cue)\(narration)
                <dl class="facts">\
                <dt>duration</dt><dd class="duration" data-seconds="\(Self.number(entry.durationSeconds))">\(Self.number(entry.durationSeconds)) s</dd>\
                <dt>characters</dt><dd class="characters">\(entry.characters)</dd>\
                <dt>loudness</dt><dd class="loudness">\(loudness?.integratedLUFS.map { Self.decibels($0) + " LUFS" } ?? "–")</dd>\
                <dt>true peak</dt><dd class="true-peak">\(loudness?.truePeakDBTP.map { Self.decibels($0) + " dBTP" } ?? "–")</dd>\
                <dt>gain</dt><dd class="gain">\(loudness.map { Self.decibels($0.gainDB) + " dB" } ?? "–")</dd>\
                <dt>size</dt><dd class="size" data-bytes="\(entry.sizeBytes)">\(PlanReport.bytes(Int(entry.sizeBytes)))</dd>\
                <dt>format</dt><dd class="format">\(Self.escape(entry.codec)), \(entry.bitrateKbps) kbps, \(entry.sampleRateHz) Hz</dd>\
                <dt>file</dt><dd class="path"><code>\(Self.escape(entry.path))</code></dd>\(captionsFact)</dl>
                \(findings.isEmpty ? "<p class=\"passed\">validate: no findings</p>" : Self.findingsList(findings, id: nil))
                </section>

                """
        }
        return Self.document(
            title: "\(poi.name) · \(manifest.tourName)", depth: 2, script: manifest.audio.contains { $0.captions != nil },
            body: """
                <header><p><a href="../../index.html">Packages</a> › <a href="../\(Self.escape(package.folder)).html">\
                \(Self.escape(manifest.tourName))</a></p><h1>\(Self.escape(poi.name))</h1>
                <p class="summary">trigger radius \(Self.number(poi.triggerRadiusMeters)) m · \
                \(Self.number(poi.location.latitude)), \(Self.number(poi.location.longitude)) · \(Self.packageLine(package))</p></header>
                \(sections)
                """)
    }

    // MARK: Pieces

    /// One page: `depth` is how many folders below the site's root it sits, for its relative links.
    /// The caption file at `relativePath` as a `data:` URI, or nil when it
    /// cannot be read (a missing file is validate's finding, shown on the POI).
    func captionsDataURI(_ relativePath: String) -> String? {
        guard let url = try? Layout(root: catalog.root).resolve(relativePath: relativePath),
            let size = ReviewFiles.regularFileSize(url), let bytes = try? ReviewFiles.read(url, span: 0..<size)
        else { return nil }
        return "data:text/vtt;charset=utf-8;base64," + Data(bytes).base64EncodedString()
    }

    /// A page; `leaflet` brings Leaflet and review.js (a tour's map),
    /// `script` review.js alone (a POI's captions).
    static func document(title: String, depth: Int, leaflet: Bool = false, script: Bool = false, body: String) -> String {
        let up = String(repeating: "../", count: depth)
        let head = leaflet ? "<link rel=\"stylesheet\" href=\"\(up)assets/leaflet/leaflet.css\">\n" : ""
        let review = "<script src=\"\(up)assets/review.js\"></script>\n"
        let scripts = leaflet ? "<script src=\"\(up)assets/leaflet/leaflet.js\"></script>\n" + review : script ? review : ""
        return """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
            <title>\(escape(title)) · tourpack review</title>
            <link rel="icon" href="data:,">
            \(head)<link rel="stylesheet" href="\(up)assets/review.css">
            </head><body>
            \(body)
            \(scripts)</body></html>

            """
    }

    /// "aac, 128 kbps · 8 files, 2:01, 1.9 MB · created … · expires …".
    static func packageLine(_ package: ReviewCatalog.Package) -> String {
        let manifest = package.manifest
        let first = manifest.audio.first
        let format = first.map { "\($0.format.rawValue), \($0.bitrateKbps) kbps" } ?? "no audio"
        return "\(escape(format))\(manifest.quality.map { " (\($0.rawValue))" } ?? "") · voice \(escape(manifest.voice.name)) · "
            + "\(manifest.audio.count) file(s), \(clock(package.durationSeconds)), \(PlanReport.bytes(Int(manifest.sizeBytes))) · "
            + "created \(PackageManifest.timestamp(manifest.createdAt)) · expires \(PackageManifest.timestamp(manifest.expiresAt))"
    }

    /// The validate cell: "passed", or how many findings.
    static func verdict(_ findings: [ValidationFinding]) -> String {
        guard !findings.isEmpty else { return "<td class=\"validate passed\" data-findings=\"0\">passed</td>" }
        let errors = findings.filter { $0.severity == .error }.count
        return "<td class=\"validate \(errors > 0 ? "failed" : "passed")\" data-findings=\"\(findings.count)\">"
            + "\(findings.count) finding\(findings.count == 1 ? "" : "s")</td>"
    }

    static func findingsList(_ findings: [ValidationFinding], id: String?) -> String {
        let items = findings.map {
            "<li class=\"finding \($0.severity.rawValue)\" data-path=\"\(escape($0.path))\" data-check=\"\($0.check.rawValue)\">"
                + "<code>\(escape($0.path))</code>: \($0.severity.rawValue): \(escape($0.message)) [\($0.check.rawValue)]</li>"
        }
        return "<ul class=\"findings\"\(id.map { " id=\"\($0)\"" } ?? "")>\n\(items.joined(separator: "\n"))\n</ul>"
    }

    /// Text for HTML content and attribute values.
    static func escape(_ text: String) -> String {
        // By scalar: "<" followed by a combining mark is one Character, not "<".
        var escaped = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": escaped += "&amp;"
            case "<": escaped += "&lt;"
            case ">": escaped += "&gt;"
            case "\"": escaped += "&quot;"
            case "'": escaped += "&#39;"
            default: escaped.unicodeScalars.append(scalar)
            }
        }
        return escaped
    }

    /// A path segment for a URL: unreserved characters as they are, everything else percent-encoded.
    static func percentEncoded(_ segment: String) -> String {
        segment.addingPercentEncoding(
            withAllowedCharacters: CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"))
            ?? segment
    }

    /// JSON for a `<script type="application/json">`: `<` escaped, so no text can close the element.
    static func json(_ value: [String: Any]) -> String {
        let data = (try? JSONSerialization.data(withJSONObject: value, options: [.sortedKeys])) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self).replacingOccurrences(of: "<", with: "\\u003c")
    }

    /// A number as JSON would print it (`12.345`, `500`): the exact value package.json holds.
    static func number(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int(value)) : String(value)
    }

    static func decibels(_ value: Double) -> String {
        String(format: "%.2f", value)
    }

    /// `m:ss`, or `h:mm:ss` from an hour on.
    static func clock(_ seconds: Double) -> String {
        let total = Int(seconds.rounded())
        let (hours, minutes, rest) = (total / 3600, total / 60 % 60, total % 60)
        let mmss = String(format: "%02d:%02d", minutes, rest)
        return hours > 0 ? "\(hours):\(mmss)" : "\(minutes):" + String(format: "%02d", rest)
    }
}

import Foundation
import Testing
import TourpackCore
import TourpackKit
import TourpackMaps
import TourpackTesting

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `tourpack review` in a real browser: Debian's headless Chromium, driven
/// by Selenium (`Browser/review_browser.py`), against a root the real
/// `tourpack build` made with the real serve-tts and serve-tiles, in AAC,
/// MP3 and Opus. Chromium decodes the audio with its own decoder, so each
/// duration it reports is a second opinion on our files.
@Suite(.serialized, .offThePool) struct ReviewCommandTests {
    /// The screenshot of a tour page a run leaves behind (not committed).
    static let screenshot = Executable.packageRoot.appendingPathComponent("build/review-tour.png")
    static let browserScript = Executable.packageRoot.appendingPathComponent("Tests/CLITests/Browser/review_browser.py")

    /// A root of 6 packages (2 tours × aac, mp3, opus) with tile packs,
    /// built once and copied out of its workspace; each test copies it again.
    static let built: Result<URL, any Error> = Result {
        let voice = try LocalVoiceServer()
        defer { voice.stop() }
        let tiles = try LocalTileServer()
        defer { tiles.stop() }
        let workspace = try BuildWorkspace(
            formats: ["aac", "mp3", "opus"],
            extraYAML: """
                maps:
                  minZoom: 11
                  maxZoom: 13
                  bufferMiles: 1
                  source:
                    url: \(tiles.urlTemplate)
                    attribution: Test tiles
                    userAgent: tourpack-tests (maps@example.com)
                    requestsPerSecond: 0
                """)
        let build = try workspace.build(voice)
        guard build.status == 0 else { throw SetupFailure("the build failed: \(build.stdout)\n\(build.stderr)") }
        let kept = try TemporaryFolder.make("tourpack-review")
        try FileManager.default.copyItem(at: workspace.output, to: kept.appendingPathComponent("Documents"))
        // The tours and the pipeline too, for `--pipeline` (the pipeline's paths are relative to it).
        try FileManager.default.copyItem(at: workspace.root.appendingPathComponent("tours"), to: kept.appendingPathComponent("tours"))
        try FileManager.default.copyItem(at: workspace.pipeline, to: kept.appendingPathComponent("pipeline.yaml"))
        return kept.appendingPathComponent("Documents")
    }

    /// The pipeline the root was built from, beside the built root.
    static func pipeline() throws -> URL {
        try built.get().deletingLastPathComponent().appendingPathComponent("pipeline.yaml")
    }

    /// A fresh copy of the built root, in a folder of its own.
    static func root() throws -> URL {
        let source = try built.get()
        let folder = try TemporaryFolder.make("tourpack-review")
        let copy = folder.appendingPathComponent("Documents")
        try FileManager.default.copyItem(at: source, to: copy)
        return copy
    }

    static func manifests(_ root: URL) throws -> [String: PackageManifest] {
        let folder = root.appendingPathComponent(Layout.offlineToursFolder)
        var found: [String: PackageManifest] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: folder.path) {
            found[name] = try PackageManifest.read(
                from: folder.appendingPathComponent(name).appendingPathComponent(Layout.manifestFileName))
        }
        return found
    }

    // MARK: The served site

    @Test func packagesToursAndAudioAsChromiumShowsThem() throws {
        let root = try Self.root()
        let manifests = try Self.manifests(root)
        #expect(manifests.count == 6)
        let server = try ReviewProcess(root: root)
        defer { server.stop() }
        #expect(server.url.hasPrefix("http://127.0.0.1:"))
        try? FileManager.default.createDirectory(at: Self.screenshot.deletingLastPathComponent(), withIntermediateDirectories: true)
        try? FileManager.default.removeItem(at: Self.screenshot)

        let seen = try BrowserReport.crawl(server.url, screenshot: Self.screenshot)
        try Self.expectPages(seen, manifests: manifests, root: root, origin: server.url, findings: [:])
        #expect(FileManager.default.fileExists(atPath: Self.screenshot.path), "a screenshot of a tour page")

        // The server counted each tile the browser asked for, and sent the pack's bytes.
        let tileRequests = seen.requests.filter { $0.contains("/tiles/") }
        let stats = try server.stats()
        let served = stats["tiles"] as? Int ?? -1
        #expect(served > 0 && served >= Set(tileRequests).count && served <= tileRequests.count, "\(stats) \(tileRequests.count)")
        var bytes = 0
        for url in tileRequests {
            let (folder, tile) = try #require(Self.tile(in: url))
            let pack = try MBTilesReader(root.appendingPathComponent("OfflineTours/\(folder)/tiles.mbtiles"))
            let expected = try #require(try pack.tile(tile))
            bytes += expected.count
            let answered = Array(try Data(contentsOf: URL(string: url)!))
            let same = answered == expected
            #expect(same, "\(url): \(answered.count) bytes answered, the pack's tile has \(expected.count)")
        }
        if served == tileRequests.count { #expect(stats["tileBytes"] as? Int == bytes) }
        #expect((stats["partial"] as? Int ?? 0) > 0, "the players asked for ranges")
    }

    @Test func aCorruptedFilesFindingShowsOnItsPOI() throws {
        let root = try Self.root()
        let manifests = try Self.manifests(root)
        // Cut one MP3 short: validate finds it by its path, and its POI page must say so.
        let (folder, manifest) = try #require(manifests.first { $0.value.audio.contains { $0.format == .mp3 && $0.phase == .guidedTour } })
        let entry = try #require(manifest.audio.first { $0.phase == .guidedTour })
        let file = root.appendingPathComponent(entry.path)
        let bytes = try Data(contentsOf: file)
        try bytes.prefix(bytes.count / 3).write(to: file)

        let server = try ReviewProcess(root: root)
        defer { server.stop() }
        let seen = try BrowserReport.crawl(server.url, screenshot: nil)
        try Self.expectPages(seen, manifests: manifests, root: root, origin: server.url, findings: [entry.path: folder])
    }

    @Test func pathsOutsideTheSiteAreRefused() throws {
        let root = try Self.root()
        let manifests = try Self.manifests(root)
        let entry = try #require(manifests.values.first?.audio.first)
        // A listed audio file turned into a link to a secret outside the root.
        let secret = root.deletingLastPathComponent().appendingPathComponent("secret.txt")
        try "SENTINEL-OUTSIDE-ROOT".write(to: secret, atomically: true, encoding: .utf8)
        let linked = try #require(manifests.values.dropFirst().first?.audio.first)
        try FileManager.default.removeItem(at: root.appendingPathComponent(linked.path))
        try FileManager.default.createSymbolicLink(at: root.appendingPathComponent(linked.path), withDestinationURL: secret)
        let server = try ReviewProcess(root: root)
        defer { server.stop() }

        let encoded = { (path: String) in
            path.split(separator: "/").map { $0.replacingOccurrences(of: " ", with: "%20") }.joined(separator: "/")
        }
        let port = try #require(URL(string: server.url)?.port)
        let probes = [
            "/../secret.txt", "/audio/../../secret.txt", "/audio/%2e%2e/%2e%2e/secret.txt", "/audio/%2E%2E%2F%2E%2E%2Fsecret.txt",
            "/audio/AudioCache/..%2f..%2f..%2fsecret.txt", "/tours/%2e%2e/%2e%2e/secret.txt", "/assets/leaflet/../../../secret.txt",
            "/audio/" + encoded(linked.path), "/OfflineTours/\(manifests.keys.first!)/package.json", "/audio/state/x",
        ]
        let answers = try RawHTTP.get(port: port, paths: probes)
        for (path, answer) in zip(probes, answers) {
            #expect([400, 403, 404].contains(answer.status), "\(path) answered \(answer.status)")
            #expect(!answer.body.contains("SENTINEL"), "\(path) leaked the file outside the root")
        }
        #expect(answers[7].status == 403, "a symlink out of the root is refused")
        #expect(answers.prefix(7).allSatisfy { $0.status == 400 }, "\(answers.map(\.status))")

        // What is listed is served, whole or by range.
        let whole = try RawHTTP.get(port: port, paths: ["/audio/" + encoded(entry.path)])[0]
        #expect(whole.status == 200 && whole.length == Int(entry.sizeBytes))
        let file = Array(try Data(contentsOf: root.appendingPathComponent(entry.path)))
        let range = try RawHTTP.get(port: port, paths: ["/audio/" + encoded(entry.path)], range: "bytes=100-199")[0]
        #expect(range.status == 206 && range.bytes == Array(file[100..<200]))
        #expect(range.contentRange == "bytes 100-199/\(file.count)")
        let beyond = try RawHTTP.get(port: port, paths: ["/audio/" + encoded(entry.path)], range: "bytes=\(file.count)-")[0]
        #expect(beyond.status == 416)
    }

    /// Issue 35: a DNS-rebinding page reaches the review under its own name;
    /// any `Host` but the server's own is refused, for pages and audio alike.
    @Test func onlyRequestsNamingTheServerItselfAreAnswered() throws {
        let root = try Self.root()
        let entry = try #require(try Self.manifests(root).values.first?.audio.first)
        let server = try ReviewProcess(root: root)
        defer { server.stop() }
        let port = try #require(URL(string: server.url)?.port)
        let audio =
            "/audio/" + entry.path.split(separator: "/").map { $0.replacingOccurrences(of: " ", with: "%20") }.joined(separator: "/")
        let script = """
            import http.client, sys
            port, path, host = int(sys.argv[1]), sys.argv[2], sys.argv[3]
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            connection.putrequest("GET", path, skip_host=True, skip_accept_encoding=True)
            if host != "-":
                connection.putheader("Host", host)
            connection.endheaders()
            response = connection.getresponse()
            body = response.read()
            print(response.status, len(body))
            """
        func status(_ path: String, host: String) throws -> Int {
            let run = try Tool.run("python3", ["-c", script, "\(port)", path, host])
            return Int(run.stdout.split(separator: " ").first ?? "") ?? -1
        }
        for path in ["/", audio] {
            #expect(try status(path, host: "attacker.example") == 421, "\(path)")
            #expect(try status(path, host: "attacker.example:\(port)") == 421, "\(path)")
            #expect(try status(path, host: "-") == 400, "\(path) without a Host")
            #expect(try status(path, host: "127.0.0.1:\(port)") == 200, "\(path)")
            #expect(try status(path, host: "localhost:\(port)") == 200, "\(path)")
        }
    }

    @Test func narrationTextsWithThePipelineAndARouteWithoutItsTilePack() throws {
        let root = try Self.root()
        let manifests = try Self.manifests(root)
        // One pack gone: its tour says so, draws the route on a plain background, and validate's finding shows.
        let (bare, bareManifest) = try #require(manifests.first)
        try FileManager.default.removeItem(at: root.appendingPathComponent("OfflineTours/\(bare)/tiles.mbtiles"))
        let pipeline = try Self.pipeline()
        let server = try ReviewProcess(root: root, arguments: ["--pipeline", pipeline.path])
        defer { server.stop() }
        let seen = try BrowserReport.crawl(server.url, screenshot: nil)

        let tour = try #require(seen.tours[bare])
        #expect(tour.ready && tour.noTiles == 1 && tour.tiles.isEmpty, "\(tour)")
        #expect(tour.routes == 1 && tour.markers == bareManifest.pois.count && tour.triggers == bareManifest.pois.count)
        let row = try #require(seen.packages.first { $0.package == bare })
        #expect(row.text("validate") != "passed")
        #expect(seen.requests.allSatisfy { !$0.contains("/tiles/\(bare)/") })
        #expect(seen.console.filter { $0.level == "SEVERE" }.isEmpty, "\(seen.console)")

        // Every phase shows the tour's own text for it.
        let tours = try TourLoader().loadAll(globs: [pipeline.deletingLastPathComponent().appendingPathComponent("tours/*.json").path])
        var shown = 0
        for (folder, manifest) in manifests {
            let tourFile = try #require(tours.first { $0.id.value == manifest.tourId })
            for poi in tourFile.pois {
                let page = try #require(seen.pois.first { $0.key.hasSuffix("/tours/\(folder)/\(poi.id.value).html") }?.value)
                for phase in page.phases {
                    let text = try #require(poi.narrations.first { $0.key.rawValue == phase.phase }?.value.text)
                    #expect(phase.narration == text && !phase.narrationMissing)
                    shown += 1
                }
            }
        }
        #expect(shown == manifests.values.reduce(0) { $0 + $1.audio.count })
    }

    // MARK: The export

    @Test func theExportOpensFromDiskWithTheSamePages() throws {
        let root = try Self.root()
        let manifests = try Self.manifests(root)
        let export = root.deletingLastPathComponent().appendingPathComponent("site")
        let run = try Executable.run(["review", root.path, "--export", export.path])
        #expect(run.status == 0, "\(run.stdout)\n\(run.stderr)")
        #expect(run.stdout.contains("exported 16 page(s)"), "\(run.stdout)")
        let index = export.appendingPathComponent("index.html")
        let seen = try BrowserReport.crawl(index.absoluteString, screenshot: nil)
        try Self.expectPages(seen, manifests: manifests, root: root, origin: export.absoluteString, findings: [:])
        // Its tiles are the pack's, as files.
        let tileRequests = seen.requests.filter { $0.contains("/tiles/") }
        #expect(!tileRequests.isEmpty)
        for url in tileRequests {
            let (folder, tile) = try #require(Self.tile(in: url))
            let pack = try MBTilesReader(root.appendingPathComponent("OfflineTours/\(folder)/tiles.mbtiles"))
            let file = Array(try Data(contentsOf: URL(string: url)!))
            let packed = try pack.tile(tile)
            let same = file == packed
            #expect(same, "\(url): \(file.count) bytes, the pack's tile has \(packed?.count ?? 0)")
        }
        // Inside the root it would be stray files of the bundle.
        let inside = try Executable.run(["review", root.path, "--export", root.appendingPathComponent("site").path])
        #expect(inside.status == ExitStatus.badInput && inside.stderr.contains("inside the Documents root"), "\(inside.stderr)")
    }

    // MARK: What every crawl must show

    /// The pages as package.json says they should be. `findings` maps the
    /// audio paths that must show a finding to their package folder.
    static func expectPages(
        _ seen: BrowserReport, manifests: [String: PackageManifest], root: URL, origin: String, findings: [String: String],
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        // The packages page: every package, with package.json's numbers.
        #expect(seen.packages.count == manifests.count, sourceLocation: sourceLocation)
        for (folder, manifest) in manifests {
            let row = try #require(seen.packages.first { $0.package == folder }, "no row for \(folder)", sourceLocation: sourceLocation)
            let first = try #require(manifest.audio.first)
            #expect(row.text("tour") == manifest.tourName, sourceLocation: sourceLocation)
            #expect(row.text("version") == "\(manifest.tourVersion)", sourceLocation: sourceLocation)
            #expect(row.text("language") == manifest.language, sourceLocation: sourceLocation)
            #expect(row.text("voice") == manifest.voice.name, sourceLocation: sourceLocation)
            #expect(row.text("format") == first.format.rawValue, sourceLocation: sourceLocation)
            #expect(row.text("bitrate") == "\(first.bitrateKbps) kbps", sourceLocation: sourceLocation)
            #expect(row.text("created") == PackageManifest.timestamp(manifest.createdAt), sourceLocation: sourceLocation)
            #expect(row.text("expires") == PackageManifest.timestamp(manifest.expiresAt), sourceLocation: sourceLocation)
            #expect(row.data("size", "bytes") == "\(manifest.sizeBytes)", sourceLocation: sourceLocation)
            let duration = manifest.audio.reduce(0) { $0 + $1.durationSeconds }
            #expect(abs((Double(row.data("duration", "seconds") ?? "") ?? -1) - duration) < 1e-9, sourceLocation: sourceLocation)
            #expect(row.text("pois") == "\(manifest.pois.count)", sourceLocation: sourceLocation)
            let broken = findings.values.contains(folder)
            #expect((row.text("validate") == "passed") == !broken, "\(row.text("validate") ?? "")", sourceLocation: sourceLocation)

            // Its tour page: the route, one marker and one trigger circle per POI, the coverage, tiles from the pack.
            let tour = try #require(seen.tours[folder], sourceLocation: sourceLocation)
            #expect(tour.ready, sourceLocation: sourceLocation)
            #expect(tour.markers == manifest.pois.count && tour.triggers == manifest.pois.count, sourceLocation: sourceLocation)
            #expect(Set(tour.markerTitles) == Set(manifest.pois.map(\.name)), sourceLocation: sourceLocation)
            #expect(tour.routes == 1 && tour.coverage == 1 && tour.noTiles == 0, sourceLocation: sourceLocation)
            #expect(
                !tour.tiles.isEmpty && tour.tiles.allSatisfy(\.loaded), "\(tour.tiles.filter { !$0.loaded })",
                sourceLocation: sourceLocation)
            #expect(tour.tiles.allSatisfy { $0.src.contains("/tiles/\(folder)/") }, sourceLocation: sourceLocation)
            #expect(tour.poiLinks.count == manifest.pois.count, sourceLocation: sourceLocation)
        }
        // Every POI page: each player decodes to package.json's duration; findings only where expected.
        var players = 0
        var formats: Set<String> = []
        for (folder, manifest) in manifests {
            for poi in manifest.pois {
                let page = try #require(
                    seen.pois.first { $0.key.hasSuffix("/tours/\(folder)/\(poi.id).html") }?.value, "no page for \(poi.id)",
                    sourceLocation: sourceLocation)
                let entries = manifest.audio.filter { $0.poiId == poi.id }
                #expect(page.phases.map(\.phase) == entries.map(\.phase.rawValue), sourceLocation: sourceLocation)
                for (phase, entry) in zip(page.phases, entries) {
                    players += 1
                    formats.insert(entry.format.rawValue)
                    #expect(phase.expected == entry.durationSeconds, sourceLocation: sourceLocation)
                    #expect(phase.facts["characters"] == "\(entry.characters)", sourceLocation: sourceLocation)
                    #expect(phase.narrationMissing, "no --pipeline: the text is not in the root", sourceLocation: sourceLocation)
                    if findings[entry.path] != nil {
                        #expect(phase.highlighted && !phase.findings.isEmpty, "\(entry.path)", sourceLocation: sourceLocation)
                        #expect(phase.findings.allSatisfy { $0.path == entry.path }, sourceLocation: sourceLocation)
                        #expect(phase.findings.contains { $0.check == "size" || $0.check == "sha256" }, sourceLocation: sourceLocation)
                        continue
                    }
                    #expect(
                        !phase.highlighted && phase.findings.isEmpty, "\(entry.path): \(phase.findings)", sourceLocation: sourceLocation)
                    #expect(phase.error == nil, "\(entry.path) did not decode in Chromium", sourceLocation: sourceLocation)
                    let decoded = try #require(phase.duration, "\(entry.path) has no duration", sourceLocation: sourceLocation)
                    #expect(
                        phase.ended, "\(entry.path) did not play to its end in Chromium: \(phase.playError ?? "no error")",
                        sourceLocation: sourceLocation)
                    #expect(
                        abs(decoded - entry.durationSeconds) <= 0.1,
                        "\(entry.path): Chromium \(decoded) s, package.json \(entry.durationSeconds) s",
                        sourceLocation: sourceLocation)
                }
            }
        }
        #expect(players == manifests.values.reduce(0) { $0 + $1.audio.count }, sourceLocation: sourceLocation)
        #expect(formats == ["aac", "mp3", "opus"], sourceLocation: sourceLocation)

        // No errors in the console, and nothing asked of anyone but the review site.
        let errors = seen.console.filter { $0.level == "SEVERE" }
        #expect(errors.isEmpty, "\(errors)", sourceLocation: sourceLocation)
        let originPrefix = origin.hasPrefix("file:") ? "file://" : origin
        let strays = seen.requests.filter { !$0.hasPrefix(originPrefix) && !$0.hasPrefix("data:") }
        #expect(strays.isEmpty, "requests beyond the review site: \(strays)", sourceLocation: sourceLocation)
        #expect(!seen.requests.isEmpty, sourceLocation: sourceLocation)
    }

    /// The package folder and tile of a `…/tiles/<folder>/<z>/<x>/<y>.png` URL.
    static func tile(in url: String) -> (String, TileID)? {
        guard let range = url.range(of: "/tiles/") else { return nil }
        let parts = url[range.upperBound...].split(separator: "/")
        guard parts.count == 4, let z = Int(parts[1]), let x = Int(parts[2]), let y = Int(parts[3].split(separator: ".").first ?? "")
        else { return nil }
        return (String(parts[0]), TileID(z: z, x: x, y: y))
    }
}

/// `tourpack review ROOT --port 0`, run as a process; its URL is the first line it prints.
final class ReviewProcess {
    let process = Process()
    let url: String

    init(root: URL, arguments: [String] = []) throws {
        let first = try ServerProcess.firstLine(process, arguments: ["review", root.path, "--port", "0"] + arguments, timeout: 120)
        guard first.hasPrefix("http://") else {
            if process.isRunning { process.terminate() }
            throw SetupFailure("tourpack review printed no URL")
        }
        url = first
    }

    /// The server's `/debug/stats` counters.
    func stats() throws -> [String: Any] {
        let data = try Data(contentsOf: URL(string: url + "debug/stats")!)
        return try JSONSerialization.jsonObject(with: data) as? [String: Any] ?? [:]
    }

    func stop() {
        guard process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
    }

    deinit { stop() }
}

/// What `review_browser.py` saw.
struct BrowserReport: Decodable {
    struct Cell: Decodable {
        var text: String
        var data: [String: String]
    }
    struct Row: Decodable {
        var package: String
        var href: String
        var cells: [String: Cell]
        func text(_ name: String) -> String? { cells[name]?.text }
        func data(_ name: String, _ key: String) -> String? { cells[name]?.data[key] }
    }
    struct Tile: Decodable {
        var src: String
        var loaded: Bool
    }
    struct Tour: Decodable {
        var ready: Bool
        var markers: Int
        var markerTitles: [String]
        var triggers: Int
        var routes: Int
        var coverage: Int
        var noTiles: Int
        var tiles: [Tile]
        var poiLinks: [String]
    }
    struct Finding: Decodable {
        var path: String
        var check: String
    }
    struct Phase: Decodable {
        var phase: String
        var highlighted: Bool
        var narration: String
        var narrationMissing: Bool
        var expected: Double
        var duration: Double?
        var error: Int?
        var ended: Bool
        var playError: String?
        var facts: [String: String]
        var findings: [Finding]
    }
    struct POIPage: Decodable {
        var phases: [Phase]
    }
    struct ConsoleEntry: Decodable, CustomStringConvertible {
        var level: String?
        var message: String?
        var description: String { "\(level ?? ""): \(message ?? "")" }
    }

    var packages: [Row]
    var tours: [String: Tour]
    var pois: [String: POIPage]
    var console: [ConsoleEntry]
    var requests: [String]

    /// Runs the browser script over the site at `start` and reads its report.
    static func crawl(_ start: String, screenshot: URL?) throws -> BrowserReport {
        let out = TemporaryFolder.path("review-browser", suffix: ".json")
        defer { TemporaryFolder.remove(out) }
        let run = try Tool.run("python3", [ReviewCommandTests.browserScript.path, start, out.path] + (screenshot.map { [$0.path] } ?? []))
        guard run.status == 0 else { throw SetupFailure("review_browser.py failed (\(run.status)): \(run.stdout)\n\(run.stderr)") }
        return try JSONDecoder().decode(BrowserReport.self, from: Data(contentsOf: out))
    }
}

/// Requests sent exactly as written, `..` and all (URL types would tidy
/// them away), through Python's http.client.
enum RawHTTP {
    struct Answer: Decodable {
        var status: Int
        var length: Int
        var contentRange: String?
        var hex: String
        var bytes: [UInt8] {
            stride(from: 0, to: hex.count, by: 2).map { offset in
                let start = hex.index(hex.startIndex, offsetBy: offset)
                return UInt8(hex[start..<hex.index(start, offsetBy: 2)], radix: 16) ?? 0
            }
        }
        var body: String { String(decoding: bytes, as: UTF8.self) }
    }

    static let script = """
        import http.client, json, sys
        port, rng, paths = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
        answers = []
        for path in paths:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            connection.putrequest("GET", path, skip_accept_encoding=True)
            if rng:
                connection.putheader("Range", rng)
            connection.endheaders()
            response = connection.getresponse()
            body = response.read()
            answers.append({"status": response.status, "length": len(body), "contentRange": response.getheader("Content-Range"),
                            "hex": body.hex()})
            connection.close()
        print(json.dumps(answers))
        """

    static func get(port: Int, paths: [String], range: String = "") throws -> [Answer] {
        let run = try Tool.run("python3", ["-c", script, "\(port)", range] + paths)
        guard run.status == 0 else { throw SetupFailure("raw HTTP failed: \(run.stderr)") }
        return try JSONDecoder().decode([Answer].self, from: Data(run.stdout.utf8))
    }
}

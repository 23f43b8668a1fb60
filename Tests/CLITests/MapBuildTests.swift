import Foundation
import Testing
import TourpackAudio
import TourpackCore
import TourpackKit
import TourpackMaps
import TourpackTesting

#if canImport(Glibc)
import Glibc
#endif

/// The maps phase end to end: the real `tourpack build` against the real
/// `serve-tts` and `serve-tiles`, whose `/debug/stats` prove what was (not)
/// requested, and the packs read back with SQLite.
@Suite(.serialized, .offThePool) struct MapBuildTests {
    static let northID = "9c5e4f6b-1d74-4e8a-8f88-4a5b6c7d8e91"
    static let southID = "9c5e4f6b-1d74-4e8a-8f88-4a5b6c7d8e92"

    /// Two small tours whose maps overlap (so they share tiles) at zoom
    /// 11–13 with a one-mile buffer: a few dozen tiles, some only in one tour.
    static func workspace(source: String, extraMaps: String = "", formats: [String] = ["aac"]) throws -> BuildWorkspace {
        let workspace = try BuildWorkspace(
            formats: formats,
            extraYAML: """
                maps:
                  minZoom: 11
                  maxZoom: 13
                  bufferMiles: 1
                \(extraMaps.split(separator: "\n").map { "  " + $0 }.joined(separator: "\n"))
                  source:
                \(source.split(separator: "\n").map { "    " + $0 }.joined(separator: "\n"))
                """)
        try FileManager.default.removeItem(at: workspace.root.appendingPathComponent("tours/alps.json"))
        try FileManager.default.removeItem(at: workspace.root.appendingPathComponent("tours/lakes.json"))
        try tour(id: northID, name: "North Ridge", from: (46.50, 7.60), to: (46.53, 7.66), poi: "9c5e4f6b-1d74-4e8a-8f88-4a5b6c7d8ea1")
            .write(to: workspace.root.appendingPathComponent("tours/north.json"), atomically: true, encoding: .utf8)
        try tour(id: southID, name: "South Valley", from: (46.48, 7.62), to: (46.45, 7.70), poi: "9c5e4f6b-1d74-4e8a-8f88-4a5b6c7d8ea2")
            .write(to: workspace.root.appendingPathComponent("tours/south.json"), atomically: true, encoding: .utf8)
        return workspace
    }

    static func tour(id: String, name: String, from: (Double, Double), to: (Double, Double), poi: String) -> String {
        """
        {"id": "\(id)", "name": "\(name)", "language": "en-US", "version": 1,
         "route": {"waypoints": [{"latitude": \(from.0), "longitude": \(from.1)}, {"latitude": \(to.0), "longitude": \(to.1)}],
                   "segments": [{"from": 0, "to": 1, "distanceMeters": 5000, "durationSeconds": 600}]},
         "pois": [{"id": "\(poi)", "name": "Viewpoint", "location": {"latitude": \(from.0), "longitude": \(from.1)},
                   "triggerRadiusMeters": 300, "narrations": {"approaching": "The view opens to the \(name.lowercased())."}}]}
        """
    }

    static func loadTour(_ url: URL) throws -> Tour {
        var diagnostics = DiagnosticCollector()
        return try #require(TourLoader().load(url, into: &diagnostics), "\(diagnostics.diagnostics)")
    }

    static func source(_ tiles: LocalTileServer, concurrency: Int = 4) -> String {
        "url: \(tiles.urlTemplate)\nattribution: Test tiles\nuserAgent: tourpack-tests (maps@example.com)\nconcurrency: \(concurrency)\nrequestsPerSecond: 0\n"
    }

    static let fastRetries = "tts:\n  api: google\n"

    /// Every package.json of the root, by tour ID.
    static func manifests(_ workspace: BuildWorkspace) throws -> [String: PackageManifest] {
        let folder = workspace.output.appendingPathComponent(Layout.offlineToursFolder)
        var found: [String: PackageManifest] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: folder.path) {
            let manifest = try PackageManifest.read(
                from: folder.appendingPathComponent(name).appendingPathComponent(Layout.manifestFileName))
            found[manifest.tourId] = manifest
        }
        return found
    }

    /// Every tile of a pack, by XYZ id, read with SQLite through its TMS rows.
    static func packTiles(_ url: URL) throws -> [TileID: [UInt8]] {
        let reader = try MBTilesReader(url)
        let rows = try sqlite(url, "SELECT zoom_level || '/' || tile_column || '/' || tile_row FROM tiles")
        var tiles: [TileID: [UInt8]] = [:]
        for row in rows {
            let parts = row.split(separator: "/").compactMap { Int($0) }
            let id = TileID(z: parts[0], x: parts[1], y: (1 << parts[0]) - 1 - parts[2])
            tiles[id] = try reader.tile(id)
        }
        return tiles
    }

    /// Runs the sqlite3 command-line shell on a file, as a person checking a pack would.
    static func sqlite(_ url: URL, _ query: String) throws -> [String] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["sqlite3", "-readonly", url.path, query]
        let out = Pipe()
        process.standardOutput = out
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw SetupFailure("sqlite3 failed on \(url.path)") }
        return String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init)
    }

    static func serverTile(_ tiles: LocalTileServer, _ id: TileID) throws -> [UInt8] {
        Array(
            try Data(
                contentsOf: URL(
                    string: tiles.urlTemplate.replacingOccurrences(of: "{z}", with: "\(id.z)")
                        .replacingOccurrences(of: "{x}", with: "\(id.x)").replacingOccurrences(of: "{y}", with: "\(id.y)"))!))
    }

    static func stat(_ tiles: LocalTileServer, _ name: String) throws -> Int { try tiles.stats()[name] as? Int ?? -1 }

    static func perTile(_ tiles: LocalTileServer) throws -> [String: [String: Int]] {
        (try tiles.stats()["perTile"] as? [String: [String: Int]]) ?? [:]
    }

    @Test func packsHoldTheServersTilesFetchedOnceAndRebuildsSendNothing() throws {
        let voice = try LocalVoiceServer()
        let tiles = try LocalTileServer(flags: ["--max-age", "3600"])
        let workspace = try Self.workspace(source: Self.source(tiles))
        let first = try workspace.build(voice, ["--json"])
        #expect(first.status == 0, "\(first.stdout)\n\(first.stderr)")

        let manifests = try Self.manifests(workspace)
        #expect(manifests.count == 2)
        // What the build asked for, before this test asks the server for its own copies.
        let counts = try Self.perTile(tiles)
        let agents = try tiles.stats()["userAgents"] as? [String]
        var allTiles: Set<TileID> = []
        for manifest in manifests.values {
            let map = manifest.mapTiles
            let file = try #require(map.file)
            #expect(file == "OfflineTours/\(manifest.packageId)/tiles.mbtiles")
            let url = workspace.output.appendingPathComponent(file)
            let digest = try FileDigest.sha256(of: url)
            #expect(digest.size == map.sizeBytes && digest.hex == map.sha256)
            #expect(map.format == .png && map.attribution == "Test tiles" && map.emptyTiles == 0)
            let packed = try Self.packTiles(url)
            #expect(packed.count == map.storedTiles && map.storedTiles == map.tileCount)
            // Byte for byte the server's tile, at the right (TMS) row.
            for (id, bytes) in packed { #expect(bytes == (try Self.serverTile(tiles, id)), "tile \(id)") }
            let tour = try Self.loadTour(
                workspace.root.appendingPathComponent("tours/\(manifest.tourId == Self.northID ? "north" : "south").json"))
            var settings = MapSettings(minZoom: 11, maxZoom: 13, bufferMiles: 1)
            settings.source = nil
            #expect(Set(packed.keys) == Set(tour.mapTiles(settings)))
            let metadata = Dictionary(
                uniqueKeysWithValues: try Self.sqlite(url, "SELECT name || '=' || value FROM metadata").map {
                    let parts = $0.split(separator: "=", maxSplits: 1)
                    return (String(parts[0]), parts.count > 1 ? String(parts[1]) : "")
                })
            #expect(
                metadata["format"] == "png" && metadata["minzoom"] == "11" && metadata["maxzoom"] == "13"
                    && metadata["attribution"] == "Test tiles")
            #expect(metadata["name"] == manifest.tourName && metadata["bounds"] != nil && metadata["center"] != nil)
            allTiles.formUnion(packed.keys)
        }
        // The tours share tiles; each was downloaded once, and nothing was asked twice.
        let shared = manifests.values.map {
            Set((try? Self.packTiles(workspace.output.appendingPathComponent($0.mapTiles.file!)))?.keys.map { $0 } ?? [])
        }
        #expect(!shared[0].intersection(shared[1]).isEmpty)
        #expect(counts.count == allTiles.count)
        #expect(counts.values.allSatisfy { $0["ok"] == 1 && $0["requests"] == 1 }, "\(counts)")
        #expect(agents == ["tourpack-tests (maps@example.com)"])

        // A rebuild sends no tile request and rewrites no byte.
        let before = try RootCheck.snapshot(workspace.output)
        try tiles.reset()
        let second = try workspace.build(voice, ["--json"])
        #expect(second.status == 0, "\(second.stderr)")
        #expect(try Self.stat(tiles, "requests") == 0)
        #expect(try RootCheck.snapshot(workspace.output) == before)
        let summary = try IncrementalBuildTests.summary(second)
        #expect(summary["tileRequests"] as? Int == 0 && summary["tilePacks"] as? Int == 0)

        // validate accepts the bundle, packs included.
        let validate = try Executable.run(["validate", workspace.output.path], in: workspace.root)
        #expect(validate.status == 0, "\(validate.stdout)")
        #expect(RootCheck.problems(in: workspace.output).isEmpty)
    }

    @Test func staleTilesAreAskedConditionallyAndA304RewritesNothing() throws {
        let voice = try LocalVoiceServer()
        let tiles = try LocalTileServer(flags: ["--max-age", "60"])
        let workspace = try Self.workspace(source: Self.source(tiles))
        let first = try workspace.build(voice)
        #expect(first.status == 0, "\(first.stderr)")
        let tileCount = try Self.perTile(tiles).count
        let before = try RootCheck.snapshot(workspace.output)
        try tiles.reset()
        // A day later every tile is stale: one conditional request each, answered 304.
        let later = PackageManifest.timestamp(Date().addingTimeInterval(86_400))
        let second = try Executable.run(
            ["build", workspace.pipeline.path, "--endpoint", voice.endpoint, "--json"], in: workspace.root,
            environment: ["TOURPACK_NOW": later])
        #expect(second.status == 0, "\(second.stderr)")
        // Every tile was asked for conditionally and answered 304; none was downloaded again.
        let stats = try tiles.stats()
        let perTile = try Self.perTile(tiles)
        #expect(perTile.count == tileCount, "\(stats)")
        #expect(perTile.values.allSatisfy { ($0["notModified"] ?? 0) >= 1 && $0["ok"] == 0 }, "\(stats)")
        #expect(stats["conditional"] as? Int == stats["requests"] as? Int, "\(stats)")
        #expect(stats["ok"] as? Int == 0, "\(stats)")
        #expect(try RootCheck.snapshot(workspace.output) == before)
        let summary = try IncrementalBuildTests.summary(second)
        #expect(summary["tilesRenewed"] as? Int == tileCount)
    }

    @Test(arguments: ["404", "204"])
    func tilesWithoutDataAreCountedEmpty(status: String) throws {
        let voice = try LocalVoiceServer()
        let tiles = try LocalTileServer(flags: ["--empty-every", "3", "--empty-status", status])
        let workspace = try Self.workspace(source: Self.source(tiles))
        let result = try workspace.build(voice)
        #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
        for manifest in try Self.manifests(workspace).values {
            let map = manifest.mapTiles
            let tour = try Self.loadTour(
                workspace.root.appendingPathComponent("tours/\(manifest.tourId == Self.northID ? "north" : "south").json"))
            let expectedEmpty = tour.mapTiles(MapSettings(minZoom: 11, maxZoom: 13, bufferMiles: 1)).filter { ($0.x + $0.y) % 3 == 0 }.count
            #expect(expectedEmpty > 0)
            #expect(map.emptyTiles == expectedEmpty)
            #expect(map.storedTiles! + map.emptyTiles! == map.tileCount)
            let packed = try Self.packTiles(workspace.output.appendingPathComponent(map.file!))
            #expect(packed.count == map.storedTiles)
            #expect(packed.keys.allSatisfy { ($0.x + $0.y) % 3 != 0 })
        }
        #expect(try Self.stat(tiles, "empty") > 0)
        // cache stats counts the tiles it keeps (empty ones included) and the packs.
        let stats = try Executable.run(["cache", "stats", workspace.pipeline.path, "--json"], in: workspace.root)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(stats.stdout.utf8)) as? [String: Any], "\(stats.stderr)")
        #expect(object["tileCacheEntries"] as? Int == (try Self.perTile(tiles)).count)
        #expect((object["tileCacheBytes"] as? Int ?? 0) > 0 && object["tilePacks"] as? Int == 2)
    }

    @Test func aTileThatKeepsFailingFailsOnlyItsTourAndKeepsTheOldPackage() throws {
        let voice = try LocalVoiceServer()
        let good = try LocalTileServer(flags: ["--max-age", "60"])
        let workspace = try Self.workspace(source: Self.source(good))
        #expect(try workspace.build(voice).status == 0)
        let before = try RootCheck.snapshot(workspace.output)
        good.stop()

        // A tile only the south tour needs now fails for good; the key is a sentinel that must never show.
        let north = try Self.loadTour(workspace.root.appendingPathComponent("tours/north.json"))
        let south = try Self.loadTour(workspace.root.appendingPathComponent("tours/south.json"))
        let settings = MapSettings(minZoom: 11, maxZoom: 13, bufferMiles: 1)
        let onlySouth = try #require(Set(south.mapTiles(settings)).subtracting(north.mapTiles(settings)).sorted().last)
        let sentinel = "SENTINEL-KEY-\(UUID().uuidString)"
        let failing = try LocalTileServer(
            flags: ["--fail", "\(onlySouth)", "--max-age", "60", "--api-key-env", "TILE_TEST_KEY"], environment: ["TILE_TEST_KEY": sentinel]
        )
        let yaml = try String(contentsOf: workspace.pipeline, encoding: .utf8)
            .replacingOccurrences(of: good.urlTemplate, with: failing.urlTemplate + "?style=outdoors")
            .replacingOccurrences(of: "attribution: Test tiles", with: "attribution: Test tiles\n    apiKeyEnv: TILE_TEST_KEY")
        try yaml.write(to: workspace.pipeline, atomically: true, encoding: .utf8)
        let later = PackageManifest.timestamp(Date().addingTimeInterval(86_400))
        let result = try Executable.run(
            ["build", workspace.pipeline.path, "--endpoint", voice.endpoint, "--json"], in: workspace.root,
            environment: ["TOURPACK_NOW": later, "TILE_TEST_KEY": sentinel])
        #expect(result.status == 1)
        let failure = try #require(result.stdout.split(separator: "\n").first { $0.contains("\"tourFailed\"") })
        #expect(failure.contains("South Valley") && failure.contains("mapDownloadFailed") && failure.contains("\(onlySouth)"))
        #expect(failure.contains("HTTP 500") && failure.contains("style=outdoors"), "\(failure)")
        let packaged = result.stdout.split(separator: "\n").filter { $0.contains("\"tourPackaged\"") }
        #expect(packaged.count == 1 && packaged[0].contains("North Ridge"), "\(packaged)")
        // The north tour went on (its tiles renewed under the new URL), the south package is byte for byte the old one.
        let after = try RootCheck.snapshot(workspace.output)
        let southPackage = try #require(
            before.keys.first {
                $0.hasPrefix("OfflineTours/") && (before[$0].map { String(decoding: $0, as: UTF8.self).contains(Self.southID) } ?? false)
            })
        let southFolder = (southPackage as NSString).deletingLastPathComponent
        for (path, bytes) in before where path.hasPrefix(southFolder) || path.contains(Self.southID) {
            #expect(after[path] == bytes, "\(path) changed")
        }
        // The key reached the server, and nowhere else.
        #expect(try Self.stat(failing, "unauthorized") == 0)
        for text in [result.stdout, result.stderr] { #expect(!text.contains(sentinel)) }
        for root in [workspace.output, workspace.state] {
            for path in RootCheck.allFiles(under: root) {
                let data = try Data(contentsOf: root.appendingPathComponent(path))
                #expect(data.range(of: Data(sentinel.utf8)) == nil, "the key is in \(path)")
            }
        }
        let plan = try Executable.run(["plan", workspace.pipeline.path], in: workspace.root, environment: ["TILE_TEST_KEY": sentinel])
        #expect(!plan.stdout.contains(sentinel) && !plan.stderr.contains(sentinel))
    }

    @Test func aBuildThroughFaultyTileServerCompletesWithTheServersTiles() throws {
        let voice = try LocalVoiceServer()
        let tiles = try LocalTileServer(flags: [
            "--failure-rate", "0.03", "--rate-limit-rate", "0.01", "--retry-after", "0", "--truncate-rate", "0.015",
            "--html-rate", "0.015", "--fault-seed", "7",
        ])
        let workspace = try Self.workspace(source: Self.source(tiles), formats: ["aac", "opus"])
        let yaml = try String(contentsOf: workspace.pipeline, encoding: .utf8)
            .replacingOccurrences(
                of: "  timeoutSeconds: 30", with: "  timeoutSeconds: 30\n  initialBackoffMs: 5\n  maxBackoffMs: 50\n  maxAttempts: 8")
        try yaml.write(to: workspace.pipeline, atomically: true, encoding: .utf8)
        let result = try workspace.build(voice, ["--json"])
        #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
        #expect(try Self.stat(tiles, "faults") > 0)
        let counts = try Self.perTile(tiles)
        #expect(counts.values.allSatisfy { $0["ok"] == 1 }, "a tile was downloaded twice: \(counts.filter { $0.value["ok"] != 1 })")
        // The same tiles from a server without faults (tiles are deterministic).
        let reference = try LocalTileServer()
        for manifest in try Self.manifests(workspace).values {
            for (id, bytes) in try Self.packTiles(workspace.output.appendingPathComponent(manifest.mapTiles.file!)) {
                #expect(bytes == (try Self.serverTile(reference, id)), "tile \(id)")
            }
        }
        // Both formats' packages carry the same pack, written once (a hard link).
        #expect(result.stdout.contains("\"mapsProgress\""))
        try tiles.reset()
        #expect(try workspace.build(voice).status == 0)
        #expect(try Self.stat(tiles, "requests") == 0)
    }

    @Test func aBuildKilledDuringTheMapsLeavesNoPartialPackAndTheRerunCompletes() throws {
        let voice = try LocalVoiceServer()
        let tiles = try LocalTileServer(flags: ["--latency-ms", "150"])
        let workspace = try Self.workspace(source: Self.source(tiles, concurrency: 1))
        let running = try workspace.startBuild(voice)
        #expect(running.waitForEvent("mapsProgress", timeout: 60) != nil)
        running.signal(SIGKILL)
        _ = running.finish()
        let packs = RootCheck.allFiles(under: workspace.output).filter { $0.hasSuffix(".mbtiles") || $0.contains(".mbtiles.") }
        #expect(packs.isEmpty, "\(packs)")
        // Not even an empty package folder: the pack waited in the state's staging folder.
        #expect(RootCheck.problems(in: workspace.output).isEmpty, "\(RootCheck.problems(in: workspace.output))")
        let killed = try Executable.run(["validate", workspace.output.path], in: workspace.root)
        #expect(killed.status == 0, "\(killed.stdout)")
        let rerun = try workspace.build(voice)
        #expect(rerun.status == 0, "\(rerun.stdout)\n\(rerun.stderr)")
        #expect(RootCheck.problems(in: workspace.output).isEmpty, "\(RootCheck.problems(in: workspace.output))")
        let validate = try Executable.run(["validate", workspace.output.path], in: workspace.root)
        #expect(validate.status == 0, "\(validate.stdout)")
    }

    @Test func planShowsTheCorridorBesideTheBoxAndMaxTilesRefuses() throws {
        let voice = try LocalVoiceServer()
        let tiles = try LocalTileServer()
        let workspace = try Self.workspace(source: Self.source(tiles), extraMaps: "selection: corridor")
        let plan = try Executable.run(["plan", workspace.pipeline.path], in: workspace.root)
        #expect(plan.status == 0, "\(plan.stderr)")
        #expect(
            plan.stdout.contains("bbox") && plan.stdout.contains("corridor *") && plan.stdout.contains("fresh in cache"), "\(plan.stdout)")
        let json = try Executable.run(["plan", workspace.pipeline.path, "--json"], in: workspace.root)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        let tours = try #require(object["tours"] as? [[String: Any]])
        for tour in tours {
            let selections = try #require(tour["tileSelections"] as? [[String: Any]])
            let bbox = try #require(selections.first { $0["selection"] as? String == "bbox" }?["tiles"] as? Int)
            let corridor = try #require(selections.first { $0["selection"] as? String == "corridor" }?["tiles"] as? Int)
            #expect(corridor <= bbox && corridor > 0)
        }
        // maxTiles below a tour's count refuses the build before any request, with exit 3 and the numbers.
        let yaml = try String(contentsOf: workspace.pipeline, encoding: .utf8).replacingOccurrences(
            of: "selection: corridor", with: "maxTiles: 3")
        try yaml.write(to: workspace.pipeline, atomically: true, encoding: .utf8)
        let refused = try workspace.build(voice)
        #expect(refused.status == 3)
        #expect(refused.stderr.contains("maps.maxTiles") && refused.stderr.contains("tiles"), "\(refused.stderr)")
        #expect(try Self.stat(tiles, "requests") == 0)
    }
}

/// Map sources beyond one server and one build: a local extract, two builds
/// sharing a state folder, and a pipeline that drops its source.
@Suite(.serialized, .offThePool) struct MapSourceTests {
    @Test func aLocalExtractIsReadInsteadOfTheNetworkWithItsRowsConverted() throws {
        let voice = try LocalVoiceServer()
        let tiles = try LocalTileServer()
        let first = try MapBuildTests.workspace(source: MapBuildTests.source(tiles))
        #expect(try first.build(voice).status == 0)
        // The first build's pack of the north tour becomes the extract of a second pipeline.
        let north = try #require(try MapBuildTests.manifests(first)[MapBuildTests.northID])
        let extract = first.root.appendingPathComponent("alps-extract.mbtiles")
        try FileManager.default.copyItem(at: first.output.appendingPathComponent(try #require(north.mapTiles.file)), to: extract)
        tiles.stop()

        let second = try MapBuildTests.workspace(source: "mbtiles: \(extract.path)\nattribution: Extract tiles")
        let result = try second.build(voice)
        #expect(result.status == 0, "\(result.stderr)")
        let manifests = try MapBuildTests.manifests(second)
        let copied = try MapBuildTests.packTiles(
            second.output.appendingPathComponent(try #require(manifests[MapBuildTests.northID]?.mapTiles.file)))
        let original = try MapBuildTests.packTiles(extract)
        #expect(!copied.isEmpty && copied == original)
        // The south tour's tiles the extract lacks are counted empty, not failed.
        let south = try #require(manifests[MapBuildTests.southID]?.mapTiles)
        #expect(south.emptyTiles! > 0 && south.storedTiles! + south.emptyTiles! == south.tileCount)
        #expect(manifests.values.allSatisfy { $0.mapTiles.attribution == "Extract tiles" })
    }

    @Test func twoBuildsSharingAStateFolderFetchEachTileOnce() throws {
        let voice = try LocalVoiceServer()
        let tiles = try LocalTileServer(flags: ["--latency-ms", "60"])
        let workspace = try MapBuildTests.workspace(source: MapBuildTests.source(tiles, concurrency: 2))
        // A second root (an opus job, say) with the same state folder and tours.
        let other = workspace.root.appendingPathComponent("Documents-opus")
        let a = try workspace.startBuild(voice)
        let b = try RunningBuild(
            arguments: [
                "build", workspace.pipeline.path, "--endpoint", voice.endpoint, "--json", "--output", other.path, "--format", "opus",
            ],
            in: workspace.root)
        #expect(a.finish() == 0)
        #expect(b.finish() == 0)
        let counts = try MapBuildTests.perTile(tiles)
        #expect(!counts.isEmpty)
        #expect(counts.values.allSatisfy { $0["ok"] == 1 }, "fetched twice: \(counts.filter { $0.value["ok"] != 1 })")
        let packs = RootCheck.allFiles(under: other).filter { $0.hasSuffix("tiles.mbtiles") }
        #expect(packs.count == 2)
    }

    @Test func droppingTheTileSourceRemovesThePacksWithTheNewPackages() throws {
        let voice = try LocalVoiceServer()
        let tiles = try LocalTileServer()
        let workspace = try MapBuildTests.workspace(source: MapBuildTests.source(tiles))
        #expect(try workspace.build(voice).status == 0)
        #expect(RootCheck.allFiles(under: workspace.output).filter { $0.hasSuffix("tiles.mbtiles") }.count == 2)
        var yaml = try String(contentsOf: workspace.pipeline, encoding: .utf8)
        yaml = String(yaml[..<yaml.range(of: "  source:")!.lowerBound])
        try yaml.write(to: workspace.pipeline, atomically: true, encoding: .utf8)
        let result = try workspace.build(voice)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(RootCheck.allFiles(under: workspace.output).filter { $0.contains("mbtiles") }.isEmpty)
        #expect(try MapBuildTests.manifests(workspace).values.allSatisfy { $0.mapTiles.file == nil })
        let validate = try Executable.run(["validate", workspace.output.path, "--strict"], in: workspace.root)
        #expect(validate.status == 0, "\(validate.stdout)")
    }
}

/// The defects of issue 27 in the maps phase: what the tile cache and a
/// local extract hand the build is checked, a bad extract is a
/// configuration error at load, and a route too large is refused before
/// anything is built.
@Suite(.serialized, .offThePool) struct MapHostileInputTests {
    /// A PNG as far as the magic check goes: the signature and a payload naming the tile.
    static func png(_ tile: TileID) -> [UInt8] {
        [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + Array("\(tile)".utf8)
    }

    /// An extract holding every tile of the north tour, written with MBTilesWriter.
    static func writeExtract(_ url: URL, workspace: BuildWorkspace) throws {
        let tour = try MapBuildTests.loadTour(workspace.root.appendingPathComponent("tours/north.json"))
        let settings = MapSettings(minZoom: 11, maxZoom: 13, bufferMiles: 1)
        let tiles = tour.mapTiles(settings)
        let bounds = try #require(tour.mapCoverage(settings)).bounds
        let metadata = MBTilesMetadata(
            name: "Extract", format: .png, bounds: bounds, minZoom: 11, maxZoom: 13, attribution: "Extract tiles")
        let writer = try MBTilesWriter(creating: url, metadata: metadata)
        for tile in tiles { try writer.add(tile, data: png(tile)) }
        try writer.finish()
    }

    /// Runs SQL on a file with the sqlite3 shell, writing.
    static func sqliteWrite(_ url: URL, _ sql: String) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["sqlite3", url.path, sql]
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw SetupFailure("sqlite3 failed on \(url.path): \(sql)") }
    }

    @Test(arguments: ["html", "empty", "text", "jpg"])
    func extractTilesAreCheckedAsFetchedTilesAre(damage: String) throws {
        let voice = try LocalVoiceServer()
        let workspace = try MapBuildTests.workspace(source: "mbtiles: extract.mbtiles\nattribution: Extract tiles")
        let extract = workspace.root.appendingPathComponent("extract.mbtiles")
        try Self.writeExtract(extract, workspace: workspace)
        let first = "(SELECT min(rowid) FROM tiles)"
        switch damage {
        case "html":
            try Self.sqliteWrite(extract, "UPDATE tiles SET tile_data = CAST('<!DOCTYPE html><html>' AS BLOB) WHERE rowid = \(first)")
        case "empty": try Self.sqliteWrite(extract, "UPDATE tiles SET tile_data = X'' WHERE rowid = \(first)")
        case "text": try Self.sqliteWrite(extract, "UPDATE tiles SET tile_data = 'not a tile' WHERE rowid = \(first)")
        default: try Self.sqliteWrite(extract, "UPDATE metadata SET value = 'jpg' WHERE name = 'format'")
        }
        let result = try workspace.build(voice)
        #expect(result.status != 0, "a bad extract tile built: \(result.stdout)")
        let words =
            damage == "text" ? "is text, not a blob" : damage == "jpg" ? "is not jpg by its first bytes" : "is not png by its first bytes"
        let output = result.stdout + result.stderr
        #expect(output.contains("its map failed: maps.source.mbtiles: \(extract.path): tile "), "\(output)")
        #expect(output.contains(words), "\(output)")
        // No package whose pack would hold the bad tile was published.
        let published = RootCheck.allFiles(under: workspace.output).filter { $0.hasSuffix(Layout.manifestFileName) }
        #expect(published.isEmpty, "\(published)")
    }

    @Test(arguments: ["directory", "no tiles table", "tiles view"])
    func aBadExtractIsAConfigurationErrorNamingItOnce(kind: String) throws {
        let workspace = try MapBuildTests.workspace(source: "mbtiles: extract.mbtiles\nattribution: Extract tiles")
        let extract = workspace.root.appendingPathComponent("extract.mbtiles")
        let expected: String
        switch kind {
        case "directory":
            try FileManager.default.createDirectory(at: extract, withIntermediateDirectories: true)
            expected = "is a directory, not an MBTiles file"
        case "no tiles table":
            try Self.writeExtract(extract, workspace: workspace)
            try Self.sqliteWrite(extract, "DROP TABLE tiles")
            expected = "no `tiles` table"
        default:
            try Self.writeExtract(extract, workspace: workspace)
            try Self.sqliteWrite(extract, "ALTER TABLE tiles RENAME TO t; CREATE VIEW tiles AS SELECT * FROM t")
            expected = "`tiles` is a view, not a table"
        }
        for command in ["plan", "build"] {
            let result = try Executable.run([command, workspace.pipeline.path], in: workspace.root)
            #expect(result.status == 2, "\(command): \(result.stdout)\n\(result.stderr)")
            #expect(result.stderr.contains("maps.source.mbtiles") && result.stderr.contains(expected), "\(result.stderr)")
            #expect(result.stderr.components(separatedBy: extract.path).count == 2, "the path is named once: \(result.stderr)")
        }
        #expect(!FileManager.default.fileExists(atPath: workspace.output.path))
    }

    @Test func aFIFOExtractIsRefusedAtLoadInsteadOfBlocking() throws {
        let workspace = try MapBuildTests.workspace(source: "mbtiles: extract.mbtiles\nattribution: Extract tiles")
        let extract = workspace.root.appendingPathComponent("extract.mbtiles")
        #expect(mkfifo(extract.path, 0o600) == 0)
        for command in ["plan", "build"] {
            let process = Process()
            process.executableURL = Executable.tourpack
            process.arguments = [command, workspace.pipeline.path]
            process.currentDirectoryURL = workspace.root
            let errors = Pipe()
            process.standardError = errors
            process.standardOutput = FileHandle.nullDevice
            let ended = DispatchSemaphore(value: 0)
            process.terminationHandler = { _ in ended.signal() }
            try process.run()
            // A bounded wait: a reader blocked on the FIFO is killed and the test fails clearly.
            guard ended.wait(timeout: .now() + 60) == .success else {
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
                Issue.record("\(command) with a FIFO as its extract did not end within 60 s")
                continue
            }
            let stderr = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            #expect(process.terminationStatus == 2, "\(command): \(stderr)")
            #expect(stderr.contains("\(extract.path): is a FIFO, not an MBTiles file"), "\(stderr)")
        }
    }

    @Test func aWALExtractBuildsAndNothingAppearsBesideIt() throws {
        let voice = try LocalVoiceServer()
        let workspace = try MapBuildTests.workspace(source: "mbtiles: extracts/extract.mbtiles\nattribution: Extract tiles")
        let folder = workspace.root.appendingPathComponent("extracts")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let extract = folder.appendingPathComponent("extract.mbtiles")
        try Self.writeExtract(extract, workspace: workspace)
        try Self.sqliteWrite(extract, "PRAGMA journal_mode = WAL")
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path) == ["extract.mbtiles"])
        let header = try FileHandle(forReadingFrom: extract).readData(ofLength: 20)
        #expect(header[18] == 2 && header[19] == 2, "the extract is not in WAL mode")
        let result = try workspace.build(voice)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path) == ["extract.mbtiles"])
        let north = try #require(try MapBuildTests.manifests(workspace)[MapBuildTests.northID]?.mapTiles)
        #expect(north.storedTiles == north.tileCount)
    }

    @Test func cachedTileFilesAreCheckedAgainstTheirNamesAndRefetched() throws {
        let voice = try LocalVoiceServer()
        let tiles = try LocalTileServer(flags: ["--max-age", "3600"])
        let workspace = try MapBuildTests.workspace(source: MapBuildTests.source(tiles))
        #expect(try workspace.build(voice).status == 0)
        // Two cached PNGs swapped and a third replaced with HTML; every entry is still fresh.
        let folder = workspace.state.appendingPathComponent("tiles")
        let files = try FileManager.default.subpathsOfDirectory(atPath: folder.path).filter { $0.split(separator: "/").last?.count == 64 }
            .sorted().map { folder.appendingPathComponent($0) }
        #expect(files.count >= 3)
        let (a, b) = (try Data(contentsOf: files[0]), try Data(contentsOf: files[1]))
        try b.write(to: files[0])
        try a.write(to: files[1])
        try Data("<!DOCTYPE html><html>rate limited</html>".utf8).write(to: files[2])
        try tiles.reset()
        // A second root from the same state: its packs are made from the cache.
        let other = workspace.root.appendingPathComponent("Documents-2")
        let result = try Executable.run(
            ["build", workspace.pipeline.path, "--endpoint", voice.endpoint, "--output", other.path], in: workspace.root)
        #expect(result.status == 0, "\(result.stderr)")
        // The three bad files were misses: asked for again, and nothing else was.
        let asked = try MapBuildTests.perTile(tiles)
        #expect(asked.count == 3, "\(asked)")
        var checked = 0
        for name in try FileManager.default.contentsOfDirectory(atPath: other.appendingPathComponent(Layout.offlineToursFolder).path) {
            let manifest = try PackageManifest.read(
                from: other.appendingPathComponent(Layout.offlineToursFolder).appendingPathComponent(name).appendingPathComponent(
                    Layout.manifestFileName))
            for (id, bytes) in try MapBuildTests.packTiles(other.appendingPathComponent(try #require(manifest.mapTiles.file))) {
                #expect(bytes == (try MapBuildTests.serverTile(tiles, id)), "tile \(id)")
                checked += 1
            }
        }
        #expect(checked > 0)
        let validate = try Executable.run(["validate", other.path], in: workspace.root)
        #expect(validate.status == 0, "\(validate.stdout)")
    }

    @Test func aRouteTooLargeIsRefusedBeforeItsTilesAreListed() throws {
        let voice = try LocalVoiceServer()
        let tiles = try LocalTileServer()
        let workspace = try MapBuildTests.workspace(source: MapBuildTests.source(tiles))
        // Around the globe at zooms 11–15: a box of about a billion tiles (listing them would need
        // tens of gigabytes), in short segments so the corridor the plan counts stays cheap.
        let waypoints = (0...120).map { step -> String in
            let t = Double(step) / 120
            return "{\"latitude\": \(-60 + 120 * t), \"longitude\": \(-170 + 340 * t)}"
        }
        let tour = """
            {"id": "\(MapBuildTests.northID)", "name": "Around", "language": "en-US", "version": 1,
             "route": {"waypoints": [\(waypoints.joined(separator: ", "))],
                       "segments": [{"from": 0, "to": 120, "distanceMeters": 20000000, "durationSeconds": 600000}]},
             "pois": [{"id": "9c5e4f6b-1d74-4e8a-8f88-4a5b6c7d8ea1", "name": "Start", "location": {"latitude": -60, "longitude": -170},
                       "triggerRadiusMeters": 300, "narrations": {"approaching": "A long way to go."}}]}
            """
        try tour.write(to: workspace.root.appendingPathComponent("tours/north.json"), atomically: true, encoding: .utf8)
        try FileManager.default.removeItem(at: workspace.root.appendingPathComponent("tours/south.json"))
        let yaml = try String(contentsOf: workspace.pipeline, encoding: .utf8).replacingOccurrences(of: "maxZoom: 13", with: "maxZoom: 15")
        try yaml.write(to: workspace.pipeline, atomically: true, encoding: .utf8)
        let plan = try Executable.run(["plan", workspace.pipeline.path], in: workspace.root)
        #expect(plan.stdout.contains("maps.maxTiles"), "\(plan.stdout)\n\(plan.stderr)")
        // With a state folder (where the refusal used to come after looking every tile up): exit 3, nothing
        // fetched. Under a 4 GiB address-space limit, so that listing the box (about 19 GB) fails at once
        // instead of filling the machine's memory.
        try FileManager.default.createDirectory(at: workspace.state, withIntermediateDirectories: true)
        for _ in 0..<2 {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/bin/sh")
            process.arguments = [
                "-c", "ulimit -v 4194304 && exec \"$0\" \"$@\"", Executable.tourpack.path, "build", workspace.pipeline.path,
                "--endpoint", voice.endpoint,
            ]
            process.currentDirectoryURL = workspace.root
            let errors = Pipe()
            process.standardError = errors
            process.standardOutput = FileHandle.nullDevice
            try process.run()
            let stderr = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            #expect(process.terminationStatus == 3, "\(stderr)")
            #expect(stderr.contains("maps.maxTiles"), "\(stderr)")
        }
        #expect(try MapBuildTests.stat(tiles, "requests") == 0)
    }
}

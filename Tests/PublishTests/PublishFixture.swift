import Crypto
import Foundation
import Testing
import TourpackAudio
import TourpackCore
import TourpackKit
import TourpackMaps
import TourpackPublish
import TourpackTesting

/// Package manifests as the store stage makes them (`PackageManifest.init`
/// from a tour, a voice and encoded audio), and the independent checkers
/// the publish tests compare against: Python's jsonschema and cryptography.
enum PublishFixture {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    static let alps = SafeID(validating: "0b7c2f0e-5d1a-4f55-9a0e-2f3b8f6c1d42")!
    static let lakes = SafeID(validating: "7d3e1f20-9c4b-4e8a-b1d2-3f4a5b6c7d8e")!

    static let local = VoicePreset(provider: "local", languageCode: "en-US", name: "en-us", tier: .local)
    static let wavenet = VoicePreset(
        provider: "google", languageCode: "en-US", name: "en-US-Wavenet-D", tier: .wavenet, speakingRate: 0.95, pitch: -2)

    /// 2026-11-24T21:00:00Z.
    static let publishedAt = PackageManifest.parseTimestamp("2026-11-24T21:00:00Z")!

    static func tour(_ id: SafeID, version: Int = 3) -> Tour {
        let alpine = id == alps
        let poi = { (n: Int) in SafeID(validating: "\(id.value.prefix(8))-0000-4000-8000-00000000000\(n)")! }
        return Tour(
            id: id, name: alpine ? "Grossglockner High Alpine Road" : "Salzkammergut \"Lakes\" / Seen",
            language: alpine ? "en-US" : "de-AT",
            version: version,
            route: Route(
                waypoints: [
                    .init(coordinate: Coordinate(latitude: 47.0417, longitude: 12.8427), name: "Heiligenblut"),
                    .init(coordinate: Coordinate(latitude: alpine ? 47.0746 : 47.7, longitude: alpine ? 12.7504 : 13.4), name: nil),
                ],
                segments: [.init(from: 0, to: 1, distanceMeters: 14200, durationSeconds: 1500.5)]),
            pois: [
                POI(
                    id: poi(1), name: "Kaiser-Franz-Josefs-Höhe", location: Coordinate(latitude: 47.0746, longitude: 12.7504),
                    triggerRadiusMeters: 800,
                    narrations: [
                        .approaching: Narration(text: "Near."), .detailed: Narration(text: "Detail."),
                        .guidedTour: Narration(text: "Tour."),
                    ]
                ),
                POI(
                    id: poi(2), name: "Fuscher Törl", location: Coordinate(latitude: 47.1250, longitude: 12.8110),
                    triggerRadiusMeters: 450.5,
                    narrations: [.detailed: Narration(text: "Pass.")]),
            ],
            sourceFile: "tours/\(id.value).json")
    }

    /// The manifest of `tour` in `voice` and `format`, with audio whose facts
    /// (size, hash, duration) differ per file, and a tile pack when `withPack`.
    static func manifest(
        _ tour: Tour, voice: VoicePreset = local, format: AudioFormat = .aac, createdAt: Date = publishedAt.addingTimeInterval(-3600),
        withPack: Bool = true
    ) throws -> PackageManifest {
        var audio: [PackageAudio] = []
        for (index, poi) in tour.pois.enumerated() {
            for phase in poi.phases {
                let seed = "\(tour.id.value) \(tour.version) \(poi.id.value) \(phase.rawValue) \(format.rawValue) \(voice.name)"
                let encoded = EncodedAudio(
                    format: format, codec: format.codecName, sampleRateHz: format.defaultSampleRate(endpointRate: 24_000), channels: 1,
                    bitrateKbps: format.bitrateKbps, durationSeconds: 12.3456 + Double(index) * 7.1 + Double(phase.rawValue.count),
                    sizeBytes: Int64(40_000 + index * 5_111 + phase.rawValue.count * 17), sha256: sha256(Data(seed.utf8)),
                    loudness: AudioLoudness(integratedLUFS: -16.02, truePeakDBTP: -1.4, gainDB: 3.5, limiterReductionDB: 0))
                audio.append(PackageAudio(poiID: poi.id, phase: phase, encoded: encoded, characters: 40))
            }
        }
        let coverage = TileMath.coverage(of: tour.coordinates, settings: MapSettings())!
        var manifest = try PackageManifest(
            tour: tour, voice: voice, format: format, audio: audio, mapTiles: coverage, createdAt: createdAt, maxAgeDays: 90,
            loudness: .standard)
        if withPack {
            manifest.mapTiles.recordPack(
                file: "OfflineTours/\(manifest.packageId)/tiles.mbtiles", format: .png, storedTiles: coverage.tileCount - 3,
                sizeBytes: 1_234_567, sha256: sha256(Data(manifest.packageId.utf8)), attribution: "© OpenStreetMap contributors")
            manifest.contentHash = manifest.computeContentHash()
        }
        return manifest
    }

    /// The catalogue entry of `manifest`, published content-addressed.
    static func entry(_ manifest: PackageManifest) -> CatalogEntry {
        CatalogEntry(
            manifest: manifest,
            manifestPath: CatalogPackage.manifestPath(packageId: manifest.packageId, contentHash: manifest.contentHash),
            manifestSHA256: sha256(Data(manifest.encoded())))
    }

    /// Two tours, the Alps in AAC (two voices), MP3 and Opus, the lakes in AAC
    /// without a tile pack: five packages, given out of order.
    static func entries() throws -> [CatalogEntry] {
        [
            entry(try manifest(tour(lakes), withPack: false)),
            entry(try manifest(tour(alps), format: .opus)),
            entry(try manifest(tour(alps), voice: wavenet)),
            entry(try manifest(tour(alps), format: .mp3)),
            entry(try manifest(tour(alps))),
        ]
    }

    static func catalog(generation: Int = 7, previousGeneration: Int? = 6) throws -> Catalog {
        Catalog(
            generation: generation, previousGeneration: previousGeneration, publishedAt: publishedAt,
            expiresAt: publishedAt.addingTimeInterval(7 * 86_400), entries: try entries())
    }

    static func sha256(_ data: Data) -> String {
        SHA256.hash(data: data).lowercaseHex
    }

    /// Runs a Python script with `arguments` as `sys.argv[1...]`, off the cooperative pool.
    static func python(_ script: String, _ arguments: [String]) async throws -> Tool.Result {
        try await Tool.runOffThePool("python3", ["-c", script] + arguments)
    }

    /// Python's jsonschema (draft 2020-12) on `document` against
    /// `schemas/catalog.schema.json`: one line per error, none when it passes.
    static func schemaErrors(_ document: Data) async throws -> [String] {
        let folder = try TemporaryFolder.make("tourpack-publish")
        defer { TemporaryFolder.remove(folder) }
        let file = folder.appendingPathComponent("catalog.json")
        try document.write(to: file)
        let script = """
            import json, sys
            import jsonschema
            schema = json.load(open(sys.argv[1]))
            jsonschema.Draft202012Validator.check_schema(schema)
            validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
            errors = sorted(validator.iter_errors(json.load(open(sys.argv[2]))), key=lambda e: list(e.absolute_path))
            for e in errors:
                print("/".join(str(p) for p in e.absolute_path) + ": " + e.message)
            sys.exit(1 if errors else 0)
            """
        let schema = packageRoot.appendingPathComponent("schemas/catalog.schema.json")
        let result = try await python(script, [schema.path, file.path])
        try #require(result.status == 0 || result.status == 1, "python3 failed: \(result.stderr)")
        return result.stdout.split(separator: "\n").map(String.init)
    }
}

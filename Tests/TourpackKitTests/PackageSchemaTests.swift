import Foundation
import Testing
import TourpackMaps
import TourpackTesting

@testable import TourpackCore
@testable import TourpackKit
@testable import TourpackValidate

/// `PackageSchema` (validate's Swift mirror of `schemas/package.schema.json`)
/// must agree with the schema file as Python's `jsonschema` reads it: the
/// same documents pass, the same edits fail. The Swift messages name the
/// JSON path of each problem.
@Suite(.offThePool) struct PackageSchemaTests {
    static func document(_ text: String) throws -> JSONValue {
        try StrictJSONReader().read(Array(text.utf8))
    }

    static var original: String {
        get throws { String(decoding: try StoreManifestFixture.manifest().encoded(), as: UTF8.self) }
    }

    /// The same package carrying a tile pack: `mapTiles` with all seven pack fields.
    static var withPack: String {
        get throws {
            var manifest = try StoreManifestFixture.manifest()
            manifest.mapTiles.recordPack(
                file: "OfflineTours/\(manifest.packageId)/tiles.mbtiles", format: .png, storedTiles: manifest.mapTiles.tileCount - 7,
                sizeBytes: 123_456, sha256: String(repeating: "ab", count: 32), attribution: "© OpenStreetMap contributors")
            manifest.contentHash = manifest.computeContentHash()
            return String(decoding: manifest.encoded(), as: UTF8.self)
        }
    }

    @Test func aManifestWithATilePackPasses() throws {
        let text = try Self.withPack
        #expect(text.contains("\"emptyTiles\": 7"))
        #expect(PackageSchema.problems(in: try Self.document(text)) == [])
        #expect(try StoreSchemaTests.schemaErrors(Array(text.utf8)) == [])
    }

    /// The pack's fields: each edit, the mirror's message (a prefix), and Python must refuse it too.
    @Test(arguments: [
        ("\"format\": \"png\"", "\"format\": \"gif\"", "mapTiles.format: \"gif\" is not one of \"png\", \"jpg\", \"webp\", \"pbf\""),
        ("\"file\": \"OfflineTours/", "\"file\": \"AudioCache/", "mapTiles.file: \"AudioCache/"),
        ("/tiles.mbtiles\"", "/tiles.sqlite\"", "mapTiles.file: \"OfflineTours/"),
        (
            "\"sha256\": \"\(String(repeating: "ab", count: 32))\",", "",
            "mapTiles.sha256: missing required field (file, format, storedTiles, emptyTiles, sizeBytes, sha256 and attribution go together)"
        ),
        ("\"attribution\": \"© OpenStreetMap contributors\",", "", "mapTiles.attribution: missing required field"),
        ("\"sizeBytes\": 123456", "\"sizeBytes\": 0", "mapTiles.sizeBytes: 0 is less than the minimum 1"),
        ("\"emptyTiles\": 7", "\"emptyTiles\": -1", "mapTiles.emptyTiles: -1 is less than the minimum 0"),
        ("\"selection\": \"bbox\"", "\"selection\": \"box\"", "mapTiles.selection: \"box\" is not one of \"bbox\", \"corridor\""),
        ("\"selection\": \"bbox\",", "", "mapTiles.selection: missing required field"),
    ])
    func packEditsAreRefusedLikeTheSchemaFile(find: String, replace: String, message: String) throws {
        let original = try Self.withPack
        try #require(original.contains(find), "fixture text lacks \(find)")
        let edited = original.replacingOccurrences(of: find, with: replace, options: [], range: original.range(of: find))
        let problems = PackageSchema.problems(in: try Self.document(edited))
        #expect(problems.contains { $0.hasPrefix(message) }, "\(problems)")
        #expect(!(try StoreSchemaTests.schemaErrors(Array(edited.utf8))).isEmpty, "jsonschema accepted what the mirror refuses: \(replace)")
    }

    @Test func generatedManifestsPassInEveryFormat() throws {
        #expect(PackageSchema.problems(in: try Self.document(Self.original)) == [])
        for format in [AudioFormat.mp3, .opus] {
            let manifest = try StoreManifestFixture.manifest(in: format)
            #expect(PackageSchema.problems(in: try Self.document(String(decoding: manifest.encoded(), as: UTF8.self))) == [], "\(format)")
        }
    }

    /// Each edit, with the message the Swift mirror gives. Python's validator must refuse it too.
    @Test(arguments: [
        ("\"tourVersion\": 3,", "\"tourVersion\": 3, \"extra\": 1,", "extra: unknown key (the schema allows no other keys here)"),
        (
            "\"phase\": \"guidedTour\"", "\"phase\": \"Guided Tour\"",
            "audio[2].phase: \"Guided Tour\" is not one of \"approaching\", \"detailed\", \"guidedTour\""
        ),
        ("\"tourId\": \"0b7c2f0e", "\"tourId\": \"0B7C2F0E", "tourId: \"0B7C2F0E-5d1a-4f55-9a0e-2f3b8f6c1d42\" is not a lowercase UUID"),
        (
            "\"createdAt\": \"2025-01-15T10:20:30Z\"", "\"createdAt\": \"2025-01-15T10:20:30.000Z\"",
            "createdAt: \"2025-01-15T10:20:30.000Z\" is not a UTC time like 2025-01-15T10:20:30Z"
        ),
        (
            "\"bitrateKbps\": 128", "\"bitrateKbps\": 300",
            "audio[0].bitrateKbps: aac at 44100 Hz takes 8 to 264 kbps (AAC-LC carries at most 6,144 bits per frame of one channel), not 300"
        ),
        ("\"format\": \"aac\"", "\"format\": \"wav\"", "audio[0].format: \"wav\" is not one of \"aac\", \"mp3\", \"opus\""),
        (
            "\"path\": \"AudioCache/", "\"path\": \"../AudioCache/",
            "audio[0].path: \"../AudioCache/0b7c2f0e-5d1a-4f55-9a0e-2f3b8f6c1d42/5f1e0c1a-8a7b-4c1e-9b55-7c0d3e2a9f10_Approaching.m4a\" is not AudioCache/<tourId>/<poiId>_<Phase>.<ext>"
        ),
        ("\"contentHash\": ", "\"contentHashX\": ", "contentHashX: unknown key (the schema allows no other keys here)"),
        ("\"sizeBytes\": 51110", "\"sizeBytes\": \"51110\"", "sizeBytes: expected an integer, found a string"),
        ("\"channels\": 1", "\"channels\": 2", "audio[0].channels: expected 1, found 2"),
        ("\"minZoom\": 12", "\"minZoom\": 23", "mapTiles.minZoom: 23 is more than the maximum 22"),
        ("\"triggerRadiusMeters\": 800", "\"triggerRadiusMeters\": 0", "pois[0].triggerRadiusMeters: 0 must be greater than 0"),
        ("\"tourVersion\": 3,", "\"tourVersion\": 3, \"tourVersion\": 4,", "tourVersion: duplicate key"),
        ("_Approaching.m4a", "_Detailed.m4a", "audio[0].path: the file name must end in _Approaching for phase approaching"),
    ])
    func editsAreRefusedLikeTheSchemaFile(find: String, replace: String, message: String) throws {
        let original = try Self.original
        try #require(original.contains(find), "fixture text lacks \(find)")
        let edited = original.replacingOccurrences(of: find, with: replace, options: [], range: original.range(of: find))
        let problems = PackageSchema.problems(in: try Self.document(edited))
        #expect(problems.contains(message), "\(problems)")
        // Duplicate keys are beyond JSON Schema (Python keeps the last one); every other edit Python refuses too.
        if !message.hasSuffix("duplicate key") {
            #expect(
                !(try StoreSchemaTests.schemaErrors(Array(edited.utf8))).isEmpty, "jsonschema accepted what the mirror refuses: \(replace)")
        }
    }

    @Test func aMissingFieldIsNamedByItsPath() throws {
        let edited = try Self.original.replacingOccurrences(of: "\"sha256\": ", with: "\"sha257\": ")
        let problems = PackageSchema.problems(in: try Self.document(edited))
        #expect(problems.contains("audio[0].sha256: missing required field"))
        #expect(problems.contains("audio[3].sha257: unknown key (the schema allows no other keys here)"))
    }
}

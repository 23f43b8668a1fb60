import Foundation
import Testing
import TourpackTesting

@testable import TourpackCore
@testable import TourpackKit

/// package.json against `schemas/package.schema.json` (checked by Python's
/// `jsonschema`, Draft 2020-12) and against the committed golden file.
///
/// `TOURPACK_UPDATE_GOLDENS=1 swift test --filter StoreSchema` rewrites
/// `Resources/store/package.golden.json` in the source tree; review the diff
/// by eye, because the app reads exactly these bytes.
@Suite(.offThePool) struct StoreSchemaTests {
    static let testsFolder = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    static let schema = testsFolder.deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent(
        "schemas/package.schema.json")

    /// Runs the validator; returns its error lines (empty when the document is valid).
    static func schemaErrors(_ document: [UInt8]) throws -> [String] {
        try JSONSchemaCheck.errors(in: document, schema: schema)
    }

    @Test func generatedManifestsAreValid() throws {
        let m = try StoreManifestFixture.manifest()
        let errors = try Self.schemaErrors(m.encoded())
        #expect(errors.isEmpty, "\(errors)")

        // Every format's facts satisfy the per-format rules too.
        for format in [AudioFormat.mp3, .opus] {
            let other = try StoreManifestFixture.manifest(in: format)
            let errors = try Self.schemaErrors(other.encoded())
            #expect(errors.isEmpty, "\(format): \(errors)")
        }
    }

    @Test func aManifestWithATilePackIsValid() throws {
        let errors = try Self.schemaErrors(Array(try PackageSchemaTests.withPack.utf8))
        #expect(errors.isEmpty, "\(errors)")
    }

    /// The schema is strict: each of these edits must be caught.
    @Test(arguments: [
        ("unknown key", "\"tourVersion\": 3,", "\"tourVersion\": 3, \"extra\": 1,"),
        ("phase label instead of key", "\"phase\": \"guidedTour\"", "\"phase\": \"Guided Tour\""),
        ("uppercase UUID", "\"tourId\": \"0b7c2f0e", "\"tourId\": \"0B7C2F0E"),
        ("fractional seconds", "\"createdAt\": \"2025-01-15T10:20:30Z\"", "\"createdAt\": \"2025-01-15T10:20:30.000Z\""),
        ("a bit rate AAC cannot carry", "\"bitrateKbps\": 128", "\"bitrateKbps\": 300"),
        ("unknown format", "\"format\": \"aac\"", "\"format\": \"wav\""),
        ("path escaping the layout", "\"path\": \"AudioCache/", "\"path\": \"../AudioCache/"),
        ("missing field", "\"contentHash\": ", "\"contentHashX\": "),
        ("sizeBytes as text", "\"sizeBytes\": 51110", "\"sizeBytes\": \"51110\""),
        ("unknown tile selection", "\"selection\": \"bbox\"", "\"selection\": \"all\""),
        ("a pack's field without the pack", "\"selection\": \"bbox\",", "\"selection\": \"bbox\", \"storedTiles\": 5,"),
    ])
    func editsAreRefused(what: String, find: String, replace: String) throws {
        let original = String(decoding: try StoreManifestFixture.manifest().encoded(), as: UTF8.self)
        try #require(original.contains(find), "fixture text lacks \(find)")
        let edited = original.replacingOccurrences(of: find, with: replace)
        let errors = try Self.schemaErrors(Array(edited.utf8))
        #expect(!errors.isEmpty, "the schema accepted: \(what)")
    }

    @Test func goldenFileMatchesByteForByte() throws {
        let bytes = try StoreManifestFixture.manifest().encoded()
        if ProcessInfo.processInfo.environment["TOURPACK_UPDATE_GOLDENS"] == "1" {
            let target = Self.testsFolder.appendingPathComponent("Resources/store/package.golden.json")
            try FileManager.default.createDirectory(at: target.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data(bytes).write(to: target)
            return
        }
        let resources = Bundle.module.url(forResource: "Resources", withExtension: nil)!
        let golden = try Data(contentsOf: resources.appendingPathComponent("store/package.golden.json"))
        #expect(Array(golden) == bytes, "package.json bytes changed; see the doc comment to regenerate")
    }
}

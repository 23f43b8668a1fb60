import Foundation
import Testing
import TourpackCore
import TourpackKit
import TourpackMaps
import TourpackPublish

/// catalog.json: built from real manifests, grouped and ordered, byte for
/// byte deterministic, and accepted by its JSON Schema as Python reads it.
@Suite struct CatalogTests {
    @Test("A catalogue has one entry per package, grouped by tour, tours by tourId and packages by packageId")
    func groupsAndOrders() throws {
        let catalog = try PublishFixture.catalog()
        #expect(catalog.tours.map(\.tourId) == [PublishFixture.alps.value, PublishFixture.lakes.value])
        let alps = try #require(catalog.tours.first)
        #expect(alps.packages.count == 4)
        #expect(alps.packages.map(\.packageId) == alps.packages.map(\.packageId).sorted())
        #expect(Set(alps.packages.map(\.format)) == [.aac, .mp3, .opus])
        #expect(alps.tourName == "Grossglockner High Alpine Road" && alps.tourVersion == 3 && alps.language == "en-US")
        #expect(catalog.tours[1].packages.count == 1 && catalog.tours[1].language == "de-AT")
    }

    @Test("A package's entry takes its facts from package.json: sizes, duration, POIs, bounds, dates, codec")
    func packageFacts() throws {
        let manifest = try PublishFixture.manifest(PublishFixture.tour(PublishFixture.alps), format: .opus)
        let entry = PublishFixture.entry(manifest).package
        let audio = manifest.audio.reduce(Int64(0)) { $0 + $1.sizeBytes }
        #expect(entry.audioBytes == audio && audio == manifest.sizeBytes)
        #expect(entry.mapBytes == 1_234_567)
        #expect(entry.sizeBytes == audio + 1_234_567)
        #expect(abs(entry.durationSeconds - manifest.audio.reduce(0) { $0 + $1.durationSeconds }) < 0.001)
        #expect(entry.poiCount == 2)
        #expect(entry.bounds == manifest.mapTiles.bounds)
        #expect(entry.format == .opus && entry.codec == "opus" && entry.bitrateKbps == 96 && entry.quality == .high)
        #expect(entry.voice == manifest.voice && entry.contentHash == manifest.contentHash)
        #expect(entry.createdAt == manifest.createdAt && entry.expiresAt == manifest.expiresAt)
        #expect(entry.manifest.path == "packages/\(manifest.packageId)/\(manifest.contentHash).json")
        #expect(entry.manifest.sha256 == PublishFixture.sha256(Data(manifest.encoded())))

        let withoutPack = PublishFixture.entry(try PublishFixture.manifest(PublishFixture.tour(PublishFixture.lakes), withPack: false))
        #expect(withoutPack.package.mapBytes == 0 && withoutPack.package.sizeBytes == withoutPack.package.audioBytes)
    }

    @Test("The bytes are deterministic: encoding twice, and decoding then encoding again, give the same bytes")
    func deterministicBytes() throws {
        let bytes = try PublishFixture.catalog().encoded()
        #expect(try PublishFixture.catalog().encoded() == bytes)
        let decoded = try Catalog.decode(bytes)
        #expect(decoded == (try PublishFixture.catalog()))
        #expect(try decoded.encoded() == bytes)
        // The same packages in another order are the same catalogue.
        let reversed = Catalog(
            generation: 7, previousGeneration: 6, publishedAt: PublishFixture.publishedAt,
            expiresAt: PublishFixture.publishedAt.addingTimeInterval(7 * 86_400), entries: try PublishFixture.entries().reversed())
        #expect(try reversed.encoded() == bytes)

        let text = String(decoding: bytes, as: UTF8.self)
        #expect(text.hasSuffix("}\n") && !text.hasSuffix("\n\n"))
        #expect(!text.contains("\\/"))
        #expect(text.contains("\"Salzkammergut \\\"Lakes\\\" / Seen\""))
        #expect(text.contains("\"publishedAt\": \"2026-11-24T21:00:00Z\""))
        #expect(text.contains("\"expiresAt\": \"2026-12-01T21:00:00Z\""))
        #expect(text.contains("\"createdAt\": \"2026-11-24T20:00:00Z\""))
        #expect(text.contains("\"generation\": 7") && text.contains("\"previousGeneration\": 6"))
        // Keys sorted at every level: `audioBytes` before `bitrateKbps` … before `voice`.
        let keys = [
            "\"audioBytes\"", "\"bitrateKbps\"", "\"bounds\"", "\"codec\"", "\"contentHash\"", "\"createdAt\"", "\"durationSeconds\"",
        ]
        let offsets = keys.map { text.range(of: $0)!.lowerBound }
        #expect(offsets == offsets.sorted())
    }

    @Test("Another schemaVersion is refused, not rewritten")
    func otherSchemaVersion() throws {
        let text = String(decoding: try PublishFixture.catalog().encoded(), as: UTF8.self)
        let edited = text.replacingOccurrences(of: "\"schemaVersion\": 1", with: "\"schemaVersion\": 2")
        #expect(throws: TourpackError.invalidInput("catalog.json: schemaVersion 2; this tourpack reads version 1 only")) {
            try Catalog.decode(Data(edited.utf8))
        }
    }

    @Test("The first generation has no previousGeneration, and a fraction of a second is dropped")
    func firstGeneration() throws {
        let catalog = Catalog(
            generation: 1, previousGeneration: nil, publishedAt: PublishFixture.publishedAt.addingTimeInterval(0.75),
            entries: try PublishFixture.entries())
        let text = String(decoding: try catalog.encoded(), as: UTF8.self)
        #expect(!text.contains("previousGeneration"))
        #expect(catalog.publishedAt == PublishFixture.publishedAt)
        #expect(try Catalog.decode(Data(text.utf8)) == catalog)
    }

    @Test("catalog.schema.json accepts the catalogue, as Python's jsonschema reads it")
    func schemaAccepts() async throws {
        #expect(try await PublishFixture.schemaErrors(try PublishFixture.catalog().encoded()) == [])
        let first = Catalog(generation: 1, previousGeneration: nil, publishedAt: PublishFixture.publishedAt, entries: [])
        #expect(try await PublishFixture.schemaErrors(try first.encoded()) == [])
    }

    /// Each edit of the encoded catalogue, and a word of the error jsonschema must give.
    @Test(
        "catalog.schema.json refuses a broken catalogue",
        arguments: [
            ("\"poiCount\": 2,", "", "'poiCount' is a required property"),
            ("\"generation\": 7,", "", "'generation' is a required property"),
            ("\"sha256\": \"", "\"sha256\": \"AB", "does not match"),
            ("\"contentHash\": \"", "\"contentHash\": \"0", "does not match"),
            ("\"path\": \"packages/", "\"path\": \"OfflineTours/", "does not match"),
            (".json\"", ".JSON\"", "does not match"),
            ("\"publishedAt\": \"2026-11-24T21:00:00Z\"", "\"publishedAt\": \"2026-11-24 21:00:00\"", "does not match"),
            ("\"poiCount\": 2,", "\"poiCount\": 2, \"extra\": 1,", "Additional properties are not allowed"),
            ("\"bitrateKbps\": 128", "\"bitrateKbps\": 300", "300 is greater than the maximum of 288"),
            ("\"quality\": \"high\"", "\"quality\": \"best\"", "'best' is not one of"),
            ("\"mapBytes\": 0", "\"mapBytes\": -1", "less than the minimum"),
            ("\"schemaVersion\": 1", "\"schemaVersion\": 2", "1 was expected"),
        ])
    func schemaRefuses(find: String, replace: String, error: String) async throws {
        let original = String(decoding: try PublishFixture.catalog().encoded(), as: UTF8.self)
        let range = try #require(original.range(of: find), "the catalogue lacks \(find)")
        let edited = original.replacingCharacters(in: range, with: replace)
        let errors = try await PublishFixture.schemaErrors(Data(edited.utf8))
        #expect(errors.contains { $0.contains(error) }, "\(replace): \(errors)")
    }

    @Test("Merging two catalogues keeps one package per packageId, the newer manifest, whichever side it is on")
    func merge() throws {
        let alps = PublishFixture.tour(PublishFixture.alps)
        let old = try PublishFixture.manifest(alps)
        let rebuilt = try PublishFixture.manifest(
            PublishFixture.tour(PublishFixture.alps, version: 4), createdAt: PublishFixture.publishedAt.addingTimeInterval(-60))
        #expect(old.packageId == rebuilt.packageId && old.contentHash != rebuilt.contentHash)
        let mp3 = try PublishFixture.manifest(alps, format: .mp3)
        let lakes = try PublishFixture.manifest(PublishFixture.tour(PublishFixture.lakes), withPack: false)

        let ours = Catalog(
            generation: 7, previousGeneration: 6, publishedAt: PublishFixture.publishedAt,
            entries: [PublishFixture.entry(old), PublishFixture.entry(mp3)])
        let theirs = Catalog(
            generation: 7, previousGeneration: 6, publishedAt: PublishFixture.publishedAt,
            entries: [PublishFixture.entry(rebuilt), PublishFixture.entry(lakes)])
        let merged = ours.mergingPackages(with: theirs)
        #expect(merged == theirs.mergingPackages(with: ours))
        #expect(merged.map(\.tourId) == [PublishFixture.alps.value, PublishFixture.lakes.value])
        let packages = merged[0].packages
        #expect(packages.count == 2)
        let aac = try #require(packages.first { $0.packageId == old.packageId })
        #expect(aac.contentHash == rebuilt.contentHash && aac.tourVersion == 4)
        #expect(packages.contains { $0.packageId == mp3.packageId && $0.tourVersion == 3 })
        // The tour is named by its newest package's version.
        #expect(merged[0].tourVersion == 4)

        // Merging a catalogue with itself changes nothing.
        #expect(ours.mergingPackages(with: ours) == ours.tours)
        let next = Catalog(generation: 8, previousGeneration: 7, publishedAt: PublishFixture.publishedAt, tours: merged)
        #expect(try Catalog.decode(try next.encoded()) == next)
    }

    @Test("Of two builds in the same second, every publisher keeps the same one")
    func sameSecondTie() throws {
        let alps = PublishFixture.tour(PublishFixture.alps)
        let a = PublishFixture.entry(try PublishFixture.manifest(alps))
        var b = a
        b.package.manifest.sha256 = String(repeating: "f", count: 64)
        #expect(b.isNewer(than: a) && !a.isNewer(than: b))
        #expect(CatalogTour.grouping([a, b]) == CatalogTour.grouping([b, a]))
        #expect(CatalogTour.grouping([a, b])[0].packages == [b.package])
    }
}

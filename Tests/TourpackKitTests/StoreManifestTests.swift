import Foundation
import Testing

@testable import TourpackAudio
@testable import TourpackCore
@testable import TourpackKit
@testable import TourpackMaps
@testable import TourpackPlan

/// A fixed tour, voice, audio and map coverage for package.json tests.
enum StoreManifestFixture {
    static let tourID = SafeID(validating: "0b7c2f0e-5d1a-4f55-9a0e-2f3b8f6c1d42")!
    static let firstPOI = SafeID(validating: "5f1e0c1a-8a7b-4c1e-9b55-7c0d3e2a9f10")!
    static let secondPOI = SafeID(validating: "1a2b3c4d-0000-4000-8000-00000000000b")!
    /// 2025-01-15T10:20:30.75Z; the fraction must be dropped.
    static let createdAt = Date(timeIntervalSince1970: 1_736_936_430.75)

    static var tour: Tour {
        Tour(
            id: tourID, name: "Grossglockner \"High\" Alpine Road", language: "en-US", version: 3,
            route: Route(
                waypoints: [
                    .init(coordinate: Coordinate(latitude: 47.0417, longitude: 12.8427), name: "Heiligenblut"),
                    .init(coordinate: Coordinate(latitude: 47.0746, longitude: 12.7504), name: nil),
                ],
                segments: [.init(from: 0, to: 1, distanceMeters: 14200, durationSeconds: 1500.5)]
            ),
            pois: [
                POI(
                    id: firstPOI, name: "Kaiser-Franz-Josefs-Höhe", location: Coordinate(latitude: 47.0746, longitude: 12.7504),
                    triggerRadiusMeters: 800,
                    narrations: [
                        .guidedTour: Narration(text: "Tour."), .approaching: Narration(text: "Near."),
                        .detailed: Narration(text: "Detail."),
                    ]),
                POI(
                    id: secondPOI, name: "Fuscher Törl", location: Coordinate(latitude: 47.1250, longitude: 12.8110),
                    triggerRadiusMeters: 450.5, narrations: [.detailed: Narration(text: "Pass.")]),
            ],
            sourceFile: "tours/alps.json"
        )
    }

    static let voice = VoicePreset(provider: "local", languageCode: "en-US", name: "en-us", tier: .local, speakingRate: 1, pitch: 0)

    static func encoded(_ seed: Int, duration: Double) -> EncodedAudio {
        EncodedAudio(
            format: .aac, codec: "aac", sampleRateHz: 44_100, channels: 1, bitrateKbps: 128, durationSeconds: duration,
            sizeBytes: Int64(10_000 + seed * 1111), sha256: String(repeating: String(seed, radix: 16), count: 64),
            loudness: AudioLoudness(integratedLUFS: -16.2, truePeakDBTP: -1.6, gainDB: 4.5, limiterReductionDB: 3.25)
        )
    }

    /// Deliberately out of order: the manifest must sort them.
    static var audio: [PackageAudio] {
        [
            PackageAudio(poiID: secondPOI, phase: .detailed, encoded: encoded(4, duration: 2.0000000001), characters: 5),
            PackageAudio(poiID: firstPOI, phase: .guidedTour, encoded: encoded(3, duration: 61.2345), characters: 5),
            PackageAudio(poiID: firstPOI, phase: .approaching, encoded: encoded(1, duration: 1.5), characters: 5),
            PackageAudio(poiID: firstPOI, phase: .detailed, encoded: encoded(2, duration: 12.25), characters: 7),
        ]
    }

    static var coverage: MapCoverage {
        TileMath.coverage(of: tour.coordinates, settings: MapSettings())!
    }

    static func manifest(tour: Tour = tour, audio: [PackageAudio] = audio, coverage: MapCoverage = coverage, createdAt: Date = createdAt)
        throws -> PackageManifest
    {
        try PackageManifest(
            tour: tour, voice: voice, format: .aac, audio: audio, mapTiles: coverage, createdAt: createdAt, maxAgeDays: 90,
            loudness: .standard)
    }

    /// The same package in another format, with that format's codec facts.
    static func manifest(in format: AudioFormat) throws -> PackageManifest {
        let converted = audio.map { item -> PackageAudio in
            var item = item
            item.encoded.format = format
            item.encoded.codec = format.codecName
            item.encoded.bitrateKbps = format.bitrateKbps
            item.encoded.sampleRateHz = format.defaultSampleRate(endpointRate: 24_000)
            return item
        }
        return try PackageManifest(
            tour: tour, voice: voice, format: format, audio: converted, mapTiles: coverage, createdAt: createdAt, maxAgeDays: 30)
    }
}

@Suite struct StoreManifestTests {
    typealias F = StoreManifestFixture

    @Test func everyFieldIsFilledFromTheInputs() throws {
        let m = try F.manifest()
        #expect(m.schemaVersion == 1)
        #expect(m.packageId == PackageID.make(tourID: F.tourID, voice: F.voice, format: .aac).value)
        #expect(m.tourId == F.tourID.value && m.tourName == F.tour.name && m.tourVersion == 3 && m.language == "en-US")
        #expect(PackageManifest.timestamp(m.createdAt) == "2025-01-15T10:20:30Z")
        #expect(PackageManifest.timestamp(m.expiresAt) == "2025-04-15T10:20:30Z")
        #expect(m.sizeBytes == m.audio.reduce(0) { $0 + $1.sizeBytes })
        #expect(m.sizeBytes == 4 * 10_000 + (1 + 2 + 3 + 4) * 1111)
        #expect(m.voice.tier == .local && m.voice.provider == "local")
        #expect(m.route.waypoints.count == 2 && m.route.segments.first?.durationSeconds == 1500.5)
        #expect(m.pois.map(\.id) == [F.firstPOI.value, F.secondPOI.value])
        // POI order, then phase order; the path names the label with its space.
        #expect(m.audio.map(\.phase) == [.approaching, .detailed, .guidedTour, .detailed])
        #expect(m.audio.map(\.poiId) == [F.firstPOI.value, F.firstPOI.value, F.firstPOI.value, F.secondPOI.value])
        #expect(m.audio[2].path == "AudioCache/\(F.tourID)/\(F.firstPOI)_Guided Tour.m4a")
        #expect(m.audio[2].durationSeconds == 61.235 || m.audio[2].durationSeconds == 61.234)
        #expect(m.audio[3].durationSeconds == 2)
        #expect(m.mapTiles == F.coverage)
        #expect(m.contentHash == m.computeContentHash() && m.contentHash.count == 64)
        #expect(!m.isExpired(at: F.createdAt) && m.isExpired(at: m.expiresAt))
    }

    @Test func sameInputsGiveSameBytesApartFromTheDates() throws {
        let a = try F.manifest()
        let b = try F.manifest(audio: F.audio.reversed())
        #expect(a.encoded() == b.encoded())
        let later = try F.manifest(createdAt: F.createdAt.addingTimeInterval(86_400 * 3 + 17))
        #expect(later.contentHash == a.contentHash)
        let differing = zip(lines(a), lines(later)).filter { $0 != $1 }.map(\.0)
        #expect(differing.count == 2)
        #expect(differing.allSatisfy { $0.contains("\"createdAt\"") || $0.contains("\"expiresAt\"") })
    }

    @Test func keysAreSortedAtEveryLevel() throws {
        let value = try F.manifest().jsonValue()
        let reread = try StrictJSONReader().read(try F.manifest().encoded())
        #expect(reread == sortedDeep(value))
    }

    /// Each change to what the app plays or shows moves the hash; changes
    /// that are invisible to the listener do not.
    @Test func contentHashChangesExactlyWithContent() throws {
        let base = try F.manifest().contentHash
        var changed: [String: String] = [:]
        var audio = F.audio
        audio[1].encoded.sha256 = String(repeating: "e", count: 64)
        changed["audio sha256"] = try F.manifest(audio: audio).contentHash
        audio = F.audio
        audio[0].encoded.durationSeconds = 2.5
        changed["audio duration"] = try F.manifest(audio: audio).contentHash
        var tour = F.tour
        tour.route.waypoints[1].coordinate.latitude += 0.001
        changed["route"] = try F.manifest(tour: tour).contentHash
        tour = F.tour
        tour.pois[1].name = "Fuscher Törl (2428 m)"
        changed["POI name"] = try F.manifest(tour: tour).contentHash
        tour = F.tour
        tour.pois[0].triggerRadiusMeters = 900
        changed["POI radius"] = try F.manifest(tour: tour).contentHash
        tour = F.tour
        tour.name = "Another Road"
        changed["tour name"] = try F.manifest(tour: tour).contentHash
        tour = F.tour
        tour.version = 4
        changed["tour version"] = try F.manifest(tour: tour).contentHash
        var coverage = F.coverage
        coverage.ranges[0].maxX += 1
        changed["map tiles"] = try F.manifest(coverage: coverage).contentHash
        for (what, hash) in changed {
            #expect(hash != base, "changing \(what) kept the content hash")
        }
        #expect(Set(changed.values).count == changed.count)

        audio = F.audio
        audio[2].characters = 999
        #expect(try F.manifest(audio: audio).contentHash == base, "billing characters are not content")
        #expect(try F.manifest(createdAt: Date(timeIntervalSince1970: 0)).contentHash == base)
    }

    @Test func incompleteOrForeignAudioIsRefused() throws {
        #expect(throws: TourpackError.self) { try F.manifest(audio: Array(F.audio.dropLast())) }
        #expect(throws: TourpackError.self) { try F.manifest(audio: F.audio + [F.audio[0]]) }
        var wrongPhase = F.audio
        wrongPhase[0].phase = .approaching  // the second POI has no approaching narration
        #expect(throws: TourpackError.self) { try F.manifest(audio: wrongPhase) }
        var wrongFormat = F.audio
        wrongFormat[0].encoded.format = .mp3
        #expect(throws: TourpackError.self) { try F.manifest(audio: wrongFormat) }
    }

    @Test func decodesBackToTheSameManifestAndSpotsEdits() throws {
        let m = try F.manifest()
        let bytes = m.encoded()
        let decoded = try PackageManifest.decode(bytes)
        #expect(decoded == m)
        #expect(decoded.isCanonical(bytes))
        #expect(decoded.computeContentHash() == m.contentHash)
        var text = String(decoding: bytes, as: UTF8.self)
        text = text.replacingOccurrences(of: "\"tourVersion\": 3", with: "\"tourVersion\": 3, \"extra\": true")
        let edited = Array(text.utf8)
        #expect(try !PackageManifest.decode(edited).isCanonical(edited))
        let badDate = String(decoding: bytes, as: UTF8.self).replacingOccurrences(of: "2025-01-15T10:20:30Z", with: "2025-02-30T10:20:30Z")
        #expect(throws: (any Error).self) { try PackageManifest.decode(Array(badDate.utf8)) }
    }

    @Test func writeLandsAtTheLayoutPathAndReadsBack() throws {
        let scratch = try StoreScratch()
        defer { scratch.remove() }
        let layout = Layout(root: scratch.root)
        let m = try F.manifest()
        let stored = try m.write(into: layout)
        #expect(stored.relativePath == "OfflineTours/\(m.packageId)/package.json")
        #expect(try PackageManifest.read(from: stored.url) == m)
        #expect(scratch.names(in: stored.url.deletingLastPathComponent()) == ["package.json"])
    }

    @Test func timestampsAreStrict() {
        #expect(PackageManifest.parseTimestamp("2025-01-15T10:20:30Z") == Date(timeIntervalSince1970: 1_736_936_430))
        for bad in [
            "2025-01-15T10:20:30.5Z", "2025-01-15T10:20:30+00:00", "2025-13-01T00:00:00Z", "2025-02-29T00:00:00Z", "2025-1-15T10:20:30Z",
        ] {
            #expect(PackageManifest.parseTimestamp(bad) == nil, "\(bad)")
        }
        #expect(PackageManifest.parseTimestamp("2024-02-29T23:59:59Z") != nil)
    }

    @Test func numbersHaveOneFixedForm() {
        #expect(JSONValue.canonicalNumber(14200) == "14200")
        #expect(JSONValue.canonicalNumber(-0.0) == "0")
        #expect(JSONValue.canonicalNumber(47.0417) == "47.0417")
        #expect(JSONValue.canonicalNumber(0.1 + 0.2) == "0.30000000000000004")
        #expect(JSONValue.canonicalNumber(.nan) == "null")
        #expect(String(decoding: JSONValue.string("a\"\\\n\u{1}/é").canonicalBytes(pretty: false), as: UTF8.self) == #""a\"\\\n\u0001/é""#)
    }

    private func lines(_ m: PackageManifest) -> [String] {
        String(decoding: m.encoded(), as: UTF8.self).split(separator: "\n").map(String.init)
    }

    private func sortedDeep(_ value: JSONValue) -> JSONValue {
        switch value {
        case .object(let members):
            return .object(members.sorted { $0.key < $1.key }.map { ($0.key, sortedDeep($0.value)) })
        case .array(let values): return .array(values.map(sortedDeep))
        default: return value
        }
    }
}

/// A rebuild within the second of the last build must still be the newer
/// build: publishers keep the later `createdAt` of two builds of a package.
@Suite struct PackageCreationTimeTests {
    @Test func aRebuildWithinTheSecondIsASecondLaterAndOtherwiseNow() throws {
        let now = Date(timeIntervalSince1970: 1_790_000_000.75)
        #expect(TourPublisher.creationTime(now, after: nil) == Date(timeIntervalSince1970: 1_790_000_000))
        let previous = try StoreManifestFixture.manifest(createdAt: Date(timeIntervalSince1970: 1_790_000_000))
        #expect(TourPublisher.creationTime(now, after: previous) == Date(timeIntervalSince1970: 1_790_000_001))
        // A clock behind the last build (or pinned to it) still moves forward.
        #expect(TourPublisher.creationTime(now.addingTimeInterval(-60), after: previous) == Date(timeIntervalSince1970: 1_790_000_001))
        #expect(TourPublisher.creationTime(now.addingTimeInterval(5), after: previous) == Date(timeIntervalSince1970: 1_790_000_005))
    }
}

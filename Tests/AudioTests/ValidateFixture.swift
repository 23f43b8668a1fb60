import Foundation
import Testing
import TourpackTesting

@testable import TourpackAudio
@testable import TourpackCore
@testable import TourpackKit
@testable import TourpackLoad
@testable import TourpackMaps
@testable import TourpackPlan
@testable import TourpackValidate

/// A good bundle, made the way the store makes one: a short synthetic
/// sweep per phase, encoded by the real FFmpeg encoder into the layout's
/// paths (temp file, then `AtomicFile.commit`), a tile pack of ten small
/// PNG tiles per package written by `MBTilesWriter`, one package.json per
/// format.
///
/// It is built once per test process and copied for each test, so every
/// corruption starts from the same good bytes.
enum ValidateFixture {
    /// 2030-01-01T00:00:00Z; packages expire 90 days later.
    static let createdAt = Date(timeIntervalSince1970: 1_893_456_000)
    /// The clock the validator is run at: one day after the build.
    static let now = createdAt.addingTimeInterval(86_400)
    static let voice = VoicePreset(provider: "local", languageCode: "en-US", name: "en-us", tier: .local)

    static let tourJSON = """
        {
          "id": "0b7c2f0e-5d1a-4f55-9a0e-2f3b8f6c1d42",
          "name": "Validate Road",
          "language": "en-US",
          "version": 2,
          "route": {
            "waypoints": [{"latitude": 47.0417, "longitude": 12.8427, "name": "Heiligenblut"}, {"latitude": 47.0746, "longitude": 12.7504}],
            "segments": [{"from": 0, "to": 1, "distanceMeters": 14200, "durationSeconds": 1500}]
          },
          "pois": [
            {"id": "5f1e0c1a-8a7b-4c1e-9b55-7c0d3e2a9f10", "name": "Kaiser-Franz-Josefs-Höhe", "location": {"latitude": 47.0746, "longitude": 12.7504},
             "triggerRadiusMeters": 800, "narrations": {"approaching": "Coming up.", "detailed": "The glacier below."}},
            {"id": "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d", "name": "Fuscher Törl", "location": {"latitude": 47.125, "longitude": 12.811},
             "triggerRadiusMeters": 450, "narrations": {"guidedTour": "The pass."}}
          ]
        }
        """

    static func tour() throws -> Tour {
        var diagnostics = DiagnosticCollector()
        let tour = TourLoader().parse(Array(tourJSON.utf8), displayName: "validate-road.json", into: &diagnostics)
        return try #require(tour, "\(diagnostics.diagnostics)")
    }

    /// A rising sweep with a little noise, at 24 kHz like the TTS endpoint's
    /// PCM. Noise keeps the AAC and Opus rate control near the table's bit
    /// rate (a pure tone would code at a third of it). Deterministic.
    static func sweep(seconds: Double) -> PCMAudio {
        let rate = 24_000
        var generator = SeededGenerator(seed: 0x2545_F491)
        let samples = (0..<Int(seconds * Double(rate))).map { index -> Int16 in
            let t = Double(index) / Double(rate)
            let noise = generator.unit() - 0.5
            let value = 0.3 * sin(2 * .pi * (200 + 1500 * t) * t) + 0.05 * noise
            return Int16(value * 32_000)
        }
        return PCMAudio(samples: samples, sampleRate: rate)
    }

    /// The seconds of audio per phase: different, so a swapped or shortened file shows.
    static let seconds: [Phase: Double] = [.approaching: 1.2, .detailed: 1.5, .guidedTour: 1.8]

    static let attribution = "© OpenStreetMap contributors"

    /// A 1×1 PNG of one colour, built by hand: the signature, IHDR, an IDAT
    /// holding a zlib stream with one stored (uncompressed) deflate block,
    /// and IEND, each chunk with its CRC. A real PNG any decoder opens.
    static func png(red: UInt8, green: UInt8, blue: UInt8) -> [UInt8] {
        func chunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
            let body = Array(type.utf8) + data
            return bigEndian(UInt32(data.count)) + body + bigEndian(crc32(body))
        }
        let scanline: [UInt8] = [0, red, green, blue]  // filter type 0, then one RGB pixel
        var adler: (a: UInt32, b: UInt32) = (1, 0)
        for byte in scanline {
            adler.a = (adler.a + UInt32(byte)) % 65_521
            adler.b = (adler.b + adler.a) % 65_521
        }
        let length = UInt16(scanline.count)
        let zlib: [UInt8] =
            [0x78, 0x01, 0x01, UInt8(length & 0xFF), UInt8(length >> 8), UInt8(~length & 0xFF), UInt8(~length >> 8)]
            + scanline + bigEndian(adler.b << 16 | adler.a)
        let header = bigEndian(1) + bigEndian(1) + [8, 2, 0, 0, 0]  // 1×1, 8-bit RGB, deflate, no filter method, not interlaced
        return [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + chunk("IHDR", header) + chunk("IDAT", zlib) + chunk("IEND", [])
    }

    private static func bigEndian(_ value: UInt32) -> [UInt8] {
        (0..<4).map { UInt8(truncatingIfNeeded: value >> (24 - 8 * $0)) }
    }

    private static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
        }
        return ~crc
    }

    /// The pack's tiles: the two corners of each zoom's range, sorted, each its own colour.
    static func packTiles(_ coverage: MapCoverage) -> [(TileID, [UInt8])] {
        coverage.ranges.flatMap { [TileID(z: $0.zoom, x: $0.minX, y: $0.minY), TileID(z: $0.zoom, x: $0.maxX, y: $0.maxY)] }
            .sorted()
            .map { ($0, png(red: UInt8($0.z * 10), green: UInt8($0.x & 0xFF), blue: UInt8($0.y & 0xFF))) }
    }

    /// Writes `tiles` as the package's pack (temp, then `AtomicFile.commit`)
    /// and records it in `coverage`, as the store does.
    static func writePack(_ tiles: [(TileID, [UInt8])], packageID: SafeID, tourName: String, coverage: inout MapCoverage, layout: Layout)
        throws
    {
        let target = layout.tilePack(packageID: packageID)
        let temp = try AtomicFile.temporaryURL(for: target.url)
        let metadata = MBTilesMetadata(
            name: tourName, format: .png, bounds: coverage.bounds, minZoom: coverage.minZoom, maxZoom: coverage.maxZoom,
            attribution: attribution, description: "Map tiles of \(tourName)")
        let writer = try MBTilesWriter(creating: temp, metadata: metadata)
        for (tile, data) in tiles { try writer.add(tile, data: data) }
        let (size, sha256) = try writer.digest()
        try AtomicFile.commit(temp: temp, to: target.url)
        coverage.recordPack(
            file: "OfflineTours/\(packageID.value)/tiles.mbtiles", format: .png, storedTiles: tiles.count,
            sizeBytes: size, sha256: sha256, attribution: attribution)
    }

    /// A 440 Hz sine, half a second on and half off: the simplest signal
    /// there is, which AAC and Opus rightly code far below their nominal rate.
    static func toneWithSilences(seconds: Double) -> PCMAudio {
        let rate = 24_000
        let samples = (0..<Int(seconds * Double(rate))).map { index -> Int16 in
            let t = Double(index) / Double(rate)
            return t.truncatingRemainder(dividingBy: 1) < 0.5 ? Int16(12_000 * sin(2 * .pi * 440 * t)) : 0
        }
        return PCMAudio(samples: samples, sampleRate: rate)
    }

    /// Noise at about -70 dBFS: a voice that hardly speaks.
    static func nearSilence(seconds: Double) -> PCMAudio {
        var generator = SeededGenerator(seed: 0x9E37_79B9)
        let samples = (0..<Int(seconds * 24_000)).map { _ in Int16(generator.next() % 21) - 10 }
        return PCMAudio(samples: samples, sampleRate: 24_000)
    }

    /// Writes a good bundle at `root` and returns its manifests by format.
    static func build(at root: URL, signal: (Double) -> PCMAudio = { sweep(seconds: $0) }) throws -> [AudioFormat: PackageManifest] {
        let tour = try tour()
        let layout = Layout(root: root)
        let coverage = try #require(tour.mapCoverage(MapSettings()))
        var manifests: [AudioFormat: PackageManifest] = [:]
        for format in AudioFormat.allCases {
            var audio: [PackageAudio] = []
            for poi in tour.pois {
                for phase in poi.phases {
                    let target = layout.audioFile(tourID: tour.id, poiID: poi.id, phase: phase, format: format)
                    let temp = try AtomicFile.temporaryURL(for: target.url)
                    let metadata = AudioMetadata(title: "\(poi.name) – \(phase.fileLabel)", album: tour.name, language: tour.language)
                    var encoded = try FFmpegAudioEncoder().encodeInMemory(signal(seconds[phase]!), as: format, metadata: metadata, to: temp)
                    encoded.loudness = try ItemMaker.loudness(of: temp, leveling: LevelingReport(gainDB: 0, limiterReductionDB: 0))
                    try AtomicFile.commit(temp: temp, to: target.url)
                    audio.append(PackageAudio(poiID: poi.id, phase: phase, encoded: encoded, characters: poi.narrations[phase]!.text.count))
                }
            }
            var packed = coverage
            let packageID = PackageID.make(tourID: tour.id, voice: voice, format: format)
            try writePack(packTiles(coverage), packageID: packageID, tourName: tour.name, coverage: &packed, layout: layout)
            let manifest = try PackageManifest(
                tour: tour, voice: voice, format: format, audio: audio, mapTiles: packed, createdAt: createdAt, maxAgeDays: 90)
            try manifest.write(into: layout)
            manifests[format] = manifest
        }
        return manifests
    }

    /// The one good bundle of this process, built on first use.
    private static let template: Result<(root: URL, manifests: [AudioFormat: PackageManifest]), any Error> = Result {
        let root = TemporaryFolder.path("tourpack-validate-template", suffix: "/Documents")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        return (root, try build(at: root))
    }

    /// A fresh copy of the good bundle in a folder of its own; `remove()` it when done.
    static func copy() throws -> ValidateBundle {
        let (template, manifests) = try template.get()
        let folder = try TemporaryFolder.make("tourpack-validate")
        let root = folder.appendingPathComponent("Documents")
        try FileManager.default.copyItem(at: template, to: root)
        return ValidateBundle(folder: folder, root: root, manifests: manifests)
    }
}

/// One copy of the good bundle, with the handles a corruption needs.
struct ValidateBundle {
    /// The folder around the root: a place outside the root for symlink targets.
    let folder: URL
    let root: URL
    var manifests: [AudioFormat: PackageManifest]

    var layout: Layout { Layout(root: root) }

    func remove() { TemporaryFolder.remove(folder) }

    func manifest(_ format: AudioFormat) -> PackageManifest { manifests[format]! }

    /// `OfflineTours/<packageId>/package.json` of a format's package.
    func manifestPath(_ format: AudioFormat) -> String {
        "OfflineTours/\(manifest(format).packageId)/package.json"
    }

    /// `OfflineTours/<packageId>/tiles.mbtiles` of a format's package.
    func packPath(_ format: AudioFormat) -> String {
        "OfflineTours/\(manifest(format).packageId)/tiles.mbtiles"
    }

    /// Replaces a package's pack with one of `tiles` and records it, so only what the tiles get wrong remains.
    mutating func replacePack(_ format: AudioFormat, tiles: [(TileID, [UInt8])]) throws {
        try FileManager.default.removeItem(at: url(packPath(format)))
        var coverage = manifest(format).mapTiles
        let tour = try ValidateFixture.tour()
        try ValidateFixture.writePack(
            tiles, packageID: SafeID(validating: manifest(format).packageId)!, tourName: tour.name, coverage: &coverage, layout: layout)
        try rewrite(format) { $0.mapTiles = coverage }
    }

    /// The rows a query on a package's pack gives, read-only, with the sqlite3 shell.
    func sqlite(_ format: AudioFormat, _ query: String) throws -> [String] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["sqlite3", "-readonly", url(packPath(format)).path, query]
        let out = Pipe()
        process.standardOutput = out
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init)
    }

    /// Runs SQL on a package's pack with the sqlite3 shell, then records the
    /// pack's new size and sha256, so only what the SQL changed remains.
    mutating func runSQL(_ format: AudioFormat, _ sql: String) throws {
        let pack = url(packPath(format))
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["sqlite3", pack.path, sql]
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw CocoaError(
                .fileWriteUnknown, userInfo: [NSFilePathErrorKey: pack.path, NSLocalizedDescriptionKey: "sqlite3 failed: \(sql)"])
        }
        let (size, sha256) = try FileDigest.sha256(of: pack)
        try rewrite(format) { manifest in
            manifest.mapTiles.sizeBytes = size
            manifest.mapTiles.sha256 = sha256
        }
    }

    /// Every file and folder under the root, hidden ones included, sorted.
    func fileList() -> [String] {
        let enumerator = FileManager.default.enumerator(atPath: root.path)
        return ((enumerator?.allObjects as? [String]) ?? []).sorted()
    }

    /// The root-relative path of a format's audio entry.
    func audioPath(_ format: AudioFormat, _ index: Int) -> String {
        manifest(format).audio[index].path
    }

    func url(_ relative: String) -> URL { root.appendingPathComponent(relative) }

    /// Rewrites a package.json: the edit, then (unless told not to) the
    /// derived fields, so only the edited fact is wrong.
    mutating func rewrite(_ format: AudioFormat, rehash: Bool = true, _ edit: (inout PackageManifest) -> Void) throws {
        var manifest = manifest(format)
        edit(&manifest)
        if rehash {
            manifest.sizeBytes = manifest.audio.reduce(0) { $0 + $1.sizeBytes }
            manifest.contentHash = manifest.computeContentHash()
        }
        try AtomicFile.write(manifest.encoded(), to: url(manifestPath(format)))
        manifests[format] = manifest
    }

    /// Records a replaced file's new size and sha256 in its package, so only the intended defect remains.
    mutating func adopt(_ format: AudioFormat, _ index: Int) throws {
        let (size, digest) = try FileDigest.sha256(of: url(audioPath(format, index)))
        try rewrite(format) { manifest in
            manifest.audio[index].sizeBytes = size
            manifest.audio[index].sha256 = digest
        }
    }

    /// Edits package.json as text, for damage the manifest type cannot express.
    func editText(_ format: AudioFormat, _ edit: (String) -> String) throws {
        let file = url(manifestPath(format))
        let text = try String(contentsOf: file, encoding: .utf8)
        try Data(edit(text).utf8).write(to: file)
    }

    func validate(strict: Bool = false, limits: ValidationLimits? = nil, now: Date = ValidateFixture.now) async throws -> ValidationReport {
        try await BundleValidator(options: ValidationOptions(now: now, strict: strict, limits: limits, threads: 2)).validate(root: root)
    }
}

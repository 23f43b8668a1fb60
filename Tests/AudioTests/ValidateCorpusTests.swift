import Foundation
import Testing
import TourpackTesting

@testable import TourpackAudio
@testable import TourpackCore
@testable import TourpackKit
@testable import TourpackMaps
@testable import TourpackValidate

#if canImport(Glibc)
import Glibc
#endif

/// The corrupted-bundle corpus of issue 7: each defect is made from a copy
/// of the good bundle, and validate must report it, at its exact path and
/// under its check, and fail (exit code 1). Derived fields (sizes, hashes)
/// are brought back in line where the defect does not concern them, so
/// each case proves its own check finds it, not a neighbour.
@Suite("validate: the corrupted-bundle corpus", .offThePool)
struct ValidateCorpusTests {
    /// What a defect must produce: an error with this path and check.
    struct Expectation {
        var path: String
        var check: ValidationCheck
        /// Words the message must contain, so the finding says what is wrong.
        var words: [String] = []
        /// The package every error must belong to (nil: the bundle's own checks).
        var package: String?
        /// Run with `--strict` (for defects that are warnings otherwise).
        var strict = false
        var limits: ValidationLimits?
    }

    enum Defect: String, CaseIterable, CustomTestStringConvertible {
        case truncatedFile, flippedByte, missingFile, wrongCodec, wrongSampleRate, mdatBeforeMoov, expiredPackage
        case strayFile, leftoverTemp, dotDotInPath, symlinkOutOfRoot, malformedJSON, schemaViolation, duplicateEntry
        case mismatchedDuration, staleContentHash, wrongSizeBytes, wrongMapTiles, folderNotPackageId, opusPreSkipZero
        case opusWithoutEndOfStream, mp3WithoutInfoHeader, overCacheBudget, mixedFormats, hostileNumbers
        case truncatedTilePack, storedTilesOffByOne, foreignTile, tileOutsideRange, strayTilePack, missingTilePack
        case tilePackSideFile, tilePackElsewhere, leftoverTilePackTemp, tilesAsView, thousandsOfRanges
        case misstatedLoudness, offTargetLoudness, missingLoudness
        case symlinkedAudioCache, symlinkedTourFolder, symlinkedOfflineTours, symlinkedPackageFolder, symlinkInsideRoot

        var testDescription: String { rawValue }
    }

    @Test("each defect is reported with its path, and validate fails", arguments: Defect.allCases)
    func defectIsFound(_ defect: Defect) async throws {
        var bundle = try ValidateFixture.copy()
        defer { bundle.remove() }
        let expected = try defect.apply(to: &bundle)
        let report = try await bundle.validate(strict: expected.strict, limits: expected.limits)

        if ProcessInfo.processInfo.environment["TOURPACK_PRINT_REPORTS"] != nil { print("=== \(defect)\n\(report.text())") }
        let errors = report.findings.filter { $0.severity == .error }
        let match = errors.first { finding in
            finding.path == expected.path && finding.check == expected.check && expected.words.allSatisfy(finding.message.contains)
        }
        #expect(
            match != nil,
            "no \(expected.check) error at \(expected.path) saying \(expected.words); found:\n\(report.findings.map(\.description).joined(separator: "\n"))"
        )
        #expect(report.exitCode == 1)
        #expect(!report.passed)
        // Nothing outside the damaged package (or the bundle's own checks) is blamed.
        let elsewhere = errors.filter { $0.package != expected.package }
        #expect(elsewhere.isEmpty, "errors elsewhere: \(elsewhere.map(\.description))")
    }

    @Test("the good bundle passes every check, with nothing to report")
    func goodBundlePasses() async throws {
        let bundle = try ValidateFixture.copy()
        defer { bundle.remove() }
        let report = try await bundle.validate(strict: true, limits: ValidationLimits(cacheMaxMB: 50, packageMaxAgeDays: 90, tileKB: 15))
        #expect(report.findings.isEmpty, "\(report.findings.map(\.description).joined(separator: "\n"))")
        #expect(report.passed && report.exitCode == 0)
        #expect(report.packages.count == 3 && report.audioFileCount == 9)
        // Every audio file went through every check of its format.
        for format in AudioFormat.allCases {
            let container: ValidationCheck = [.aac: .faststart, .mp3: .mp3Header, .opus: .oggOpus][format]!
            for entry in bundle.manifest(format).audio {
                let ran = Set(report.outcomes.filter { $0.subject == entry.path }.map(\.check))
                #expect(
                    ran == [.path, .exists, .size, .sha256, .decode, .format, .duration, .loudness, container], "\(entry.path): \(ran)")
                #expect(entry.loudness?.integratedLUFS != nil, "\(entry.path): no loudness recorded")
            }
            let manifestChecks = Set(report.outcomes.filter { $0.subject == bundle.manifestPath(format) }.map(\.check))
            #expect(manifestChecks == [.json, .schema, .canonical, .packageId, .audioList, .expiry, .mapTiles, .contentHash, .sizeBytes])
            #expect(report.outcomes.filter { $0.subject == bundle.packPath(format) }.map(\.check) == [.tilePack])
        }
        #expect(
            report.text().hasSuffix(
                "validate passed: 3 packages, 9 audio files, \(report.outcomes.count) checks; 0 errors, 0 warnings (strict)"))
    }

    /// AAC and Opus spend fewer bits on simple or quiet audio; that is not a
    /// defect, and our own files from such a voice must pass.
    @Test("bundles made from a pure tone with silences and from near-silence pass validate", arguments: ["tone", "near-silence"])
    func simpleAudioPasses(signal: String) async throws {
        let folder = TemporaryFolder.path("tourpack-validate-\(signal)")
        let root = folder.appendingPathComponent("Documents")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { TemporaryFolder.remove(folder) }
        let manifests = try ValidateFixture.build(at: root) { seconds in
            signal == "tone" ? ValidateFixture.toneWithSilences(seconds: seconds) : ValidateFixture.nearSilence(seconds: seconds)
        }
        // The point of the test: well below the nominal rate.
        let aac = try #require(manifests[.aac]?.audio.max { $0.durationSeconds < $1.durationSeconds })
        let inspection = try AudioFileInspector().measure(root.appendingPathComponent(aac.path))
        #expect(inspection.bitRateKbps < 100, "\(inspection.bitRateKbps) kbps")
        let report = try await BundleValidator(options: ValidationOptions(now: ValidateFixture.now, strict: true, threads: 2)).validate(
            root: root)
        #expect(report.passed, "\(report.findings.map(\.description).joined(separator: "\n"))")
        #expect(report.audioFileCount == 9)
    }

    @Test("validate writes nothing: no -journal or -wal appears beside a pack, nothing else changes")
    func validateLeavesTheBundleAsItWas() async throws {
        let bundle = try ValidateFixture.copy()
        defer { bundle.remove() }
        let before = bundle.fileList()
        #expect(before.contains(bundle.packPath(.aac)))
        let report = try await bundle.validate()
        #expect(report.passed)
        #expect(bundle.fileList() == before)
    }

    /// Issue 27, defect 6: other tools write minzoom as an INTEGER; no
    /// storage class may crash validate.
    @Test("a pack whose metadata values are INTEGER, REAL or BLOB is read, and passes")
    func metadataOfAnyStorageClassPasses() async throws {
        var bundle = try ValidateFixture.copy()
        defer { bundle.remove() }
        for format in AudioFormat.allCases {
            // A `value` column without a type keeps each storage class as given (a TEXT one would turn numbers back into text).
            try bundle.runSQL(
                format,
                "CREATE TABLE typed (name TEXT, value); "
                    + "INSERT INTO typed SELECT name, CASE name WHEN 'minzoom' THEN CAST(value AS INTEGER) "
                    + "WHEN 'maxzoom' THEN CAST(value AS REAL) WHEN 'attribution' THEN CAST(value AS BLOB) ELSE value END FROM metadata; "
                    + "DROP TABLE metadata; ALTER TABLE typed RENAME TO metadata")
            #expect(
                try bundle.sqlite(
                    format, "SELECT typeof(value) FROM metadata WHERE name IN ('minzoom', 'maxzoom', 'attribution') ORDER BY name")
                    == ["blob", "real", "integer"])
        }
        let report = try await bundle.validate()
        #expect(report.passed, "\(report.findings.map(\.description).joined(separator: "\n"))")
        #expect(report.findings.isEmpty, "\(report.findings.map(\.description).joined(separator: "\n"))")
    }

    /// Issue 27, defect 14: SQLite stops at 512 bytes of path and FFmpeg at
    /// 1,024; validate opens packs and audio by descriptor.
    @Test("a good root whose path is about 1,100 characters passes")
    func aVeryLongRootPasses() async throws {
        let bundle = try ValidateFixture.copy()
        defer { bundle.remove() }
        var folder = bundle.folder
        for index in 0..<5 { folder.appendPathComponent(String(repeating: "\(index)", count: 200)) }
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let root = folder.appendingPathComponent("Documents")
        try FileManager.default.moveItem(at: bundle.root, to: root)
        #expect(root.path.utf8.count > 1_050)
        let report = try await BundleValidator(options: ValidationOptions(now: ValidateFixture.now, strict: true, threads: 2)).validate(
            root: root)
        #expect(report.findings.isEmpty, "\(report.findings.map(\.description).joined(separator: "\n"))")
        #expect(report.passed && report.audioFileCount == 9)
    }

    @Test("with --pipeline, a package made with another tile selection is a warning")
    func otherSelectionIsAWarning() async throws {
        let bundle = try ValidateFixture.copy()
        defer { bundle.remove() }
        let report = try await bundle.validate(
            limits: ValidationLimits(cacheMaxMB: 50, packageMaxAgeDays: 90, tileKB: 15, selection: .corridor))
        #expect(report.passed)
        #expect(report.findings.count == 3, "\(report.findings.map(\.description))")
        for finding in report.findings {
            #expect(finding.severity == .warning && finding.check == .mapTiles && finding.message.contains("maps.selection is corridor"))
        }
    }

    @Test("a pack with 1,200 bad tiles names five of each kind and counts the rest")
    func manyBadTilesAreSummed() async throws {
        var bundle = try ValidateFixture.copy()
        defer { bundle.remove() }
        let range = try #require(bundle.manifest(.aac).mapTiles.ranges.last)
        let html = Array("<!DOCTYPE html><html>".utf8)
        let tiles = (0..<1_200).map { (TileID(z: range.zoom, x: range.minX + $0 / 40, y: range.minY + $0 % 40), html) }
        try bundle.replacePack(.aac, tiles: tiles)
        let report = try await bundle.validate()
        let messages = report.findings.filter { $0.check == .tilePack }.map(\.message)
        #expect(
            messages.contains {
                $0.hasPrefix("1200 tiles that are not png by their first bytes: 16/\(range.minX)/\(range.minY) (starts 3C 21 44 4F), ")
                    && $0.hasSuffix(" and 1195 more")
            }, "\(messages)")
    }

    @Test("a corridor package's pack is held to the recomputed corridor")
    func corridorPack() async throws {
        var bundle = try ValidateFixture.copy()
        defer { bundle.remove() }
        let tour = try ValidateFixture.tour()
        let settings = MapSettings(selection: .corridor)
        let corridor = try #require(tour.mapCoverage(settings))
        let selected = tour.mapTiles(settings)
        // The first and last tile the corridor keeps at each zoom.
        let kept = Dictionary(grouping: selected, by: \.z).values.flatMap { [$0.min()!, $0.max()!] }.sorted()
        let png = ValidateFixture.png(red: 1, green: 2, blue: 3)
        try bundle.rewrite(.aac) { $0.mapTiles = corridor }
        try bundle.replacePack(.aac, tiles: kept.map { ($0, png) })
        let good = try await bundle.validate(strict: true)
        #expect(good.findings.isEmpty, "\(good.findings.map(\.description))")

        // A tile inside the ranges that the corridor does not keep, if the corridor is narrower than its ranges here.
        let keptSet = Set(selected)
        let outside = corridor.ranges.lazy.flatMap { r in
            (r.minX...r.maxX).lazy.flatMap { x in (r.minY...r.maxY).lazy.map { TileID(z: r.zoom, x: x, y: $0) } }
        }
        .first { !keptSet.contains($0) }
        if let outside {
            try bundle.replacePack(.aac, tiles: (kept + [outside]).sorted().map { ($0, png) })
            let report = try await bundle.validate()
            #expect(
                report.findings.contains {
                    $0.check == .tilePack && $0.path == bundle.packPath(.aac) && $0.message.contains("1 tile outside the corridor")
                        && $0.message.contains("\(outside)")
                },
                "\(report.findings.map(\.description))")
        }
    }

    @Test("a stray file is a warning without --strict, and the run passes")
    func strayIsAWarning() async throws {
        var bundle = try ValidateFixture.copy()
        defer { bundle.remove() }
        let expected = try Defect.strayFile.apply(to: &bundle)
        let report = try await bundle.validate()
        #expect(report.passed && report.exitCode == 0)
        #expect(report.findings.map(\.severity) == [.warning])
        #expect(report.findings.first?.path == expected.path && report.findings.first?.check == .stray)
    }

    @Test("every problem is reported, not just the first")
    func everyProblemIsReported() async throws {
        var bundle = try ValidateFixture.copy()
        defer { bundle.remove() }
        var expectations: [Expectation] = []
        for defect in [Defect.missingFile, .flippedByte, .leftoverTemp, .malformedJSON, .mismatchedDuration] {
            expectations.append(try defect.apply(to: &bundle))
        }
        let report = try await bundle.validate()
        for expected in expectations {
            #expect(
                report.findings.contains { $0.path == expected.path && $0.check == expected.check && $0.severity == .error },
                "\(expected.check) at \(expected.path)")
        }
        #expect(report.exitCode == 1)
    }

    @Test("a root that is no folder is a usage error (exit 2), not a finding")
    func missingRoot() async throws {
        let nowhere = URL(fileURLWithPath: "/nonexistent/tourpack-\(UUID().uuidString)")
        await #expect(throws: TourpackError.self) { try await BundleValidator().validate(root: nowhere) }
        do {
            _ = try await BundleValidator().validate(root: nowhere)
        } catch let error as TourpackError {
            #expect(error.exitCode == 2)
        }
    }
}

extension ValidateCorpusTests.Defect {
    typealias Expectation = ValidateCorpusTests.Expectation

    /// Damages `bundle` and says what validate must report.
    func apply(to bundle: inout ValidateBundle) throws -> Expectation {
        let fm = FileManager.default
        func package(_ format: AudioFormat) -> String { bundle.manifest(format).packageId }
        switch self {
        case .truncatedFile:
            let path = bundle.audioPath(.opus, 1)
            let data = try Data(contentsOf: bundle.url(path))
            try data.prefix(data.count / 2).write(to: bundle.url(path))
            return Expectation(path: path, check: .size, words: ["truncated"], package: package(.opus))
        case .flippedByte:
            let path = bundle.audioPath(.mp3, 0)
            var data = try Data(contentsOf: bundle.url(path))
            data[data.count / 2] ^= 0x40
            try data.write(to: bundle.url(path))
            return Expectation(path: path, check: .sha256, package: package(.mp3))
        case .missingFile:
            let path = bundle.audioPath(.aac, 2)
            try fm.removeItem(at: bundle.url(path))
            return Expectation(path: path, check: .exists, words: ["missing"], package: package(.aac))
        case .wrongCodec:
            // An MP3 written at the .m4a path, recorded with its own size and sha256.
            let path = bundle.audioPath(.aac, 1)
            try fm.removeItem(at: bundle.url(path))
            try fm.copyItem(at: bundle.url(bundle.audioPath(.mp3, 1)), to: bundle.url(path))
            try bundle.adopt(.aac, 1)
            return Expectation(path: path, check: .format, words: ["codec is mp3"], package: package(.aac))
        case .wrongSampleRate:
            let path = bundle.audioPath(.aac, 0)
            try reencode(bundle.url(path), ["-ar", "22050", "-c:a", "aac", "-b:a", "128k", "-movflags", "+faststart", "-f", "ipod"])
            try bundle.adopt(.aac, 0)
            return Expectation(path: path, check: .format, words: ["22050 Hz"], package: package(.aac))
        case .mdatBeforeMoov:
            // The same AAC stream remuxed without faststart: moov goes after mdat.
            let path = bundle.audioPath(.aac, 1)
            try reencode(bundle.url(path), ["-c", "copy", "-f", "ipod"])
            try bundle.adopt(.aac, 1)
            return Expectation(path: path, check: .faststart, words: ["before 'moov'"], package: package(.aac))
        case .expiredPackage:
            try bundle.rewrite(.mp3) { manifest in
                manifest.createdAt = ValidateFixture.now.addingTimeInterval(-91 * 86_400)
                manifest.expiresAt = ValidateFixture.now.addingTimeInterval(-86_400)
            }
            return Expectation(path: bundle.manifestPath(.mp3), check: .expiry, words: ["expired"], package: package(.mp3))
        case .strayFile:
            let path = "AudioCache/\(bundle.manifest(.aac).tourId)/11111111-2222-4333-8444-555555555555_Detailed.m4a"
            try fm.copyItem(at: bundle.url(bundle.audioPath(.aac, 0)), to: bundle.url(path))
            return Expectation(path: path, check: .stray, words: ["no package lists it"], strict: true)
        case .leftoverTemp:
            let final = bundle.audioPath(.opus, 0)
            let name = (final as NSString).lastPathComponent
            let path = (final as NSString).deletingLastPathComponent + "/.\(name).tmp-0123456789abcdef"
            try Data([0x4F, 0x67, 0x67]).write(to: bundle.url(path))
            return Expectation(path: path, check: .temporary, words: ["temp"])
        case .dotDotInPath:
            let escaped = "../" + bundle.audioPath(.aac, 0)
            try bundle.rewrite(.aac) { $0.audio[0].path = escaped }
            return Expectation(path: escaped, check: .path, words: ["'..'"], package: package(.aac))
        case .symlinkOutOfRoot:
            let path = bundle.audioPath(.mp3, 2)
            let outside = bundle.folder.appendingPathComponent("elsewhere.mp3")
            try fm.moveItem(at: bundle.url(path), to: outside)
            try fm.createSymbolicLink(at: bundle.url(path), withDestinationURL: outside)
            return Expectation(path: path, check: .path, words: ["outside the output root"], package: package(.mp3))
        case .symlinkedAudioCache:
            // The audio moved to another folder of the root and linked back: every path still resolves inside.
            try fm.moveItem(at: bundle.url("AudioCache"), to: bundle.url("Stash"))
            try fm.createSymbolicLink(atPath: bundle.url("AudioCache").path, withDestinationPath: "Stash")
            return Expectation(path: "AudioCache", check: .symlink, words: ["symlink to Stash"])
        case .symlinkedTourFolder:
            let path = "AudioCache/\(bundle.manifest(.aac).tourId)"
            try fm.moveItem(at: bundle.url(path), to: bundle.url("AudioCache/real"))
            try fm.createSymbolicLink(atPath: bundle.url(path).path, withDestinationPath: "real")
            return Expectation(path: path, check: .symlink, words: ["symlink to real"])
        case .symlinkedOfflineTours:
            // Every package outside the root: validate must not pass a root of 0 packages.
            let outside = bundle.folder.appendingPathComponent("elsewhere-tours")
            try fm.moveItem(at: bundle.url("OfflineTours"), to: outside)
            try fm.createSymbolicLink(at: bundle.url("OfflineTours"), withDestinationURL: outside)
            return Expectation(path: "OfflineTours", check: .symlink, words: ["symlink to \(outside.path)"])
        case .symlinkedPackageFolder:
            let path = "OfflineTours/\(package(.aac))"
            let outside = bundle.folder.appendingPathComponent("elsewhere-package")
            try fm.moveItem(at: bundle.url(path), to: outside)
            try fm.createSymbolicLink(at: bundle.url(path), withDestinationURL: outside)
            return Expectation(path: path, check: .symlink, words: ["symlink to \(outside.path)"])
        case .symlinkInsideRoot:
            // A listed audio file linked to a copy inside the root: its package's finding.
            let path = bundle.audioPath(.opus, 1)
            let copy = (path as NSString).deletingLastPathComponent + "/copy.bin"
            try fm.moveItem(at: bundle.url(path), to: bundle.url(copy))
            try fm.createSymbolicLink(atPath: bundle.url(path).path, withDestinationPath: "copy.bin")
            return Expectation(path: path, check: .symlink, words: ["audio[1].path is a symlink to copy.bin"], package: package(.opus))
        case .malformedJSON:
            try bundle.editText(.opus) { String($0.prefix($0.count / 2)) }
            return Expectation(path: bundle.manifestPath(.opus), check: .json, words: ["not valid JSON", "line"], package: package(.opus))
        case .schemaViolation:
            try bundle.editText(.mp3) { $0.replacingOccurrences(of: "\"channels\": 1", with: "\"channels\": 2") }
            return Expectation(
                path: bundle.manifestPath(.mp3), check: .schema, words: ["audio[0].channels", "expected 1"], package: package(.mp3))
        case .duplicateEntry:
            try bundle.rewrite(.aac) { $0.audio.append($0.audio[1]) }
            return Expectation(
                path: bundle.manifestPath(.aac), check: .audioList, words: ["duplicate entry", "audio[3]"], package: package(.aac))
        case .mismatchedDuration:
            let path = bundle.audioPath(.aac, 1)
            try bundle.rewrite(.aac) { $0.audio[1].durationSeconds += 1.5 }
            return Expectation(path: path, check: .duration, words: ["package.json says 3.0"], package: package(.aac))
        case .misstatedLoudness:
            let path = bundle.audioPath(.opus, 1)
            try bundle.rewrite(.opus) { $0.audio[1].loudness?.integratedLUFS? += 3 }
            return Expectation(path: path, check: .loudness, words: ["LUFS, package.json says"], package: package(.opus))
        case .offTargetLoudness:
            // A package that says it was normalized to -40 LUFS, over a
            // 4-second file (long enough to be held to it) that never was.
            let path = bundle.audioPath(.mp3, 2)
            let url = bundle.url(path)
            var encoded = try FFmpegAudioEncoder().encodeInMemory(
                ValidateFixture.sweep(seconds: 4), as: .mp3, metadata: Fixtures.metadata, to: url)
            encoded.loudness = try ItemMaker.loudness(of: url, leveling: LevelingReport(gainDB: 0, limiterReductionDB: 0))
            try bundle.rewrite(.mp3) { manifest in
                manifest.loudness = PackageManifest.Loudness(targetLUFS: -40, truePeakDBTP: -1)
                manifest.audio[2].durationSeconds = (encoded.durationSeconds * 1000).rounded() / 1000
                manifest.audio[2].sizeBytes = encoded.sizeBytes
                manifest.audio[2].sha256 = encoded.sha256
                manifest.audio[2].loudness = encoded.loudness?.rounded
            }
            return Expectation(path: path, check: .loudness, words: ["the package's target is -40.0 LUFS"], package: package(.mp3))
        case .missingLoudness:
            let path = bundle.audioPath(.aac, 0)
            try bundle.rewrite(.aac) {
                $0.loudness = PackageManifest.Loudness(targetLUFS: -30, truePeakDBTP: -1)
                $0.audio[0].loudness = nil
            }
            return Expectation(path: path, check: .loudness, words: ["records no loudness"], package: package(.aac))
        case .staleContentHash:
            try bundle.rewrite(.opus, rehash: false) { $0.tourName = "Renamed Road" }
            return Expectation(path: bundle.manifestPath(.opus), check: .contentHash, package: package(.opus))
        case .wrongSizeBytes:
            try bundle.rewrite(.mp3, rehash: false) { $0.sizeBytes += 1 }
            return Expectation(path: bundle.manifestPath(.mp3), check: .sizeBytes, package: package(.mp3))
        case .wrongMapTiles:
            try bundle.rewrite(.aac) { $0.mapTiles.ranges[2].maxX += 1 }
            return Expectation(path: bundle.manifestPath(.aac), check: .mapTiles, words: ["zoom 14"], package: package(.aac))
        case .folderNotPackageId:
            let original = package(.opus)
            let other = "aaaaaaaa-bbbb-5ccc-8ddd-eeeeeeeeeeee"
            try fm.moveItem(at: bundle.url("OfflineTours/\(original)"), to: bundle.url("OfflineTours/\(other)"))
            return Expectation(path: "OfflineTours/\(other)/package.json", check: .packageId, words: ["folder is named"], package: other)
        case .opusPreSkipZero:
            let path = bundle.audioPath(.opus, 2)
            var bytes = [UInt8](try Data(contentsOf: bundle.url(path)))
            bytes[28 + 10] = 0  // OpusHead starts after the 27-byte header and a 1-entry segment table.
            bytes[28 + 11] = 0
            Self.resealOggPage(&bytes, at: 0)
            try Data(bytes).write(to: bundle.url(path))
            try bundle.adopt(.opus, 2)
            return Expectation(path: path, check: .oggOpus, words: ["pre-skip is 0"], package: package(.opus))
        case .opusWithoutEndOfStream:
            let path = bundle.audioPath(.opus, 0)
            var bytes = [UInt8](try Data(contentsOf: bundle.url(path)))
            let last = try #require(Self.oggPageOffsets(bytes).last)
            bytes[last + 5] &= ~0x04
            Self.resealOggPage(&bytes, at: last)
            try Data(bytes).write(to: bundle.url(path))
            try bundle.adopt(.opus, 0)
            return Expectation(path: path, check: .oggOpus, words: ["end-of-stream"], package: package(.opus))
        case .mp3WithoutInfoHeader:
            let path = bundle.audioPath(.mp3, 1)
            try reencode(bundle.url(path), ["-c", "copy", "-write_xing", "0", "-f", "mp3"])
            try bundle.adopt(.mp3, 1)
            return Expectation(path: path, check: .mp3Header, words: ["no Xing/Info header"], package: package(.mp3))
        case .overCacheBudget:
            // A sparse 51 MiB file: over the smallest budget a pipeline may set, without writing 51 MiB.
            let path = "AudioCache/\(bundle.manifest(.aac).tourId)/big.bin"
            let fd = open(bundle.url(path).path, O_WRONLY | O_CREAT, 0o644)
            #expect(fd >= 0 && ftruncate(fd, 51 * 1024 * 1024) == 0)
            close(fd)
            return Expectation(
                path: "AudioCache", check: .cacheBudget, words: ["over the budget"],
                limits: ValidationLimits(cacheMaxMB: 50, packageMaxAgeDays: 90, tileKB: 15))
        case .hostileNumbers:
            // Numbers that would hang the tile math or overflow a sum must be findings, not a crash.
            try bundle.rewrite(.opus, rehash: false) { manifest in
                manifest.mapTiles.maxZoom = 1_000_000_000
                manifest.audio[0].sizeBytes = .max
                manifest.audio[1].sizeBytes = .max
            }
            return Expectation(
                path: bundle.manifestPath(.opus), check: .schema, words: ["mapTiles.maxZoom: 1000000000 is more than the maximum 22"],
                package: package(.opus))
        case .truncatedTilePack:
            let path = bundle.packPath(.aac)
            let data = try Data(contentsOf: bundle.url(path))
            try data.prefix(data.count / 2).write(to: bundle.url(path))
            return Expectation(path: path, check: .tilePack, words: ["truncated"], package: package(.aac))
        case .storedTilesOffByOne:
            // The counts still add up to tileCount; only the pack disagrees.
            try bundle.rewrite(.mp3) { manifest in
                manifest.mapTiles.storedTiles! += 1
                manifest.mapTiles.emptyTiles! -= 1
            }
            return Expectation(
                path: bundle.packPath(.mp3), check: .tilePack, words: ["holds 10 tiles", "storedTiles is 11"], package: package(.mp3))
        case .foreignTile:
            // An HTML error page and a JPEG stored as PNG tiles, recorded with the pack's own size and sha256.
            var tiles = ValidateFixture.packTiles(bundle.manifest(.opus).mapTiles)
            tiles[3].1 = Array("<!DOCTYPE html><html><body>Rate limited</body></html>".utf8)
            tiles[6].1 = [0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10] + Array("JFIF".utf8)
            let (html, jpeg) = (tiles[3].0, tiles[6].0)
            try bundle.replacePack(.opus, tiles: tiles)
            return Expectation(
                path: bundle.packPath(.opus), check: .tilePack,
                words: ["2 tiles that are not png", "\(html) (starts 3C 21 44 4F)", "\(jpeg) (starts FF D8 FF E0)"], package: package(.opus)
            )
        case .tileOutsideRange:
            // The last tile moved one column east of zoom 16's range: same count, still in order.
            var tiles = ValidateFixture.packTiles(bundle.manifest(.aac).mapTiles)
            let last = tiles[tiles.count - 1].0
            let outside = TileID(z: last.z, x: last.x + 1, y: last.y)
            tiles[tiles.count - 1].0 = outside
            try bundle.replacePack(.aac, tiles: tiles)
            return Expectation(
                path: bundle.packPath(.aac), check: .tilePack, words: ["1 tile outside package.json's range", "\(outside)"],
                package: package(.aac))
        case .strayTilePack:
            // package.json written without the pack: the file on disk is no one's.
            try bundle.rewrite(.mp3) { manifest in
                let tiles = manifest.mapTiles
                manifest.mapTiles = MapCoverage(
                    minZoom: tiles.minZoom, maxZoom: tiles.maxZoom, bufferMiles: tiles.bufferMiles, selection: tiles.selection,
                    bounds: tiles.bounds, ranges: tiles.ranges, tileCount: tiles.tileCount, estimatedBytes: tiles.estimatedBytes)
            }
            return Expectation(
                path: bundle.packPath(.mp3), check: .stray, words: ["tile pack", "package.json does not list it"], strict: true)
        case .missingTilePack:
            let path = bundle.packPath(.opus)
            try fm.removeItem(at: bundle.url(path))
            return Expectation(path: path, check: .tilePack, words: ["missing"], package: package(.opus))
        case .tilePackSideFile:
            let path = bundle.packPath(.aac) + "-journal"
            try Data(count: 512).write(to: bundle.url(path))
            return Expectation(path: path, check: .stray, words: ["SQLite side file"], strict: true)
        case .tilePackElsewhere:
            // The AAC package names the MP3 package's pack: refused unopened.
            let elsewhere = bundle.packPath(.mp3)
            try bundle.rewrite(.aac) { $0.mapTiles.file = elsewhere }
            return Expectation(path: elsewhere, check: .tilePack, words: ["refused", bundle.packPath(.aac)], package: package(.aac))
        case .tilesAsView:
            // Issue 27, defect 8: a view can hide an endless or enormous query; only tables are read.
            try bundle.runSQL(.mp3, "ALTER TABLE tiles RENAME TO stored; CREATE VIEW tiles AS SELECT * FROM stored")
            return Expectation(
                path: bundle.packPath(.mp3), check: .tilePack, words: ["`tiles` is a view, not a table"], package: package(.mp3))
        case .thousandsOfRanges:
            // Issue 27, defect 15: thousands of ranges are one finding, found in one pass.
            try bundle.rewrite(.aac) { manifest in
                manifest.mapTiles.ranges += Array(repeating: manifest.mapTiles.ranges[0], count: 3_000)
            }
            return Expectation(
                path: bundle.manifestPath(.aac), check: .mapTiles, words: ["3005 ranges listed: zoom 12 ", "listed more than once"],
                package: package(.aac))
        case .leftoverTilePackTemp:
            let path = "OfflineTours/\(package(.opus))/.tiles.mbtiles.tmp-00000000deadbeef"
            try fm.copyItem(at: bundle.url(bundle.packPath(.opus)), to: bundle.url(path))
            return Expectation(path: path, check: .temporary, words: ["temp"])
        case .mixedFormats:
            // An Opus entry smuggled into the AAC package.
            var entry = bundle.manifest(.opus).audio[2]
            try bundle.rewrite(.aac) { manifest in
                entry.path = Layout.audioRelativePath(
                    tourID: SafeID(validating: manifest.tourId)!, poiID: SafeID(validating: entry.poiId)!, phase: entry.phase, format: .opus
                )
                manifest.audio[2] = entry
            }
            return Expectation(path: bundle.manifestPath(.aac), check: .audioList, words: ["mixes formats"], package: package(.aac))
        }
    }

    /// Replaces `url` with ffmpeg's rewrite of it (`-map_metadata 0` keeps the tags).
    private func reencode(_ url: URL, _ arguments: [String]) throws {
        let output = url.deletingLastPathComponent().appendingPathComponent("reencoded-\(UUID().uuidString)")
        let result = try Tool.run("ffmpeg", ["-nostdin", "-v", "error", "-y", "-i", url.path] + arguments + [output.path])
        try #require(result.status == 0, "ffmpeg: \(result.stderr)")
        try FileManager.default.removeItem(at: url)
        try FileManager.default.moveItem(at: output, to: url)
    }

    /// Where each Ogg page starts.
    static func oggPageOffsets(_ bytes: [UInt8]) -> [Int] {
        var offsets: [Int] = []
        var offset = 0
        while offset + 27 <= bytes.count {
            offsets.append(offset)
            let segments = Int(bytes[offset + 26])
            offset += 27 + segments + bytes[offset + 27..<offset + 27 + segments].reduce(0) { $0 + Int($1) }
        }
        return offsets
    }

    /// Recomputes a page's CRC after an edit, so only the edited fact is wrong.
    static func resealOggPage(_ bytes: inout [UInt8], at offset: Int) {
        let segments = Int(bytes[offset + 26])
        let length = 27 + segments + bytes[offset + 27..<offset + 27 + segments].reduce(0) { $0 + Int($1) }
        let crc = OggCRC.checksum(of: bytes[offset..<offset + length], crcOffset: 22)
        for index in 0..<4 { bytes[offset + 22 + index] = UInt8(truncatingIfNeeded: crc >> (8 * UInt32(index))) }
    }
}

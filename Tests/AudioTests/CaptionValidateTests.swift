import Foundation
import Testing
import TourpackTesting

@testable import TourpackCore
@testable import TourpackKit
@testable import TourpackPlan
@testable import TourpackValidate

/// validate and the caption files of issue 25: the good bundle with a
/// caption file per narration passes, with and without the pipeline's
/// tour; each damaged caption file is reported at its own path, under its
/// check, and nothing else in the bundle is blamed.
@Suite("validate: caption files", .offThePool)
struct CaptionValidateTests {
    /// The damaged package: the AAC one; its first entry is the first POI's `approaching` (1.2 s of audio).
    static let format = AudioFormat.aac

    enum Defect: String, CaseIterable, CustomTestStringConvertible {
        case badSyntax, cuePastTheEnd, overlappingCues, wrongText, wrongSha256, wrongSize, wrongCueCount, missingFile
        case strayFile, wrongPath, emptyCue, unknownTiming, leftoverTemp, notACaptionFile, symlinkedFile
        case symlinkInsideRoot

        var testDescription: String { rawValue }
    }

    struct Expectation {
        var path: String
        var check: ValidationCheck
        var words: [String]
        var strict = false
        var tours = false
        /// The bundle's own finding (a stray file), not the package's.
        var bundle = false
    }

    @Test("the good bundle with captions passes every check, with the tours and strictly")
    func goodCaptionsPass() async throws {
        var bundle = try ValidateFixture.copy()
        defer { bundle.remove() }
        try bundle.addCaptions()
        let report = try await bundle.validate(strict: true, tours: [try ValidateFixture.tour()])
        #expect(report.findings.isEmpty, "\(report.findings.map(\.description).joined(separator: "\n"))")
        #expect(report.passed && report.exitCode == 0)
        // Every caption file went through every check.
        for format in AudioFormat.allCases {
            for entry in bundle.manifest(format).audio {
                let path = try #require(entry.captions?.path)
                let checks = Set(report.outcomes.filter { $0.subject == path }.map(\.check))
                #expect(checks == [.path, .exists, .size, .sha256, .captions, .captionText], "\(path): \(checks)")
            }
        }
        // JUnit lists each passing check as a test case.
        #expect(report.junit().contains("captionText"))
    }

    @Test("each damaged caption file is reported at its path, and validate fails", arguments: Defect.allCases)
    func defectIsFound(_ defect: Defect) async throws {
        var bundle = try ValidateFixture.copy()
        defer { bundle.remove() }
        try bundle.addCaptions()
        let expected = try defect.apply(to: &bundle)
        let report = try await bundle.validate(strict: expected.strict, tours: expected.tours ? [try ValidateFixture.tour()] : [])
        let errors = report.findings.filter { $0.severity == .error }
        let match = errors.first { finding in
            finding.path == expected.path && finding.check == expected.check && expected.words.allSatisfy(finding.message.contains)
        }
        #expect(
            match != nil,
            "no \(expected.check) error at \(expected.path) saying \(expected.words); found:\n\(report.findings.map(\.description).joined(separator: "\n"))"
        )
        #expect(report.exitCode == 1 && !report.passed)
        let package = expected.bundle ? nil : bundle.manifest(Self.format).packageId
        let elsewhere = errors.filter { $0.package != package }
        #expect(elsewhere.isEmpty, "errors elsewhere: \(elsewhere.map(\.description))")
        // Every report format names the file and the check.
        #expect(report.text().contains(expected.path))
        let json = try report.json()
        #expect(json.contains(expected.path) && json.contains("\"\(expected.check.rawValue)\""))
        #expect(report.junit().contains(expected.path))
    }
}

extension CaptionValidateTests.Defect {
    func apply(to bundle: inout ValidateBundle) throws -> CaptionValidateTests.Expectation {
        let format = CaptionValidateTests.format
        let entry = bundle.manifest(format).audio[0]
        let path = entry.captions!.path
        switch self {
        case .badSyntax:
            try bundle.replaceCaptions(format, 0, Array("WEBVTT\n\n1\n00:00:00.000 --> 00:00:1.000\nComing up.\n".utf8), cues: 1)
            return .init(
                path: path, check: .captions,
                words: ["not valid WebVTT: line 4: expected a timestamp like 00:00:01.250, found \"00:00:1.000\""])
        case .cuePastTheEnd:
            try bundle.replaceCaptions(format, 0, WebVTT.encode([CaptionCue(start: 0.1, end: 2.0, text: "Coming up.")]), cues: 1)
            return .init(path: path, check: .captions, words: ["cue 1 (line 4)", "00:00:02.000", "after the audio's 1.2"])
        case .overlappingCues:
            let cues = [CaptionCue(start: 0, end: 0.8, text: "Coming"), CaptionCue(start: 0.5, end: 1.0, text: "up.")]
            try bundle.replaceCaptions(format, 0, WebVTT.encode(cues), cues: 2)
            return .init(path: path, check: .captions, words: ["cue 2 (line 8)", "before cue 1 ends at 00:00:00.800", "overlap"])
        case .wrongText:
            try bundle.replaceCaptions(format, 0, WebVTT.encode([CaptionCue(start: 0.1, end: 1.0, text: "Going <away>.")]), cues: 1)
            return .init(
                path: path, check: .captionText, words: ["cue 1 (line 4)", "expected \"Coming up.\"", "found \"Going <away>.\""],
                tours: true)
        case .wrongSha256:
            let url = bundle.url(path)
            var bytes = Array(try Data(contentsOf: url))
            bytes[bytes.count - 3] ^= 0x20
            try Data(bytes).write(to: url)
            return .init(path: path, check: .sha256, words: ["sha256 is", "audio[0].captions.sha256"])
        case .wrongSize:
            try bundle.rewrite(format) { $0.audio[0].captions!.sizeBytes += 1 }
            return .init(path: path, check: .size, words: ["bytes, audio[0].captions.sizeBytes says", "truncated"])
        case .wrongCueCount:
            try bundle.rewrite(format) { $0.audio[0].captions!.cues = 2 }
            return .init(path: path, check: .captions, words: ["1 cue, audio[0].captions.cues says 2"])
        case .missingFile:
            try FileManager.default.removeItem(at: bundle.url(path))
            return .init(path: path, check: .exists, words: ["missing"])
        case .strayFile:
            let stray = path.replacingOccurrences(of: "_Approaching.vtt", with: "_Guided Tour.vtt")
            try Data(WebVTT.encode([CaptionCue(start: 0, end: 1, text: "Left over.")])).write(to: bundle.url(stray))
            return .init(path: stray, check: .stray, words: ["stray caption file"], strict: true, bundle: true)
        case .wrongPath:
            let other = path.replacingOccurrences(of: "_Approaching.vtt", with: "_Detailed.vtt")
            try bundle.rewrite(format) { $0.audio[0].captions!.path = other }
            return .init(path: other, check: .path, words: ["refused", "expected \(path)"])
        case .emptyCue:
            try bundle.replaceCaptions(format, 0, Array("WEBVTT\n\n1\n00:00:00.100 --> 00:00:01.000\n<b> </b>&nbsp;\n".utf8), cues: 1)
            return .init(path: path, check: .captions, words: ["cue 1 (line 4) has no text"])
        case .leftoverTemp:
            let temp = try AtomicFile.temporaryURL(for: bundle.url(path))
            try Data("WEBVTT\n".utf8).write(to: temp)
            let relative = String(temp.path.dropFirst(bundle.root.path.count + 1))
            return .init(path: relative, check: .temporary, words: ["leftover temp file"], bundle: true)
        case .notACaptionFile:
            let notes = (path as NSString).deletingLastPathComponent + "/notes.txt"
            try Data("notes".utf8).write(to: bundle.url(notes))
            return .init(path: notes, check: .stray, words: ["not part of the layout"], strict: true, bundle: true)
        case .symlinkedFile:
            let outside = bundle.folder.appendingPathComponent("outside.vtt")
            try FileManager.default.moveItem(at: bundle.url(path), to: outside)
            try FileManager.default.createSymbolicLink(at: bundle.url(path), withDestinationURL: outside)
            // A link out of the root is refused unopened, as an audio file's is.
            return .init(path: path, check: .path, words: ["audio[0].captions.path is refused", "outside the output root"])
        case .symlinkInsideRoot:
            // The same bytes in the MP3 package: a link is still refused, since the app's reads would follow it.
            let twin = try #require(bundle.manifest(.mp3).audio.first { $0.poiId == entry.poiId && $0.phase == entry.phase }?.captions)
            try FileManager.default.removeItem(at: bundle.url(path))
            try FileManager.default.createSymbolicLink(at: bundle.url(path), withDestinationURL: bundle.url(twin.path))
            return .init(path: path, check: .symlink, words: ["audio[0].captions.path is a symlink to", twin.path])
        case .unknownTiming:
            try bundle.editText(format) { $0.replacingOccurrences(of: "\"timing\": \"provider\"", with: "\"timing\": \"guessed\"") }
            return .init(
                path: bundle.manifestPath(format), check: .schema, words: ["audio[0].captions.timing", "\"guessed\" is not one of"])
        }
    }
}

extension ValidateBundle {
    /// Writes each narration's captions into every package (its sentences
    /// spread over its audio, as `WebVTT.encode` writes them) and lists them
    /// in package.json with the sizes, hashes and counts the store records.
    mutating func addCaptions() throws {
        let tour = try ValidateFixture.tour()
        for format in AudioFormat.allCases {
            for (index, entry) in manifest(format).audio.enumerated() {
                let poi = try #require(tour.pois.first { $0.id.value == entry.poiId })
                let texts = CaptionScript.sentenceTexts(of: try #require(poi.narrations[entry.phase]))
                let step = (entry.durationSeconds - 0.2) / Double(texts.count)
                let cues = texts.enumerated().map { number, text in
                    CaptionCue(start: 0.1 + Double(number) * step, end: 0.1 + Double(number + 1) * step, text: text)
                }
                try replaceCaptions(format, index, WebVTT.encode(cues), cues: cues.count)
            }
        }
    }

    /// Writes `bytes` as the caption file of a format's `audio[index]` and
    /// records it, so only what the bytes get wrong remains.
    mutating func replaceCaptions(_ format: AudioFormat, _ index: Int, _ bytes: [UInt8], cues: Int) throws {
        let manifest = manifest(format)
        let entry = manifest.audio[index]
        let path = Layout.captionsRelativePath(
            packageID: try #require(SafeID(validating: manifest.packageId)), poiID: try #require(SafeID(validating: entry.poiId)),
            phase: entry.phase)
        try FileManager.default.createDirectory(at: url(path).deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data(bytes).write(to: url(path))
        let captions = PackageCaptions(bytes: bytes, cues: cues, timing: .provider)
        try rewrite(format) { manifest in
            manifest.audio[index].captions = .init(
                path: path, sha256: captions.sha256, sizeBytes: captions.sizeBytes, cues: captions.cues, timing: captions.timing)
        }
    }

    func validate(strict: Bool = false, tours: [Tour]) async throws -> ValidationReport {
        try await BundleValidator(options: ValidationOptions(now: ValidateFixture.now, strict: strict, threads: 2, tours: tours))
            .validate(root: root)
    }
}

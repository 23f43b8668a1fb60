import Foundation
import Testing
import TourpackAudio
import TourpackCore
import TourpackKit
import TourpackMaps
import TourpackTesting

/// `tourpack validate` run as CI runs it: the real executable on a real
/// bundle, its exit codes, its JSON, and its JUnit XML read by a JUnit
/// parser from PyPI (`junitparser`, installed by `make setup-test`).
@Suite(.offThePool) struct ValidateCommandTests {
    /// A small good bundle made with the library: one tour of two POIs and three
    /// phases, one package per format, built "now" so the real clock passes it.
    struct Bundle {
        let folder: URL
        let root: URL
        var manifests: [AudioFormat: PackageManifest] = [:]

        init() throws {
            folder = TemporaryFolder.path("tourpack-cli-validate")
            root = folder.appendingPathComponent("Documents")
            let tours = Executable.packageRoot.appendingPathComponent("Tests/TourpackKitTests/Resources/good-tour.json")
            var diagnostics = DiagnosticCollector()
            let tour = try #require(TourLoader().load(tours, into: &diagnostics), "\(diagnostics.diagnostics)")
            let voice = VoicePreset(provider: "local", languageCode: "en-US", name: "en-us", tier: .local)
            let layout = Layout(root: root)
            let coverage = try #require(TileMath.coverage(of: tour.coordinates, settings: MapSettings()))
            for format in AudioFormat.allCases {
                var audio: [PackageAudio] = []
                for poi in tour.pois {
                    for phase in poi.phases {
                        let target = layout.audioFile(tourID: tour.id, poiID: poi.id, phase: phase, format: format)
                        let temp = try AtomicFile.temporaryURL(for: target.url)
                        let encoded = try Self.encode(
                            Self.sweep(), as: format, metadata: AudioMetadata(title: poi.name, album: tour.name, language: tour.language),
                            to: temp)
                        try AtomicFile.commit(temp: temp, to: target.url)
                        audio.append(PackageAudio(poiID: poi.id, phase: phase, encoded: encoded, characters: 10))
                    }
                }
                let manifest = try PackageManifest(
                    tour: tour, voice: voice, format: format, audio: audio, mapTiles: coverage, createdAt: Date(), maxAgeDays: 90)
                try manifest.write(into: layout)
                manifests[format] = manifest
            }
        }

        func remove() { TemporaryFolder.remove(folder) }

        /// `pcm` as one file, through an encode session as a build writes one.
        static func encode(_ pcm: PCMAudio, as format: AudioFormat, metadata: AudioMetadata, to url: URL) throws -> EncodedAudio {
            let target = EncodeTarget(format: format, sampleRateHz: format.defaultSampleRate(endpointRate: pcm.sampleRate), url: url)
            let session = try FFmpegAudioEncoder().open([target], inputRate: pcm.sampleRate, metadata: metadata)
            try pcm.samples.withUnsafeBufferPointer { try session.write($0) }
            return try #require(try session.finish()[format])
        }

        /// 1.2 s of a noisy sweep at 24 kHz: enough for the bit-rate check to apply.
        static func sweep() -> PCMAudio {
            var generator = SeededGenerator(seed: 7)
            let samples = (0..<28_800).map { index -> Int16 in
                let t = Double(index) / 24_000
                let noise: Double = generator.unit() - 0.5
                let tone: Double = 0.3 * sin(2 * Double.pi * (200 + 1500 * t) * t)
                return Int16((tone + 0.05 * noise) * 32_000)
            }
            return PCMAudio(samples: samples, sampleRate: 24_000)
        }
    }

    @Test func goodBundleExitsZero() throws {
        let bundle = try Bundle()
        defer { bundle.remove() }
        let result = try Executable.run(["validate", bundle.root.path, "--strict"])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        #expect(result.stdout.contains("validate passed: 3 packages, 9 audio files"))
        #expect(result.stderr.isEmpty)
    }

    @Test func defectsExitOneAndJUnitParses() throws {
        let bundle = try Bundle()
        defer { bundle.remove() }
        let aac = try #require(bundle.manifests[.aac])
        let missing = aac.audio[0].path
        try FileManager.default.removeItem(at: bundle.root.appendingPathComponent(missing))
        let stray = "AudioCache/\(aac.tourId)/notes <&\"'>.txt"
        try Data("x".utf8).write(to: bundle.root.appendingPathComponent(stray))
        let report = bundle.folder.appendingPathComponent("validate.xml")

        let result = try Executable.run(["validate", bundle.root.path, "--format", "junit", "--output", report.path, "--strict"])
        #expect(result.status == 1, "\(result.stderr)")
        #expect(result.stdout.isEmpty)
        #expect(result.stderr.contains("validate FAILED: 3 packages, 9 audio files"))

        let cases = try Self.junitCases(report)
        let failures = cases.filter { $0.result == "Failure" }
        #expect(
            failures.contains { $0.suite == aac.packageId && $0.name == "\(missing) [exists]" && $0.message.contains("missing") },
            "\(failures)")
        #expect(failures.contains { $0.suite == "bundle" && $0.name == "\(stray) [stray]" }, "\(failures)")
        #expect(failures.count == 2, "\(failures)")
        // One test case per file and check: passing cases are listed too.
        #expect(cases.contains { $0.name == "\(aac.audio[1].path) [decode]" && $0.result == "pass" })
        #expect(Set(cases.map(\.suite)) == Set(bundle.manifests.values.map(\.packageId) + ["bundle"]))
    }

    @Test func jsonReportHasAStableShape() throws {
        let bundle = try Bundle()
        defer { bundle.remove() }
        let opus = try #require(bundle.manifests[.opus])
        let file = bundle.root.appendingPathComponent(opus.audio[1].path)
        var bytes = try Data(contentsOf: file)
        bytes[bytes.count - 100] ^= 0xFF
        try bytes.write(to: file)

        let result = try Executable.run(["validate", bundle.root.path, "--format", "json"])
        #expect(result.status == 1, "\(result.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        #expect(object["version"] as? Int == 1)
        #expect(object["passed"] as? Bool == false)
        #expect(Set(object.keys) == ["findings", "packages", "passed", "root", "strict", "summary", "version"])
        let summary = try #require(object["summary"] as? [String: Any])
        #expect(summary["packages"] as? Int == 3 && summary["audioFiles"] as? Int == 9)
        let findings = try #require(object["findings"] as? [[String: Any]])
        let sha = try #require(findings.first { $0["check"] as? String == "sha256" })
        #expect(sha["path"] as? String == opus.audio[1].path)
        #expect(sha["package"] as? String == opus.packageId)
        #expect(sha["severity"] as? String == "error")
        // Keys are sorted, so the text is stable for diffs.
        let keys = result.stdout.split(separator: "\n").filter { $0.hasPrefix("  \"") }.map { $0.split(separator: "\"")[1] }
        #expect(keys == keys.sorted())
    }

    @Test func pipelineBudgetsApply() throws {
        let bundle = try Bundle()
        defer { bundle.remove() }
        let pipeline = bundle.folder.appendingPathComponent("p.yaml")
        try "version: 1\ntours: [\"*.json\"]\nbudgets: {cacheMaxMB: 50, packageMaxAgeDays: 30}\n".write(
            to: pipeline, atomically: true, encoding: .utf8)
        let result = try Executable.run(["validate", bundle.root.path, "--pipeline", pipeline.path, "--strict"])
        // Built for 90 days, the pipeline says 30: a warning, an error with --strict.
        #expect(result.status == 1)
        #expect(result.stdout.contains("the pipeline's budgets.packageMaxAgeDays is 30 [expiry]"), "\(result.stdout)")
    }

    /// Caption files listed in package.json: without `--pipeline` their texts
    /// are not judged; with it, the pipeline's tours are loaded and a cue that
    /// is not the narration's sentence fails, named by file, cue and line.
    @Test func captionTextsAreHeldToThePipelineTours() throws {
        var bundle = try Bundle()
        defer { bundle.remove() }
        let tourFile = Executable.packageRoot.appendingPathComponent("Tests/TourpackKitTests/Resources/good-tour.json")
        var diagnostics = DiagnosticCollector()
        let tour = try #require(TourLoader().load(tourFile, into: &diagnostics))
        var manifest = bundle.manifests[.aac]!
        let packageID = try #require(SafeID(validating: manifest.packageId))
        var wrong = ""
        for index in manifest.audio.indices {
            let entry = manifest.audio[index]
            let poi = try #require(tour.pois.first { $0.id.value == entry.poiId })
            var texts = CaptionScript.sentenceTexts(of: try #require(poi.narrations[entry.phase]))
            if index == 0 {
                wrong = "Not what the guide says."
                texts[0] = wrong
            }
            let step = (entry.durationSeconds - 0.2) / Double(texts.count)
            let cues = texts.enumerated().map { CaptionCue(start: 0.1 + Double($0) * step, end: 0.1 + Double($0 + 1) * step, text: $1) }
            let bytes = WebVTT.encode(cues)
            let path = Layout.captionsRelativePath(packageID: packageID, poiID: poi.id, phase: entry.phase)
            let url = bundle.root.appendingPathComponent(path)
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data(bytes).write(to: url)
            let captions = PackageCaptions(bytes: bytes, cues: cues.count, timing: .estimated)
            // The entry's memberwise init is internal; its Codable form is the contract's.
            let json = """
                {"path": "\(path)", "sha256": "\(captions.sha256)", "sizeBytes": \(captions.sizeBytes), "cues": \(cues.count), "timing": "estimated"}
                """
            manifest.audio[index].captions = try JSONDecoder().decode(PackageManifest.CaptionsEntry.self, from: Data(json.utf8))
        }
        manifest.contentHash = manifest.computeContentHash()
        try manifest.write(into: Layout(root: bundle.root))
        bundle.manifests[.aac] = manifest

        let plain = try Executable.run(["validate", bundle.root.path, "--strict"])
        #expect(plain.status == 0, "\(plain.stdout)")
        #expect(plain.stdout.contains("[captionText]") == false)

        let pipeline = bundle.folder.appendingPathComponent("p.yaml")
        try "version: 1\ntours: [\"\(tourFile.path)\"]\nbudgets: {cacheMaxMB: 50, packageMaxAgeDays: 90}\n".write(
            to: pipeline, atomically: true, encoding: .utf8)
        let result = try Executable.run(["validate", bundle.root.path, "--pipeline", pipeline.path])
        #expect(result.status == 1, "\(result.stdout)")
        let first = manifest.audio[0].captions!.path
        let line =
            result.stdout.split(separator: "\n").first { $0.contains("[captionText]") }.map { $0.trimmingCharacters(in: .whitespaces) }
            ?? ""
        #expect(line.hasPrefix("\(first): error: cue 1 (line 4): expected"), "\(result.stdout)")
        #expect(line.contains("found \"\(wrong)\""), "\(line)")
        #expect(result.stdout.split(separator: "\n").filter { $0.contains("[captionText]") }.count == 1, "\(result.stdout)")
    }

    /// Numbers past Int's range in package.json are findings at their JSON
    /// path, not a trap (issue 27, defect 5: SIGILL converting a Double to an Int).
    @Test func extremeNumbersAreFindingsNotACrash() throws {
        let bundle = try Bundle()
        defer { bundle.remove() }
        let aac = try #require(bundle.manifests[.aac])
        let opus = try #require(bundle.manifests[.opus])
        func edit(_ packageID: String, _ change: (inout [String: Any]) throws -> Void) throws {
            let url = bundle.root.appendingPathComponent("OfflineTours/\(packageID)/\(Layout.manifestFileName)")
            var object = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
            try change(&object)
            try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]).write(to: url)
        }
        try edit(aac.packageId) { object in
            var audio = try #require(object["audio"] as? [[String: Any]])
            audio[0]["sampleRateHz"] = 1e300
            object["audio"] = audio
        }
        try edit(opus.packageId) { object in
            var tiles = try #require(object["mapTiles"] as? [String: Any])
            tiles["bufferMiles"] = -1e19
            object["mapTiles"] = tiles
        }

        let result = try Executable.run(["validate", bundle.root.path, "--format", "json"])
        #expect(result.status == 1, "\(result.stdout)\(result.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        let findings = try #require(object["findings"] as? [[String: Any]])
        let messages = findings.map { "\($0["package"] as? String ?? "") \($0["message"] as? String ?? "")" }
        #expect(messages.contains { $0.hasPrefix(aac.packageId) && $0.contains("audio[0].sampleRateHz") }, "\(messages)")
        #expect(messages.contains { $0.hasPrefix(opus.packageId) && $0.contains("mapTiles.bufferMiles") }, "\(messages)")
    }

    /// Issue 35: with `--pipeline`, a file far too short for its narration's
    /// text (`SpeechLength`: 60 spoken characters a second at rate 1.0) is an
    /// error naming its POI and phase, captions or not; the same file under
    /// its own short text passes.
    @Test func aNarrationTooShortForItsTextIsAnErrorNamingPOIAndPhase() throws {
        let bundle = try Bundle()
        defer { bundle.remove() }
        let source = Executable.packageRoot.appendingPathComponent("Tests/TourpackKitTests/Resources/good-tour.json")
        var tour = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: source)) as? [String: Any])
        var pois = try #require(tour["pois"] as? [[String: Any]])
        var narrations = try #require(pois[0]["narrations"] as? [String: Any])
        let phase = try #require(narrations.keys.sorted().first)
        let poiID = try #require(pois[0]["id"] as? String)
        // 90 sentences: about 2,600 spoken characters, at least 43 s; the file lasts 1.2 s.
        narrations[phase] = Array(repeating: "The road climbs in thirty-six hairpins.", count: 90).joined(separator: " ")
        pois[0]["narrations"] = narrations
        tour["pois"] = pois
        let tourFile = bundle.folder.appendingPathComponent("long-tour.json")
        try JSONSerialization.data(withJSONObject: tour).write(to: tourFile)
        let pipeline = bundle.folder.appendingPathComponent("p.yaml")
        try "version: 1\ntours: [\"\(tourFile.path)\"]\nbudgets: {cacheMaxMB: 50, packageMaxAgeDays: 90}\n".write(
            to: pipeline, atomically: true, encoding: .utf8)

        let plain = try Executable.run(["validate", bundle.root.path])
        #expect(plain.status == 0, "without the pipeline the text is unknown: \(plain.stdout)")
        let result = try Executable.run(["validate", bundle.root.path, "--pipeline", pipeline.path])
        #expect(result.status == 1, "\(result.stdout)")
        let lines = result.stdout.split(separator: "\n").filter { $0.contains("[duration]") }
        #expect(lines.count == AudioFormat.allCases.count, "one per package: \(result.stdout)")
        for line in lines {
            #expect(line.contains("POI \(poiID) \(phase)") && line.contains("implausible"), "\(line)")
            #expect(line.contains("too little audio: 1.2"), "\(line)")
        }

        // The tour as built: every file's length fits its text.
        let fitting = bundle.folder.appendingPathComponent("p2.yaml")
        try "version: 1\ntours: [\"\(source.path)\"]\nbudgets: {cacheMaxMB: 50, packageMaxAgeDays: 90}\n".write(
            to: fitting, atomically: true, encoding: .utf8)
        let fine = try Executable.run(["validate", bundle.root.path, "--pipeline", fitting.path])
        #expect(fine.status == 0, "\(fine.stdout)")
    }

    /// Issue 35: validate judges expiry by `TOURPACK_NOW`, as `install` and `installed` do.
    @Test func expiryIsJudgedAtTourpackNow() throws {
        let bundle = try Bundle()
        defer { bundle.remove() }
        let now = try Executable.run(["validate", bundle.root.path])
        #expect(now.status == 0, "\(now.stdout)")
        let later = PackageManifest.timestamp(Date().addingTimeInterval(100 * 86_400))
        let result = try Executable.run(["validate", bundle.root.path], environment: ["TOURPACK_NOW": later])
        #expect(result.status == 1, "\(result.stdout)")
        #expect(result.stdout.split(separator: "\n").filter { $0.contains("[expiry]") && $0.contains("expired at") }.count == 3)
        #expect(result.stdout.contains("(now \(later))"), "\(result.stdout)")
    }

    @Test func usageErrorsExitTwo() throws {
        #expect(try Executable.run(["validate"]).status == 2)
        #expect(try Executable.run(["validate", "/nonexistent/tourpack-root"]).status == 2)
        #expect(try Executable.run(["validate", "/tmp", "--format", "xml"]).status == 2)
        #expect(try Executable.run(["validate", "/tmp", "--pipeline", "/nonexistent/p.yaml"]).status == 2)
    }

    struct JUnitCase: CustomStringConvertible {
        var suite, classname, name, result, message: String
        var description: String { "\(suite) | \(name) | \(result) | \(message)" }
    }

    /// The test cases as `junitparser` reads them: a real consumer's view of the XML.
    static func junitCases(_ file: URL) throws -> [JUnitCase] {
        let script = """
            import sys
            try:
                import junitparser
            except ImportError:
                print("MISSING: python3 cannot import junitparser; install it (pip install junitparser, or make setup-test)")
                sys.exit(3)
            xml = junitparser.JUnitXml.fromfile(sys.argv[1])
            total = 0
            for suite in xml:
                assert suite.tests == len(list(suite)), "tests attribute of " + suite.name
                for case in suite:
                    total += 1
                    results = case.result
                    kind = type(results[0]).__name__ if results else "pass"
                    message = (results[0].message or "") if results else ""
                    print("\\t".join([suite.name, case.classname, case.name, kind, message.replace("\\n", " ")]))
            assert xml.tests == total, "tests attribute of testsuites"
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", script, file.path]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let text = String(decoding: data, as: UTF8.self)
        try #require(process.terminationStatus == 0, "junitparser: \(text)")
        return text.split(separator: "\n").map { line in
            let fields = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init) + ["", "", "", "", ""]
            return JUnitCase(suite: fields[0], classname: fields[1], name: fields[2], result: fields[3], message: fields[4])
        }
    }
}

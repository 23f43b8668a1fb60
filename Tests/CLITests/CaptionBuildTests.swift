import Foundation
import Testing
import TourpackAudio
import TourpackCore
import TourpackKit
import TourpackTesting

/// Captions end to end, against the real `serve-tts`: the cues of every
/// shipped file are checked against the file itself, decoded by ffmpeg
/// (no tourpack code), and parsed by an independent WebVTT reader
/// (Python's webvtt-py).
@Suite(.serialized, .offThePool) struct CaptionBuildTests {
    static let tourID = "5c1d0e2f-7a31-4a6b-8c44-0d1e2f3a4b50"
    static let shortPOI = "5c1d0e2f-7a31-4a6b-8c44-0d1e2f3a4b51"
    static let longPOI = "5c1d0e2f-7a31-4a6b-8c44-0d1e2f3a4b52"

    /// Sentences with no commas, so the only pauses in the audio are between sentences.
    static let shortNarration = "The road climbs to the pass. Snow lies here in June. Drive slowly now."
    /// 54 sentences, past the 3,000 bytes a Google chunk holds with 2,000 bytes of headroom: two chunks.
    static let longSentences = Array(repeatElement(sentences, count: 9).joined())
    static let sentences = [
        "The old hospice stood here for eight hundred years.",
        "Monks kept dogs to find lost travellers in the snow.",
        "The lake beside it freezes for most of the year.",
        "A small chapel still holds a service every summer.",
        "From the top you can see three countries at once.",
        "The descent on the far side is steep and narrow.",
    ]

    /// A workspace with one tour: a narration of one chunk and one of several.
    static func workspace(api: String = "google", extraYAML: String) throws -> BuildWorkspace {
        let workspace = try BuildWorkspace(formats: ["aac", "mp3", "opus"], extraYAML: extraYAML)
        try FileManager.default.removeItem(at: workspace.root.appendingPathComponent("tours/lakes.json"))
        try writeTour(workspace, long: longSentences.joined(separator: " "))
        if api != "google" {
            var text = try String(contentsOf: workspace.pipeline, encoding: .utf8)
            text = text.replacingOccurrences(of: "api: google", with: "api: \(api)")
            try text.write(to: workspace.pipeline, atomically: true, encoding: .utf8)
        }
        return workspace
    }

    static func writeTour(_ workspace: BuildWorkspace, long: String) throws {
        try """
        {"id": "\(tourID)", "name": "Caption Pass", "language": "en-US", "version": 1,
         "route": {"waypoints": [{"latitude": 46.0, "longitude": 7.1}, {"latitude": 46.05, "longitude": 7.2}],
                   "segments": [{"from": 0, "to": 1, "distanceMeters": 6000, "durationSeconds": 600}]},
         "pois": [
          {"id": "\(shortPOI)", "name": "Short", "location": {"latitude": 46.0, "longitude": 7.1}, "triggerRadiusMeters": 300,
           "narrations": {"approaching": "\(shortNarration)"}},
          {"id": "\(longPOI)", "name": "Long", "location": {"latitude": 46.02, "longitude": 7.15}, "triggerRadiusMeters": 300,
           "narrations": {"detailed": "\(long)"}}
         ]}
        """.write(to: workspace.root.appendingPathComponent("tours/alps.json"), atomically: true, encoding: .utf8)
    }

    /// Every audio entry of every package with its caption file's cues.
    static func captioned(_ workspace: BuildWorkspace) throws -> [(
        entry: PackageManifest.AudioEntry, captions: PackageManifest.CaptionsEntry, cues: [(start: Double, end: Double, text: String)]
    )] {
        let packages = try FileManager.default.contentsOfDirectory(
            at: workspace.output.appendingPathComponent("OfflineTours"), includingPropertiesForKeys: nil)
        var result: [(PackageManifest.AudioEntry, PackageManifest.CaptionsEntry, [(Double, Double, String)])] = []
        for folder in packages.sorted(by: { $0.path < $1.path }) {
            let manifest = try PackageManifest.read(from: folder.appendingPathComponent("package.json"))
            for entry in manifest.audio {
                guard let captions = entry.captions else {
                    Issue.record("\(entry.path) has no captions")
                    continue
                }
                result.append((entry, captions, try webvttPy(workspace.output.appendingPathComponent(captions.path))))
            }
        }
        return result
    }

    /// The cues as webvtt-py reads them: an independent parser of the format.
    static func webvttPy(_ file: URL) throws -> [(start: Double, end: Double, text: String)] {
        let script = """
            import json, sys, webvtt
            def seconds(stamp):
                hours, minutes, rest = stamp.split(":")
                return int(hours) * 3600 + int(minutes) * 60 + float(rest)
            print(json.dumps([[seconds(c.start), seconds(c.end), c.text] for c in webvtt.read(sys.argv[1])]))
            """
        let run = try Tool.run("python3", ["-c", script, file.path])
        guard run.status == 0, let rows = try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [[Any]] else {
            Issue.record("webvtt-py could not read \(file.path): \(run.stderr)")
            return []
        }
        return rows.map { (($0[0] as? Double) ?? -1, ($0[1] as? Double) ?? -1, ($0[2] as? String) ?? "") }
    }

    /// Where sentences start in a shipped file, found from its samples alone:
    /// ffmpeg decodes it, and each start is the first loud 10 ms frame after
    /// at least `minimumPause` of quiet (and the file's first loud frame).
    static func speechStarts(_ file: URL, minimumPause: Double = 0.18) throws -> [Double] {
        let rate = 16_000
        // Tool reads stdout as text, which would garble samples: ffmpeg writes a file.
        let raw = TemporaryFolder.path("captions", suffix: ".raw")
        defer { TemporaryFolder.remove(raw) }
        let toFile = try Tool.run("ffmpeg", ["-v", "error", "-y", "-i", file.path, "-f", "s16le", "-ac", "1", "-ar", "\(rate)", raw.path])
        guard toFile.status == 0 else { throw SetupFailure("ffmpeg could not decode \(file.path): \(toFile.stderr)") }
        let data = try Data(contentsOf: raw)
        let samples = data.withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) }
        let frame = rate / 100
        var starts: [Double] = []
        var quietFrames = Int.max / 2
        for index in stride(from: 0, to: samples.count - frame, by: frame) {
            var energy = 0.0
            for sample in samples[index..<index + frame] { energy += Double(sample) * Double(sample) }
            let dbfs = 10 * log10(max(energy / Double(frame), 1e-9) / (32768.0 * 32768.0))
            if dbfs > -40 {
                if Double(quietFrames) * 0.01 >= minimumPause { starts.append(Double(index) / Double(rate)) }
                quietFrames = 0
            } else {
                quietFrames += 1
            }
        }
        return starts
    }

    @Test func everyCueStartsWithinAFewFramesOfItsSentenceInTheShippedFile() throws {
        // A small limit makes the long narration several chunks; a pause
        // other than the default, and loudness on (the default).
        let server = try LocalVoiceServer()
        let workspace = try Self.workspace(extraYAML: "chunking: {headroom: 2000}\naudio: {pauseMs: 650}\n")
        let build = try workspace.build(server, ["--json"])
        #expect(build.status == 0, "\(build.stderr)")
        let validated = try Executable.run(["validate", workspace.output.path], in: workspace.root)
        #expect(validated.status == 0, "\(validated.stdout)\(validated.stderr)")

        let files = try Self.captioned(workspace)
        #expect(files.count == 2 * 3)
        let long = try #require(files.first { $0.entry.poiId == Self.longPOI })
        #expect(long.cues.map(\.text) == Self.longSentences)
        #expect(try IncrementalBuildTests.requests(server) == 3, "the long narration is two chunks")
        for file in files {
            #expect(file.captions.timing == .provider, "\(file.captions.path)")
            #expect(file.captions.cues == file.cues.count)
            let expected =
                file.entry.poiId == Self.shortPOI
                ? CaptionScript.sentenceTexts(of: Narration(text: Self.shortNarration)) : Self.longSentences
            #expect(file.cues.map(\.text) == expected, "\(file.captions.path)")
            let starts = try Self.speechStarts(workspace.output.appendingPathComponent(file.entry.path))
            #expect(starts.count == file.cues.count, "\(file.entry.path): speech starts \(starts), cues \(file.cues.map(\.start))")
            for (cue, start) in zip(file.cues, starts) {
                #expect(abs(cue.start - start) <= 0.150, "\(file.entry.path): cue \"\(cue.text)\" at \(cue.start) s, speech at \(start) s")
            }
            for (cue, next) in zip(file.cues, file.cues.dropFirst()) { #expect(cue.end <= next.start && cue.start < cue.end) }
            #expect((file.cues.last?.end ?? .infinity) <= file.entry.durationSeconds + 0.001)
        }
    }

    @Test func aRebuildAsksNothingAndAnEditedSentenceAsksOnlyForItsChunk() throws {
        let server = try LocalVoiceServer()
        let workspace = try Self.workspace(extraYAML: "chunking: {headroom: 2000}\n")
        let first = try workspace.build(server)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stdout.contains("+ 6 caption files"), "two narrations in three packages: \(first.stdout)")
        let requests = try IncrementalBuildTests.requests(server)
        let captionFiles = try Self.captioned(workspace).map { workspace.output.appendingPathComponent($0.captions.path) }
        let before = try Dictionary(uniqueKeysWithValues: captionFiles.map { ($0.path, try Data(contentsOf: $0)) })
        let inodes = Dictionary(uniqueKeysWithValues: captionFiles.map { ($0.path, Self.inode($0)) })

        let again = try workspace.build(server)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(try IncrementalBuildTests.requests(server) == requests, "a rebuild asks for nothing")
        for file in captionFiles {
            #expect(try Data(contentsOf: file) == before[file.path])
            #expect(Self.inode(file) == inodes[file.path], "\(file.lastPathComponent) was rewritten")
        }

        // One sentence of the long narration changes: one chunk, one caption file per package.
        var edited = Self.longSentences
        edited[45] = "A small chapel still holds a mass every summer."
        try Self.writeTour(workspace, long: edited.joined(separator: " "))
        let third = try workspace.build(server)
        #expect(third.status == 0, "\(third.stderr)")
        #expect(third.stdout.contains("+ 3 caption files"), "\(third.stdout)")
        #expect(try IncrementalBuildTests.requests(server) == requests + 1)
        for file in captionFiles {
            let changed = file.lastPathComponent.hasPrefix(Self.longPOI)
            #expect((try Data(contentsOf: file) != before[file.path]) == changed, "\(file.lastPathComponent)")
            if !changed { #expect(Self.inode(file) == inodes[file.path], "\(file.lastPathComponent) was rewritten") }
        }
        let long = try Self.captioned(workspace).filter { $0.entry.poiId == Self.longPOI }
        #expect(long.count == 3 && long.allSatisfy { $0.cues.map(\.text) == edited && $0.captions.timing == .provider })
    }

    /// Captions are kept with their files. A narration whose written text
    /// changes while what is spoken does not (a lexicon's alias written
    /// out) keeps its audio and gets new captions, with no request; and a
    /// rebuild reads no chunk's shape: with every chunk gone from the
    /// synthesis cache it still asks nothing and writes the same captions.
    @Test func captionsAreKeptWithTheirFilesAndFollowTheWrittenText() throws {
        let server = try LocalVoiceServer()
        let workspace = try Self.workspace(extraYAML: "chunking: {headroom: 2000}\nlexicons: [names.pls]\n")
        try """
        <?xml version="1.0" encoding="UTF-8"?>
        <lexicon version="1.0" xmlns="http://www.w3.org/2005/01/pronunciation-lexicon" alphabet="ipa" xml:lang="en-US">
          <lexeme><grapheme>Gotthard</grapheme><alias>Gott hard</alias></lexeme>
        </lexicon>
        """.write(to: workspace.root.appendingPathComponent("names.pls"), atomically: true, encoding: .utf8)
        var spoken = Self.longSentences
        spoken[0] = "The old hospice on the Gott hard stood here for eight hundred years."
        try Self.writeTour(workspace, long: spoken.joined(separator: " "))
        let first = try workspace.build(server)
        #expect(first.status == 0, "\(first.stderr)")
        let requests = try IncrementalBuildTests.requests(server)
        let audio = RootCheck.allFiles(under: workspace.output).filter { $0.hasPrefix("AudioCache/") }
        let inodes = Dictionary(uniqueKeysWithValues: audio.map { ($0, Self.inode(workspace.output.appendingPathComponent($0))) })

        var written = spoken
        written[0] = "The old hospice on the Gotthard stood here for eight hundred years."
        try Self.writeTour(workspace, long: written.joined(separator: " "))
        let renamed = try workspace.build(server)
        #expect(renamed.status == 0, "\(renamed.stderr)")
        #expect(renamed.stdout.contains("+ 3 caption files"), "the long narration's, in three packages: \(renamed.stdout)")
        #expect(try IncrementalBuildTests.requests(server) == requests, "the same words are spoken")
        for path in audio { #expect(Self.inode(workspace.output.appendingPathComponent(path)) == inodes[path], "\(path) was made again") }
        let long = try Self.captioned(workspace).filter { $0.entry.poiId == Self.longPOI }
        #expect(long.count == 3 && long.allSatisfy { $0.cues.map(\.text) == written && $0.captions.timing == .provider })
        let captions = try Self.captioned(workspace).map { workspace.output.appendingPathComponent($0.captions.path) }
        let before = try Dictionary(uniqueKeysWithValues: captions.map { ($0.path, try Data(contentsOf: $0)) })

        try Self.sqlite(workspace.state.appendingPathComponent("state.sqlite"), "DELETE FROM synthesisChunk")
        let again = try workspace.build(server)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(try IncrementalBuildTests.requests(server) == requests, "no chunk's shape is needed to reuse captions")
        for file in captions { #expect(try Data(contentsOf: file) == before[file.path], "\(file.lastPathComponent)") }
        let validated = try Executable.run(["validate", "--strict", workspace.output.path], in: workspace.root)
        #expect(validated.status == 0, "\(validated.stdout)\(validated.stderr)")
    }

    /// A caption file a rebuild trusted unread (its signature kept) is still
    /// written again when it is damaged in place or removed: any write
    /// changes what `lstat` says of it.
    @Test func aDamagedOrMissingCaptionFileIsWrittenAgainByARebuild() throws {
        let server = try LocalVoiceServer()
        let workspace = try Self.workspace(extraYAML: "")
        #expect(try workspace.build(server).status == 0)
        let files = try Self.captioned(workspace).map { workspace.output.appendingPathComponent($0.captions.path) }
        let before = try Dictionary(uniqueKeysWithValues: files.map { ($0.path, try Data(contentsOf: $0)) })
        // Settled, then signed by a rebuild that reads them.
        Thread.sleep(forTimeInterval: 2.2)
        #expect(try workspace.build(server).status == 0)

        let (damaged, removed) = (files[0], files[1])
        let handle = try FileHandle(forWritingTo: damaged)
        try handle.write(contentsOf: Data(repeating: 0x41, count: before[damaged.path]!.count))
        try handle.close()
        try FileManager.default.removeItem(at: removed)
        let again = try workspace.build(server)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.stdout.contains("packages unchanged, 2 caption files written again"), "\(again.stdout)")
        for file in files { #expect(try Data(contentsOf: file) == before[file.path], "\(file.lastPathComponent)") }
    }

    /// Runs the sqlite3 command-line shell on a state database.
    static func sqlite(_ url: URL, _ statement: String) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["sqlite3", url.path, statement]
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw SetupFailure("sqlite3 failed on \(url.path)") }
    }

    @Test func anOpenAIBuildGetsEstimatedCaptionsThatStillCoverEverySentence() throws {
        let server = try LocalVoiceServer()
        let workspace = try Self.workspace(api: "openai", extraYAML: "captions: webvtt\n")
        let build = try workspace.build(server)
        #expect(build.status == 0, "\(build.stderr)")
        let files = try Self.captioned(workspace)
        #expect(files.count == 2 * 3)
        for file in files {
            #expect(file.captions.timing == .estimated)
            let expected =
                file.entry.poiId == Self.shortPOI
                ? CaptionScript.sentenceTexts(of: Narration(text: Self.shortNarration)) : Self.longSentences
            #expect(file.cues.map(\.text) == expected)
            for (cue, next) in zip(file.cues, file.cues.dropFirst()) { #expect(cue.start < cue.end && cue.end <= next.start) }
            #expect((file.cues.last?.end ?? .infinity) <= file.entry.durationSeconds + 0.001)
        }
        let validated = try Executable.run(["validate", workspace.output.path], in: workspace.root)
        #expect(validated.status == 0, "\(validated.stdout)\(validated.stderr)")
    }

    @Test func captionsOffWritesNoneAndRemovesThoseOfAnEarlierBuild() throws {
        let server = try LocalVoiceServer()
        let workspace = try Self.workspace(extraYAML: "")
        #expect(try workspace.build(server).status == 0)
        #expect(try Self.captioned(workspace).count == 6)
        let text = try String(contentsOf: workspace.pipeline, encoding: .utf8)
        try (text + "\ncaptions: off\n").write(to: workspace.pipeline, atomically: true, encoding: .utf8)
        let off = try workspace.build(server)
        #expect(off.status == 0, "\(off.stderr)")
        let vtt = RootCheck.allFiles(under: workspace.output).filter { $0.hasSuffix(".vtt") }
        #expect(vtt.isEmpty, "\(vtt)")
        let validated = try Executable.run(["validate", "--strict", workspace.output.path], in: workspace.root)
        #expect(validated.status == 0, "\(validated.stdout)\(validated.stderr)")
    }

    static func inode(_ url: URL) -> UInt64? {
        ((try? FileManager.default.attributesOfItem(atPath: url.path))?[.systemFileNumber] as? NSNumber)?.uint64Value
    }
}

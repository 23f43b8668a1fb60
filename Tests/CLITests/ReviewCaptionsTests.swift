import Foundation
import Testing
import TourpackCore
import TourpackKit
import TourpackTesting

/// `tourpack review` shows each narration's captions: a `<track>` on its
/// player, served as `text/vtt`, loaded by headless Chromium with every cue
/// of the file, and the cue being spoken as text under the player
/// (`Browser/review_captions.py`). A package from before captions still
/// renders, with no track.
@Suite(.serialized, .offThePool) struct ReviewCaptionsTests {
    static let script = Executable.packageRoot.appendingPathComponent("Tests/CLITests/Browser/review_captions.py")

    /// The cues written for a narration of `seconds`: two halves, the first
    /// with markup-like text, which must reach the reader as text.
    static func cues(seconds: Double) -> [CaptionCue] {
        [
            CaptionCue(start: 0, end: seconds / 2, text: "Look <b>left</b> & see \"the\" lake."),
            CaptionCue(start: seconds / 2, end: seconds - 0.01, text: "Zweiter Satz: Höhe 2 504 m."),
        ]
    }

    /// Gives every narration of the package in `folder` a caption file and
    /// its package.json the `captions` entries (and a new contentHash), as a build does.
    static func addCaptions(to folder: String, in root: URL) throws -> PackageManifest {
        let manifestURL = root.appendingPathComponent("OfflineTours/\(folder)/package.json")
        var json = try JSONSerialization.jsonObject(with: Data(contentsOf: manifestURL)) as! [String: Any]
        var audio = json["audio"] as! [[String: Any]]
        for index in audio.indices {
            let cues = cues(seconds: (audio[index]["durationSeconds"] as! NSNumber).doubleValue)
            let bytes = Data(WebVTT.encode(cues))
            let phase = try #require(Phase(rawValue: audio[index]["phase"] as! String))
            let path = Layout.captionsRelativePath(
                packageID: try #require(SafeID(validating: folder)),
                poiID: try #require(SafeID(validating: audio[index]["poiId"] as! String)), phase: phase)
            let url = root.appendingPathComponent(path)
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try bytes.write(to: url)
            let facts = PackageCaptions(bytes: Array(bytes), cues: cues.count, timing: .provider)
            audio[index]["captions"] = [
                "path": path, "sha256": facts.sha256, "sizeBytes": facts.sizeBytes, "cues": facts.cues, "timing": facts.timing.rawValue,
            ]
        }
        json["audio"] = audio
        var manifest = try PackageManifest.decode(Array(try JSONSerialization.data(withJSONObject: json, options: [.sortedKeys])))
        manifest.contentHash = manifest.computeContentHash()
        try Data(manifest.encoded()).write(to: manifestURL)
        return manifest
    }

    /// Makes the package in `folder` one from before captions: no entries, no files.
    static func removeCaptions(from folder: String, in root: URL) throws -> PackageManifest {
        let manifestURL = root.appendingPathComponent("OfflineTours/\(folder)/package.json")
        var json = try JSONSerialization.jsonObject(with: Data(contentsOf: manifestURL)) as! [String: Any]
        json["audio"] = (json["audio"] as! [[String: Any]]).map { $0.filter { $0.key != "captions" } }
        try? FileManager.default.removeItem(at: root.appendingPathComponent("OfflineTours/\(folder)/captions"))
        var manifest = try PackageManifest.decode(Array(try JSONSerialization.data(withJSONObject: json, options: [.sortedKeys])))
        manifest.contentHash = manifest.computeContentHash()
        try Data(manifest.encoded()).write(to: manifestURL)
        return manifest
    }

    struct Report: Decodable {
        struct Shown: Decodable {
            var text: String
            var elements: Int
        }
        struct Phase: Decodable {
            var phase: String
            var tracks: Int
            var captionLine: Bool
            var kind: String?
            var srclang: String?
            var label: String?
            var isDefault: Bool?
            var src: String?
            var readyState: Int?
            var mode: String?
            var contentType: String?
            var cues: Int?
            var cueTexts: [String]?
            var shown: [Shown]?
        }
        struct Page: Decodable {
            var title: String
            var players: Int
            var phases: [Phase]
        }
        struct ConsoleEntry: Decodable {
            var level: String?
            var message: String?
        }
        var pages: [String: Page]
        var console: [ConsoleEntry]
    }

    @Test func eachNarrationHasACaptionTrackAndThePageShowsTheCueBeingSpoken() throws {
        let root = try ReviewCommandTests.root()
        let manifests = try ReviewCommandTests.manifests(root)
        let (folder, _) = try #require(manifests.sorted { $0.key < $1.key }.first { $0.value.audio.first?.format == .aac })
        let (olderFolder, _) = try #require(manifests.sorted { $0.key < $1.key }.first { $0.value.audio.first?.format == .mp3 })
        let older = try Self.removeCaptions(from: olderFolder, in: root)
        let manifest = try Self.addCaptions(to: folder, in: root)
        let poi = try #require(manifest.pois.first { poi in manifest.audio.filter { $0.poiId == poi.id }.count > 1 } ?? manifest.pois.first)
        let olderPOI = try #require(older.pois.first)

        let server = try ReviewProcess(root: root)
        defer { server.stop() }
        let page = "\(server.url)tours/\(folder)/\(poi.id).html"
        let olderPage = "\(server.url)tours/\(olderFolder)/\(olderPOI.id).html"
        let report = try Self.open([page, olderPage])
        try Self.expectCaptions(report, page: page, manifest: manifest, poi: poi, served: true)
        try Self.expectNoCaptions(report, page: olderPage, manifest: older, poi: olderPOI)
        #expect((try server.stats()["captions"] as? Int ?? 0) >= 2, "the server counted the tracks it sent")

        // The export, opened from disk: its tracks carry the files (a file:// page may load none).
        let export = root.deletingLastPathComponent().appendingPathComponent("site")
        let run = try Executable.run(["review", root.path, "--export", export.path])
        #expect(run.status == 0 && run.stdout.contains("caption file(s)"), "\(run.stdout)\n\(run.stderr)")
        let exported = export.appendingPathComponent("tours/\(folder)/\(poi.id).html").absoluteString
        let exportedOlder = export.appendingPathComponent("tours/\(olderFolder)/\(olderPOI.id).html").absoluteString
        let fromDisk = try Self.open([exported, exportedOlder])
        try Self.expectCaptions(fromDisk, page: exported, manifest: manifest, poi: poi, served: false)
        try Self.expectNoCaptions(fromDisk, page: exportedOlder, manifest: older, poi: olderPOI)
    }

    /// Runs `review_captions.py` over `pages`.
    static func open(_ pages: [String]) throws -> Report {
        let out = TemporaryFolder.path("review-captions", suffix: ".json")
        defer { TemporaryFolder.remove(out) }
        let run = try Tool.run("python3", [script.path, out.path] + pages)
        try #require(run.status == 0, "review_captions.py failed: \(run.stdout)\n\(run.stderr)")
        let report = try JSONDecoder().decode(Report.self, from: Data(contentsOf: out))
        let errors = report.console.filter { $0.level == "SEVERE" }
        #expect(errors.isEmpty, "\(errors.map { $0.message ?? "" })")
        return report
    }

    /// Each player of `poi` has its track, loaded with the file's cues, and the page shows each cue as it is reached.
    static func expectCaptions(_ report: Report, page: String, manifest: PackageManifest, poi: PackageManifest.POIEntry, served: Bool)
        throws
    {
        let seen = try #require(report.pages[page])
        let entries = manifest.audio.filter { $0.poiId == poi.id }
        #expect(seen.phases.map(\.phase) == entries.map(\.phase.rawValue))
        for (phase, entry) in zip(seen.phases, entries) {
            let captions = try #require(entry.captions)
            let expected = cues(seconds: entry.durationSeconds)
            #expect(phase.tracks == 1 && phase.captionLine)
            #expect(phase.kind == "captions" && phase.srclang == manifest.language && phase.isDefault == true, "\(phase)")
            #expect(phase.label?.isEmpty == false)
            if served {
                #expect(phase.src?.removingPercentEncoding?.hasSuffix("/captions/" + captions.path) == true, "\(phase.src ?? "no src")")
                #expect(phase.contentType == "text/vtt; charset=utf-8", "\(phase.contentType ?? "none")")
            } else {
                #expect(phase.src?.hasPrefix("data:text/vtt;charset=utf-8;base64,") == true)
            }
            #expect(phase.readyState == 2, "the track loaded")
            #expect(phase.mode == "hidden", "the page's script puts the track in hidden mode")
            #expect(phase.cues == captions.cues && phase.cues == expected.count, "\(phase.cues ?? -1) cues")
            #expect(phase.cueTexts == expected.map(\.text))
            // The reader sees each cue's text, markup-like characters as text, while the player is in it.
            #expect(phase.shown?.map(\.text) == expected.map(\.text), "\(phase.shown ?? [])")
            #expect(phase.shown?.allSatisfy { $0.elements == 0 } == true, "a cue's text became markup")
        }
    }

    /// A package from before captions renders as before: its players, no track, no caption line.
    static func expectNoCaptions(_ report: Report, page: String, manifest: PackageManifest, poi: PackageManifest.POIEntry) throws {
        let old = try #require(report.pages[page])
        #expect(old.title == poi.name)
        #expect(old.players == manifest.audio.filter { $0.poiId == poi.id }.count && old.players > 0)
        #expect(old.phases.allSatisfy { $0.tracks == 0 && !$0.captionLine })
    }
}

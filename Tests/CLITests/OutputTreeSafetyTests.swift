import Foundation
import Testing
import TourpackCore
import TourpackKit
import TourpackTesting

#if canImport(Glibc)
import Glibc
#endif

/// No write outside the root (issue 16): a symlink in the output tree, or a
/// state folder reached through one into the output, is refused before the
/// first request (exit 2, naming the path), and nothing lands outside the
/// root. The real `tourpack build` against the real `serve-tts`, whose
/// `/debug/stats` proves no request was made.
@Suite(.serialized, .offThePool) struct OutputTreeSafetyTests {
    /// A workspace, a server, and an empty folder outside the output root for links to point at.
    final class Setup {
        let workspace: BuildWorkspace
        let server: LocalVoiceServer
        var outside: URL { workspace.root.appendingPathComponent("outside", isDirectory: true) }

        init() throws {
            workspace = try BuildWorkspace()
            server = try LocalVoiceServer()
            try FileManager.default.createDirectory(at: outside, withIntermediateDirectories: true)
            try FileManager.default.createDirectory(at: workspace.output, withIntermediateDirectories: true)
        }

        func folder(_ relative: String) throws -> URL {
            let url = workspace.output.appendingPathComponent(relative, isDirectory: true)
            try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
            return url
        }

        func link(_ relative: String, to target: URL) throws -> URL {
            let url = workspace.output.appendingPathComponent(relative)
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try FileManager.default.createSymbolicLink(at: url, withDestinationURL: target)
            return url
        }

        /// A package ID this build writes, read from `build --dry-run`.
        func packageID() throws -> String {
            let result = try Executable.run(["build", workspace.pipeline.path, "--dry-run"], in: workspace.root)
            let match = try #require(result.stdout.firstMatch(of: /OfflineTours\/([0-9a-f-]{36})\/package\.json/), "\(result.stdout)")
            return String(match.1)
        }

        /// Builds, and checks the refusal: exit 2, the path named, no request, nothing outside.
        func expectRefused(naming path: String, _ extra: [String] = [], sourceLocation: SourceLocation = #_sourceLocation) throws {
            let result = try workspace.build(server, extra)
            #expect(result.status == 2, "\(result.stdout)\n\(result.stderr)", sourceLocation: sourceLocation)
            #expect(result.stderr.contains(path), "the message names \(path): \(result.stderr)", sourceLocation: sourceLocation)
            #expect(try IncrementalBuildTests.requests(server) == 0, sourceLocation: sourceLocation)
            #expect(
                OutputTreeSafetyTests.entries(under: outside).isEmpty,
                "written outside the root: \(OutputTreeSafetyTests.entries(under: outside))", sourceLocation: sourceLocation)
        }

        deinit {
            server.stop()
            workspace.remove()
        }
    }

    /// Every entry under `folder`, folders included: a folder made outside is a write outside too.
    static func entries(under folder: URL) -> [String] {
        guard let walker = FileManager.default.enumerator(atPath: folder.path) else { return [] }
        return walker.compactMap { $0 as? String }.sorted()
    }

    @Test func audioCacheSymlinkIsRefused() throws {
        let setup = try Setup()
        let link = try setup.link("AudioCache", to: setup.outside)
        try setup.expectRefused(naming: link.path)
        #expect(!FileManager.default.fileExists(atPath: setup.workspace.output.appendingPathComponent("OfflineTours").path))
    }

    @Test func tourFolderSymlinkIsRefused() throws {
        let setup = try Setup()
        _ = try setup.folder("AudioCache")
        let link = try setup.link("AudioCache/\(BuildWorkspace.alpsID)", to: setup.outside)
        try setup.expectRefused(naming: link.path)
    }

    @Test func offlineToursSymlinkIsRefused() throws {
        let setup = try Setup()
        let link = try setup.link("OfflineTours", to: setup.outside)
        try setup.expectRefused(naming: link.path)
        #expect(!FileManager.default.fileExists(atPath: setup.workspace.output.appendingPathComponent("AudioCache").path))
    }

    @Test func packageFolderSymlinkIsRefused() throws {
        let setup = try Setup()
        let link = try setup.link("OfflineTours/\(try setup.packageID())", to: setup.outside)
        try setup.expectRefused(naming: link.path)
    }

    @Test func captionsFolderSymlinkIsRefused() throws {
        let setup = try Setup()
        let link = try setup.link("OfflineTours/\(try setup.packageID())/captions", to: setup.outside)
        try setup.expectRefused(naming: link.path)
    }

    @Test func symlinkedPackageJSONIsRefused() throws {
        let setup = try Setup()
        let target = setup.outside.appendingPathComponent("package.json")
        let link = try setup.link("OfflineTours/\(try setup.packageID())/package.json", to: target)
        try setup.expectRefused(naming: link.path)
        #expect(!FileManager.default.fileExists(atPath: target.path))
    }

    /// Each folder's files are judged from one listing of it: a symlink at an
    /// audio file and a folder at a caption file are both found, and named
    /// in one refusal, on a rebuild as on a first build.
    @Test func aSymlinkedAudioFileAndAFolderAtACaptionFileAreRefused() throws {
        let setup = try Setup()
        #expect(try setup.workspace.build(setup.server).status == 0)
        let files = RootCheck.allFiles(under: setup.workspace.output)
        let audio = setup.workspace.output.appendingPathComponent(try #require(files.first { $0.hasSuffix(".m4a") }))
        let captions = setup.workspace.output.appendingPathComponent(try #require(files.first { $0.hasSuffix(".vtt") }))
        let target = setup.outside.appendingPathComponent("audio.m4a")
        try Data("outside".utf8).write(to: target)
        try FileManager.default.removeItem(at: audio)
        try FileManager.default.createSymbolicLink(at: audio, withDestinationURL: target)
        try FileManager.default.removeItem(at: captions)
        try FileManager.default.createDirectory(at: captions, withIntermediateDirectories: false)

        let requests = try IncrementalBuildTests.requests(setup.server)
        let result = try setup.workspace.build(setup.server)
        #expect(result.status == 2, "\(result.stdout)\n\(result.stderr)")
        #expect(result.stderr.contains("\(audio.path) is a symlink to \(target.path), not a file"), "\(result.stderr)")
        #expect(result.stderr.contains("\(captions.path) is a folder, not a file"), "\(result.stderr)")
        #expect(try IncrementalBuildTests.requests(setup.server) == requests)
        #expect(try Data(contentsOf: target) == Data("outside".utf8), "the file outside is untouched")
    }

    @Test func audioCacheThatIsAFileIsRefused() throws {
        let setup = try Setup()
        let file = setup.workspace.output.appendingPathComponent("AudioCache")
        try Data("not a folder".utf8).write(to: file)
        try setup.expectRefused(naming: file.path)
        #expect(try Data(contentsOf: file) == Data("not a folder".utf8))
    }

    @Test func stateThroughASymlinkIntoTheOutputIsRefused() throws {
        let setup = try Setup()
        let inside = try setup.folder("inner")
        let link = setup.workspace.root.appendingPathComponent("state-link")
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: inside)
        try setup.expectRefused(naming: link.path, ["--state", link.path])
        #expect(Self.entries(under: inside).isEmpty, "state written into the output: \(Self.entries(under: inside))")
    }

    @Test func outputInsideTheStateIsRefused() throws {
        let setup = try Setup()
        let link = setup.workspace.root.appendingPathComponent("output-link")
        let inside = setup.workspace.state.appendingPathComponent("bundle", isDirectory: true)
        try FileManager.default.createDirectory(at: inside, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: inside)
        try setup.expectRefused(naming: link.path, ["--output", link.path])
        #expect(Self.entries(under: inside).isEmpty)
    }

    /// The swap a preflight cannot see: one Alps request is held while the
    /// others land, so the tour's folder exists; it is then replaced by a
    /// link out of the root. The held item's files must be refused, not
    /// written through the link: the tour fails, the other tour ships.
    @Test func aTourFolderSwappedMidBuildIsRefused() throws {
        let workspace = try BuildWorkspace()
        defer { workspace.remove() }
        let server = try LocalVoiceServer(faults: ["--hold-text", "HELD-HERE", "--stall-ms", "4000"])
        defer { server.stop() }
        let outside = workspace.root.appendingPathComponent("outside", isDirectory: true)
        try FileManager.default.createDirectory(at: outside, withIntermediateDirectories: true)
        try workspace.writeTours(alps: "HELD-HERE is the road.", lakes: "The lake lies still below the pass.")
        let build = try workspace.startBuild(server)
        func alpsItemDone() -> Bool {
            build.events.contains { $0["event"] as? String == "itemDone" && $0["tourId"] as? String == BuildWorkspace.alpsID }
        }
        while !alpsItemDone(), build.waitForEvent("itemDone") != nil {}
        try #require(alpsItemDone(), "no Alps item finished: \(build.events)")
        let tourFolder = workspace.output.appendingPathComponent("AudioCache/\(BuildWorkspace.alpsID)")
        #expect((try server.stats()["faultsInjected"] as? [String: Int])?["held"] == 1, "the held request is still pending")
        try FileManager.default.moveItem(at: tourFolder, to: workspace.root.appendingPathComponent("moved-alps"))
        try FileManager.default.createSymbolicLink(at: tourFolder, withDestinationURL: outside)

        #expect(build.finish() == 1)
        #expect(Self.entries(under: outside).isEmpty, "written outside the root: \(Self.entries(under: outside))")
        let failed = build.events.first { $0["event"] as? String == "tourFailed" }
        #expect(failed?["tourId"] as? String == BuildWorkspace.alpsID, "\(build.events)")
        #expect(build.events.contains { $0["event"] as? String == "tourPackaged" && $0["tourId"] as? String == BuildWorkspace.lakesID })
    }

    @Test func outputRootReachedThroughASymlinkBuilds() throws {
        let setup = try Setup()
        let link = setup.workspace.root.appendingPathComponent("documents-link")
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: setup.workspace.output)
        let result = try setup.workspace.build(setup.server, ["--output", link.path])
        #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
        #expect(RootCheck.allFiles(under: setup.workspace.output).contains { $0.hasSuffix("package.json") })
        #expect(RootCheck.problems(in: setup.workspace.output).isEmpty)
        #expect(Self.entries(under: setup.outside).isEmpty)
    }
}

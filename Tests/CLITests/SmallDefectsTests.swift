import Foundation
import Testing
import TourpackCore
import TourpackTesting

#if canImport(Glibc)
import Glibc
#endif

/// The smaller things the probing found (issue 27, defect 16).
@Suite(.serialized, .offThePool) struct SmallDefectsTests {
    @Test("A tour pattern that matches nothing is the pipeline file's error, at tours[i]")
    func anUnmatchedPatternNamesThePipeline() throws {
        let workspace = try BuildWorkspace()
        let yaml = try String(contentsOf: workspace.pipeline, encoding: .utf8)
            .replacingOccurrences(of: #"tours: ["tours/*.json"]"#, with: #"tours: ["tours/*.json", "elsewhere/*.json"]"#)
        try yaml.write(to: workspace.pipeline, atomically: true, encoding: .utf8)
        let plan = try Executable.run(["plan", workspace.pipeline.path], in: workspace.root)
        #expect(plan.status == 2, "\(plan.stderr)")
        let line = plan.stderr.split(separator: "\n").first { $0.contains("no tour file matches") } ?? ""
        #expect(line.contains(workspace.pipeline.path) && line.contains("tours[1]") && line.contains("elsewhere/*.json"), "\(plan.stderr)")
    }

    @Test("A stale temp in the root's staging folder goes at the next build, also when the state is on another file system")
    func aStaleStagingTempIsRemoved() throws {
        let voice = try LocalVoiceServer()
        let workspace = try BuildWorkspace()
        // The state on a file system of its own: the build stages beside the final paths, and never uses `staging/`.
        let disk = try SmallDisk(workspace.state, bytes: 64 << 20)
        defer { disk.unmount() }
        try #require(disk.method == .tmpfs, "needs a second file system (a tmpfs)")
        try #require(try workspace.build(voice).status == 0)
        let staging = workspace.rootState.appendingPathComponent("staging")
        try FileManager.default.createDirectory(at: staging, withIntermediateDirectories: true)
        let stale = staging.appendingPathComponent(".x.tmp-0123456789abcdef")
        try Data("left by a killed run".utf8).write(to: stale)
        let next = try workspace.build(voice)
        #expect(next.status == 0, "\(next.stderr)")
        #expect(!FileManager.default.fileExists(atPath: stale.path), "the stale temp is still in staging")
    }

    @Test("cache prune and cache clear, locked out by a build, do not tell the user to drop a --no-wait they never gave")
    func cacheCommandsLockedOutGiveTheirOwnAdvice() throws {
        let voice = try LocalVoiceServer(faults: ["--latency-ms", "4000"])
        let workspace = try BuildWorkspace()
        let build = try workspace.startBuild(voice)
        #expect(build.waitForEvent("started", timeout: 60) != nil)
        for command in ["prune", "clear"] {
            let result = try Executable.run(
                ["cache", command, workspace.pipeline.path] + (command == "clear" ? ["--yes"] : []), in: workspace.root)
            #expect(result.status == 1, "\(command): \(result.stdout)\n\(result.stderr)")
            #expect(!result.stderr.contains("--no-wait"), "\(command): \(result.stderr)")
            #expect(result.stderr.contains("cache \(command) does not wait"), "\(command): \(result.stderr)")
        }
        build.signal(SIGTERM)
        _ = build.finish()
    }

    @Test("FFmpeg's own log lines ('[aac @ 0x…] …') never reach the output; a damaged file is reported in tourpack's words")
    func ffmpegLinesStayInside() throws {
        let voice = try LocalVoiceServer()
        let workspace = try BuildWorkspace()
        try #require(try workspace.build(voice).status == 0)
        // Damage the middle of every audio file, keeping its size.
        for path in RootCheck.allFiles(under: workspace.output) where path.hasPrefix("AudioCache/") {
            let url = workspace.output.appendingPathComponent(path)
            var bytes = try Data(contentsOf: url)
            for index in stride(from: bytes.count / 3, to: bytes.count * 2 / 3, by: 7) { bytes[index] ^= 0x5A }
            try bytes.write(to: url)
        }
        let validate = try Executable.run(["validate", workspace.output.path], in: workspace.root)
        #expect(validate.status != 0, "\(validate.stdout)")
        for text in [validate.stdout, validate.stderr] {
            #expect(text.range(of: #"\[[a-z0-9_]+ @ 0x[0-9a-f]+\]"#, options: .regularExpression) == nil, "\(text.prefix(2000))")
        }
    }

    @Test("A tour file whose name is not UTF-8 is named, bytes escaped, as an input error (exit 2), not 'file doesn't exist'")
    func aNonUTF8TourFileName() throws {
        let workspace = try BuildWorkspace()
        // "caf\xE9.json": Latin-1, not UTF-8; created through the C API, which takes bytes.
        let folder = workspace.root.appendingPathComponent("tours").path
        let name: [UInt8] = Array("\(folder)/caf".utf8) + [0xE9] + Array(".json".utf8) + [0]
        let fd = name.withUnsafeBufferPointer {
            open(UnsafeRawPointer($0.baseAddress!).assumingMemoryBound(to: CChar.self), O_WRONLY | O_CREAT, 0o644)
        }
        try #require(fd >= 0)
        close(fd)
        let plan = try Executable.run(["plan", workspace.pipeline.path], in: workspace.root)
        #expect(plan.status == 2, "\(plan.stdout)\n\(plan.stderr)")
        #expect(plan.stderr.contains("caf\\xE9.json") && plan.stderr.contains("not UTF-8"), "\(plan.stderr)")
        #expect(!plan.stderr.contains("NSCocoaErrorDomain") && !plan.stderr.contains("doesn't exist"), "\(plan.stderr)")
    }
}

import Foundation
import Testing
import TourpackTesting

#if canImport(Glibc)
import Glibc
#endif

/// The synthesis cache checks what it reads against what its entry recorded
/// (the file's size and SHA-256): a swapped or replaced file is a miss and
/// is spoken again, and a path that is not a regular file is never read
/// (issue 27, defect 3).
@Suite(.serialized, .offThePool) struct SynthesisCacheTrustTests {
    static func flacFiles(_ workspace: BuildWorkspace) -> [URL] {
        let folder = workspace.state.appendingPathComponent("synthesis")
        return RootCheck.allFiles(under: folder).filter { $0.hasSuffix(".flac") }.map { folder.appendingPathComponent($0) }
    }

    /// How long each chunk kept in the synthesis cache plays, by its path
    /// under `synthesis/`. (The local voice is not the same twice to the
    /// sample, nor are its levels, so a chunk spoken again is told from
    /// another narration by its length: within a few tens of milliseconds
    /// of the first time, where the swapped ones differ by more than a second.)
    static func durations(_ workspace: BuildWorkspace) throws -> [String: Double] {
        let folder = workspace.state.appendingPathComponent("synthesis")
        var found: [String: Double] = [:]
        for file in flacFiles(workspace) {
            // Never a symlink to a device: ffprobe would read /dev/zero for ever.
            var info = stat()
            guard lstat(file.path, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { continue }
            found[String(file.path.dropFirst(folder.path.count))] = try FFprobe.probe(file).duration
        }
        return found
    }

    enum Damage: String, CaseIterable, Sendable {
        /// The longest and the shortest chunk's files swapped.
        case swapped
        /// A chunk's file replaced by a symlink to /dev/zero, which never ends.
        case device
    }

    @Test(
        "Swapped cache files, or one symlinked to /dev/zero, are misses: the rebuild speaks them again, promptly, and ships the right narration",
        arguments: Damage.allCases)
    func damagedFilesAreMisses(_ damage: Damage) throws {
        let voice = try LocalVoiceServer()
        let workspace = try BuildWorkspace()
        try #require(try workspace.build(voice).status == 0)
        // The longest and the shortest chunk are swapped: narrations of plainly different lengths.
        let files = try Self.flacFiles(workspace).map { ($0, try FFprobe.probe($0).duration) }.sorted { $0.1 > $1.1 }.map(\.0)
        try #require(files.count >= 3, "\(files)")
        let (longest, shortest) = (try FFprobe.probe(files[0]).duration, try FFprobe.probe(files[files.count - 1]).duration)
        try #require(longest - shortest > 1, "\(longest) s and \(shortest) s")
        // The reference: the same root and state, untouched, rebuilt the same way.
        let reference = try BuildWorkspace()
        try FileManager.default.removeItem(at: reference.root)
        try FileManager.default.copyItem(at: workspace.root, to: reference.root)
        switch damage {
        case .swapped:
            let parked = files[0].appendingPathExtension("parked")
            try FileManager.default.moveItem(at: files[0], to: parked)
            try FileManager.default.moveItem(at: files[files.count - 1], to: files[0])
            try FileManager.default.moveItem(at: parked, to: files[files.count - 1])
        case .device:
            try FileManager.default.removeItem(at: files[1])
            try FileManager.default.createSymbolicLink(atPath: files[1].path, withDestinationPath: "/dev/zero")
        }
        let target = "loudness: {targetLUFS: -20, truePeakDBTP: -2}\n"
        try String(contentsOf: workspace.pipeline, encoding: .utf8).appending(target)
            .write(to: workspace.pipeline, atomically: true, encoding: .utf8)

        let build = try RunningBuild(
            arguments: ["build", workspace.pipeline.path, "--endpoint", voice.endpoint, "--json"], in: workspace.root)
        let finished = build.waitForEvent("finished", timeout: 120)
        if finished == nil {
            build.signal(SIGTERM)
            if build.waitForEvent("never-sent", timeout: 10) == nil, build.process.isRunning { build.signal(SIGKILL) }
        }
        #expect(finished != nil, "the rebuild did not finish in 120 s: \(build.transcript.suffix(600))")
        #expect(build.finish() == 0, "\(build.transcript.suffix(1200))")
        // Each damaged chunk was a miss: spoken again.
        #expect((finished?["requests"] as? Int ?? 0) == (damage == .swapped ? 2 : 1), "\(finished ?? [:])")

        // The untouched copy, rebuilt alike: each key's file holds its own chunk again.
        try String(contentsOf: reference.pipeline, encoding: .utf8).appending(target)
            .write(to: reference.pipeline, atomically: true, encoding: .utf8)
        try #require(try reference.build(voice).status == 0)
        let (shipped, expected) = (try Self.durations(workspace), try Self.durations(reference))
        #expect(shipped.keys.sorted() == expected.keys.sorted())
        for (path, duration) in expected {
            #expect(abs((shipped[path] ?? 0) - duration) < 0.3, "\(path) plays \(shipped[path] ?? 0) s, its chunk \(duration) s")
        }
        #expect(RootCheck.problems(in: workspace.output).isEmpty)
        // Every chunk's path holds a regular file again.
        for file in files {
            var info = stat()
            #expect(lstat(file.path, &info) == 0 && info.st_mode & S_IFMT == S_IFREG, "\(file.lastPathComponent)")
        }
    }
}

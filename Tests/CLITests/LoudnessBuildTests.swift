import Foundation
import Testing
import TourpackAudio
import TourpackCore
import TourpackKit
import TourpackTesting

/// Loudness normalization end to end: `serve-tts --level-spread-db 18`
/// answers each text 0 to 18 dB down (levels up to ±9 dB about their
/// middle), and every file still measures the target by ffmpeg's own
/// `ebur128` meter, a meter that shares no code with tourpack's.
@Suite(.serialized, .offThePool) struct LoudnessBuildTests {
    /// ffmpeg's integrated loudness and true peak of a file.
    static func ffmpegLoudness(_ url: URL) throws -> (integrated: Double, truePeak: Double) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["ffmpeg", "-hide_banner", "-nostats", "-i", url.path, "-af", "ebur128=peak=true", "-f", "null", "-"]
        let err = Pipe()
        process.standardError = err
        process.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
        try process.run()
        let text = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        let summary = text.components(separatedBy: "Summary:").last ?? ""
        func value(after label: String) -> Double {
            guard let range = summary.range(of: label) else { return .nan }
            return Double(summary[range.upperBound...].split(whereSeparator: \.isWhitespace).first.map(String.init) ?? "") ?? .nan
        }
        return (value(after: "I:"), value(after: "Peak:"))
    }

    /// Every audio file of the bundle with its package.json entry and ffmpeg's measurement.
    static func measured(_ workspace: BuildWorkspace) throws -> [(
        entry: PackageManifest.AudioEntry, package: PackageManifest, ffmpeg: (integrated: Double, truePeak: Double)
    )] {
        let packages = try FileManager.default.contentsOfDirectory(
            at: workspace.output.appendingPathComponent("OfflineTours"), includingPropertiesForKeys: nil)
        var result: [(PackageManifest.AudioEntry, PackageManifest, (Double, Double))] = []
        for folder in packages {
            let manifest = try PackageManifest.read(from: folder.appendingPathComponent("package.json"))
            for entry in manifest.audio {
                result.append((entry, manifest, try ffmpegLoudness(workspace.output.appendingPathComponent(entry.path))))
            }
        }
        return result
    }

    static func validate(_ workspace: BuildWorkspace) throws -> Executable.Result {
        try Executable.run(["validate", workspace.output.path], in: workspace.root)
    }

    @Test func answersFarApartComeOutAtOneLoudnessAndATargetChangeCostsNoRequest() throws {
        let server = try LocalVoiceServer(faults: ["--level-spread-db", "18"])
        let workspace = try BuildWorkspace(formats: ["aac", "mp3", "opus"])

        let first = try workspace.build(server, ["--json"])
        #expect(first.status == 0, "\(first.stderr)")
        let validated = try Self.validate(workspace)
        #expect(validated.status == 0, "\(validated.stdout)\(validated.stderr)")
        let files = try Self.measured(workspace)
        #expect(files.count == 3 * 5)
        for (entry, package, ffmpeg) in files {
            #expect(package.loudness?.targetLUFS == -16 && package.loudness?.truePeakDBTP == -1)
            let recorded = try #require(entry.loudness, "\(entry.path): no loudness in package.json")
            #expect(
                recorded.truePeakDBTP.map { abs($0 - ffmpeg.truePeak) <= 1 } ?? false,
                "\(entry.path): package.json \(recorded), ffmpeg \(ffmpeg)")
            guard entry.durationSeconds >= 3 else { continue }
            #expect(
                abs(ffmpeg.integrated - -16) <= 1, "\(entry.path) (\(entry.durationSeconds) s): ffmpeg measures \(ffmpeg.integrated) LUFS")
            #expect(ffmpeg.truePeak <= -1, "\(entry.path): ffmpeg's true peak is \(ffmpeg.truePeak) dBTP")
            #expect(
                recorded.integratedLUFS.map { abs($0 - ffmpeg.integrated) <= 0.5 } ?? false,
                "\(entry.path): package.json \(recorded), ffmpeg \(ffmpeg)")
        }
        // The endpoint's levels really were far apart: the gains that undid them are too.
        let gains = files.compactMap { $0.entry.loudness?.gainDB }
        #expect((gains.max() ?? 0) - (gains.min() ?? 0) > 6, "gains \(gains.sorted())")
        let requests = try IncrementalBuildTests.requests(server)

        // A new target: every file is made again from the synthesis cache, with no request.
        try String(contentsOf: workspace.pipeline, encoding: .utf8)
            .appending("loudness: {targetLUFS: -20, truePeakDBTP: -2}\n")
            .write(to: workspace.pipeline, atomically: true, encoding: .utf8)
        let retarget = try workspace.build(server, ["--json"])
        #expect(retarget.status == 0, "\(retarget.stderr)")
        #expect(try IncrementalBuildTests.requests(server) == requests)
        let summary = try IncrementalBuildTests.summary(retarget)
        #expect(summary["encodes"] as? Int == 15, "\(summary)")
        #expect(try Self.validate(workspace).status == 0)
        for (entry, package, ffmpeg) in try Self.measured(workspace) where entry.durationSeconds >= 3 {
            #expect(package.loudness?.targetLUFS == -20 && package.loudness?.truePeakDBTP == -2)
            #expect(abs(ffmpeg.integrated - -20) <= 1, "\(entry.path): \(ffmpeg)")
            #expect(ffmpeg.truePeak <= -2, "\(entry.path): \(ffmpeg)")
        }

        // Off: the endpoint's levels are kept, and package.json names no target.
        var text = try String(contentsOf: workspace.pipeline, encoding: .utf8)
        text = text.replacingOccurrences(of: "loudness: {targetLUFS: -20, truePeakDBTP: -2}", with: "loudness: off")
        try text.write(to: workspace.pipeline, atomically: true, encoding: .utf8)
        let off = try workspace.build(server, ["--json"])
        #expect(off.status == 0, "\(off.stderr)")
        #expect(try IncrementalBuildTests.requests(server) == requests)
        #expect(try Self.validate(workspace).status == 0)
        let kept = try Self.measured(workspace)
        #expect(kept.allSatisfy { $0.package.loudness == nil && $0.entry.loudness?.gainDB == 0 })
        let levels = kept.filter { $0.entry.durationSeconds >= 3 }.map(\.ffmpeg.integrated)
        #expect((levels.max() ?? 0) - (levels.min() ?? 0) > 6, "levels as spoken: \(levels.sorted())")
    }

    @Test func aBadLoudnessSettingIsNamedByPath() throws {
        let workspace = try BuildWorkspace(extraYAML: "loudness: {targetLUFS: -2, peak: 1}")
        let result = try Executable.run(["plan", workspace.pipeline.path], in: workspace.root)
        #expect(result.status == 2)
        #expect(result.stderr.contains("loudness.targetLUFS"), "\(result.stderr)")
        #expect(result.stderr.contains("loudness.peak"), "\(result.stderr)")
    }
}

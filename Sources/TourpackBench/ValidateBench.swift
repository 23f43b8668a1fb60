// `tourpack-bench validate [--files 1000] [--seconds 20] [--repetitions 3]`
//
// Wall-clock time of `BundleValidator` on a bundle of about `--files` audio
// files (espeak-ng speech of `--seconds` each, in all three formats), once on
// one thread and once on one thread per core. Each file is hashed and fully
// decoded, so the figure is dominated by FFmpeg's decoders. The bundle must
// pass: it doubles as a check of the tolerances on real speech.
// Target (issue 7): 1,000 files in seconds.
import Foundation
import TourpackAudio
import TourpackCore
import TourpackKit
import TourpackMaps
import TourpackTesting

enum ValidateBench {
    /// Issue 39's goal for validate, per file of the warm-rebuild catalogue's 3-6 s of speech.
    static let goalCPUMillisecondsPerFile = 2.0

    static func run(_ arguments: [String]) async throws {
        var files = 1000
        var seconds = 20.0
        var repetitions = 3
        var index = 0
        while index < arguments.count {
            switch arguments[index] {
            case "--files": index += 1; files = max(3, Int(arguments[index]) ?? files)
            case "--seconds": index += 1; seconds = Double(arguments[index]) ?? seconds
            case "--repetitions": index += 1; repetitions = max(1, Int(arguments[index]) ?? repetitions)
            default: throw BenchError("unknown option \(arguments[index])")
            }
            index += 1
        }
        let work = try TemporaryFolder.make("tourpack-bench-validate")
        defer { TemporaryFolder.remove(work) }

        let root = work.appendingPathComponent("Documents")
        let count = try makeBundle(at: root, files: files, seconds: seconds, work: work)
        print(
            String(
                format: "validate: %d audio files of %.1f s espeak-ng speech (aac, mp3, opus), %d cores, median of %d", count, seconds,
                ValidationOptions.defaultThreads, repetitions))
        for threads in Set([1, ValidationOptions.defaultThreads]).sorted() {
            var times: [Double] = []
            var cpu: [Double] = []
            for _ in 0..<repetitions {
                let start = DispatchTime.now()
                let cpuStart = CPUTime.ownSeconds()
                let report = try await BundleValidator(options: ValidationOptions(threads: threads)).validate(root: root)
                times.append(Double(DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds) / 1e9)
                cpu.append(CPUTime.ownSeconds() - cpuStart)
                guard report.passed, report.warningCount == 0 else {
                    print(report.text())
                    throw BenchError("the benchmark bundle did not pass")
                }
            }
            print(
                String(
                    format:
                        "  %d thread%@  %.2f s (min %.2f s)  %.0f files/s; %.2f ms of CPU per file of %g s (goal ≤ %.1f ms at 3-6 s, issue 39: %@; "
                        + "depends on the machine's load, reported only); load average %@",
                    threads, threads == 1 ? " " : "s", EncodeBench.median(times), times.min()!, Double(count) / EncodeBench.median(times),
                    EncodeBench.median(cpu) * 1000 / Double(count), seconds, goalCPUMillisecondsPerFile,
                    seconds > 6
                        ? "not comparable: longer files"
                        : EncodeBench.median(cpu) * 1000 / Double(count) <= goalCPUMillisecondsPerFile ? "met" : "missed",
                    BenchLoad.text))
        }
    }

    /// Tours of up to 100 POIs with one narration each, in three formats; each
    /// format's file is encoded once and copied, with its own package.json.
    static func makeBundle(at root: URL, files: Int, seconds: Double, work: URL) throws -> Int {
        let pcm = try EncodeBench.speech(seconds: seconds, rate: 24_000, in: work)
        var encoded: [AudioFormat: (url: URL, audio: EncodedAudio)] = [:]
        for format in AudioFormat.allCases {
            let url = work.appendingPathComponent("speech.\(format.fileExtension)")
            let audio = try EncodeBench.encode(pcm, as: format, to: url)
            encoded[format] = (url, audio)
        }
        let perFormat = (files + 2) / 3
        let tourCount = (perFormat + 99) / 100
        let layout = Layout(root: root)
        let voice = VoicePreset(provider: "local", languageCode: "en-US", name: "en-us", tier: .local)
        var written = 0
        for tourIndex in 0..<tourCount {
            let pois = min(100, perFormat - tourIndex * 100)
            let tour = try tour(index: tourIndex, pois: pois)
            let coverage = TileMath.coverage(of: tour.coordinates, settings: MapSettings())!
            for format in AudioFormat.allCases {
                let (source, audio) = encoded[format]!
                var items: [PackageAudio] = []
                for poi in tour.pois {
                    let target = layout.audioFile(tourID: tour.id, poiID: poi.id, phase: .detailed, format: format)
                    try AtomicFile.createFolder(target.url.deletingLastPathComponent())
                    try FileManager.default.copyItem(at: source, to: target.url)
                    items.append(PackageAudio(poiID: poi.id, phase: .detailed, encoded: audio, characters: 100))
                    written += 1
                }
                try PackageManifest(
                    tour: tour, voice: voice, format: format, audio: items, mapTiles: coverage, createdAt: Date(), maxAgeDays: 90
                )
                .write(into: layout)
            }
        }
        return written
    }

    static func tour(index: Int, pois: Int) throws -> Tour {
        func id(_ n: Int) -> String { String(format: "%08x-0000-4000-8000-%012x", index, n) }
        let poiJSON = (0..<pois).map { n in
            """
            {"id": "\(id(n + 1))", "name": "POI \(n)", "location": {"latitude": \(47 + Double(n) / 1000), "longitude": 12.8},
             "triggerRadiusMeters": 500, "narrations": {"detailed": "Narration \(n)."}}
            """
        }
        let json = """
            {"id": "\(id(0))", "name": "Bench tour \(index)", "language": "en-US", "version": 1,
             "route": {"waypoints": [{"latitude": 47.0, "longitude": 12.8}, {"latitude": 47.1, "longitude": 12.9}]},
             "pois": [\(poiJSON.joined(separator: ","))]}
            """
        var diagnostics = DiagnosticCollector()
        guard let tour = TourLoader().parse(Array(json.utf8), displayName: "bench-\(index).json", into: &diagnostics) else {
            throw BenchError("bench tour: \(diagnostics.diagnostics)")
        }
        return tour
    }
}

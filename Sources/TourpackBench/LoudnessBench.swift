// `tourpack-bench loudness [--seconds 600]`
//
// The CPU cost of loudness normalization per hour of audio, on espeak-ng
// speech at the endpoint's 24 kHz, in the parts the build runs:
// 1. per chunk, once, when it is recorded: the loudness meter (gating
//    blocks and true peak) and the limiter survey (13 thresholds over one shared
//    true-peak envelope), on 30-second chunks;
// 2. per file: the gain solve, then the leveler (gain and look-ahead
//    true-peak limiter) on the joined stream;
// 3. per file and format: decoding the written file and measuring it as
//    shipped (what package.json records).
// For scale, the AAC encode of the same audio. CPU is user+system time from
// getrusage (RUSAGE_SELF), the median of `--repetitions` runs.
import Foundation
import TourpackAudio
import TourpackCore
import TourpackKit
import TourpackTesting

enum LoudnessBench {
    static func run(_ arguments: [String]) throws {
        var seconds = 600.0
        var repetitions = 3
        var index = 0
        while index < arguments.count {
            switch arguments[index] {
            case "--seconds": index += 1; seconds = Double(arguments[index]) ?? seconds
            case "--repetitions": index += 1; repetitions = max(1, Int(arguments[index]) ?? repetitions)
            default: throw BenchError("unknown option \(arguments[index])")
            }
            index += 1
        }
        let work = try TemporaryFolder.make("tourpack-bench-loudness")
        defer { TemporaryFolder.remove(work) }

        let rate = EncodeBench.inputSampleRateHz
        let pcm = try EncodeBench.speech(seconds: seconds, rate: rate, in: work)
        let hours = pcm.durationSeconds / 3600
        print(
            String(
                format: "loudness: %.1f s of espeak-ng speech at %d Hz, %d repetitions; CPU seconds per hour of audio (median)",
                pcm.durationSeconds, rate, repetitions))
        let chunkLength = 30 * rate
        let chunks = stride(from: 0, to: pcm.samples.count, by: chunkLength).map {
            Array(pcm.samples[$0..<min(pcm.samples.count, $0 + chunkLength)])
        }

        func perHour(_ label: String, _ body: () throws -> Void) rethrows -> Double {
            var runs: [Double] = []
            for _ in 0..<repetitions {
                let start = CPUTime.ownSeconds()
                try body()
                runs.append(CPUTime.ownSeconds() - start)
            }
            let median = runs.sorted()[runs.count / 2] / hours
            print("  " + label.padding(toLength: 62, withPad: " ", startingAt: 0) + String(format: "%8.2f s", median))
            return median
        }

        var profiles: [LoudnessProfile] = []
        let meter = try perHour("per chunk: loudness meter (gating blocks, true peak)") {
            profiles = []
            for chunk in chunks {
                let meter = try LoudnessMeter(rate: rate)
                chunk.withUnsafeBufferPointer { meter.add($0) }
                profiles.append(meter.finishedProfile)
            }
        }
        let survey = perHour("per chunk: limiter survey (13 thresholds)") {
            for (index, chunk) in chunks.enumerated() {
                var survey = LimiterSurvey(rate: rate)
                chunk.withUnsafeBufferPointer { survey.add($0) }
                let limiting = survey.finish()
                profiles[index] = LoudnessProfile(bins: profiles[index].bins, truePeak: profiles[index].truePeak, limiting: limiting)
            }
        }
        let target = LoudnessTarget.standard
        var gain = 0.0
        let solve = perHour("per file: gain solve") { gain = target.gainDB(for: profiles) }
        var leveled: [Int16] = []
        let level = try perHour("per file: leveler (gain + look-ahead true-peak limiter)") {
            leveled = []
            leveled.reserveCapacity(pcm.samples.count)
            let leveler = LoudnessLeveler(gainDB: gain, ceilingDBTP: target.limiterCeilingDBTP, rate: rate)
            try pcm.samples.withUnsafeBufferPointer { all in
                for start in stride(from: 0, to: all.count, by: 4096) {
                    try leveler.feed(UnsafeBufferPointer(rebasing: all[start..<min(all.count, start + 4096)])) {
                        leveled.append(contentsOf: $0)
                    }
                }
            }
            try leveler.finish { leveled.append(contentsOf: $0) }
        }
        var shipped: [String: Double] = [:]
        var encodeAAC = 0.0
        for format in AudioFormat.allCases {
            let url = work.appendingPathComponent("leveled.\(format.fileExtension)")
            let cost = try perHour("encode \(format.rawValue) (for scale, not loudness)") {
                _ = try EncodeBench.encode(PCMAudio(samples: leveled, sampleRate: rate), as: format, to: url)
            }
            if format == .aac { encodeAAC = cost }
            var inspection: AudioInspection?
            shipped[format.rawValue] = try perHour("per file: decode the \(format.rawValue) and measure it as shipped") {
                inspection = try AudioFileInspector().inspect(url)
            }
            print(
                String(
                    format: "    %@ as shipped: %.2f LUFS, true peak %.2f dBTP", format.rawValue, inspection?.integratedLUFS ?? .nan,
                    inspection?.truePeakDBTP ?? .nan))
        }
        let perChunk = meter + survey
        let perFile = solve + level
        print(
            String(
                format:
                    "loudness: %.1f s CPU per hour of audio measured per chunk (%.1f meter + %.1f survey), %.1f s to level, %.1f s to measure an AAC file as shipped; AAC encode %.1f s",
                perChunk, meter, survey, perFile, shipped["aac"] ?? .nan, encodeAAC))
    }
}

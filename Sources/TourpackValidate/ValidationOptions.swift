package import Foundation
package import TourpackCore

/// How `BundleValidator` judges a bundle: the clock, strictness, and what a
/// pipeline file adds.
package struct ValidationOptions: Sendable {
    /// The time expiry is judged at; tests inject a fixed one.
    package var now: Date
    /// `--strict`: every warning (a stray file, a package folder without
    /// package.json, a non-canonical package.json) counts as an error, as in
    /// `swift-format lint --strict`.
    package var strict: Bool
    /// The pipeline's budgets and map settings, when `--pipeline` names one.
    package var limits: ValidationLimits?
    /// How many files are checked at once; each check is one blocking thread.
    package var threads: Int
    /// The pipeline's tours, when `--pipeline` names one and they load: each
    /// caption file's cue texts are held to its narration in the tour of the
    /// package's `tourId`. Empty: cue texts are only checked for being there.
    package var tours: [Tour]

    /// One thread per core the process may use (affinity and cgroup quota
    /// included): decoding is CPU work. This is what NIO's `System.coreCount`
    /// reports too; Foundation's spelling avoids importing NIOCore, which
    /// TourpackValidate does not declare.
    package static var defaultThreads: Int { ProcessInfo.processInfo.activeProcessorCount }

    package init(
        now: Date = Date(), strict: Bool = false, limits: ValidationLimits? = nil, threads: Int = ValidationOptions.defaultThreads,
        tours: [Tour] = []
    ) {
        self.now = now
        self.strict = strict
        self.limits = limits
        self.threads = max(1, threads)
        self.tours = tours
    }
}

/// The facts of a pipeline file that a bundle can be held to. Without a
/// pipeline, validate checks only what the bundle says about itself.
package struct ValidationLimits: Sendable, Hashable {
    /// `budgets.cacheMaxMB` in bytes (MB are MiB, as everywhere in tourpack).
    package var cacheMaxBytes: Int64
    /// `budgets.packageMaxAgeDays`: `expiresAt - createdAt` should be this many days.
    package var packageMaxAgeDays: Int
    /// `maps.tileKB`: `mapTiles.estimatedBytes` is `tileCount × tileKB × 1024`.
    package var tileKB: Int
    /// `maps.selection`: a package made with another selection is a warning (an older build's package).
    package var selection: TileSelection

    package init(cacheMaxMB: Int, packageMaxAgeDays: Int, tileKB: Int, selection: TileSelection = .bbox) {
        self.cacheMaxBytes = Budgets.bytes(megabytes: cacheMaxMB)
        self.packageMaxAgeDays = packageMaxAgeDays
        self.tileKB = tileKB
        self.selection = selection
    }

    package init(pipeline: PipelineConfig) {
        self.init(
            cacheMaxMB: pipeline.budgets.cacheMaxMB, packageMaxAgeDays: pipeline.budgets.packageMaxAgeDays,
            tileKB: pipeline.maps.tileKB, selection: pipeline.maps.selection)
    }
}

/// The tolerances of the audio checks, in one place so the Validate article of the docs can quote them.
///
/// Durations: the contract allows a file to differ from its PCM by one codec
/// frame plus the encoder delay, so that is what a measured duration may
/// differ from package.json by (plus 1 ms for the millisecond rounding of
/// `durationSeconds`). Bit rates: FFmpeg's AAC and Opus encoders are not CBR;
/// on espeak speech they land 2–4% from the table (the docs' audio article, "Audio
/// choices") and on a synthetic sweep up to 8% under it, so ±15% catches a
/// wrong setting (a 64k or 256k file) without failing honest rate control.
/// Files shorter than `minimumSecondsForBitRate` skip the bit-rate check:
/// over a few frames the rate control has not settled and container-level
/// priming dominates.
package enum ValidationTolerance {
    /// The measured bit rate may differ from the table's by this fraction.
    package static let bitRateFraction = 0.15
    /// Shorter files are not held to a bit rate.
    package static let minimumSecondsForBitRate = 1.0
    /// The largest sane Opus pre-skip: 80 ms at 48 kHz (libopus writes 312, 6.5 ms).
    package static let maximumOpusPreSkip = 3_840
    /// A file's loudness may differ from what package.json records, and from
    /// the package's target, by this much (LU, and dB for true peaks).
    package static let loudnessLU = 1.0
    /// Shorter files are not held to the package's target: a few gating
    /// blocks say little about a file, and the target is met by the whole tour.
    package static let minimumSecondsForLoudness = 3.0
    /// A true peak may pass the package's ceiling by this much before it is
    /// an error: true-peak meters oversample with different filters, and
    /// they disagree by a few tenths of a dB on the same file.
    package static let truePeakOverDB = 0.5
    /// A caption cue may end this long after the audio's `durationSeconds`:
    /// cue times and the duration are each rounded to the millisecond, and
    /// the last sentence's end comes from the voice's timings or an estimate
    /// on the joined PCM, not from a measurement of the encoded file.
    package static let captionEndSeconds = 0.05
    /// A `createdAt` further in the future than this is a warning (clock skew between machines).
    package static let clockSkewSeconds: TimeInterval = 300

    /// One frame plus the encoder delay, in seconds, plus 1 ms of rounding:
    /// AAC 1024 + 1024 at 44.1 kHz (47.4 ms), MP3 1152 + 1105 (LAME's 576
    /// plus the decoder's 529) at 44.1 kHz (52.2 ms), Opus 960 + 312 at 48 kHz (27.5 ms).
    package static func durationSeconds(for format: AudioFormat, sampleRateHz: Int) -> Double {
        let samples: Int
        switch format {
        case .aac: samples = 1024 + 1024
        case .mp3: samples = 1152 + 1105
        case .opus: samples = 960 + 312
        }
        // Opus always codes at 48 kHz inside, whatever rate its header records.
        let rate = format == .opus ? 48_000 : max(1, sampleRateHz)
        return Double(samples) / Double(rate) + 0.001
    }

    /// The demuxer FFmpeg names for each format's container.
    package static func containerName(for format: AudioFormat) -> String {
        switch format {
        case .aac: return "mov,mp4,m4a,3gp,3g2,mj2"
        case .mp3: return "mp3"
        case .opus: return "ogg"
        }
    }
}

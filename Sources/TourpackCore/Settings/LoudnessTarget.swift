/// The loudness every file is brought to (the contract's "Audio"): integrated
/// loudness in LUFS and the ceiling for true peaks in dBTP.
package struct LoudnessTarget: Sendable, Hashable {
    package var integratedLUFS: Double
    package var truePeakDBTP: Double

    /// -16 LUFS, -1 dBTP: the level of spoken-word streaming, with headroom
    /// for the lossy encoders' overshoot.
    package static let standard = LoudnessTarget(integratedLUFS: -16, truePeakDBTP: -1)

    /// The largest gain a file gets, either way. A file far below the target
    /// (a near-silent answer) would otherwise have its noise floor raised to
    /// speech level.
    package static let maximumGainDB = 30.0

    /// How far below the ceiling the limiter holds the peaks: the largest
    /// `AudioFormat.truePeakOvershootDB` of every format, whichever the
    /// pipeline makes. One limiter feeds every format of an item, and a
    /// margin that followed the pipeline's formats would put the format
    /// list into each file's key: adding Opus would re-encode every AAC file.
    package var encoderMarginDB: Double

    package static let defaultEncoderMarginDB = AudioFormat.allCases.map(\.truePeakOvershootDB).max() ?? 0

    package init(integratedLUFS: Double, truePeakDBTP: Double, encoderMarginDB: Double = defaultEncoderMarginDB) {
        self.integratedLUFS = integratedLUFS
        self.truePeakDBTP = truePeakDBTP
        self.encoderMarginDB = encoderMarginDB
    }

    /// The limiter's threshold: the ceiling less the encoders' margin.
    package var limiterCeilingDBTP: Double { truePeakDBTP - encoderMarginDB }
}

extension AudioFormat {
    /// How far the decoded file's true peak may rise above its input's:
    /// the codec's quantization noise rides on the peaks. Measured with
    /// ffmpeg's ebur128 meter on heavily limited speech (`LoudnessTests`):
    /// AAC at 128k and MP3 at 192k stay within 0.5 dB, Opus at 96k
    /// reaches about 1.1 dB.
    package var truePeakOvershootDB: Double {
        switch self {
        case .aac, .mp3: return 0.5
        case .opus: return 1.5
        }
    }
}

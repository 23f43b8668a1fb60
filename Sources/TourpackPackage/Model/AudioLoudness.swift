/// An audio file's loudness as shipped (package.json's `loudness` on each
/// audio entry): measured by decoding the file, plus the gain it was given
/// and the limiter's largest reduction.
public struct AudioLoudness: Sendable, Hashable, Codable {
    /// BS.1770 integrated loudness; nil when no 400 ms block passes the
    /// gates (a file under 0.4 s, or silence).
    public var integratedLUFS: Double?
    /// The true peak; nil for digital silence.
    public var truePeakDBTP: Double?
    /// The one gain applied to the whole file (0 with normalization off).
    public var gainDB: Double
    /// The look-ahead limiter's largest gain reduction (0 when it never acted).
    public var limiterReductionDB: Double

    public init(integratedLUFS: Double?, truePeakDBTP: Double?, gainDB: Double, limiterReductionDB: Double) {
        self.integratedLUFS = integratedLUFS
        self.truePeakDBTP = truePeakDBTP
        self.gainDB = gainDB
        self.limiterReductionDB = limiterReductionDB
    }

    /// Every figure to 0.01 dB: what package.json records, so float noise
    /// in a measurement never changes its bytes.
    public var rounded: AudioLoudness {
        func r(_ value: Double) -> Double { (value * 100).rounded() / 100 }
        return AudioLoudness(
            integratedLUFS: integratedLUFS.map(r), truePeakDBTP: truePeakDBTP.map(r), gainDB: r(gainDB),
            limiterReductionDB: r(limiterReductionDB))
    }
}

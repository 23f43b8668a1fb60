package import Foundation
import TourpackCore

/// A stretch of audio's loudness as ITU-R BS.1770 measures it, in a form
/// that adds up: the histogram of its gating blocks (400 ms, every 100 ms)
/// in 0.1 LU bins from -70 LUFS, and its true peak.
///
/// Integrated loudness is not an average of averages: two gates (absolute
/// at -70 LUFS, then relative at 10 LU below the ungated mean) decide which
/// blocks count, and they depend on the whole file. So a chunk keeps its
/// blocks, not its loudness; a file's measurement is the sum of its chunks'
/// histograms, gated once. That is how libebur128's own histogram mode keeps
/// state, at the same 0.1 LU resolution, which moves the result by at most
/// 0.05 LU. Blocks that straddle a seam between chunks are not in any
/// chunk; the pause there is silence, gated out anyway.
package struct LoudnessProfile: Sendable, Hashable {
    /// Gating blocks per bin; bin `b` holds blocks from `-70 + b/10` LUFS.
    package private(set) var bins: [Int: Int]
    /// The largest true peak, as a linear amplitude (1.0 is full scale).
    package private(set) var truePeak: Double
    /// One chunk's energy left by the limiter at each of
    /// `LimiterSurvey.thresholdsDBFS`, as a fraction; empty when not
    /// surveyed (silence, or a merged profile, whose chunks' thresholds differ).
    package internal(set) var limiting: [Double]

    package static let binCount = 1_000
    static let floorLUFS = -70.0

    package init(bins: [Int: Int] = [:], truePeak: Double = 0, limiting: [Double] = []) {
        self.bins = bins
        self.truePeak = truePeak
        self.limiting = limiting
    }

    /// Adds one gating block of loudness `lufs`; below the absolute gate it is not kept.
    mutating func addBlock(lufs: Double) {
        guard lufs.isFinite, lufs >= Self.floorLUFS else { return }
        let bin = Int(clamping: (lufs - Self.floorLUFS) * 10, to: 0...(Self.binCount - 1), rounding: .down)
        bins[bin, default: 0] += 1
    }

    mutating func notePeak(_ peak: Double) { truePeak = max(truePeak, peak) }

    /// Both stretches together (without a limiter survey).
    package func merged(with other: LoudnessProfile) -> LoudnessProfile {
        LoudnessProfile(bins: bins.merging(other.bins, uniquingKeysWith: +), truePeak: max(truePeak, other.truePeak))
    }

    /// The gating blocks kept (those above the absolute gate).
    package var blockCount: Int { bins.values.reduce(0, +) }

    /// Integrated loudness in LUFS; nil when no block passes the gates
    /// (shorter than 400 ms, or silence).
    package var integratedLUFS: Double? {
        func energy(_ bin: Int) -> Double { pow(10, (Self.floorLUFS + (Double(bin) + 0.5) / 10 + 0.691) / 10) }
        func lufs(_ energy: Double) -> Double { -0.691 + 10 * log10(energy) }
        let blocks = blockCount
        guard blocks > 0 else { return nil }
        let ungated = bins.reduce(0.0) { $0 + Double($1.value) * energy($1.key) } / Double(blocks)
        let relativeGate = lufs(ungated) - 10
        var sum = 0.0
        var count = 0
        // The bin holding the gate counts, as in libebur128's histogram mode.
        for (bin, n) in bins where Self.floorLUFS + Double(bin + 1) / 10 > relativeGate {
            sum += Double(n) * energy(bin)
            count += n
        }
        guard count > 0 else { return nil }
        return lufs(sum / Double(count))
    }

    /// The true peak in dBTP; nil for digital silence.
    package var truePeakDBTP: Double? { truePeak > 0 ? 20 * log10(truePeak) : nil }

    // MARK: Kept in the synthesis cache's index

    /// This profile with every block `decibels` louder (blocks pushed under
    /// the absolute gate are dropped).
    func shifted(by decibels: Double) -> LoudnessProfile {
        // Past ±binCount steps every block lands in the top bin or under the gate alike.
        let steps = Int(clamping: decibels * 10, to: -Self.binCount...Self.binCount)
        var moved: [Int: Int] = [:]
        for (bin, count) in bins where bin + steps >= 0 { moved[min(Self.binCount - 1, bin + steps), default: 0] += count }
        return LoudnessProfile(bins: moved, truePeak: truePeak * pow(10, decibels / 20), limiting: [])
    }

    /// The fraction of this chunk's energy the limiter leaves at a threshold
    /// of `thresholdDBFS`, interpolated in dB between the surveyed ones; 1
    /// when not surveyed.
    func energyLeft(atThreshold thresholdDBFS: Double) -> Double {
        let thresholds = LimiterSurvey.thresholdsDBFS
        guard limiting.count == thresholds.count else { return 1 }
        let levels = limiting.map { 10 * log10(max($0, 1e-9)) }
        guard thresholdDBFS < thresholds[0] else { return limiting[0] }
        for k in 1..<thresholds.count where thresholdDBFS >= thresholds[k] {
            let fraction = (thresholds[k - 1] - thresholdDBFS) / (thresholds[k - 1] - thresholds[k])
            return pow(10, (levels[k - 1] + fraction * (levels[k] - levels[k - 1])) / 10)
        }
        // Past the survey: at least what the lowest threshold takes.
        return limiting[thresholds.count - 1]
    }

    /// A compact byte form: a version byte, the limiter's revision (the
    /// survey's entries mean nothing to another limiter, or at other
    /// thresholds), the peak (Float64), the number of survey entries
    /// (UInt8) and each as a Float64, then each non-empty bin as (UInt16
    /// bin, UInt32 count), little-endian.
    package var encoded: Data {
        var data = Data([3, UInt8(LoudnessLeveler.revision)])
        withUnsafeBytes(of: truePeak.bitPattern.littleEndian) { data.append(contentsOf: $0) }
        data.append(UInt8(limiting.count))
        for fraction in limiting { withUnsafeBytes(of: fraction.bitPattern.littleEndian) { data.append(contentsOf: $0) } }
        for (bin, count) in bins.sorted(by: { $0.key < $1.key }) {
            withUnsafeBytes(of: UInt16(bin).littleEndian) { data.append(contentsOf: $0) }
            withUnsafeBytes(of: UInt32(clamping: count).littleEndian) { data.append(contentsOf: $0) }
        }
        return data
    }

    /// Reads `encoded`; nil for bytes it did not write.
    package init?(encoded data: Data) {
        let bytes = [UInt8](data)
        // Another layout, or a survey by another limiter: measured again.
        guard bytes.count >= 11, bytes[0] == 3, Int(bytes[1]) == LoudnessLeveler.revision else { return nil }
        let surveyed = Int(bytes[10])
        let binsStart = 11 + 8 * surveyed
        guard surveyed == 0 || surveyed == LimiterSurvey.thresholdsDBFS.count, bytes.count >= binsStart,
            (bytes.count - binsStart) % 6 == 0
        else { return nil }
        func little(_ at: Int, _ count: Int) -> UInt64 {
            (0..<count).reduce(UInt64(0)) { $0 | UInt64(bytes[at + $1]) << (8 * UInt64($1)) }
        }
        let peak = Double(bitPattern: little(2, 8))
        guard peak.isFinite, peak >= 0 else { return nil }
        let limiting = (0..<surveyed).map { Double(bitPattern: little(11 + 8 * $0, 8)) }
        guard limiting.allSatisfy({ $0.isFinite && $0 >= 0 && $0 <= 1 }) else { return nil }
        var bins: [Int: Int] = [:]
        for at in stride(from: binsStart, to: bytes.count, by: 6) {
            let bin = Int(little(at, 2))
            guard bin < Self.binCount else { return nil }
            bins[bin, default: 0] += Int(little(at + 2, 4))
        }
        self.init(bins: bins, truePeak: peak, limiting: limiting)
    }
}

/// Measures mono audio as it streams past: integrated loudness and the
/// gating blocks (a `LoudnessProfile`) by ITU-R BS.1770, and the true peak
/// (4× oversampled below 96 kHz) with `TruePeakMeter`.
///
/// The figures are libebur128's (in its histogram mode, which keeps memory
/// fixed however long the audio): the same K-weighting filter to the bit,
/// the same 400 ms blocks every 100 ms, the same 0.1 LU bins and gating.
/// Where libebur128 sums 400 ms of filtered samples again every 100 ms,
/// this meter sums each sample once, into its 100 ms hop, and a block is its
/// last four hops. That adds the same squares in another order, which can
/// move a block's loudness by a few 1e-13 LU (3 blocks in 4 in the tests,
/// by at most 3e-13): a block lands in another bin than libebur128's only
/// that close to an edge between bins (never in the tests' 11,840 blocks),
/// and the integrated loudness, gated from the bins' counts, is then
/// libebur128's to the bit.
///
/// One owner at a time.
package final class LoudnessMeter {
    package let rate: Int
    /// Samples in one 100 ms hop, as libebur128 counts them.
    private let hop: Int
    private var filter: KWeighting
    /// The current hop's sum of squares so far, and its samples.
    private var hopSum = 0.0
    private var intoHop = 0
    /// The three hops before it (oldest first), and how many hops are complete.
    private var earlier = (0.0, 0.0, 0.0)
    private var hops = 0
    private var histogram = GatingHistogram()
    private(set) package var profile = LoudnessProfile()
    private var peaks: TruePeakMeter
    /// Whether `profile` collects the gating blocks; without it, only the
    /// integrated loudness and the true peak are measured.
    private let keepsBlocks: Bool
    /// Sees each gating block's mean square as it completes (the tests compare them with libebur128's).
    var blockObserver: ((Double) -> Void)?

    /// - Parameter keepsBlocks: false when only `integratedLUFS` and
    ///   `truePeak` are wanted (a file as shipped, not a chunk): `profile`
    ///   then stays empty. The integrated loudness and the true peak are
    ///   the same either way.
    package init(rate: Int, keepsBlocks: Bool = true) throws {
        // libebur128's range of rates.
        guard (16...2_822_400).contains(rate) else {
            throw TourpackError.internalInvariant("the loudness meter cannot measure audio at \(rate) Hz")
        }
        self.rate = rate
        self.keepsBlocks = keepsBlocks
        hop = (rate + 5) / 10
        filter = KWeighting(rate: rate)
        peaks = TruePeakMeter(rate: rate)
    }

    /// Feeds 16-bit samples (full scale 32,768).
    package func add(_ samples: UnsafeBufferPointer<Int16>) {
        peaks.add(samples)
        feed(samples) { Double($0) / 32_768 }
    }

    /// Feeds float samples (full scale ±1).
    package func add(_ samples: UnsafeBufferPointer<Float>) {
        peaks.add(samples)
        feed(samples) { Double($0) }
    }

    /// Filters the samples hop by hop, closing each hop at its boundary.
    @inline(__always)
    private func feed<Sample>(_ samples: UnsafeBufferPointer<Sample>, _ value: (Sample) -> Double) {
        guard let base = samples.baseAddress else { return }
        var offset = 0
        while offset < samples.count {
            let piece = min(samples.count - offset, hop - intoHop)
            filter.addSquares(of: base + offset, count: piece, to: &hopSum, value)
            offset += piece
            intoHop += piece
            if intoHop == hop { closeHop() }
        }
    }

    /// Ends a hop: from the fourth on, the last four make a gating block.
    private func closeHop() {
        hops += 1
        if hops >= 4 {
            let energy = (earlier.0 + earlier.1 + earlier.2 + hopSum) / Double(4 * hop)
            histogram.add(energy: energy)
            // The block's loudness as libebur128 reports it (its momentary loudness at this point).
            if keepsBlocks, energy > 0 { profile.addBlock(lufs: GatingHistogram.lufs(energy: energy)) }
            blockObserver?(energy)
        }
        earlier = (earlier.1, earlier.2, hopSum)
        hopSum = 0
        intoHop = 0
    }

    /// Integrated loudness of everything fed, gated as libebur128's
    /// histogram mode gates; nil when no block passes the gates.
    package var integratedLUFS: Double? { histogram.integratedLUFS }

    /// The true peak of everything fed, linear.
    package var truePeak: Double { peaks.truePeak }

    /// The profile with the true peak filled in.
    package var finishedProfile: LoudnessProfile {
        var profile = profile
        profile.notePeak(truePeak)
        return profile
    }
}

import CEbur128
public import Foundation
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
public struct LoudnessProfile: Sendable, Hashable {
    /// Gating blocks per bin; bin `b` holds blocks from `-70 + b/10` LUFS.
    public private(set) var bins: [Int: Int]
    /// The largest true peak, as a linear amplitude (1.0 is full scale).
    public private(set) var truePeak: Double
    /// One chunk's energy left by the limiter at each of
    /// `LimiterSurvey.thresholdsDBFS`, as a fraction; empty when not
    /// surveyed (silence, or a merged profile, whose chunks' thresholds differ).
    public internal(set) var limiting: [Double]

    public static let binCount = 1_000
    static let floorLUFS = -70.0

    public init(bins: [Int: Int] = [:], truePeak: Double = 0, limiting: [Double] = []) {
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
    public func merged(with other: LoudnessProfile) -> LoudnessProfile {
        LoudnessProfile(bins: bins.merging(other.bins, uniquingKeysWith: +), truePeak: max(truePeak, other.truePeak))
    }

    /// The gating blocks kept (those above the absolute gate).
    public var blockCount: Int { bins.values.reduce(0, +) }

    /// Integrated loudness in LUFS; nil when no block passes the gates
    /// (shorter than 400 ms, or silence).
    public var integratedLUFS: Double? {
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
    public var truePeakDBTP: Double? { truePeak > 0 ? 20 * log10(truePeak) : nil }

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
    public var encoded: Data {
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
    public init?(encoded data: Data) {
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
/// gating blocks (a `LoudnessProfile`) with libebur128, and the true peak
/// (4× oversampled below 96 kHz) with `TruePeakMeter`, which gives
/// libebur128's figure to the bit at a fraction of its cost.
///
/// Blocking C work, one owner at a time.
public final class LoudnessMeter {
    public let rate: Int
    private var state: UnsafeMutablePointer<ebur128_state>?
    /// Samples in one 100 ms hop, as libebur128 counts them.
    private let hop: Int
    /// Samples fed since the last hop boundary, and hops completed.
    private var intoHop = 0
    private var hops = 0
    private(set) public var profile = LoudnessProfile()
    private var peaks: TruePeakMeter
    /// Whether `profile` collects the gating blocks; without it, only the
    /// integrated loudness and the true peak are measured.
    private let keepsBlocks: Bool

    /// - Parameter keepsBlocks: false when only `integratedLUFS` and
    ///   `truePeak` are wanted (a file as shipped, not a chunk): each
    ///   block's loudness is then not read back from libebur128, which
    ///   would sum 400 ms of filtered samples again every 100 ms. The
    ///   integrated loudness and the true peak are the same either way.
    public init(rate: Int, keepsBlocks: Bool = true) throws {
        guard rate > 0, let state = ebur128_init(1, UInt(rate), Self.mode) else {
            throw TourpackError.internalInvariant("libebur128 cannot measure audio at \(rate) Hz")
        }
        self.state = state
        self.rate = rate
        self.keepsBlocks = keepsBlocks
        hop = (rate + 5) / 10
        peaks = TruePeakMeter(rate: rate)
    }

    /// Integrated loudness; the histogram keeps libebur128's own memory
    /// fixed however long the audio is. The true peak is `peaks`'.
    private static let mode = Int32(EBUR128_MODE_I.rawValue | EBUR128_MODE_HISTOGRAM.rawValue)

    deinit { ebur128_destroy(&state) }

    /// Feeds 16-bit samples.
    public func add(_ samples: UnsafeBufferPointer<Int16>) {
        guard let base = samples.baseAddress else { return }
        peaks.add(samples)
        feed(samples.count) { offset, count in ebur128_add_frames_short(state, base + offset, count) }
    }

    /// Feeds float samples (full scale ±1).
    public func add(_ samples: UnsafeBufferPointer<Float>) {
        guard let base = samples.baseAddress else { return }
        peaks.add(samples)
        feed(samples.count) { offset, count in ebur128_add_frames_float(state, base + offset, count) }
    }

    /// Feeds `count` samples in pieces that end on hop boundaries, so that
    /// after each hop the momentary loudness is exactly the gating block
    /// libebur128 has just computed.
    private func feed(_ count: Int, _ add: (Int, Int) -> Int32) {
        var offset = 0
        while offset < count {
            let piece = min(count - offset, hop - intoHop)
            _ = add(offset, piece)
            offset += piece
            intoHop += piece
            if intoHop == hop {
                intoHop = 0
                hops += 1
                if hops >= 4, keepsBlocks {
                    var momentary = 0.0
                    if ebur128_loudness_momentary(state, &momentary) == 0 { profile.addBlock(lufs: momentary) }
                }
            }
        }
    }

    /// Integrated loudness of everything fed, by libebur128's own gating; nil
    /// when no block passes the gates.
    public var integratedLUFS: Double? {
        var value = 0.0
        guard ebur128_loudness_global(state, &value) == 0, value.isFinite else { return nil }
        return value
    }

    /// The true peak of everything fed, linear.
    public var truePeak: Double { peaks.truePeak }

    /// The profile with the true peak filled in.
    public var finishedProfile: LoudnessProfile {
        var profile = profile
        profile.notePeak(truePeak)
        return profile
    }
}

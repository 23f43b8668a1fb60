import Foundation

/// The true peak of mono audio as libebur128 measures it (ITU-R BS.1770
/// annex 2), to the same bit, at a fraction of its cost.
///
/// libebur128 oversamples every sample 4× (2× from 96 kHz; not at all from
/// 192 kHz) through a 49-tap windowed-sinc interpolator and keeps the
/// largest magnitude, with a scalar multiply-add and an index look-up per
/// tap: in a `validate` run it took two thirds of the CPU, five times the
/// decode. This meter computes the same interpolator the same way (the same
/// coefficients, each output summed in double in the same tap order and
/// rounded to float), so every output it computes is libebur128's; and it
/// computes only the outputs that could raise the peak. Each output is at
/// most `gain` (the largest sum of one phase's coefficient magnitudes)
/// times the largest input it reads, so a block of input whose loudest
/// sample, and the delay line's before it, cannot reach the peak found so far
/// (which already counts the block's own sample peak) is never computed.
/// Inputs are gathered in windows of `window` samples, and each window's
/// blocks are examined loudest first, so the peak is found early and the
/// quieter blocks are passed over: the outputs computed are a subset of
/// libebur128's, and every one left out is bounded by the peak already
/// found, so the maximum is the same. In speech, that is most blocks.
///
/// The result is the larger of the interpolated peak and the sample peak,
/// as `ebur128_true_peak` reports it, linear (1.0 is full scale).
public struct TruePeakMeter: Sendable {
    /// One phase of the interpolator: its coefficients and how many inputs
    /// back each one reads.
    struct Phase: Sendable {
        var coefficients: [Double] = []
        var lags: [Int] = []
    }

    let phases: [Phase]
    /// The delay line's length: inputs an output can read.
    let delay: Int
    /// The largest sum of one phase's coefficient magnitudes.
    let gain: Double
    /// The `delay` inputs before the window, then the window's inputs so far (`filled` of them).
    private var buffer: [Float]
    private var filled = 0
    private var samplePeak = 0.0
    private var interpolatedPeak = 0.0

    /// Inputs examined at once: the unit of skipping.
    static let blockSize = 64
    /// Inputs gathered before their blocks are examined, loudest first.
    public static let window = 16_384

    /// A meter for audio at `rate` Hz.
    public init(rate: Int) {
        let factor = rate < 96_000 ? 4 : rate < 192_000 ? 2 : 1
        let taps = 49
        var phases = [Phase](repeating: Phase(), count: factor)
        if factor > 1 {
            // The windowed sinc of BS.1770's example interpolator, as libebur128 designs it.
            for tap in 0..<taps {
                let m = Double(tap) - Double(taps - 1) / 2.0
                var c = 1.0
                if abs(m) > 0.000_001 { c = sin(m * .pi / Double(factor)) / (m * .pi / Double(factor)) }
                c *= 0.5 * (1 - cos(2 * .pi * Double(tap) / Double(taps - 1)))
                guard abs(c) > 0.000_001 else { continue }
                phases[tap % factor].coefficients.append(c)
                phases[tap % factor].lags.append(tap / factor)
            }
        }
        self.phases = factor > 1 ? phases : []
        delay = (taps + factor - 1) / factor
        gain = phases.map { $0.coefficients.reduce(0) { $0 + abs($1) } }.max() ?? 1
        buffer = [Float](repeating: 0, count: delay + Self.window)
    }

    /// The true peak of everything fed so far, linear.
    public var truePeak: Double {
        mutating get {
            examineWindow()
            return max(interpolatedPeak, samplePeak)
        }
    }

    /// Feeds 16-bit samples (full scale 32,768).
    public mutating func add(_ samples: UnsafeBufferPointer<Int16>) {
        var start = 0
        while start < samples.count {
            let count = min(Self.window - filled, samples.count - start)
            let at = delay + filled
            buffer.withUnsafeMutableBufferPointer { buffer in
                for index in 0..<count { buffer[at + index] = Float(Double(samples[start + index]) / 32_768) }
            }
            filled += count
            start += count
            if filled == Self.window { examineWindow() }
        }
    }

    /// Feeds float samples (full scale ±1).
    public mutating func add(_ samples: UnsafeBufferPointer<Float>) {
        var start = 0
        while start < samples.count {
            let count = min(Self.window - filled, samples.count - start)
            let at = delay + filled
            buffer.withUnsafeMutableBufferPointer { buffer in
                for index in 0..<count { buffer[at + index] = samples[start + index] }
            }
            filled += count
            start += count
            if filled == Self.window { examineWindow() }
        }
    }

    /// Examines the window's blocks, loudest first, computing the outputs
    /// only of those that could raise the peak; then keeps its last `delay`
    /// inputs for the next window.
    private mutating func examineWindow() {
        guard filled > 0 else { return }
        let (delay, filled, gain, phases, blockSize) = (delay, filled, gain, phases, Self.blockSize)
        var samplePeak = samplePeak
        var peak = interpolatedPeak
        buffer.withUnsafeMutableBufferPointer { buffer in
            // Each block's largest input, and the largest its outputs read (the `delay` inputs before it too).
            var reaches: [(block: Int, reach: Float)] = []
            reaches.reserveCapacity((filled + blockSize - 1) / blockSize)
            var block = 0
            while block * blockSize < filled {
                let first = delay + block * blockSize
                let end = delay + min(filled, (block + 1) * blockSize)
                var largest: Float = 0
                for index in first..<end { largest = max(largest, abs(buffer[index])) }
                samplePeak = max(samplePeak, Double(largest))
                var reach = largest
                for index in (first - delay)..<first { reach = max(reach, abs(buffer[index])) }
                reaches.append((block, reach))
                block += 1
            }
            guard !phases.isEmpty else { return }
            reaches.sort { $0.reach > $1.reach || ($0.reach == $1.reach && $0.block < $1.block) }
            for (block, reach) in reaches {
                // A bound on every output of the block, with room for the rounding of the sums and of the float result.
                // The blocks come loudest first: once one cannot raise the peak, none after it can.
                guard gain * Double(reach) * (1 + 1e-6) > max(peak, samplePeak) else { break }
                let first = delay + block * blockSize
                let end = delay + min(filled, (block + 1) * blockSize)
                for at in first..<end {
                    for phase in phases {
                        // Summed in double in tap order, then rounded to float, as libebur128 does.
                        var sum = 0.0
                        phase.coefficients.withUnsafeBufferPointer { coefficients in
                            phase.lags.withUnsafeBufferPointer { lags in
                                for index in 0..<coefficients.count { sum += Double(buffer[at - lags[index]]) * coefficients[index] }
                            }
                        }
                        peak = max(peak, abs(Double(Float(sum))))
                    }
                }
            }
            // The last `delay` inputs go before the next window.
            for index in 0..<delay { buffer[index] = buffer[filled + index] }
        }
        self.samplePeak = samplePeak
        interpolatedPeak = peak
        self.filled = 0
    }
}

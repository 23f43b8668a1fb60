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
/// (which already counts the block's own sample peak) is only pushed
/// through the delay line. In speech, that is most blocks.
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
    /// The last `delay` inputs, as a ring; `cursor` is where the next goes.
    private var line: [Float]
    private var cursor = 0
    private var samplePeak = 0.0
    private var interpolatedPeak = 0.0

    /// Inputs examined at once: the unit of skipping.
    static let blockSize = 64

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
        line = [Float](repeating: 0, count: delay)
    }

    /// The true peak of everything fed so far, linear.
    public var truePeak: Double { max(interpolatedPeak, samplePeak) }

    /// Feeds 16-bit samples (full scale 32,768).
    public mutating func add(_ samples: UnsafeBufferPointer<Int16>) {
        var block = [Float](repeating: 0, count: Self.blockSize)
        var start = 0
        while start < samples.count {
            let count = min(Self.blockSize, samples.count - start)
            var largest: Int32 = 0
            for index in 0..<count {
                let sample = Int32(samples[start + index])
                largest = max(largest, abs(sample))
                block[index] = Float(Double(sample) / 32_768)
            }
            samplePeak = max(samplePeak, Double(largest) / 32_768)
            block.withUnsafeBufferPointer { feed(UnsafeBufferPointer(rebasing: $0[0..<count]), largest: Float(Double(largest) / 32_768)) }
            start += count
        }
    }

    /// Feeds float samples (full scale ±1).
    public mutating func add(_ samples: UnsafeBufferPointer<Float>) {
        var start = 0
        while start < samples.count {
            let count = min(Self.blockSize, samples.count - start)
            let block = UnsafeBufferPointer(rebasing: samples[start..<(start + count)])
            var largest: Float = 0
            for sample in block { largest = max(largest, abs(sample)) }
            samplePeak = max(samplePeak, Double(largest))
            feed(block, largest: largest)
            start += count
        }
    }

    /// One block of at most `blockSize` inputs whose largest magnitude is `largest`.
    private mutating func feed(_ block: UnsafeBufferPointer<Float>, largest: Float) {
        guard !phases.isEmpty else { return }
        // The outputs of this block read its inputs and those still in the
        // delay line (however small the blocks fed before). A bound on every
        // one, with room for the rounding of the sums and of the float result:
        var reach = largest
        for sample in line { reach = max(reach, abs(sample)) }
        let bound = gain * Double(reach) * (1 + 1e-6)
        if bound <= truePeak {
            for sample in block {
                line[cursor] = sample
                cursor = cursor + 1 == delay ? 0 : cursor + 1
            }
            return
        }
        var peak = interpolatedPeak
        let delay = delay
        var cursor = cursor
        line.withUnsafeMutableBufferPointer { line in
            for sample in block {
                line[cursor] = sample
                for phase in phases {
                    // Summed in double in tap order, then rounded to float, as libebur128 does.
                    var sum = 0.0
                    phase.coefficients.withUnsafeBufferPointer { coefficients in
                        phase.lags.withUnsafeBufferPointer { lags in
                            for index in 0..<coefficients.count {
                                var at = cursor - lags[index]
                                if at < 0 { at += delay }
                                sum += Double(line[at]) * coefficients[index]
                            }
                        }
                    }
                    peak = max(peak, abs(Double(Float(sum))))
                }
                cursor = cursor + 1 == delay ? 0 : cursor + 1
            }
        }
        self.cursor = cursor
        interpolatedPeak = peak
    }
}

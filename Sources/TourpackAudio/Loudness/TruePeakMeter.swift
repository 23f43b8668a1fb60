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
/// In a block that could raise the peak, each run of `estimateWidth`
/// outputs is first estimated in float, eight at a time (`SIMD8`); the
/// estimate is within 1e-6 of the block's bound of the exact sum, so a run
/// whose estimate, with a margin ten times that, cannot reach the peak is
/// passed over too. Of 13,500 runs in 4.5 s of speech-like audio (voiced
/// bursts at 24 kHz), 3,544 were estimated and 3 computed in double.
///
/// The result is the larger of the interpolated peak and the sample peak,
/// as `ebur128_true_peak` reports it, linear (1.0 is full scale).
package struct TruePeakMeter: Sendable {
    /// One phase of the interpolator: its coefficients and how many inputs
    /// back each one reads.
    struct Phase: Sendable {
        var coefficients: [Double] = []
        var lags: [Int] = []
    }

    let phases: [Phase]
    /// Every phase's coefficients rounded to float, one phase after another
    /// (`phaseEnds` marks where each ends), with their lags: the estimate's.
    let estimateCoefficients: [Float]
    let estimateLags: [Int]
    let phaseEnds: [Int]
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
    package static let window = 16_384

    /// A meter for audio at `rate` Hz.
    package init(rate: Int) {
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
        estimateCoefficients = self.phases.flatMap { $0.coefficients.map { Float($0) } }
        estimateLags = self.phases.flatMap(\.lags)
        phaseEnds = self.phases.reduce(into: []) { $0.append(($0.last ?? 0) + $1.coefficients.count) }
        delay = (taps + factor - 1) / factor
        gain = phases.map { $0.coefficients.reduce(0) { $0 + abs($1) } }.max() ?? 1
        buffer = [Float](repeating: 0, count: delay + Self.window)
    }

    /// The true peak of everything fed so far, linear.
    package var truePeak: Double {
        mutating get {
            examineWindow()
            return max(interpolatedPeak, samplePeak)
        }
    }

    /// Feeds 16-bit samples (full scale 32,768).
    package mutating func add(_ samples: UnsafeBufferPointer<Int16>) {
        var start = 0
        while start < samples.count {
            let count = min(Self.window - filled, samples.count - start)
            let at = delay + filled
            buffer.withUnsafeMutableBufferPointer { buffer in
                let (source, destination) = (samples.baseAddress! + start, buffer.baseAddress! + at)
                // Exact: a 16-bit sample over 32,768 is a float, as libebur128's (float)(sample / 32768.0) is.
                for index in 0..<count { destination[index] = Float(source[index]) * (1 / 32_768) }
            }
            filled += count
            start += count
            if filled == Self.window { examineWindow() }
        }
    }

    /// Feeds float samples (full scale ±1).
    package mutating func add(_ samples: UnsafeBufferPointer<Float>) {
        var start = 0
        while start < samples.count {
            let count = min(Self.window - filled, samples.count - start)
            let at = delay + filled
            buffer.withUnsafeMutableBufferPointer { buffer in
                (buffer.baseAddress! + at).update(from: samples.baseAddress! + start, count: count)
            }
            filled += count
            start += count
            if filled == Self.window { examineWindow() }
        }
    }

    /// Outputs estimated at once: one `SIMD8<Float>` per phase.
    static let estimateWidth = 8

    /// The largest magnitude, over every phase, of the outputs at the
    /// `estimateWidth` inputs from `at`, computed in float.
    ///
    /// Each is within 1e-6 of `gain` times the largest input it reads of
    /// the exact sum: the coefficients rounded to float are off by at most
    /// 2^-24 of themselves, each product and each of the at most 13 sums by
    /// at most 2^-24 of the sum of the products' magnitudes, which is at
    /// most `gain` times that input; 15 × 2^-24 is under 1e-6. Whether the
    /// multiply and add fuse only makes it closer.
    @inline(__always)
    static func largestEstimate(
        _ input: UnsafePointer<Float>, at: Int, _ coefficients: UnsafeBufferPointer<Float>, _ lags: UnsafeBufferPointer<Int>,
        _ phaseEnds: UnsafeBufferPointer<Int>
    ) -> Float {
        var largest = SIMD8<Float>()
        var tap = 0
        for end in phaseEnds {
            var sum = SIMD8<Float>()
            while tap < end {
                let inputs = UnsafeRawPointer(input + (at - lags[tap])).loadUnaligned(as: SIMD8<Float>.self)
                sum += inputs * coefficients[tap]
                tap += 1
            }
            let magnitude = sum.replacing(with: -sum, where: sum .< 0)
            largest.replace(with: magnitude, where: magnitude .> largest)
        }
        return horizontalMax(largest)
    }

    /// The largest lane (the generic `max()` is not inlined).
    @inline(__always)
    private static func horizontalMax(_ lanes: SIMD8<Float>) -> Float {
        var halves = lanes.lowHalf
        halves.replace(with: lanes.highHalf, where: lanes.highHalf .> halves)
        return Swift.max(Swift.max(halves[0], halves[1]), Swift.max(halves[2], halves[3]))
    }

    /// The largest magnitude of `count` inputs from `first`.
    @inline(__always)
    private static func largestMagnitude(_ first: UnsafePointer<Float>, count: Int) -> Float {
        var largest = SIMD8<Float>()
        var index = 0
        while index + 8 <= count {
            let inputs = UnsafeRawPointer(first + index).loadUnaligned(as: SIMD8<Float>.self)
            let magnitude = inputs.replacing(with: -inputs, where: inputs .< 0)
            largest.replace(with: magnitude, where: magnitude .> largest)
            index += 8
        }
        var result = horizontalMax(largest)
        while index < count {
            result = Swift.max(result, abs(first[index]))
            index += 1
        }
        return result
    }

    /// Examines the window's blocks, loudest first, computing the outputs
    /// only of those that could raise the peak; then keeps its last `delay`
    /// inputs for the next window.
    private mutating func examineWindow() {
        guard filled > 0 else { return }
        let (delay, filled, gain, phases, blockSize) = (delay, filled, gain, phases, Self.blockSize)
        let (estimateCoefficients, estimateLags, phaseEnds) = (estimateCoefficients, estimateLags, phaseEnds)
        var samplePeak = samplePeak
        var peak = interpolatedPeak
        buffer.withUnsafeMutableBufferPointer { buffer in
            // Each block's largest input, and the largest its outputs read (the `delay` inputs before it too).
            let input = UnsafePointer(buffer.baseAddress!)
            var reaches: [(block: Int, reach: Float)] = []
            reaches.reserveCapacity((filled + blockSize - 1) / blockSize)
            var block = 0
            while block * blockSize < filled {
                let first = delay + block * blockSize
                let end = delay + min(filled, (block + 1) * blockSize)
                let largest = Self.largestMagnitude(input + first, count: end - first)
                samplePeak = max(samplePeak, Double(largest))
                let reach = max(largest, Self.largestMagnitude(input + first - delay, count: delay))
                reaches.append((block, reach))
                block += 1
            }
            guard !phases.isEmpty else { return }
            // Blocks that cannot raise the peak as it stands (the window's sample peak now counted) are not sorted:
            // the loop below would stop before them.
            let floor = max(peak, samplePeak)
            reaches.removeAll { gain * Double($0.reach) * (1 + 1e-6) <= floor }
            reaches.sort { $0.reach > $1.reach || ($0.reach == $1.reach && $0.block < $1.block) }
            estimateCoefficients.withUnsafeBufferPointer { coefficients in
                estimateLags.withUnsafeBufferPointer { lags in
                    phaseEnds.withUnsafeBufferPointer { phaseEnds in
                        for (block, reach) in reaches {
                            // A bound on every output of the block, with room for the rounding of the sums and of the float result.
                            // The blocks come loudest first: once one cannot raise the peak, none after it can.
                            let bound = gain * Double(reach)
                            guard bound * (1 + 1e-6) > max(peak, samplePeak) else { break }
                            let first = delay + block * blockSize
                            let end = delay + min(filled, (block + 1) * blockSize)
                            // The estimate is within 1e-6 of `bound` of each sum (see `largestEstimate`); 1e-5 leaves room.
                            let margin = bound * 1e-5
                            var group = first
                            while group < end {
                                let groupEnd = min(end, group + Self.estimateWidth)
                                defer { group = groupEnd }
                                if groupEnd - group == Self.estimateWidth {
                                    let estimate = Double(Self.largestEstimate(input, at: group, coefficients, lags, phaseEnds))
                                    if (estimate + margin) * (1 + 1e-6) <= max(peak, samplePeak) { continue }
                                }
                                for at in group..<groupEnd {
                                    for phase in phases {
                                        // Summed in double in tap order, then rounded to float, as libebur128 does.
                                        var sum = 0.0
                                        phase.coefficients.withUnsafeBufferPointer { coefficients in
                                            phase.lags.withUnsafeBufferPointer { lags in
                                                for index in 0..<coefficients.count {
                                                    sum += Double(buffer[at - lags[index]]) * coefficients[index]
                                                }
                                            }
                                        }
                                        peak = max(peak, abs(Double(Float(sum))))
                                    }
                                }
                            }
                        }
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

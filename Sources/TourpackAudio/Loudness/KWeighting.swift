import Foundation

/// BS.1770's K-weighting (a high shelf near 1.7 kHz, then a high pass near
/// 38 Hz) as one 4th-order filter in double, for any sample rate, computed
/// as libebur128 computes it: the same coefficients, each output the same
/// sums in the same order, so every filtered sample is libebur128's to the
/// bit.
///
/// libebur128 designs both biquads from their analogue prototypes by the
/// bilinear transform at the stream's rate, multiplies them out into one
/// filter, and runs it in direct form II with five doubles of state. It
/// flushes denormal results to zero while filtering; this filter flushes its
/// state between runs of `flushEvery` samples instead, which changes no
/// output that matters (a square under 1e-600 is zero either way) and keeps
/// a long digital silence from decaying through slow denormal arithmetic.
struct KWeighting: Sendable {
    /// Numerator b0...b4 and denominator a1...a4 (a0 is 1).
    let b0, b1, b2, b3, b4: Double
    let a1, a2, a3, a4: Double
    /// The last four intermediate values, newest first.
    private var v1 = 0.0, v2 = 0.0, v3 = 0.0, v4 = 0.0

    static let flushEvery = 256

    init(rate: Int) {
        let rate = Double(rate)
        // The high shelf: centre, gain (dB) and Q as BS.1770's 48 kHz coefficients imply.
        var f0 = 1_681.974450955533
        let gain = 3.999843853973347
        var q = 0.7071752369554196
        var k = tan(Double.pi * f0 / rate)
        let vh = pow(10.0, gain / 20.0)
        let vb = pow(vh, 0.4996667741545416)
        let a0 = 1.0 + k / q + k * k
        let pb = ((vh + vb * k / q + k * k) / a0, 2.0 * (k * k - vh) / a0, (vh - vb * k / q + k * k) / a0)
        let pa = (1.0, 2.0 * (k * k - 1.0) / a0, (1.0 - k / q + k * k) / a0)
        // The high pass (its numerator is 1, -2, 1).
        f0 = 38.13547087602444
        q = 0.5003270373238773
        k = tan(Double.pi * f0 / rate)
        let rb = (1.0, -2.0, 1.0)
        let ra = (1.0, 2.0 * (k * k - 1.0) / (1.0 + k / q + k * k), (1.0 - k / q + k * k) / (1.0 + k / q + k * k))
        // The product of the two, term by term in libebur128's order.
        b0 = pb.0 * rb.0
        b1 = pb.0 * rb.1 + pb.1 * rb.0
        b2 = pb.0 * rb.2 + pb.1 * rb.1 + pb.2 * rb.0
        b3 = pb.1 * rb.2 + pb.2 * rb.1
        b4 = pb.2 * rb.2
        a1 = pa.0 * ra.1 + pa.1 * ra.0
        a2 = pa.0 * ra.2 + pa.1 * ra.1 + pa.2 * ra.0
        a3 = pa.1 * ra.2 + pa.2 * ra.1
        a4 = pa.2 * ra.2
    }

    /// Filters `count` samples from `source`, each turned into a double by
    /// `value`, and adds the squares of the outputs to `sum` one by one, in
    /// order.
    @inline(__always)
    mutating func addSquares<Sample>(
        of source: UnsafePointer<Sample>, count: Int, to sum: inout Double, _ value: (Sample) -> Double
    ) {
        let (b0, b1, b2, b3, b4, a1, a2, a3, a4) = (b0, b1, b2, b3, b4, a1, a2, a3, a4)
        var (v1, v2, v3, v4) = (v1, v2, v3, v4)
        var total = sum
        var start = 0
        while start < count {
            let end = min(count, start + Self.flushEvery)
            for index in start..<end {
                // Left to right, as libebur128's C evaluates them: no fused multiply-add, no reassociation.
                let v0 = value(source[index]) - a1 * v1 - a2 * v2 - a3 * v3 - a4 * v4
                let output = b0 * v0 + b1 * v1 + b2 * v2 + b3 * v3 + b4 * v4
                (v4, v3, v2, v1) = (v3, v2, v1, v0)
                total += output * output
            }
            start = end
            // What libebur128 flushes as it goes, flushed here once per run.
            if abs(v1) < .leastNormalMagnitude { v1 = 0 }
            if abs(v2) < .leastNormalMagnitude { v2 = 0 }
            if abs(v3) < .leastNormalMagnitude { v3 = 0 }
            if abs(v4) < .leastNormalMagnitude { v4 = 0 }
        }
        (self.v1, self.v2, self.v3, self.v4) = (v1, v2, v3, v4)
        sum = total
    }
}

/// Gating blocks counted in libebur128's histogram: 1,000 bins of 0.1 LU
/// from -70 LUFS, each block placed by its mean square against the bins'
/// edges, and integrated loudness gated from the counts exactly as
/// libebur128's histogram mode does (each bin weighs as its centre).
struct GatingHistogram: Sendable {
    private(set) var counts = [Int](repeating: 0, count: LoudnessProfile.binCount)

    /// Each bin's mean square at its centre (-69.95 LUFS for bin 0).
    static let energies: [Double] = (0..<LoudnessProfile.binCount).map {
        pow(10.0, (Double($0) / 10.0 - 69.95 + 0.691) / 10.0)
    }
    /// The bins' edges: bin `i` holds mean squares from `edges[i]` up to `edges[i + 1]`.
    static let edges: [Double] = (0...LoudnessProfile.binCount).map { pow(10.0, (Double($0) / 10.0 - 70.0 + 0.691) / 10.0) }
    /// The relative gate, -10 LU, as a factor on mean square.
    static let relativeGate = pow(10.0, -10.0 / 10.0)
    private static let ln10 = log(10.0)

    /// BS.1770's loudness of a mean square, as libebur128 writes it.
    static func lufs(energy: Double) -> Double { 10 * (log(energy) / ln10) - 0.691 }

    /// The bin whose edges hold `energy` (at least `edges[0]`); the top bin for anything louder.
    static func bin(of energy: Double) -> Int {
        var low = 0
        var high = LoudnessProfile.binCount
        repeat {
            let middle = (low + high) / 2
            if energy >= edges[middle] { low = middle } else { high = middle }
        } while high - low != 1
        return low
    }

    /// Counts a block of mean square `energy`; under the absolute gate (-70 LUFS) it is not kept.
    mutating func add(energy: Double) {
        guard energy >= Self.edges[0] else { return }
        counts[Self.bin(of: energy)] += 1
    }

    /// Integrated loudness in LUFS; nil when no block passes the gates.
    var integratedLUFS: Double? {
        let energies = Self.energies
        var ungated = 0.0
        var blocks = 0
        for bin in 0..<counts.count {
            ungated += Double(counts[bin]) * energies[bin]
            blocks += counts[bin]
        }
        guard blocks > 0 else { return nil }
        let gate = ungated / Double(blocks) * Self.relativeGate
        var first = 0
        if gate >= Self.edges[0] {
            // The bin holding the gate counts when its centre clears the gate.
            first = Self.bin(of: gate)
            if gate > energies[first] { first += 1 }
        }
        var gated = 0.0
        var kept = 0
        for bin in first..<counts.count {
            gated += Double(counts[bin]) * energies[bin]
            kept += counts[bin]
        }
        guard kept > 0 else { return nil }
        return Self.lufs(energy: gated / Double(kept))
    }
}

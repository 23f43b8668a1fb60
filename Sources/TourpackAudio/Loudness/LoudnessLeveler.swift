import Foundation
package import TourpackCore

extension LoudnessTarget {
    /// The one gain, in dB, that brings a file made of `chunks` to the
    /// target after its limiter; 0 when it has no gated loudness (silence,
    /// or under 400 ms).
    ///
    /// The chunks' gating blocks merged say what the file measures at 0 dB.
    /// The gain that would reach the target alone pushes speech's peaks into
    /// the limiter, which takes some loudness back: each chunk's survey says
    /// how much at the threshold this gain implies, so the blocks are
    /// lowered by that, measured again, and the gain corrected; a few rounds
    /// settle it to a hundredth of a dB.
    package func gainDB(for chunks: [LoudnessProfile]) -> Double {
        let whole = chunks.reduce(LoudnessProfile()) { $0.merged(with: $1) }
        guard let measured = whole.integratedLUFS else { return 0 }
        func clamped(_ gain: Double) -> Double { min(Self.maximumGainDB, max(-Self.maximumGainDB, gain)) }
        var gain = clamped(integratedLUFS - measured)
        for _ in 0..<8 {
            let threshold = limiterCeilingDBTP - gain
            let limited = chunks.reduce(LoudnessProfile()) { sum, chunk in
                sum.merged(with: chunk.shifted(by: 10 * log10(max(chunk.energyLeft(atThreshold: threshold), 1e-9))))
            }
            guard let after = limited.integratedLUFS else { break }
            let error = integratedLUFS - (after + gain)
            gain = clamped(gain + error)
            if abs(error) < 0.01 { break }
        }
        return gain
    }

    /// What output keys hold of it: a changed target makes the files again.
    package var fingerprint: String {
        "loudness \(integratedLUFS.compactText) LUFS \(truePeakDBTP.compactText) dBTP margin \(encoderMarginDB.compactText) r\(LoudnessLeveler.revision)"
    }
}

/// How one file was levelled, for package.json.
package struct LevelingReport: Sendable, Hashable {
    /// The gain applied to the whole file.
    package var gainDB: Double
    /// The limiter's largest gain reduction (0 when it never acted).
    package var limiterReductionDB: Double

    package init(gainDB: Double, limiterReductionDB: Double) {
        self.gainDB = gainDB
        self.limiterReductionDB = limiterReductionDB
    }
}

/// Applies one gain to a stream of samples and holds its true peaks under
/// a ceiling with a look-ahead limiter, without changing its length.
///
/// The limiter looks `lookahead` samples ahead. For each sample it finds
/// the largest peak near it, including those between samples
/// (`TruePeakEnvelope`), and the gain that would bring that peak to the
/// ceiling (`LimiterGain`). The stream is delayed inside the limiter and
/// flushed at the end, so the output has exactly as many samples as the input.
///
/// Blocking arithmetic; one owner at a time. Holds a few milliseconds of samples.
package final class LoudnessLeveler {
    /// Part of output keys and of each chunk's limiter table: a change to
    /// the limiter makes the files, and the tables, again.
    static let revision = 4
    static let lookaheadMilliseconds = 4.0
    static let releaseMilliseconds = 80.0

    static func lookahead(rate: Int) -> Int { max(1, Int((lookaheadMilliseconds * Double(rate) / 1000).rounded())) }
    static func release(rate: Int) -> Float { Float(1 - exp(-1000 / (releaseMilliseconds * Double(rate)))) }

    package let gainDB: Double
    private let gain: Float
    private var envelope = TruePeakEnvelope()
    private var limiter: LimiterGain
    private var history = SampleHistory()
    private var realCount: Int?
    private var smallestGain: Float = 1
    private var gained: [Float] = []
    private var peaks: [Float] = []
    private var block: [Int16] = []
    private let skipsSettled: Bool

    /// - Parameters:
    ///   - gainDB: the file's gain.
    ///   - ceilingDBTP: the largest true peak let through.
    ///   - rate: the samples' rate.
    package convenience init(gainDB: Double, ceilingDBTP: Double, rate: Int) {
        self.init(gainDB: gainDB, ceilingDBTP: ceilingDBTP, rate: rate, skipsSettled: true)
    }

    /// - Parameter skipsSettled: whether blocks the limiter has nothing to
    ///   do in skip it (`LimiterGain.skip`); off only to test that this
    ///   changes no sample.
    init(gainDB: Double, ceilingDBTP: Double, rate: Int, skipsSettled: Bool) {
        self.skipsSettled = skipsSettled
        self.gainDB = gainDB
        gain = Float(pow(10, gainDB / 20) / 32768)
        limiter = LimiterGain(
            threshold: Float(pow(10, ceilingDBTP / 20)), lookahead: Self.lookahead(rate: rate), release: Self.release(rate: rate))
    }

    /// How the stream was levelled so far.
    package var report: LevelingReport {
        LevelingReport(gainDB: gainDB, limiterReductionDB: smallestGain < 1 ? -20 * log10(Double(smallestGain)) : 0)
    }

    /// Takes the next samples; `emit` gets levelled samples, delayed by the look-ahead.
    package func feed(_ input: UnsafeBufferPointer<Int16>, emit: (UnsafeBufferPointer<Int16>) throws -> Void) throws {
        gained.removeAll(keepingCapacity: true)
        for sample in input { gained.append(Float(sample) * gain) }
        try process(emit: emit)
    }

    /// After the last sample: pushes the delayed tail through.
    package func finish(emit: (UnsafeBufferPointer<Int16>) throws -> Void) throws {
        guard realCount == nil else { return }
        realCount = history.end
        gained = Array(repeating: 0, count: limiter.lookahead + TruePeakEnvelope.latency)
        try process(emit: emit)
    }

    private func process(emit: (UnsafeBufferPointer<Int16>) throws -> Void) throws {
        history.append(gained)
        peaks.removeAll(keepingCapacity: true)
        gained.withUnsafeBufferPointer { envelope.run($0, into: &peaks) }
        block.removeAll(keepingCapacity: true)
        let end = realCount ?? Int.max
        var smallest = smallestGain
        do {
            // A local view, released before `drop` so the drop never copies.
            let history = self.history
            func hand(_ out: Int, _ applied: Float) {
                guard out < end else { return }
                smallest = min(smallest, applied)
                let level = (history[out] * applied * 32768).rounded()
                block.append(Int16(max(-32768, min(32767, level))))
            }
            // A block under the ceiling, with nothing limited for a look-ahead, goes out at one gain.
            if skipsSettled, limiter.isSettled, peaks.max() ?? 0 <= limiter.threshold {
                limiter.skip(peaks.count) { outs, applied in
                    for out in outs { hand(out, applied) }
                }
            } else {
                peaks.withUnsafeBufferPointer { peaks in limiter.run(peaks, hand) }
            }
        }
        smallestGain = smallest
        self.history.drop(before: limiter.nextOut)
        if !block.isEmpty { try block.withUnsafeBufferPointer { try emit($0) } }
    }
}

/// Samples of a stream by their index in it, from the oldest still needed.
struct SampleHistory {
    private var samples: [Float] = []
    private var base = 0
    /// The index after the last sample appended.
    var end: Int { base + samples.count }

    mutating func append(_ more: [Float]) { samples.append(contentsOf: more) }

    subscript(index: Int) -> Float { samples[index - base] }

    /// Forgets samples before `index`, in large steps so the cost stays linear.
    mutating func drop(before index: Int) {
        let count = index - base
        guard count > 16_384 else { return }
        samples.removeFirst(count)
        base = index
    }
}

/// For each sample of a stream, the largest magnitude near it: the sample
/// itself and the points ¼, ½ and ¾ of the way to each neighbour, from a
/// 12-tap windowed-sinc interpolator (4× oversampling, as BS.1770's
/// true-peak meter does). Hands out sample n's peak when sample n+6 arrives.
struct TruePeakEnvelope {
    static let latency = halfTaps
    private static let halfTaps = 6
    private static let taps = 2 * halfTaps
    /// The coefficients for the point ¼, ½ and ¾ of the way from sample n
    /// to n+1, over samples n-5 … n+6; each phase sums to 1.
    static let phases: [Float] = (1...3).flatMap { phase -> [Float] in
        let fraction = Double(phase) / 4
        let raw = (-(halfTaps - 1)...halfTaps).map { m -> Double in
            let t = Double(m) - fraction
            let sinc = t == 0 ? 1 : sin(Double.pi * t) / (Double.pi * t)
            let window = 0.5 + 0.5 * cos(Double.pi * t / (Double(halfTaps) + 0.5))
            return sinc * window
        }
        let sum = raw.reduce(0, +)
        return raw.map { Float($0 / sum) }
    }

    /// The last `taps - 1` samples before the next block (zeros at the start).
    private var tail = [Float](repeating: 0, count: taps - 1)
    private var count = 0
    private var previousBetween: Float = 0
    /// Scratch, kept between blocks: `tail`, the block and three zeros; each sample's `between`.
    private var buffer: [Float] = []
    private var betweens: [Float] = []

    /// Takes the next samples; appends to `peaks` the peak of every sample
    /// that becomes known (each `latency` samples behind the input).
    ///
    /// Sample n's window is samples n-5 … n+6; its peak is the largest of
    /// its own magnitude and the interpolated points on either side of it.
    /// Four windows are summed at once, one per SIMD lane, each tap in the
    /// same order as a sum of one window would take it: the same figures
    /// to the bit as a sample at a time.
    mutating func run(_ input: UnsafeBufferPointer<Float>, into peaks: inout [Float]) {
        let (taps, halfTaps, blockCount) = (Self.taps, Self.halfTaps, input.count)
        guard blockCount > 0 else { return }
        buffer.removeAll(keepingCapacity: true)
        buffer.append(contentsOf: tail)
        buffer.append(contentsOf: input)
        buffer.append(contentsOf: repeatElement(0, count: 3))
        betweens.removeAll(keepingCapacity: true)
        betweens.append(contentsOf: repeatElement(0, count: blockCount + 3))
        Self.phases.withUnsafeBufferPointer { coefficients in
            buffer.withUnsafeBufferPointer { buffer in
                betweens.withUnsafeMutableBufferPointer { betweens in
                    let base = UnsafeRawPointer(buffer.baseAddress!)
                    var index = 0
                    while index < blockCount {
                        var first = SIMD4<Float>(repeating: 0), second = first, third = first
                        for tap in 0..<taps {
                            let window = base.loadUnaligned(
                                fromByteOffset: (index + tap) * MemoryLayout<Float>.stride, as: SIMD4<Float>.self)
                            first += window * coefficients[tap]
                            second += window * coefficients[taps + tap]
                            third += window * coefficients[2 * taps + tap]
                        }
                        let largest = Self.larger(Self.larger(Self.magnitude(first), Self.magnitude(second)), Self.magnitude(third))
                        for lane in 0..<4 { betweens[index + lane] = largest[lane] }
                        index += 4
                    }
                }
            }
        }
        peaks.reserveCapacity(peaks.count + blockCount)
        for index in 0..<blockCount where count + index >= halfTaps {
            // Window `index` is samples n-5 … n+6 of sample n, which sits at `index + halfTaps - 1`.
            let between = betweens[index]
            peaks.append(max(abs(buffer[index + halfTaps - 1]), between, previousBetween))
            previousBetween = between
        }
        count += blockCount
        tail.withUnsafeMutableBufferPointer { tail in
            for index in 0..<(taps - 1) { tail[index] = buffer[blockCount + index] }
        }
    }

    @inline(__always)
    private static func magnitude(_ value: SIMD4<Float>) -> SIMD4<Float> {
        value.replacing(with: -value, where: value .< 0)
    }

    /// Lane by lane, the larger (the generic `pointwiseMax` was not inlined here).
    @inline(__always)
    private static func larger(_ a: SIMD4<Float>, _ b: SIMD4<Float>) -> SIMD4<Float> {
        a.replacing(with: b, where: b .> a)
    }
}

/// The gain a look-ahead limiter applies for one threshold, from the
/// stream's true-peak envelope: for each sample, the gain that brings its
/// peak to the threshold; the minimum of those over the last `lookahead`
/// samples, recovering no faster than `release` per sample; averaged over
/// `lookahead` samples. Each of the minimums averaged for sample `out`
/// covers `out`, so the average never exceeds the gain `out` needs, and it
/// moves in small steps: no click. Hands out sample n's gain when the peak
/// of sample n + lookahead - 1 arrives.
struct LimiterGain {
    let threshold: Float
    let lookahead: Int
    let release: Float
    /// Monotonic queue of (index, wanted gain), a ring of `lookahead + 1`.
    private var queueIndex: [Int]
    private var queueGain: [Float]
    private var head = 0
    private var tail = 0
    private var held: Float = 1
    private var ring: [Float]
    private var ringSum: Double
    private var ringSlot = 0
    private var count = 0
    /// Samples since `held` was last below 1. From `lookahead` on, every
    /// gain in the ring is 1 and the queue holds only gains of 1.
    private var settled = 0

    init(threshold: Float, lookahead: Int, release: Float) {
        self.threshold = threshold
        self.lookahead = lookahead
        self.release = release
        queueIndex = Array(repeating: 0, count: lookahead + 1)
        queueGain = Array(repeating: 1, count: lookahead + 1)
        ring = Array(repeating: 1, count: lookahead)
        ringSum = Double(lookahead)
        // Nothing limited yet: a ring of ones and an empty queue.
        settled = lookahead
    }

    /// The next sample `run` hands out.
    var nextOut: Int { max(0, count - lookahead + 1) }

    /// Whether `skip` may stand for `run` over peaks none of which passes
    /// the threshold: nothing has been limited for a whole look-ahead.
    var isSettled: Bool { settled >= lookahead }

    /// What `run` does over `count` peaks none of which passes the
    /// threshold, once settled, without the work per sample: each sample is
    /// handed out at the one gain `run` would give it (the ring's average,
    /// unchanged, since every step adds 1 and removes 1), and the state ends
    /// as `run` leaves it. `body` gets the samples handed out and that gain.
    mutating func skip(_ steps: Int, _ body: (Range<Int>, Float) -> Void) {
        guard steps > 0 else { return }
        let first = nextOut
        count += steps
        settled += steps
        ringSlot = (ringSlot + steps) % lookahead
        // The queue keeps the newest peak, as `run` would after popping the equal gains before it.
        queueIndex[head] = count - 1
        queueGain[head] = 1
        tail = head + 1 == lookahead + 1 ? 0 : head + 1
        body(first..<nextOut, Float(ringSum / Double(lookahead)))
    }

    /// Takes the next samples' peaks; calls `body` with the index and gain
    /// of each sample that becomes known, in order.
    mutating func run(_ peaks: UnsafeBufferPointer<Float>, _ body: (Int, Float) -> Void) {
        let (threshold, lookahead, release, capacity) = (threshold, lookahead, release, lookahead + 1)
        var (head, tail, held, ringSum, ringSlot, count, settled) = (head, tail, held, ringSum, ringSlot, count, settled)
        queueIndex.withUnsafeMutableBufferPointer { queueIndex in
            queueGain.withUnsafeMutableBufferPointer { queueGain in
                ring.withUnsafeMutableBufferPointer { ring in
                    for peak in peaks {
                        let n = count
                        count += 1
                        let wanted = peak > threshold ? threshold / peak : 1
                        while tail != head {
                            let last = tail == 0 ? capacity - 1 : tail - 1
                            guard queueGain[last] >= wanted else { break }
                            tail = last
                        }
                        queueIndex[tail] = n
                        queueGain[tail] = wanted
                        tail = tail + 1 == capacity ? 0 : tail + 1
                        while queueIndex[head] <= n - lookahead { head = head + 1 == capacity ? 0 : head + 1 }
                        held = min(queueGain[head], held + (1 - held) * release)
                        settled = held == 1 ? settled + 1 : 0
                        ringSum += Double(held - ring[ringSlot])
                        ring[ringSlot] = held
                        ringSlot = ringSlot + 1 == lookahead ? 0 : ringSlot + 1
                        let out = n - lookahead + 1
                        if out >= 0 { body(out, Float(ringSum / Double(lookahead))) }
                    }
                }
            }
        }
        (self.head, self.tail, self.held, self.ringSum, self.ringSlot, self.count, self.settled) =
            (head, tail, held, ringSum, ringSlot, count, settled)
    }
}

/// An encode session whose samples are levelled on their way in.
package final class LevelingSession: AudioEncodeSession {
    let inner: any AudioEncodeSession
    package let leveler: LoudnessLeveler

    package init(_ inner: any AudioEncodeSession, leveler: LoudnessLeveler) {
        self.inner = inner
        self.leveler = leveler
    }

    package func write(_ samples: UnsafeBufferPointer<Int16>) throws {
        try leveler.feed(samples) { try inner.write($0) }
    }

    package func finish() throws -> [AudioFormat: EncodedAudio] {
        try leveler.finish { try inner.write($0) }
        return try inner.finish()
    }

    package func discard() { inner.discard() }

    package var samplesWritten: Int { inner.samplesWritten }
}

/// How much loudness the limiter would take from one chunk, at each of a
/// range of thresholds: measured once, when the chunk is recorded, so a
/// file's gain can allow for its limiter before the file is encoded.
///
/// A gain moves every sample and the ceiling does not, so limiting `x`
/// gained by G under ceiling C takes exactly what limiting `x` under
/// C - G takes: the limiter only sees peaks against its threshold. The
/// survey runs one limiter per threshold of `thresholdsDBFS` (sharing one
/// true-peak envelope) over the chunk as it is, and keeps, for each, the
/// energy left after limiting as a fraction of the energy before. A file's
/// gain then solves for the target with each chunk's loss at the threshold
/// that gain implies (`LoudnessTarget.gainDB(for:)`).
///
/// The limiters are `LimiterGain`'s, all thirteen at once, one per SIMD
/// lane: each step is the same arithmetic in the same order as one
/// `LimiterGain` takes it, so the figures are the same to the bit. The
/// smallest wanted gain over the look-ahead comes from running minimums
/// over stretches of `lookahead` (van Herk and Gil-Werman), which no
/// branch per sample decides.
package struct LimiterSurvey {
    /// +1 dBFS (nothing to limit) down to -35 dBFS, 3 dB apart: a ceiling
    /// of -1 dBTP less the margin, with every gain up to the largest
    /// (`LoudnessTarget.maximumGainDB`). The loss between two thresholds is
    /// interpolated in dB: it changes smoothly with the threshold.
    package static let thresholdsDBFS: [Double] = (0..<13).map { 1 - 3 * Double($0) }

    typealias Lanes = SIMD16<Float>
    typealias WideLanes = SIMD16<Double>

    /// One lane per threshold; the three lanes past them never limit.
    private let thresholds: Lanes
    private let lookahead: Int
    private let release: Float
    private var envelope = TruePeakEnvelope()
    private var history = SampleHistory()
    /// The wanted gains of the last `lookahead - 1` samples (1 before the start).
    private var carried: [Lanes]
    private var held = Lanes(repeating: 1)
    /// The last `lookahead` held gains, and their sum.
    private var ring: [Lanes]
    private var ringSum: WideLanes
    private var ringSlot = 0
    private var count = 0
    private var before = 0.0
    private var after = WideLanes(repeating: 0)
    private var finished = false
    private var values: [Float] = []
    private var peaks: [Float] = []
    private var wanted: [Lanes] = []
    private var prefix: [Lanes] = []
    private var suffix: [Lanes] = []

    package init(rate: Int) {
        lookahead = LoudnessLeveler.lookahead(rate: rate)
        release = LoudnessLeveler.release(rate: rate)
        var thresholds = Lanes(repeating: .infinity)
        for (lane, dBFS) in Self.thresholdsDBFS.enumerated() { thresholds[lane] = Float(pow(10, dBFS / 20)) }
        self.thresholds = thresholds
        carried = Array(repeating: Lanes(repeating: 1), count: lookahead - 1)
        ring = Array(repeating: Lanes(repeating: 1), count: lookahead)
        ringSum = WideLanes(repeating: Double(lookahead))
    }

    package mutating func add(_ samples: UnsafeBufferPointer<Int16>) {
        values.removeAll(keepingCapacity: true)
        for sample in samples { values.append(Float(sample) / 32768) }
        process()
    }

    private mutating func process() {
        history.append(values)
        peaks.removeAll(keepingCapacity: true)
        values.withUnsafeBufferPointer { envelope.run($0, into: &peaks) }
        let (blockCount, lookahead, release, thresholds) = (peaks.count, lookahead, release, thresholds)
        guard blockCount > 0 else { return }
        // Each step's wanted gains, after the carried ones: step j's
        // look-ahead is wanted[j ..< j + lookahead].
        wanted.removeAll(keepingCapacity: true)
        wanted.append(contentsOf: carried)
        for peak in peaks {
            let spread = Lanes(repeating: peak)
            wanted.append(Lanes(repeating: 1).replacing(with: thresholds / spread, where: spread .> thresholds))
        }
        Self.runningMinimums(wanted, stretch: lookahead, prefix: &prefix, suffix: &suffix)
        var (held, ringSum, ringSlot, count) = (held, ringSum, ringSlot, count)
        var energy = WideLanes(repeating: 0)
        let one = Lanes(repeating: 1)
        let handedOut: Int
        do {
            // A local view, released before `drop` so the drop never copies.
            let history = self.history
            ring.withUnsafeMutableBufferPointer { ring in
                prefix.withUnsafeBufferPointer { prefix in
                    suffix.withUnsafeBufferPointer { suffix in
                        for step in 0..<blockCount {
                            let smallest = Self.smaller(suffix[step], prefix[step + lookahead - 1])
                            held = Self.smaller(smallest, held + (one - held) * release)
                            ringSum += WideLanes(held - ring[ringSlot])
                            ring[ringSlot] = held
                            ringSlot = ringSlot + 1 == lookahead ? 0 : ringSlot + 1
                            let out = count - lookahead + 1
                            count += 1
                            guard out >= 0 else { continue }
                            let gain = Lanes(ringSum / Double(lookahead))
                            let limited = WideLanes(Lanes(repeating: history[out]) * gain)
                            energy += limited * limited
                        }
                    }
                }
            }
            // The samples handed out in this block.
            handedOut = max(0, count - lookahead + 1)
            for out in max(0, handedOut - blockCount)..<handedOut {
                before += Double(history[out]) * Double(history[out])
            }
        }
        (self.held, self.ringSum, self.ringSlot, self.count) = (held, ringSum, ringSlot, count)
        after += energy
        carried.removeAll(keepingCapacity: true)
        carried.append(contentsOf: wanted.suffix(lookahead - 1))
        history.drop(before: handedOut)
    }

    /// For every stretch of `stretch` values, its minimum is
    /// `min(suffix[i], prefix[i + stretch - 1])`: the running minimum of
    /// each aligned block from its start (`prefix`) and to its end (`suffix`).
    private static func runningMinimums(_ values: [Lanes], stretch: Int, prefix: inout [Lanes], suffix: inout [Lanes]) {
        prefix.removeAll(keepingCapacity: true)
        suffix.removeAll(keepingCapacity: true)
        prefix.append(contentsOf: values)
        suffix.append(contentsOf: values)
        let total = values.count
        prefix.withUnsafeMutableBufferPointer { prefix in
            suffix.withUnsafeMutableBufferPointer { suffix in
                var start = 0
                while start < total {
                    let end = min(total, start + stretch)
                    for index in (start + 1)..<max(start + 1, end) { prefix[index] = smaller(prefix[index - 1], prefix[index]) }
                    var index = end - 2
                    while index >= start {
                        suffix[index] = smaller(suffix[index + 1], suffix[index])
                        index -= 1
                    }
                    start = end
                }
            }
        }
    }

    /// Lane by lane, `Swift.min(a, b)`: `b` where it is smaller, else `a`.
    @inline(__always)
    private static func smaller(_ a: Lanes, _ b: Lanes) -> Lanes {
        a.replacing(with: b, where: b .< a)
    }

    /// The energy left at each threshold, as a fraction; empty for silence.
    package mutating func finish() -> [Double] {
        if !finished {
            finished = true
            // Push the tail through; what the padding adds is silence.
            values = Array(repeating: 0, count: lookahead + TruePeakEnvelope.latency)
            process()
        }
        guard before > 0 else { return [] }
        return Self.thresholdsDBFS.indices.map { min(1, after[$0] / before) }
    }
}

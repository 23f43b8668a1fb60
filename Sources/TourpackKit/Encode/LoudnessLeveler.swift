public import Foundation

/// The loudness every file is brought to (SPEC "Audio rules"): integrated
/// loudness in LUFS and the ceiling for true peaks in dBTP.
public struct LoudnessTarget: Sendable, Hashable {
    public var integratedLUFS: Double
    public var truePeakDBTP: Double

    /// -16 LUFS, -1 dBTP: the level of spoken-word streaming, with headroom
    /// for the lossy encoders' overshoot.
    public static let standard = LoudnessTarget(integratedLUFS: -16, truePeakDBTP: -1)

    /// The largest gain a file gets, either way. A file far below the target
    /// (a near-silent answer) would otherwise have its noise floor raised to
    /// speech level.
    public static let maximumGainDB = 30.0

    /// How far below the ceiling the limiter holds the peaks: the largest
    /// `AudioFormat.truePeakOvershootDB` of the formats made from the stream.
    public var encoderMarginDB: Double

    public init(integratedLUFS: Double, truePeakDBTP: Double, encoderMarginDB: Double = 0.5) {
        self.integratedLUFS = integratedLUFS
        self.truePeakDBTP = truePeakDBTP
        self.encoderMarginDB = encoderMarginDB
    }

    /// This target with the margin that `formats` need.
    public func making(_ formats: some Sequence<AudioFormat>) -> LoudnessTarget {
        var target = self
        target.encoderMarginDB = formats.map(\.truePeakOvershootDB).max() ?? encoderMarginDB
        return target
    }

    /// The limiter's threshold: the ceiling less the encoders' margin.
    public var limiterCeilingDBTP: Double { truePeakDBTP - encoderMarginDB }

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
    public func gainDB(for chunks: [LoudnessProfile]) -> Double {
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
    var fingerprint: String {
        "loudness \(integratedLUFS.compactText) LUFS \(truePeakDBTP.compactText) dBTP margin \(encoderMarginDB.compactText) r\(LoudnessLeveler.revision)"
    }
}

/// How one file was levelled, for package.json.
public struct LevelingReport: Sendable, Hashable {
    /// The gain applied to the whole file.
    public var gainDB: Double
    /// The limiter's largest gain reduction (0 when it never acted).
    public var limiterReductionDB: Double
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
public final class LoudnessLeveler {
    /// Part of output keys and of each chunk's limiter table: a change to
    /// the limiter makes the files, and the tables, again.
    static let revision = 3
    static let lookaheadMilliseconds = 4.0
    static let releaseMilliseconds = 80.0

    static func lookahead(rate: Int) -> Int { max(1, Int((lookaheadMilliseconds * Double(rate) / 1000).rounded())) }
    static func release(rate: Int) -> Float { Float(1 - exp(-1000 / (releaseMilliseconds * Double(rate)))) }

    public let gainDB: Double
    private let gain: Float
    private var envelope = TruePeakEnvelope()
    private var limiter: LimiterGain
    private var delay: SampleDelay
    private var received = 0
    private var realCount: Int?
    private var smallestGain: Float = 1
    private var block: [Int16] = []

    /// - Parameters:
    ///   - gainDB: the file's gain.
    ///   - ceilingDBTP: the largest true peak let through.
    ///   - rate: the samples' rate.
    public init(gainDB: Double, ceilingDBTP: Double, rate: Int) {
        self.gainDB = gainDB
        gain = Float(pow(10, gainDB / 20) / 32768)
        let lookahead = Self.lookahead(rate: rate)
        limiter = LimiterGain(threshold: Float(pow(10, ceilingDBTP / 20)), lookahead: lookahead, release: Self.release(rate: rate))
        delay = SampleDelay(length: lookahead + TruePeakEnvelope.latency)
        block.reserveCapacity(4096)
    }

    /// How the stream was levelled so far.
    public var report: LevelingReport {
        LevelingReport(gainDB: gainDB, limiterReductionDB: smallestGain < 1 ? -20 * log10(Double(smallestGain)) : 0)
    }

    /// Takes the next samples; `emit` gets levelled samples, delayed by the look-ahead.
    public func feed(_ input: UnsafeBufferPointer<Int16>, emit: (UnsafeBufferPointer<Int16>) throws -> Void) throws {
        for sample in input { try push(Float(sample) * gain, emit: emit) }
    }

    /// After the last sample: pushes the delayed tail through.
    public func finish(emit: (UnsafeBufferPointer<Int16>) throws -> Void) throws {
        guard realCount == nil else { return }
        realCount = received
        for _ in 0..<(delay.length) { try push(0, emit: emit) }
        try flush(emit: emit)
    }

    private func push(_ value: Float, emit: (UnsafeBufferPointer<Int16>) throws -> Void) throws {
        delay.push(value, at: received)
        received += 1
        guard let peak = envelope.push(value), let (index, applied) = limiter.push(peak) else { return }
        guard realCount.map({ index < $0 }) ?? true else { return }
        smallestGain = min(smallestGain, applied)
        let level = (delay.sample(at: index) * applied * 32768).rounded()
        block.append(Int16(max(-32768, min(32767, level))))
        if block.count == 4096 { try flush(emit: emit) }
    }

    private func flush(emit: (UnsafeBufferPointer<Int16>) throws -> Void) throws {
        guard !block.isEmpty else { return }
        try block.withUnsafeBufferPointer { try emit($0) }
        block.removeAll(keepingCapacity: true)
    }
}

/// The last `length` samples of a stream, by their index in it.
struct SampleDelay {
    let length: Int
    private var ring: [Float]

    init(length: Int) {
        self.length = length
        ring = Array(repeating: 0, count: length)
    }

    mutating func push(_ value: Float, at index: Int) { ring[index % length] = value }

    /// Sample `index`, which must be among the last `length` pushed.
    func sample(at index: Int) -> Float { ring[index % length] }
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
    private static let phases: [Float] = (1...3).flatMap { phase -> [Float] in
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

    /// The last `taps` samples, oldest first once full (a ring).
    private var history = [Float](repeating: 0, count: taps)
    private var count = 0
    private var previousBetween: Float = 0

    /// Takes the next sample; the peak of the sample `latency` before it
    /// (nil for the first `latency` samples).
    mutating func push(_ value: Float) -> Float? {
        history[count % Self.taps] = value
        count += 1
        // Sample n is at `count - 1 - halfTaps`; the window is n-5 … n+6.
        let n = count - 1 - Self.halfTaps
        guard n >= 0 else { return nil }
        let start = count - Self.taps
        var between: Float = 0
        Self.phases.withUnsafeBufferPointer { coefficients in
            history.withUnsafeBufferPointer { ring in
                for phase in 0..<3 {
                    var sum: Float = 0
                    for tap in 0..<Self.taps {
                        let index = start + tap
                        if index >= 0 { sum += ring[index % Self.taps] * coefficients[phase * Self.taps + tap] }
                    }
                    between = max(between, abs(sum))
                }
            }
        }
        let own = abs(history[n % Self.taps])
        defer { previousBetween = between }
        return max(own, between, previousBetween)
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
    private var count = 0

    init(threshold: Float, lookahead: Int, release: Float) {
        self.threshold = threshold
        self.lookahead = lookahead
        self.release = release
        queueIndex = Array(repeating: 0, count: lookahead + 1)
        queueGain = Array(repeating: 1, count: lookahead + 1)
        ring = Array(repeating: 1, count: lookahead)
        ringSum = Double(lookahead)
    }

    /// Takes the next sample's peak; the index and gain of the sample
    /// `lookahead - 1` before it, once there is one.
    mutating func push(_ peak: Float) -> (index: Int, gain: Float)? {
        let n = count
        count += 1
        let wanted = peak > threshold ? threshold / peak : 1
        let capacity = lookahead + 1
        while tail != head, queueGain[(tail + capacity - 1) % capacity] >= wanted { tail = (tail + capacity - 1) % capacity }
        queueIndex[tail] = n
        queueGain[tail] = wanted
        tail = (tail + 1) % capacity
        while queueIndex[head] <= n - lookahead { head = (head + 1) % capacity }
        held = min(queueGain[head], held + (1 - held) * release)
        let slot = n % lookahead
        ringSum += Double(held - ring[slot])
        ring[slot] = held
        let out = n - lookahead + 1
        guard out >= 0 else { return nil }
        return (out, Float(ringSum / Double(lookahead)))
    }
}

/// An encode session whose samples are levelled on their way in.
final class LevelingSession: AudioEncodeSession {
    let inner: any AudioEncodeSession
    let leveler: LoudnessLeveler

    init(_ inner: any AudioEncodeSession, leveler: LoudnessLeveler) {
        self.inner = inner
        self.leveler = leveler
    }

    func write(_ samples: UnsafeBufferPointer<Int16>) throws {
        try leveler.feed(samples) { try inner.write($0) }
    }

    func finish() throws -> [AudioFormat: EncodedAudio] {
        try leveler.finish { try inner.write($0) }
        return try inner.finish()
    }

    func discard() { inner.discard() }

    var samplesWritten: Int { inner.samplesWritten }
}

/// How much loudness the limiter would take from one chunk, at each of a
/// range of thresholds: measured once, when the chunk is recorded, so a
/// file's gain can allow for its limiter before the file is encoded.
///
/// A gain moves every sample and the ceiling does not, so limiting `x`
/// gained by G under ceiling C takes exactly what limiting `x` under
/// C - G takes: the limiter only sees peaks against its threshold. The
/// survey runs one `LimiterGain` per threshold of `thresholdsDBFS` (sharing
/// one true-peak envelope) over the chunk as it is, and keeps, for each,
/// the energy left after limiting as a fraction of the energy before. A
/// file's gain then solves for the target with each chunk's loss at the
/// threshold that gain implies (`LoudnessTarget.gainDB(for:)`).
struct LimiterSurvey {
    /// +1 dBFS (nothing to limit) down to -35 dBFS, 3 dB apart: a ceiling
    /// of -1 dBTP less the margin, with every gain up to the largest
    /// (`LoudnessTarget.maximumGainDB`). The loss between two thresholds is
    /// interpolated in dB: it changes smoothly with the threshold.
    static let thresholdsDBFS: [Double] = (0..<13).map { 1 - 3 * Double($0) }

    private var envelope = TruePeakEnvelope()
    private var limiters: [LimiterGain]
    private var delay: SampleDelay
    private var before = 0.0
    private var after: [Double]
    private var received = 0
    private var finished = false

    init(rate: Int) {
        let lookahead = LoudnessLeveler.lookahead(rate: rate)
        let release = LoudnessLeveler.release(rate: rate)
        limiters = Self.thresholdsDBFS.map { LimiterGain(threshold: Float(pow(10, $0 / 20)), lookahead: lookahead, release: release) }
        delay = SampleDelay(length: lookahead + TruePeakEnvelope.latency)
        after = Array(repeating: 0, count: Self.thresholdsDBFS.count)
    }

    mutating func add(_ samples: UnsafeBufferPointer<Int16>) {
        for sample in samples { push(Float(sample) / 32768) }
    }

    private mutating func push(_ value: Float) {
        delay.push(value, at: received)
        received += 1
        guard let peak = envelope.push(value) else { return }
        for index in limiters.indices {
            guard let (out, gain) = limiters[index].push(peak) else { continue }
            let limited = Double(delay.sample(at: out) * gain)
            after[index] += limited * limited
            if index == 0 {
                let original = Double(delay.sample(at: out))
                before += original * original
            }
        }
    }

    /// The energy left at each threshold, as a fraction; empty for silence.
    mutating func finish() -> [Double] {
        if !finished {
            finished = true
            // Push the tail through; what the padding adds is silence.
            for _ in 0..<delay.length { push(0) }
        }
        guard before > 0 else { return [] }
        return after.map { min(1, $0 / before) }
    }
}

extension AudioFormat {
    /// How far the decoded file's true peak may rise above its input's:
    /// the codec's quantization noise rides on the peaks. Measured with
    /// ffmpeg's ebur128 meter on heavily limited speech (`LoudnessTests`):
    /// AAC at 128k and MP3 at 192k stay within 0.5 dB, Opus at 96k
    /// reaches about 1.1 dB.
    public var truePeakOvershootDB: Double {
        switch self {
        case .aac, .mp3: return 0.5
        case .opus: return 1.5
        }
    }
}

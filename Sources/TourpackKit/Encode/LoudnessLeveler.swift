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

    /// How far below the ceiling the limiter holds the peaks. AAC, MP3 and
    /// Opus reconstruct peaks a little above those of their input (the
    /// quantization noise rides on them); the margin absorbs that, so the
    /// file as shipped stays under the ceiling.
    public static let encoderMarginDB = 0.5

    public init(integratedLUFS: Double, truePeakDBTP: Double) {
        self.integratedLUFS = integratedLUFS
        self.truePeakDBTP = truePeakDBTP
    }

    /// The one gain, in dB, that brings audio measured as `profile` to the
    /// target; 0 when it has no gated loudness (silence, or under 400 ms).
    public func gainDB(for profile: LoudnessProfile) -> Double {
        guard let measured = profile.integratedLUFS else { return 0 }
        return min(Self.maximumGainDB, max(-Self.maximumGainDB, integratedLUFS - measured))
    }

    /// What output keys hold of it: a changed target makes the files again.
    var fingerprint: String {
        "loudness \(integratedLUFS.compactText) LUFS \(truePeakDBTP.compactText) dBTP r\(LoudnessLeveler.revision)"
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
/// the largest peak near it, including those between samples (4×
/// oversampled with a windowed-sinc interpolator, as BS.1770's true-peak
/// meter does), and the gain that would bring that peak to the ceiling.
/// The gain applied is the minimum of those gains over the look-ahead
/// window, smoothed by a moving average of the same length, so it has
/// reached its value by the time the peak arrives and never changes
/// abruptly. It then recovers with a release of `releaseMilliseconds`. The
/// stream is delayed by the look-ahead inside the limiter and flushed at
/// the end, so the output has exactly as many samples as the input.
///
/// Blocking arithmetic; one owner at a time. Holds a few milliseconds of samples.
public final class LoudnessLeveler {
    /// Part of output keys: a change to the limiter makes the files again.
    static let revision = 1
    static let lookaheadMilliseconds = 4.0
    static let releaseMilliseconds = 80.0

    /// Taps either side of the interpolated point.
    private static let halfTaps = 6
    /// The interpolator's coefficients for the points ¼, ½ and ¾ of the way
    /// from sample n to n+1, over samples n-5 … n+6.
    private static let phases: [[Float]] = (1...3).map { phase in
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

    public let gainDB: Double
    private let gain: Float
    /// The limiter's threshold, linear.
    private let threshold: Float
    private let lookahead: Int
    private let release: Float

    /// Gained samples from `base` on; enough history for the interpolator.
    private var samples: [Float] = []
    private var base = 0
    private var received = 0
    /// The real input's length, once `finish` has padded it.
    private var realCount: Int?
    /// The next sample whose peak gain is computed, and the next put out.
    private var nextPeak = 0
    private var nextOut = 0
    private var previousInterpolatedPeak: Float = 0
    /// Monotonic queue of (index, gain) for the look-ahead minimum.
    private var minimum: [(index: Int, gain: Float)] = []
    private var minimumHead = 0
    private var held: Float = 1
    private var ring: [Float]
    private var ringSum: Double
    private var smallestGain: Float = 1
    private var block: [Int16] = []

    /// - Parameters:
    ///   - gainDB: the file's gain.
    ///   - ceilingDBTP: the largest true peak let through.
    ///   - rate: the samples' rate.
    public init(gainDB: Double, ceilingDBTP: Double, rate: Int) {
        self.gainDB = gainDB
        gain = Float(pow(10, gainDB / 20) / 32768)
        threshold = Float(pow(10, ceilingDBTP / 20))
        lookahead = max(1, Int((Self.lookaheadMilliseconds * Double(rate) / 1000).rounded()))
        release = Float(1 - exp(-1000 / (Self.releaseMilliseconds * Double(rate))))
        ring = Array(repeating: 1, count: lookahead)
        ringSum = Double(lookahead)
        block.reserveCapacity(4096)
    }

    /// How the stream was levelled so far.
    public var report: LevelingReport {
        LevelingReport(gainDB: gainDB, limiterReductionDB: smallestGain < 1 ? -20 * log10(Double(smallestGain)) : 0)
    }

    /// Takes the next samples; `emit` gets levelled samples, delayed by the look-ahead.
    public func feed(_ input: UnsafeBufferPointer<Int16>, emit: (UnsafeBufferPointer<Int16>) throws -> Void) throws {
        var offset = 0
        while offset < input.count {
            let piece = min(input.count - offset, 4096)
            samples.reserveCapacity(samples.count + piece)
            for sample in input[offset..<(offset + piece)] { samples.append(Float(sample) * gain) }
            received += piece
            offset += piece
            try pump(emit: emit)
        }
    }

    /// After the last sample: pushes the delayed tail through.
    public func finish(emit: (UnsafeBufferPointer<Int16>) throws -> Void) throws {
        guard realCount == nil else { return }
        realCount = received
        let padding = lookahead + Self.halfTaps
        samples.append(contentsOf: repeatElement(0, count: padding))
        received += padding
        try pump(emit: emit)
        try flush(emit: emit)
    }

    private func sample(_ index: Int) -> Float {
        index < base ? 0 : samples[index - base]
    }

    private func pump(emit: (UnsafeBufferPointer<Int16>) throws -> Void) throws {
        let phases = Self.phases
        let halfTaps = Self.halfTaps
        while nextPeak + halfTaps < received {
            let n = nextPeak
            var interpolated: Float = 0
            for coefficients in phases {
                var sum: Float = 0
                for (tap, coefficient) in coefficients.enumerated() { sum += sample(n - halfTaps + 1 + tap) * coefficient }
                interpolated = max(interpolated, abs(sum))
            }
            let peak = max(abs(sample(n)), interpolated, previousInterpolatedPeak)
            previousInterpolatedPeak = interpolated
            let wanted = peak > threshold ? threshold / peak : 1
            // The smallest wanted gain of the last `lookahead` samples...
            while minimum.count > minimumHead, minimum[minimum.count - 1].gain >= wanted { minimum.removeLast() }
            minimum.append((n, wanted))
            while minimum[minimumHead].index <= n - lookahead { minimumHead += 1 }
            // ...recovering no faster than the release...
            held = min(minimum[minimumHead].gain, held + (1 - held) * release)
            // ...averaged over the `lookahead` samples from `out` to `n`: each
            // of those minimums covers `out`, so the average is at most the
            // gain `out` wants, and it moves by small steps.
            let slot = n % lookahead
            ringSum += Double(held - ring[slot])
            ring[slot] = held
            nextPeak += 1
            let out = n - lookahead + 1
            guard out >= 0 else { continue }
            let applied = Float(ringSum / Double(lookahead))
            if realCount.map({ out < $0 }) ?? true {
                smallestGain = min(smallestGain, applied)
                let value = (sample(out) * applied * 32768).rounded()
                block.append(Int16(max(-32768, min(32767, value))))
                if block.count == 4096 { try flush(emit: emit) }
            }
            nextOut = out + 1
            if minimumHead > 1024 {
                minimum.removeFirst(minimumHead)
                minimumHead = 0
            }
        }
        // Keep only what the interpolator and the output still need.
        let keep = min(nextOut, nextPeak - halfTaps)
        if keep - base > 8192 {
            samples.removeFirst(keep - base)
            base = keep
        }
    }

    private func flush(emit: (UnsafeBufferPointer<Int16>) throws -> Void) throws {
        guard !block.isEmpty else { return }
        try block.withUnsafeBufferPointer { try emit($0) }
        block.removeAll(keepingCapacity: true)
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

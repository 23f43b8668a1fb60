import CEbur128
import Foundation
import Testing
import TourpackTesting

@testable import TourpackAudio

/// `TruePeakMeter` against libebur128's own true-peak mode: the same figure
/// to the bit, since package.json records it and files must stay
/// bit-identical to those measured before.
@Suite("True peak: TruePeakMeter against libebur128", .offThePool)
struct TruePeakTests {
    /// libebur128's true peak of `samples` (fed in pieces of `piece`), linear.
    static func reference(_ samples: [Int16], rate: Int, piece: Int) throws -> Double {
        var state: UnsafeMutablePointer<ebur128_state>? = ebur128_init(1, UInt(rate), Int32(EBUR128_MODE_TRUE_PEAK.rawValue))
        try #require(state != nil)
        defer { ebur128_destroy(&state) }
        samples.withUnsafeBufferPointer { buffer in
            var at = 0
            while at < buffer.count {
                let count = min(piece, buffer.count - at)
                _ = ebur128_add_frames_short(state, buffer.baseAddress! + at, count)
                at += count
            }
        }
        var value = 0.0
        #expect(ebur128_true_peak(state, 0, &value) == 0)
        return value
    }

    static func measured(_ samples: [Int16], rate: Int, piece: Int) -> Double {
        var meter = TruePeakMeter(rate: rate)
        samples.withUnsafeBufferPointer { buffer in
            var at = 0
            while at < buffer.count {
                let count = min(piece, buffer.count - at)
                meter.add(UnsafeBufferPointer(rebasing: buffer[at..<(at + count)]))
                at += count
            }
        }
        return meter.truePeak
    }

    /// Signals whose true peak lies between samples, on a sample, early, late,
    /// and in noise; at each rate's oversampling (4×, 2× and none).
    static func signals(rate: Int) -> [(String, [Int16])] {
        var generator = SystemRandomNumberGenerator()
        func tone(_ hertz: Double, _ amplitude: Double, phase: Double, count: Int) -> [Int16] {
            (0..<count).map { Int16((amplitude * 32_767 * sin(2 * .pi * hertz * Double($0) / Double(rate) + phase)).rounded()) }
        }
        let quiet = tone(440, 0.05, phase: 0, count: rate)
        return [
            ("a quarter-rate tone at 45°, peaking between samples", tone(Double(rate) / 4, 0.99, phase: .pi / 4, count: rate / 2)),
            ("a sweep of tones", (1...20).flatMap { tone(Double($0) * 500, 0.3 + Double($0) / 40, phase: 0.3, count: 2_400) }),
            ("a loud click late in quiet audio", quiet + [Int16.max, Int16.min, Int16.max] + quiet),
            ("full-scale square waves", (0..<rate).map { ($0 / 7) % 2 == 0 ? Int16.max : Int16.min }),
            ("white noise", (0..<rate).map { _ in Int16.random(in: -20_000...20_000, using: &generator) }),
            ("silence", [Int16](repeating: 0, count: rate / 10)),
            // Clipping: a sine driven 3 dB past full scale, flat-topped, whose overs lie between samples.
            (
                "a clipped sine",
                (0..<rate).map { Int16(clamping: Int((1.4 * 32_767 * sin(2 * .pi * 997 * Double($0) / Double(rate) + 0.2)).rounded())) }
            ),
            // The loudest stretch straddles the meter's window of 16,384 inputs, and the loudest blocks come late.
            (
                "an inter-sample peak across a window's edge",
                [Int16](repeating: 0, count: TruePeakMeter.window - 5) + tone(Double(rate) / 4, 0.9, phase: .pi / 4, count: 11) + quiet
                    + tone(Double(rate) / 4, 0.95, phase: .pi / 4, count: 9) + quiet
            ),
        ]
    }

    @Test(
        "synthetic signals, fed in pieces of any size, give libebur128's true peak bit for bit",
        arguments: [24_000, 44_100, 96_000, 192_000])
    func synthetic(rate: Int) throws {
        for (name, samples) in Self.signals(rate: rate) {
            for piece in [1, 63, 4_800, samples.count] {
                let reference = try Self.reference(samples, rate: rate, piece: piece)
                #expect(Self.measured(samples, rate: rate, piece: piece) == reference, "\(name), pieces of \(piece)")
            }
        }
    }

    @Test("espeak speech at every level of a 1 dB ladder gives libebur128's true peak bit for bit")
    func speech() throws {
        let directory = try TemporaryFolder.make("tourpack-audio")
        defer { TemporaryFolder.remove(directory) }
        for rate in [24_000, 48_000] {
            let chunks = try Fixtures.chunks(rate: rate, in: directory)
            for chunk in chunks {
                for step in 0..<12 {
                    let scale = pow(10, Double(step) / 20) / 2
                    let samples = chunk.samples.map { Int16(clamping: Int((Double($0) * scale).rounded())) }
                    let reference = try Self.reference(samples, rate: rate, piece: 2_400)
                    #expect(Self.measured(samples, rate: rate, piece: 2_400) == reference, "\(rate) Hz, \(step) dB")
                }
            }
        }
    }

    @Test("float input gives libebur128's true peak of the same samples as floats")
    func floats() throws {
        let rate = 48_000
        let samples = Self.signals(rate: rate).flatMap(\.1)
        let floats = samples.map { Float($0) / 32_768 }
        var state: UnsafeMutablePointer<ebur128_state>? = ebur128_init(1, UInt(rate), Int32(EBUR128_MODE_TRUE_PEAK.rawValue))
        try #require(state != nil)
        defer { ebur128_destroy(&state) }
        _ = floats.withUnsafeBufferPointer { ebur128_add_frames_float(state, $0.baseAddress!, $0.count) }
        var reference = 0.0
        #expect(ebur128_true_peak(state, 0, &reference) == 0)
        var meter = TruePeakMeter(rate: rate)
        floats.withUnsafeBufferPointer { meter.add($0) }
        #expect(meter.truePeak == reference)
    }

    @Test(
        "the float estimate of eight outputs is within 1e-6 of their bound of the exact outputs, inside the meter's margin",
        arguments: [24_000, 96_000])
    func estimateBound(rate: Int) {
        let meter = TruePeakMeter(rate: rate)
        var generator = SeededGenerator(seed: UInt64(rate))
        let count = 40_000
        let signals: [(String, [Float])] = [
            ("full-scale noise", (0..<count).map { _ in Float(Int16(truncatingIfNeeded: generator.next())) / 32_768 }),
            ("full-scale square waves", (0..<count).map { ($0 / 3) % 2 == 0 ? 32_767 / 32_768 : -1 }),
            ("quiet noise with loud clicks", (0..<count).map { $0 % 997 == 0 ? 1 : Float(Int(generator.next() % 65) - 32) / 32_768 }),
            ("float noise past full scale", (0..<count).map { _ in Float(generator.unit() * 4 - 2) }),
        ]
        for (name, inputs) in signals {
            var largestError = 0.0
            inputs.withUnsafeBufferPointer { input in
                meter.estimateCoefficients.withUnsafeBufferPointer { coefficients in
                    meter.estimateLags.withUnsafeBufferPointer { lags in
                        meter.phaseEnds.withUnsafeBufferPointer { phaseEnds in
                            for at in stride(from: meter.delay, to: count - 8, by: 8) {
                                let estimate = Double(
                                    TruePeakMeter.largestEstimate(input.baseAddress!, at: at, coefficients, lags, phaseEnds))
                                let reach = input[(at - meter.delay + 1)..<(at + 8)].reduce(Float(0)) { max($0, abs($1)) }
                                let bound = meter.gain * Double(reach)
                                // The exact outputs, as libebur128 computes them: in double, in tap order, rounded to float.
                                var exact = 0.0
                                for output in at..<(at + 8) {
                                    for phase in meter.phases {
                                        var sum = 0.0
                                        for (coefficient, lag) in zip(phase.coefficients, phase.lags) {
                                            sum += Double(input[output - lag]) * coefficient
                                        }
                                        exact = max(exact, abs(Double(Float(sum))))
                                    }
                                }
                                // What the meter relies on to pass the outputs over.
                                #expect(exact <= (estimate + bound * 1e-5) * (1 + 1e-6), "\(name) at \(at)")
                                if bound > 0 { largestError = max(largestError, abs(exact - estimate) / bound) }
                            }
                        }
                    }
                }
            }
            // The proof's figure, with the exact output's own rounding to float.
            #expect(largestError < 1.1e-6, "\(name): the estimate is off by \(largestError) of the bound")
        }
    }
}

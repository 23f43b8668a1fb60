import CEbur128
import Foundation
import Testing
import TourpackTesting

@testable import TourpackAudio

/// `LoudnessMeter` (our own K-weighting and gating) against libebur128 in
/// histogram mode: the same integrated loudness to the bit, each gating
/// block's loudness to 1e-9 LU, and the same profile bins, at every rate,
/// fed in pieces of any size.
@Suite("Loudness meter against libebur128", .offThePool)
struct LoudnessMeterTests {
    /// What libebur128 makes of some audio: its integrated loudness, and each
    /// gating block's loudness (its momentary loudness at each hop's end from
    /// the fourth on) with the profile those blocks make.
    struct Reference {
        var integrated: Double?
        var blocks: [Double] = []
        var profile = LoudnessProfile()
    }

    static func reference<Sample>(
        _ samples: [Sample], rate: Int, piece: Int,
        _ add: (UnsafeMutablePointer<ebur128_state>?, UnsafePointer<Sample>, Int) -> Int32
    ) throws -> Reference {
        let mode = Int32(EBUR128_MODE_I.rawValue | EBUR128_MODE_HISTOGRAM.rawValue)
        var state: UnsafeMutablePointer<ebur128_state>? = ebur128_init(1, UInt(rate), mode)
        try #require(state != nil)
        defer { ebur128_destroy(&state) }
        let hop = (rate + 5) / 10
        var reference = Reference()
        samples.withUnsafeBufferPointer { buffer in
            var at = 0
            var intoHop = 0
            var hops = 0
            while at < buffer.count {
                // Pieces of `piece`, cut again at each hop's end to read the block that ends there.
                let count = min(piece - at % piece, buffer.count - at, hop - intoHop)
                _ = add(state, buffer.baseAddress! + at, count)
                at += count
                intoHop += count
                guard intoHop == hop else { continue }
                intoHop = 0
                hops += 1
                guard hops >= 4 else { continue }
                var momentary = 0.0
                _ = ebur128_loudness_momentary(state, &momentary)
                reference.blocks.append(momentary)
                reference.profile.addBlock(lufs: momentary)
            }
        }
        var global = 0.0
        #expect(ebur128_loudness_global(state, &global) == 0)
        reference.integrated = global.isFinite ? global : nil
        return reference
    }

    static func reference(_ samples: [Int16], rate: Int, piece: Int) throws -> Reference {
        try reference(samples, rate: rate, piece: piece) { ebur128_add_frames_short($0, $1, $2) }
    }

    static func reference(_ samples: [Float], rate: Int, piece: Int) throws -> Reference {
        try reference(samples, rate: rate, piece: piece) { ebur128_add_frames_float($0, $1, $2) }
    }

    /// Our meter's figures, fed in pieces of `piece`: the integrated loudness, each block's loudness, the profile.
    static func measured<Sample>(
        _ samples: [Sample], rate: Int, piece: Int, keepsBlocks: Bool = true,
        _ add: (LoudnessMeter, UnsafeBufferPointer<Sample>) -> Void
    ) throws -> (meter: LoudnessMeter, blocks: [Double]) {
        let meter = try LoudnessMeter(rate: rate, keepsBlocks: keepsBlocks)
        var blocks: [Double] = []
        meter.blockObserver = { blocks.append($0 > 0 ? GatingHistogram.lufs(energy: $0) : -.infinity) }
        samples.withUnsafeBufferPointer { buffer in
            var at = 0
            while at < buffer.count {
                let count = min(piece, buffer.count - at)
                add(meter, UnsafeBufferPointer(rebasing: buffer[at..<(at + count)]))
                at += count
            }
        }
        return (meter, blocks)
    }

    /// Checks our meter against libebur128 for 16-bit `samples`; returns the blocks that land in another bin.
    @discardableResult
    static func compare(_ name: String, _ samples: [Int16], rate: Int, piece: Int) throws -> Int {
        let reference = try reference(samples, rate: rate, piece: piece)
        let (meter, blocks) = try measured(samples, rate: rate, piece: piece) { $0.add($1) }
        return check(name, reference: reference, meter: meter, blocks: blocks)
    }

    @discardableResult
    static func check(_ name: String, reference: Reference, meter: LoudnessMeter, blocks: [Double]) -> Int {
        #expect(meter.integratedLUFS == reference.integrated, "\(name): integrated loudness")
        #expect(blocks.count == reference.blocks.count, "\(name): blocks")
        for (ours, theirs) in zip(blocks, reference.blocks) where ours != theirs {
            // The same squares in hops: 3 blocks in 4 differ from libebur128's, by at most 3e-13 LU over these tests.
            #expect(abs(ours - theirs) < 1e-9, "\(name): a block at \(ours) LUFS against libebur128's \(theirs)")
        }
        let moved = Set(meter.profile.bins.keys).union(reference.profile.bins.keys).reduce(0) {
            $0 + abs(meter.profile.bins[$1, default: 0] - reference.profile.bins[$1, default: 0])
        }
        // A block changes bins only within about 1e-13 LU of an edge: over these tests (11,840 blocks), never.
        #expect(moved == 0, "\(name): profile bins \(meter.profile.bins) against libebur128's \(reference.profile.bins)")
        return moved
    }

    static let rates = [8_000, 16_000, 22_050, 24_000, 44_100, 48_000, 96_000]

    /// Signals for each test: tones, noise, silence, audio about the absolute gate, clipping.
    static func signals(rate: Int) -> [(String, [Int16])] {
        var generator = SeededGenerator(seed: UInt64(rate))
        func tone(_ hertz: Double, _ dBFS: Double, seconds: Double, phase: Double = 0) -> [Int16] {
            let amplitude = pow(10, dBFS / 20) * 32_767
            return (0..<Int(seconds * Double(rate))).map {
                Int16(clamping: Int((amplitude * sin(2 * .pi * hertz * Double($0) / Double(rate) + phase)).rounded()))
            }
        }
        func noise(_ amplitude: Int, seconds: Double) -> [Int16] {
            (0..<Int(seconds * Double(rate))).map { _ in Int16(Int(generator.next() % UInt64(2 * amplitude + 1)) - amplitude) }
        }
        return [
            ("a 997 Hz tone at -20 dBFS", tone(997, -20, seconds: 2.05)),
            ("tones rising from 30 Hz", (1...8).flatMap { tone(30 * pow(2, Double($0)), -3 - 2 * Double($0), seconds: 0.3) }),
            ("white noise", noise(12_000, seconds: 1.5)),
            ("silence, then a tone", [Int16](repeating: 0, count: rate) + tone(440, -30, seconds: 1)),
            // The filter's state decays through denormals in the silence: libebur128 flushes them as it goes, we per run.
            (
                "a tone, 4 s of silence, a tone",
                tone(50, -10, seconds: 0.5) + [Int16](repeating: 0, count: 4 * rate) + tone(440, -30, seconds: 0.5)
            ),
            // About -70 LUFS: a tone and noise of a few steps, some blocks each side of the absolute gate.
            ("a tone of a few steps near the absolute gate", tone(1_000, -66, seconds: 1.2) + tone(1_000, -72, seconds: 1.2)),
            ("noise of a step or two", noise(2, seconds: 2)),
            ("a sine driven 6 dB past full scale", tone(997, 6, seconds: 1.3, phase: 0.2)),
            ("shorter than a block", tone(997, -20, seconds: 0.35)),
        ]
    }

    @Test("synthetic signals, at every rate and fed in pieces of any size, measure as libebur128 measures them", arguments: rates)
    func synthetic(rate: Int) throws {
        for (name, samples) in Self.signals(rate: rate) {
            // Single samples only where the signal is short: in a debug build the
            // reference and the meter a sample at a time hold a core for minutes.
            for piece in [1, 7, 4_096, samples.count] where piece > 1 || samples.count <= 4_800 {
                try Self.compare("\(name) at \(rate) Hz, pieces of \(piece)", samples, rate: rate, piece: piece)
            }
        }
    }

    @Test("espeak speech, quiet to clipped, measures as libebur128 measures it", arguments: [8_000, 22_050, 24_000, 96_000])
    func speech(rate: Int) throws {
        let directory = try TemporaryFolder.make("tourpack-audio")
        defer { TemporaryFolder.remove(directory) }
        let speech = try Fixtures.chunks(rate: rate, in: directory).flatMap(\.samples)
        // -60 dB puts most blocks near the absolute gate; +12 dB clips.
        for decibels in [-60.0, -20, 0, 12] {
            let scale = pow(10, decibels / 20)
            let samples = speech.map { Int16(clamping: Int((Double($0) * scale).rounded())) }
            for piece in [7, 4_096] {
                try Self.compare("speech at \(decibels) dB, \(rate) Hz, pieces of \(piece)", samples, rate: rate, piece: piece)
            }
        }
    }

    @Test("float input measures as libebur128 measures the same floats", arguments: [24_000, 44_100])
    func floats(rate: Int) throws {
        var generator = SeededGenerator(seed: 7)
        let floats = (0..<(3 * rate)).map { index -> Float in
            let tone = 0.4 * sin(2 * .pi * 220 * Double(index) / Double(rate))
            let noise = Double(generator.next() % 2_001) / 1_000 - 1
            // Over full scale now and then: floats may go there.
            return Float(tone + 0.3 * noise * (index % 9_000 < 300 ? 4 : 1))
        }
        for piece in [1, 4_096] {
            let reference = try Self.reference(floats, rate: rate, piece: piece)
            let (meter, blocks) = try Self.measured(floats, rate: rate, piece: piece) { $0.add($1) }
            Self.check("floats at \(rate) Hz, pieces of \(piece)", reference: reference, meter: meter, blocks: blocks)
        }
    }

    @Test("without blocks kept, the same integrated loudness and true peak, and an empty profile")
    func withoutBlocks() throws {
        let rate = 24_000
        let samples = Self.signals(rate: rate)[0].1 + Self.signals(rate: rate)[2].1
        let (kept, _) = try Self.measured(samples, rate: rate, piece: 1_000) { $0.add($1) }
        let (dropped, _) = try Self.measured(samples, rate: rate, piece: 1_000, keepsBlocks: false) { $0.add($1) }
        #expect(dropped.integratedLUFS != nil)
        #expect(dropped.integratedLUFS == kept.integratedLUFS)
        #expect(dropped.truePeak == kept.truePeak)
        #expect(dropped.profile.bins.isEmpty)
        #expect(!kept.profile.bins.isEmpty)
    }

    @Test("rates libebur128 refuses are refused", arguments: [0, 15, 2_822_401])
    func refusedRate(rate: Int) {
        #expect(throws: (any Error).self) { try LoudnessMeter(rate: rate) }
    }
}

/// SplitMix64: a small, fast, seeded generator, so a failing input can be
/// replayed from its seed and a bench's input is the same on every run.
/// One value, not shared: `SeededDraws` is the locked one for threads.
package struct SeededGenerator: RandomNumberGenerator, Sendable {
    private var state: UInt64

    package init(seed: UInt64) { state = seed }

    package mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// The next draw in [0, 1), from the top 53 bits.
    package mutating func unit() -> Double { Double(next() >> 11) / Double(1 << 53) }
}

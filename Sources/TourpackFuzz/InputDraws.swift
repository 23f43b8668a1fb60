/// The numbers a fuzz target draws from its input, to split it into pieces
/// or lay it out in time: a 64-bit LCG (Knuth's MMIX constants) seeded with
/// the input's FNV-1a hash, so one input is split and timed the same way on
/// every run. The corpus was kept for the paths these draws take, so the
/// sequence is fixed; the tests' `SeededGenerator` is test support, which
/// `make fuzz`'s executable does not link.
struct InputDraws {
    private var state: UInt64

    init(_ bytes: [UInt8]) { state = Self.hash(bytes) }

    /// The next 64 bits; their top bits are the best drawn.
    mutating func next() -> UInt64 {
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        return state
    }

    /// FNV-1a of `bytes`: a number from the input without a byte of it spent on it.
    static func hash(_ bytes: [UInt8]) -> UInt64 {
        bytes.reduce(UInt64(0xCBF2_9CE4_8422_2325)) { ($0 ^ UInt64($1)) &* 0x100_0000_01B3 }
    }
}

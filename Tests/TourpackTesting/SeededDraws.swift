import Foundation

/// A deterministic stream of draws in [0, 1) (SplitMix64), shared by the server's threads.
package final class SeededDraws: @unchecked Sendable {
    private let lock = NSLock()
    private var state: UInt64

    package init(seed: UInt64) { state = seed }

    package func next() -> Double {
        lock.withLock {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return Double((z ^ (z >> 31)) >> 11) / Double(1 << 53)
        }
    }
}

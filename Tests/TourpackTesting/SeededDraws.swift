import Foundation

/// A deterministic stream of draws in [0, 1) (`SeededGenerator`), shared by the server's threads.
package final class SeededDraws: @unchecked Sendable {
    private let lock = NSLock()
    private var generator: SeededGenerator

    package init(seed: UInt64) { generator = SeededGenerator(seed: seed) }

    package func next() -> Double { lock.withLock { generator.unit() } }
}

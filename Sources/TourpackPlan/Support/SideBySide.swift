import Foundation

/// Runs `work` once for each index in `0..<count` on every core
/// (`concurrentPerform`) and returns the results in index order.
///
/// For work that is the CPU's or the file system's alone, done by a build
/// on one of its pool's threads while nothing else can go on: planning the
/// tours, reading the packages already there, listing the output tree.
/// `concurrentPerform` returns only when every index has run.
package func sideBySide<Result>(_ count: Int, _ work: @Sendable (Int) -> Result) -> [Result] {
    let slots = Slots<Result>(count: count)
    DispatchQueue.concurrentPerform(iterations: count) { index in
        slots.set(index, work(index))
    }
    return slots.values
}

/// One result per index, each written by the one worker that made it.
private final class Slots<Result>: @unchecked Sendable {
    private var slots: [Result?]
    private let lock = NSLock()

    init(count: Int) { slots = Array(repeating: nil, count: count) }

    func set(_ index: Int, _ value: Result) { lock.withLock { slots[index] = value } }

    var values: [Result] { lock.withLock { slots.map { $0! } } }
}

/// Runs `first` and `second` at once, and returns both results, or throws
/// the first one's error, then the second's.
package func sideBySide<First, Second>(_ first: @Sendable () throws -> First, _ second: @Sendable () throws -> Second) throws -> (
    First, Second
) {
    let results = sideBySide(2) { index -> Result<Any, any Error> in
        Result { index == 0 ? try first() as Any : try second() as Any }
    }
    // Each slot holds what its own closure returned.
    return (try results[0].get() as! First, try results[1].get() as! Second)
}

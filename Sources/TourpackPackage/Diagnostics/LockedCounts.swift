import Foundation

/// A value shared between threads behind one lock: the box every set of
/// live counters in tourpack keeps its numbers in (the synthesizer's, the
/// caches', the tile fetcher's and the embedded servers'), so each reads
/// a consistent snapshot and changes several fields at once.
public final class LockedCounts<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    public init(_ value: Value) {
        self.value = value
    }

    /// The value now, consistent in all its fields.
    public var snapshot: Value { lock.withLock { value } }

    /// Changes the value under the lock; returns what `change` returns.
    @discardableResult
    public func update<Result>(_ change: (inout Value) throws -> Result) rethrows -> Result {
        try lock.withLock { try change(&value) }
    }
}

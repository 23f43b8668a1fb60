package import Foundation
import TourpackCore

/// A clock that moves only when told: expiry, LRU order, the ledger's month
/// and the rate limiter's refill, tested without a single sleep.
///
/// It is two clocks that move together. As a Swift `Clock` (`now`,
/// `sleep(until:)`) it starts at zero and wakes its sleepers when it passes
/// their deadline. As a wall clock (`date`, handed to the code under test as
/// its `now: () -> Date`) it starts at a given date.
package final class ManualClock: Clock, @unchecked Sendable {
    /// A point on the Swift clock: the time moved since the start.
    package struct Instant: InstantProtocol {
        package var offset: Duration
        package func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        package func duration(to other: Instant) -> Duration { other.offset - offset }
        package static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
    }

    private let lock = NSLock()
    private var current = Instant(offset: .zero)
    private var currentDate: Date
    private var sleepers: [(deadline: Instant, continuation: CheckedContinuation<Void, any Error>)] = []

    package init(_ start: Date) { currentDate = start }

    /// Starts at `start`, an ISO 8601 timestamp as package.json writes them.
    package convenience init(_ start: String = "2026-11-20T12:00:00Z") { self.init(PackageManifest.parseTimestamp(start)!) }

    // MARK: The wall clock

    /// The date now, as a function the code under test calls for the time.
    package var date: @Sendable () -> Date { { [self] in lock.withLock { currentDate } } }

    /// Moves both clocks forward by `days` and `seconds`, waking the sleepers now due.
    package func advance(days: Double = 0, seconds: Double = 0) {
        let interval = days * 86_400 + seconds
        move(by: .seconds(interval), dateBy: interval)
    }

    /// Sets the wall clock to `date`, forward or back; the Swift clock does not move.
    package func set(_ date: Date) { lock.withLock { currentDate = date } }

    // MARK: The Swift clock

    package var now: Instant { lock.withLock { current } }

    package var minimumResolution: Duration { .nanoseconds(1) }

    /// How many callers wait in `sleep(until:)`.
    package var sleeperCount: Int { lock.withLock { sleepers.count } }

    package func sleep(until deadline: Instant, tolerance: Duration?) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            lock.lock()
            if deadline <= current {
                lock.unlock()
                continuation.resume()
            } else {
                sleepers.append((deadline, continuation))
                lock.unlock()
            }
        }
    }

    /// Moves the Swift clock to the earliest sleeper's deadline, waking it.
    package func advanceToNextDeadline() {
        lock.lock()
        guard let next = sleepers.map(\.deadline).min() else {
            lock.unlock()
            return
        }
        let step = current.duration(to: next)
        lock.unlock()
        advance(by: step)
    }

    /// Moves both clocks forward by `duration`, waking the sleepers now due.
    package func advance(by duration: Duration) {
        let (seconds, attoseconds) = duration.components
        move(by: duration, dateBy: Double(seconds) + Double(attoseconds) / 1e18)
    }

    private func move(by duration: Duration, dateBy interval: TimeInterval) {
        lock.lock()
        current = current.advanced(by: duration)
        currentDate += interval
        let due = sleepers.filter { $0.deadline <= current }
        sleepers.removeAll { $0.deadline <= current }
        lock.unlock()
        for sleeper in due { sleeper.continuation.resume() }
    }
}

import Foundation
import TourpackState

/// The requests of one build in flight, by chunk, with who waits for each:
/// the same chunk asked for twice at once (one sentence in two narrations)
/// is requested once, and later callers wait for the first one's audio. The
/// shared request is cancelled only when every caller waiting for it is.
final class InFlightChunks: @unchecked Sendable {
    /// One caller's hold on a shared request.
    final class Ticket: @unchecked Sendable {
        let isFirst: Bool
        /// Set once the caller stopped waiting (done or cancelled).
        var left = false
        init(isFirst: Bool) { self.isFirst = isFirst }
    }

    private struct Entry {
        var task: Task<SpokenChunk, any Error>
        var waiters: Int
    }

    private let lock = NSLock()
    private var entries: [SynthesisKey: Entry] = [:]

    /// The request already fetching `key`, or a new one from `start`.
    /// `start` runs under the lock, so the task cannot `finish` before it is recorded.
    func join(_ key: SynthesisKey, start: () -> Task<SpokenChunk, any Error>) -> (Task<SpokenChunk, any Error>, Ticket) {
        lock.withLock {
            if var entry = entries[key] {
                entry.waiters += 1
                entries[key] = entry
                return (entry.task, Ticket(isFirst: false))
            }
            let task = start()
            entries[key] = Entry(task: task, waiters: 1)
            return (task, Ticket(isFirst: true))
        }
    }

    /// A caller stops waiting; the request is cancelled when a cancelled
    /// caller was the last one waiting for it.
    func leave(_ key: SynthesisKey, _ ticket: Ticket, cancelling: Bool) {
        lock.withLock {
            guard !ticket.left else { return }
            ticket.left = true
            guard var entry = entries[key] else { return }
            entry.waiters -= 1
            entries[key] = entry
            if cancelling, entry.waiters == 0 { entry.task.cancel() }
        }
    }

    /// The request is over; later callers look in the cache again.
    func finish(_ key: SynthesisKey) {
        lock.withLock { _ = entries.removeValue(forKey: key) }
    }
}

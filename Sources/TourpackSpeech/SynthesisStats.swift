import Foundation
import TourpackCore

/// What a synthesizer has done so far, for the build's summary and `--json`.
package struct SynthesisStats: Sendable, Hashable, Codable {
    /// HTTP requests sent, retries included.
    package var requests = 0
    /// Requests that were tries after a failure.
    package var retries = 0
    /// Characters in every request sent, retries included.
    package var charactersSent = 0
    /// Characters of chunks that came back as audio (what a provider bills).
    package var charactersSynthesized = 0
    /// Chunks the server called too long, split and sent again.
    package var splits = 0
    /// Chunks that failed for good.
    package var failures = 0
    /// New TCP connections; low when connections are reused.
    package var connectionsOpened = 0
    /// Response bytes received.
    package var bytesReceived = 0

    package init() {}
}

/// The live counters behind `SynthesisStats`, shared by all copies of a synthesizer.
typealias SynthesisCounters = LockedCounts<SynthesisStats>

/// Characters of every 2xx answer the endpoint gave while synthesizing one
/// chunk, retries and split parts included: what a provider bills, even for
/// an answer that then turned out truncated or undecodable and was retried.
/// The build sets one as a task-local around each request and settles the
/// ledger with it.
package final class BilledCharacters: @unchecked Sendable {
    private let lock = NSLock()
    private var total = 0
    /// `total` as `onSend` was last told it; nil before the first send.
    private var announced: Int?
    /// Called before the first request goes out (`first`: the ledger marks
    /// the reservation sent), and before a retry when answers were billed
    /// since (`billed`: the ledger raises the reservation); a throw stops the request.
    let onSend: (@Sendable (_ first: Bool, _ billed: Int) async throws -> Void)?

    package init(onSend: (@Sendable (_ first: Bool, _ billed: Int) async throws -> Void)? = nil) {
        self.onSend = onSend
    }

    package var value: Int { lock.withLock { total } }
    func add(_ characters: Int) { lock.withLock { total += characters } }

    /// A request (the first, or a retry) is about to go out.
    func willSend() async throws {
        let (first, billed, changed) = lock.withLock {
            defer { announced = total }
            return (announced == nil, total, total > (announced ?? 0))
        }
        if first || changed, let onSend { try await onSend(first, billed) }
    }

    @TaskLocal package static var current: BilledCharacters?
}

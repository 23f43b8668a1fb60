/// At most `limit` holders at once; the rest wait in arrival order.
///
/// Bounds the requests in flight (`tts.concurrency`), however many chunks
/// the pipeline hands the synthesizer at once. A released slot passes
/// straight to the first waiter, so a late arrival cannot overtake it.
package actor ConcurrencyLimit {
    let limit: Int
    private var holders = 0
    private var nextWaiter = 0
    private var waiters: [(id: Int, continuation: CheckedContinuation<Void, any Error>)] = []

    package init(limit: Int) { self.limit = max(1, limit) }

    package func acquire() async throws {
        if holders < limit, waiters.isEmpty {
            holders += 1
            return
        }
        let id = nextWaiter
        nextWaiter += 1
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                if Task.isCancelled {
                    continuation.resume(throwing: CancellationError())
                } else {
                    waiters.append((id, continuation))
                }
            }
        } onCancel: {
            Task { await self.cancelWaiter(id) }
        }
    }

    package func release() {
        if waiters.isEmpty {
            holders -= 1
        } else {
            waiters.removeFirst().continuation.resume()  // the slot changes hands; holders stays
        }
    }

    private func cancelWaiter(_ id: Int) {
        guard let index = waiters.firstIndex(where: { $0.id == id }) else { return }
        waiters.remove(at: index).continuation.resume(throwing: CancellationError())
    }
}

import NIOPosix

extension NIOThreadPool {
    /// Runs `body` on the pool and waits for it, even when the calling task
    /// is cancelled: for cleanup that must happen (removing temps, closing
    /// files). `runIfActive` drops work whose task was cancelled before it
    /// started, which is exactly when cleanup matters. On a pool that has
    /// stopped, `body` runs on the caller's thread.
    func runRegardless(_ body: @escaping @Sendable () -> Void) async {
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            submit { _ in
                body()
                done.resume()
            }
        }
    }
}

extension NIOThreadPool {
    /// `runIfActive`, but work that must not be lost once a request was
    /// answered (settling the ledger) runs even when the task was cancelled.
    func runIfActiveOrHere<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        let box = ResultBox<T>()
        await runRegardless { box.result = Result(catching: body) }
        return try box.result!.get()
    }
}

private final class ResultBox<T: Sendable>: @unchecked Sendable {
    var result: Result<T, any Error>?
}

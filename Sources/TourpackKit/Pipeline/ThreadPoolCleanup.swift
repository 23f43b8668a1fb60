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

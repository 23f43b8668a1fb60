import Dispatch

/// Blocking file work (fsync, hashing, renames, copies, a folder's
/// manifests read) run off Swift's cooperative pool: on a concurrent
/// Dispatch queue of its own, bridged back with a continuation. The app's
/// library has no swift-nio, so this is its `NIOThreadPool`.
enum Blocking {
    private static let queue = DispatchQueue(label: "tourpack.client.blocking", qos: .utility, attributes: .concurrent)

    /// Runs `work` on the queue and returns its result; a cancelled task
    /// still waits for `work` to finish (it cannot be interrupted halfway).
    static func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try Task.checkCancellation()
        return try await withCheckedThrowingContinuation { continuation in
            queue.async { continuation.resume(with: Result { try work() }) }
        }
    }

    /// Runs `work` on the queue even when the task is cancelled: the
    /// clean-up after a failed or cancelled install must still happen.
    static func cleanUp(_ work: @escaping @Sendable () -> Void) async {
        await withCheckedContinuation { continuation in
            queue.async {
                work()
                continuation.resume()
            }
        }
    }
}

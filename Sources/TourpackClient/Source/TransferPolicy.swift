import Foundation
import TourpackPackage

/// How long and how often one file is tried over the network before the
/// download gives up on it: the limits a device needs so that a slow or
/// hostile server can neither hold it for ever nor keep it busy.
package struct TransferPolicy: Sendable, Hashable {
    /// Tries of one file without progress before it fails (`networkUnavailable`).
    package var maximumAttempts: Int
    /// Below this rate, averaged over `rateWindowSeconds`, a try is abandoned as stalled.
    package var minimumBytesPerSecond: Int64
    package var rateWindowSeconds: Double
    /// One file's whole download, every try included.
    package var fileDeadlineSeconds: Double
    /// Full-jitter exponential backoff between tries: from this, doubling, up to `maximumBackoffSeconds`.
    package var initialBackoffSeconds: Double
    package var maximumBackoffSeconds: Double

    package init(
        maximumAttempts: Int = 6, minimumBytesPerSecond: Int64 = 1024, rateWindowSeconds: Double = 15,
        fileDeadlineSeconds: Double = 3600, initialBackoffSeconds: Double = 0.5, maximumBackoffSeconds: Double = 20
    ) {
        self.maximumAttempts = max(1, maximumAttempts)
        self.minimumBytesPerSecond = max(0, minimumBytesPerSecond)
        self.rateWindowSeconds = max(1, rateWindowSeconds)
        self.fileDeadlineSeconds = max(1, fileDeadlineSeconds)
        self.initialBackoffSeconds = max(0, initialBackoffSeconds)
        self.maximumBackoffSeconds = max(self.initialBackoffSeconds, maximumBackoffSeconds)
    }

    /// The wait before try `failures + 1`: full jitter (a random share of
    /// the doubled backoff), or the server's `Retry-After` when it is longer.
    package func delay(afterFailures failures: Int, retryAfter: Double?) -> Double {
        let ceiling = min(maximumBackoffSeconds, initialBackoffSeconds * pow(2, Double(max(0, failures - 1))))
        let jittered = Double.random(in: 0...max(ceiling, 0.000_001))
        guard let retryAfter, retryAfter.isFinite, retryAfter > 0 else { return jittered }
        return min(max(jittered, retryAfter), fileDeadlineSeconds)
    }
}

/// The tries of one file: how many failed since bytes that could be kept
/// last arrived, and the file's overall deadline.
package struct TransferTries: Sendable {
    package let policy: TransferPolicy
    private var failures = 0
    private let started = ContinuousClock.now

    package init(_ policy: TransferPolicy) { self.policy = policy }

    /// Bytes that could be kept arrived: the next failure is the first again.
    package mutating func progressed() { failures = 0 }

    package var secondsLeft: Double { policy.fileDeadlineSeconds - started.duration(to: .now).seconds }

    /// How long to wait before the next try; `unreachable` when the tries or the deadline are spent.
    package mutating func delay(status: Int?, reason: String, retryAfter: Double?, url: String) throws -> Double {
        failures += 1
        let wait = policy.delay(afterFailures: failures, retryAfter: retryAfter)
        if failures >= policy.maximumAttempts || wait >= secondsLeft {
            let spent = failures >= policy.maximumAttempts ? "\(failures) tr\(failures == 1 ? "y" : "ies")" : "its deadline"
            throw SiteSourceFailure(.unreachable, url: url, status: status, reason: "\(reason); gave up after \(spent)")
        }
        return wait
    }
}

package import Foundation
package import TourpackCore

/// When to try a chunk again, and how long to wait first.
///
/// Exponential backoff with full jitter: the wait after the n-th failure is
/// uniform in [0, min(maxBackoff, initial · 2ⁿ⁻¹)), so many clients that fail
/// together do not come back together. A server's `Retry-After` is a floor.
/// The random source is injected so tests can pin the waits.
package struct RetryPolicy: Sendable {
    /// Tries per chunk, the first included.
    package var maxAttempts: Int
    package var initialBackoffSeconds: Double
    package var maxBackoffSeconds: Double
    /// No retry starts later than this after the first try began.
    package var deadlineSeconds: Double
    /// Returns a value in [0, 1).
    package var random: @Sendable () -> Double

    package init(
        maxAttempts: Int, initialBackoffSeconds: Double, maxBackoffSeconds: Double,
        deadlineSeconds: Double, random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) }
    ) {
        self.maxAttempts = max(1, maxAttempts)
        self.initialBackoffSeconds = max(0, initialBackoffSeconds)
        self.maxBackoffSeconds = max(0, maxBackoffSeconds)
        self.deadlineSeconds = deadlineSeconds
        self.random = random
    }

    /// The policy `tts:` settings describe; the deadline defaults to the time
    /// every try could take at full timeout plus every backoff at its cap.
    package init(settings: TTSSettings, deadlineSeconds: Double? = nil) {
        let attempts = max(1, settings.maxAttempts)
        self.init(
            maxAttempts: attempts, initialBackoffSeconds: settings.initialBackoffSeconds,
            maxBackoffSeconds: settings.maxBackoffSeconds,
            deadlineSeconds: deadlineSeconds ?? Double(attempts) * (settings.timeoutSeconds + settings.maxBackoffSeconds))
    }

    /// Seconds to wait after `failedAttempts` tries failed (1 after the first).
    package func delay(afterFailedAttempts failedAttempts: Int, retryAfter: Double?) -> Double {
        let exponent = Double(max(0, failedAttempts - 1))
        let ceiling = min(maxBackoffSeconds, initialBackoffSeconds * pow(2, min(exponent, 60)))
        let jittered = min(max(random(), 0), 1) * ceiling
        guard let retryAfter else { return jittered }
        return max(retryAfter, jittered)
    }

    /// `Retry-After` as seconds: either delta-seconds or an HTTP date.
    package static func retryAfterSeconds(_ header: String?, now: Date = Date()) -> Double? {
        guard let header = header?.trimmingCharacters(in: .whitespaces), !header.isEmpty else { return nil }
        if let seconds = Double(header), seconds.isFinite { return max(0, seconds) }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        guard let date = formatter.date(from: header) else { return nil }
        return max(0, date.timeIntervalSince(now))
    }
}

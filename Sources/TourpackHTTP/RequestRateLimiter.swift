import TourpackCore

/// Keeps request starts under `requestsPerMinute`, across every task that shares it.
///
/// A token bucket: `burst` tokens at most, refilled continuously. The refill
/// rate is `(requestsPerMinute - burst + 1) / 60` per second, so even a full
/// bucket plus a minute of refill never starts more than `requestsPerMinute`
/// requests inside any 60-second window. A caller that finds the bucket empty
/// reserves the next token and sleeps until it is due, so waiters are served
/// in arrival order. The clock is injected: tests drive it by hand.
package actor RequestRateLimiter<C: Clock> where C.Duration == Duration {
    /// The most starts in any 60-second window.
    package let requestsPerMinute: Int
    /// Starts allowed back to back after a quiet spell.
    package let burst: Int
    private let clock: C
    private let tokensPerSecond: Double
    private var tokens: Double
    private var lastRefill: C.Instant

    /// - Parameters:
    ///   - burst: requests that may start back to back; clamped to 1...requestsPerMinute.
    package init(requestsPerMinute: Int, burst: Int, clock: C) {
        let perMinute = max(1, requestsPerMinute)
        let burst = min(max(1, burst), perMinute)
        self.requestsPerMinute = perMinute
        self.burst = burst
        self.clock = clock
        self.tokensPerSecond = Double(perMinute - burst + 1) / 60
        self.tokens = Double(burst)
        self.lastRefill = clock.now
    }

    /// Returns when one more request may start. Throws `CancellationError`
    /// (and gives the reserved token back) if the task is cancelled while waiting.
    package func acquire() async throws {
        let now = clock.now
        let elapsed = lastRefill.duration(to: now)
        lastRefill = now
        tokens = min(Double(burst), tokens + elapsed.seconds * tokensPerSecond)
        tokens -= 1
        guard tokens < 0 else { return }
        let wait = -tokens / tokensPerSecond
        do {
            try await clock.sleep(until: now.advanced(by: .nanoseconds(Int64((wait * 1e9).rounded(.up)))), tolerance: nil)
        } catch {
            tokens += 1
            throw error
        }
    }
}

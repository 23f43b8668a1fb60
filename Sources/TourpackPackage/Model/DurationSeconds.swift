extension Duration {
    /// The duration in seconds, as a `Double`: what rates, timeouts, logs and
    /// reports count in. `Duration` keeps whole seconds and attoseconds
    /// apart; this is the one place that puts them back together.
    public var seconds: Double {
        let parts = components
        return Double(parts.seconds) + Double(parts.attoseconds) / 1e18
    }

    /// `seconds` as a `Duration`, clamped to 0…10⁹ s: waits and deadlines
    /// computed from a server's `Retry-After` or a policy never go negative
    /// or overflow.
    package static func clamped(seconds: Double) -> Duration {
        .nanoseconds(Int64((max(0, min(seconds, 1e9)) * 1e9).rounded()))
    }
}

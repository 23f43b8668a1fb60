extension Duration {
    /// The duration in seconds, as a `Double`: what rates, timeouts, logs and
    /// reports count in. `Duration` keeps whole seconds and attoseconds
    /// apart; this is the one place that puts them back together.
    public var seconds: Double {
        let parts = components
        return Double(parts.seconds) + Double(parts.attoseconds) / 1e18
    }
}

/// Conversions from `Double` to `Int` that cannot trap.
///
/// `Int(_: Double)` traps on NaN, on an infinity and past `Int`'s range
/// (about 9.2e18). A time a provider reports, a figure a cache row keeps
/// or a file's header claims is data, not a promise: 1e15 seconds at
/// 24 kHz is 2.4e19 samples, and a build that converted it with `Int(_:)`
/// died with SIGILL. Timing and audio code converts with these instead.
extension Int {
    /// `value` rounded by `rule`, or nil when it is NaN, infinite or past
    /// `Int`'s range.
    public init?(checked value: Double, rounding rule: FloatingPointRoundingRule = .toNearestOrAwayFromZero) {
        guard value.isFinite else { return nil }
        let rounded = value.rounded(rule)
        // 2^63 is exactly representable; Int.max is not (it rounds up to 2^63).
        guard rounded >= -9_223_372_036_854_775_808.0, rounded < 9_223_372_036_854_775_808.0 else { return nil }
        self.init(rounded)
    }

    /// `value` rounded by `rule` and clamped to `bounds`; NaN is `bounds.lowerBound`.
    public init(clamping value: Double, to bounds: ClosedRange<Int>, rounding rule: FloatingPointRoundingRule = .toNearestOrAwayFromZero) {
        guard !value.isNaN else {
            self = bounds.lowerBound
            return
        }
        if let exact = Int(checked: value, rounding: rule) {
            self = Swift.min(Swift.max(exact, bounds.lowerBound), bounds.upperBound)
        } else {
            self = value < 0 ? bounds.lowerBound : bounds.upperBound
        }
    }
}

/// The rule a chunk's sentence times are held to before captions use them,
/// wherever they come from: a provider's answer, or a synthesis-cache row
/// that an older version kept (or another worker's, through the shared
/// PostgreSQL index).
///
/// Times are data, not a promise. Each must be finite, not negative, no
/// earlier than the one before it, and no later than the chunk's end
/// (`samples / rate`). A list that breaks the rule is dropped whole: the
/// chunk's sentence starts are then estimated, as for a voice that reports
/// none, and its audio is kept.
extension ChunkShape {
    /// Whether `sentenceTimes` (when there are any) obey the rule at `rate`.
    package func timesFit(rate: Int) -> Bool {
        guard let times = sentenceTimes else { return true }
        return Self.timesFit(times, samples: samples, rate: rate)
    }

    /// Whether `times` can be sentence starts in `samples` samples at `rate`.
    package static func timesFit(_ times: [Double], samples: Int, rate: Int) -> Bool {
        guard rate > 0, samples >= 0 else { return times.isEmpty }
        let end = Double(samples) / Double(rate)
        var previous = 0.0
        for time in times {
            guard time.isFinite, time >= previous, time <= end else { return false }
            previous = time
        }
        return true
    }

    /// This shape, without its `sentenceTimes` when they break the rule.
    package func withFittingTimes(rate: Int) -> ChunkShape {
        guard !timesFit(rate: rate) else { return self }
        var shape = self
        shape.sentenceTimes = nil
        return shape
    }
}

package import Foundation

/// A chunk's shape and loudness, measured on one pass over its samples.
package struct ChunkMeter {
    let rate: Int
    private var shapes = ShapeMeter()
    private var loudness: LoudnessMeter?
    private var survey: LimiterSurvey?

    /// - Parameter measuresLoudness: false measures the shape only (its
    ///   `loudness` stays nil): most of the cost is the limiter survey.
    package init(rate: Int, measuresLoudness: Bool = true) {
        self.rate = rate
        survey = measuresLoudness ? LimiterSurvey(rate: rate) : nil
    }

    package mutating func add(_ samples: UnsafeBufferPointer<Int16>) throws {
        shapes.add(samples)
        guard survey != nil else { return }
        if loudness == nil { loudness = try LoudnessMeter(rate: rate) }
        loudness?.add(samples)
        survey?.add(samples)
    }

    package var count: Int { shapes.count }

    /// The chunk's shape with its loudness, once every sample is in.
    package mutating func finish() -> ChunkShape {
        var shape = shapes.shape
        guard survey != nil else { return shape }
        var profile = loudness?.finishedProfile ?? LoudnessProfile()
        profile.limiting = survey?.finish() ?? []
        shape.loudness = profile
        return shape
    }

    /// Measures the FLAC file at `url`; nil when it does not decode whole.
    package static func measure(_ url: URL, rate: Int, measuresLoudness: Bool = true) -> ChunkShape? {
        var meter = ChunkMeter(rate: rate, measuresLoudness: measuresLoudness)
        guard (try? FLACFile.stream(url, { try meter.add($0) })) != nil else { return nil }
        return meter.finish()
    }
}

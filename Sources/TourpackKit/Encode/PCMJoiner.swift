import Foundation

/// Joins a phase's TTS chunks into one PCM signal, so the phase is encoded
/// once (SPEC.md, "Audio rules": never concatenate encoded files).
///
/// Each chunk arrives with its own lead-in and tail of near-silence. Left as
/// they are, the gap between chunks would vary with the voice and the text,
/// and a chunk that ends abruptly would click. So at every interior edge the
/// joiner finds where speech starts or ends (the first or last sample above
/// `silenceThresholdDBFS`), keeps up to `keepQuietMilliseconds` of the quiet
/// tail that sits there (breath and decay sound more natural than digital
/// zero), and fills the rest with digital silence so that the gap between the
/// last audible sample of one chunk and the first of the next is exactly
/// `pauseMilliseconds`. Short fades at each seam bring the signal to zero and
/// back, so no seam has a step in it. The first chunk's start and the last
/// chunk's end are kept, with only a short fade against clicks.
public struct PCMJoiner: Sendable {
    /// Why a join failed.
    public enum JoinError: Error, Sendable, Equatable, CustomStringConvertible {
        /// No chunks, or only chunks without samples: there is nothing to encode.
        case empty
        /// A chunk has a sample rate of zero or less.
        case invalidSampleRate(chunk: Int, rate: Int)

        public var description: String {
            switch self {
            case .empty: return "no audio to join: every chunk is empty"
            case .invalidSampleRate(let chunk, let rate): return "chunk \(chunk) has an invalid sample rate \(rate)"
            }
        }
    }

    /// The pause between chunks, from the last audible sample of one chunk to
    /// the first audible sample of the next (`AudioSettings.pauseMilliseconds`).
    public var pauseMilliseconds: Int
    /// The length of the fade-out before and the fade-in after each seam.
    public var fadeMilliseconds: Int
    /// A sample at or below this level (dBFS, peak) counts as silence when edges are trimmed.
    public var silenceThresholdDBFS: Double
    /// At most this much of the quiet tail or lead-in at a seam is kept; the
    /// rest of the pause is digital silence.
    public var keepQuietMilliseconds: Int

    /// - Parameters:
    ///   - pauseMilliseconds: 350 ms by default, the spec's "one natural pause".
    ///   - fadeMilliseconds: 8 ms by default: long enough to remove a click, short
    ///     enough not to soften a consonant.
    ///   - silenceThresholdDBFS: -50 dBFS by default, below TTS noise floors that matter
    ///     and above the dither and reverb tails of every voice we have heard.
    ///   - keepQuietMilliseconds: 40 ms by default.
    public init(pauseMilliseconds: Int = 350, fadeMilliseconds: Int = 8, silenceThresholdDBFS: Double = -50, keepQuietMilliseconds: Int = 40) {
        self.pauseMilliseconds = max(0, pauseMilliseconds)
        self.fadeMilliseconds = max(0, fadeMilliseconds)
        self.silenceThresholdDBFS = silenceThresholdDBFS
        self.keepQuietMilliseconds = max(0, keepQuietMilliseconds)
    }

    /// The linear sample level of `silenceThresholdDBFS`.
    public var silenceThreshold: Int {
        Int((32768 * pow(10, silenceThresholdDBFS / 20)).rounded())
    }

    /// Joins `chunks` in order. Chunks at another rate than the first are
    /// resampled to the first chunk's rate; empty chunks are skipped; chunks
    /// that hold only silence are skipped when any chunk holds speech.
    /// - Throws: `JoinError.empty` when there is no sample at all.
    public func join(_ chunks: [PCMAudio]) throws -> PCMAudio {
        for (index, chunk) in chunks.enumerated() where chunk.sampleRate <= 0 {
            throw JoinError.invalidSampleRate(chunk: index, rate: chunk.sampleRate)
        }
        let nonEmpty = chunks.filter { !$0.samples.isEmpty }
        guard let first = nonEmpty.first else { throw JoinError.empty }
        let rate = first.sampleRate
        var parts: [PCMAudio] = []
        parts.reserveCapacity(nonEmpty.count)
        for chunk in nonEmpty { parts.append(try chunk.resampled(to: rate)) }

        let threshold = silenceThreshold
        let spans = parts.map { audibleSpan(of: $0.samples, threshold: threshold) }
        let audible = zip(parts, spans).compactMap { part, span in span.map { (part.samples, $0) } }
        let pause = samples(milliseconds: pauseMilliseconds, rate: rate)
        let fade = samples(milliseconds: fadeMilliseconds, rate: rate)
        let keepQuiet = samples(milliseconds: keepQuietMilliseconds, rate: rate)

        guard !audible.isEmpty else {
            // Only silence: nothing to trim against, so keep it and keep the pause.
            return PCMAudio(samples: plainJoin(parts.map(\.samples), pause: pause, fade: fade), sampleRate: rate)
        }

        var output: [Int16] = []
        output.reserveCapacity(audible.reduce(0) { $0 + $1.0.count } + pause * (audible.count - 1))
        for (index, (samples, span)) in audible.enumerated() {
            let isFirst = index == 0
            let isLast = index == audible.count - 1
            // The quiet margins kept at this chunk's interior edges: each side of
            // a seam may use up to half the pause.
            let lead = isFirst ? span.lowerBound : min(span.lowerBound, keepQuiet, pause / 2)
            let tail = isLast ? samples.count - span.upperBound : min(samples.count - span.upperBound, keepQuiet, pause / 2)
            let start = output.count
            output.append(contentsOf: samples[(span.lowerBound - lead)..<(span.upperBound + tail)])
            let end = output.count
            // Fade in at the start of every piece, fade out at the end of every piece.
            applyFadeIn(&output, range: start..<min(end, start + min(fade, (end - start) / 2)))
            applyFadeOut(&output, range: max(start, end - min(fade, (end - start) / 2))..<end)
            if !isLast {
                let nextLead = min(audible[index + 1].1.lowerBound, keepQuiet, pause / 2)
                let silence = max(0, pause - tail - nextLead)
                output.append(contentsOf: repeatElement(0, count: silence))
            }
        }
        return PCMAudio(samples: output, sampleRate: rate)
    }

    /// The samples from the first to the last above the silence threshold:
    /// what the join keeps of a chunk at an interior edge. Nil for silence.
    public func audibleRange(of samples: [Int16]) -> Range<Int>? {
        audibleSpan(of: samples, threshold: silenceThreshold)
    }

    private func audibleSpan(of samples: [Int16], threshold: Int) -> Range<Int>? {
        guard let first = samples.firstIndex(where: { abs(Int($0)) > threshold }),
              let last = samples.lastIndex(where: { abs(Int($0)) > threshold })
        else { return nil }
        return first..<(last + 1)
    }

    private func plainJoin(_ parts: [[Int16]], pause: Int, fade: Int) -> [Int16] {
        var output: [Int16] = []
        for (index, part) in parts.enumerated() {
            if index > 0 { output.append(contentsOf: repeatElement(0, count: pause)) }
            let start = output.count
            output.append(contentsOf: part)
            let length = min(fade, part.count / 2)
            applyFadeIn(&output, range: start..<(start + length))
            applyFadeOut(&output, range: (output.count - length)..<output.count)
        }
        return output
    }

    private func samples(milliseconds: Int, rate: Int) -> Int {
        Int((Double(milliseconds) * Double(rate) / 1000).rounded())
    }

    /// A raised-cosine ramp from silence to full level over `range`.
    private func applyFadeIn(_ samples: inout [Int16], range: Range<Int>) {
        let count = range.count
        guard count > 0 else { return }
        for (step, index) in range.enumerated() {
            samples[index] = scaled(samples[index], by: ramp(Double(step + 1) / Double(count + 1)))
        }
    }

    /// A raised-cosine ramp from full level to silence over `range`.
    private func applyFadeOut(_ samples: inout [Int16], range: Range<Int>) {
        let count = range.count
        guard count > 0 else { return }
        for (step, index) in range.enumerated() {
            samples[index] = scaled(samples[index], by: ramp(Double(count - step) / Double(count + 1)))
        }
    }

    private func ramp(_ position: Double) -> Double { 0.5 - 0.5 * cos(Double.pi * position) }

    private func scaled(_ sample: Int16, by gain: Double) -> Int16 {
        Int16((Double(sample) * gain).rounded())
    }
}

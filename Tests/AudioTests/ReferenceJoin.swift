import Foundation
import TourpackAudio
import TourpackKit

/// The whole-buffer join that the build used before the audio path
/// streamed (commit 1271158's `PCMJoiner.join`), kept verbatim as the
/// reference: the streamed join must give exactly its samples.
struct ReferenceJoin {
    var pauseMilliseconds = 350
    var fadeMilliseconds = 8
    var keepQuietMilliseconds = 40
    var silenceThreshold: Int { PCMJoiner.silenceThreshold }

    func join(_ chunks: [PCMAudio]) throws -> PCMAudio {
        for (index, chunk) in chunks.enumerated() where chunk.sampleRate <= 0 {
            throw PCMJoiner.JoinError.invalidSampleRate(chunk: index, rate: chunk.sampleRate)
        }
        let nonEmpty = chunks.filter { !$0.samples.isEmpty }
        guard let first = nonEmpty.first else { throw PCMJoiner.JoinError.empty }
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

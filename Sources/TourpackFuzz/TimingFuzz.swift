import Foundation
import TourpackAudio
import TourpackCore
import TourpackPlan
import TourpackSpeech

/// The fuzz targets of the three sentence-timing answers: each answer is
/// read by the real reader (Google's `timepoints`, ElevenLabs' alignment,
/// Polly's sentence speech marks), the times go into a chunk's shape as a
/// build would keep them, and the caption timer places the narration's
/// cues over one to three such chunks, joined.
///
/// The property, for any answer: nothing traps (a time of 1e308 s once
/// did, converting to samples), and every cue lies inside its audio, in
/// order: `0 ≤ start ≤ end ≤ the joined file's length`, each cue starting
/// where the one before it ends or later. Both the raw times
/// (as an older version cached them) and the times the synthesizer keeps
/// (`ChunkShape.withFittingTimes`) are timed.
extension FuzzHarness {
    /// The narration of each chunk: three sentences, one non-ASCII.
    static let timingText = "Hi. Où? Ok."
    static let timingRate = 24_000

    /// Google's answer to a request marked `s0`…`s2`, decoded whole.
    static func timingGoogle(_ bytes: [UInt8]) {
        var decoder = GoogleAnswerDecoder(marks: 3)
        let samples = decodeForTiming(bytes, &decoder)
        timeCaptions("timing-google", bytes, samples: samples, times: decoder.sentenceTimes)
    }

    /// ElevenLabs' `with-timestamps` answer for the text sent, decoded whole.
    static func timingElevenLabs(_ bytes: [UInt8]) {
        let chunk = Chunk(text: timingText, isSSML: false)
        let boundaries = CaptionScript(narration: Narration(text: timingText), chunks: [chunk]).boundaries[0]
        let sent = chunk.plainText
        let starts = SentenceTimings.elevenLabsStarts(chunk, boundaries: boundaries, sent: sent)
        var decoder = ElevenLabsTimestampsDecoder(rate: timingRate, sent: sent, starts: starts)
        let samples = decodeForTiming(bytes, &decoder)
        timeCaptions("timing-elevenlabs", bytes, samples: samples, times: decoder.sentenceTimes)
    }

    /// Polly's sentence speech marks (the second request's answer); the
    /// audio's length comes from the input's hash, 0 to 4 s.
    static func timingPolly(_ bytes: [UInt8]) {
        let chunk = Chunk(text: timingText, isSSML: false)
        let boundaries = CaptionScript(narration: Narration(text: timingText), chunks: [chunk]).boundaries[0]
        guard let (starts, end) = SentenceTimings.sentenceStarts(chunk, boundaries: boundaries) else {
            violated("timing-polly", "the narration's own sentence starts do not fit it")
        }
        let times = try? SentenceTimings.pollyTimes(bytes, targets: starts, end: end)
        let samples = Int(InputDraws.hash(bytes) % UInt64(4 * timingRate + 1))
        timeCaptions(
            "timing-polly", bytes, samples: (0..<samples).map { Int16(truncatingIfNeeded: ($0 % 50) * 400 - 10_000) }, times: times)
    }

    /// The samples of a body the decoder takes whole; none when it refuses it.
    private static func decodeForTiming<Decoder: AnswerDecoder>(_ bytes: [UInt8], _ decoder: inout Decoder) -> [Int16] {
        var samples: [Int16] = []
        do {
            try bytes.withUnsafeBytes { block in try decoder.feed(block) { decoded, _ in samples.append(contentsOf: decoded) } }
            try decoder.finish()
        } catch {
            return []
        }
        return samples
    }

    /// Every chunk of the narration spoken as `samples` with `times`,
    /// through the caption timer, raw and as the synthesizer keeps them.
    private static func timeCaptions(_ target: String, _ bytes: [UInt8], samples: [Int16], times: [Double]?) {
        let count = 1 + Int(InputDraws.hash(bytes) % 3)
        let chunks = Array(repeating: Chunk(text: timingText, isSSML: false), count: count)
        let narration = Narration(text: chunks.map(\.text).joined(separator: " "))
        let script = CaptionScript(narration: narration, chunks: chunks)
        var shape = ShapeMeter.shape(of: samples)
        shape.sentenceTimes = times
        let joiner = PCMJoiner()
        for shape in [shape, shape.withFittingTimes(rate: timingRate)] {
            let shapes = Array(repeating: shape, count: count)
            let (cues, _) = CaptionTimer(joiner: joiner, rate: timingRate).cues(script, shapes: shapes)
            let join = JoinStream(joiner: joiner, chunks: count, rate: timingRate)
            for (index, shape) in shapes.enumerated() { join.record(index, shape) }
            var total = 0
            while let (_, piece) = join.next() { total += piece.range.count + piece.silenceAfter }
            let length = Double(total) / Double(timingRate)
            guard cues.count == script.sentences.count else {
                violated(target, "\(cues.count) cues for \(script.sentences.count) sentences")
            }
            var previousEnd = 0.0
            for cue in cues {
                // (A file too short for a millisecond a cue squeezes the last ones to its end, empty.)
                guard cue.start.isFinite, cue.end.isFinite, cue.start >= 0, cue.start <= cue.end, cue.start >= previousEnd - 1e-9,
                    cue.end <= length + 1e-9
                else {
                    violated(target, "cue \(cue.start)–\(cue.end) outside the audio (\(length) s) or out of order; times \(times ?? [])")
                }
                previousEnd = cue.end
            }
        }
    }
}

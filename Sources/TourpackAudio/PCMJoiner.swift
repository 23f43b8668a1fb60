import Foundation

/// What the join needs to know of a chunk before it reads a sample: how
/// long it is, and where its speech starts and ends.
///
/// It is measured once, while the chunk's samples stream past on their way
/// into the synthesis cache (`ShapeMeter`), and kept in the cache's index,
/// so a join can plan every seam without decoding anything twice.
package struct ChunkShape: Sendable, Hashable {
    /// The chunk's length in samples.
    package var samples: Int
    /// From the first to the last sample above `PCMJoiner.silenceThreshold`;
    /// nil when the chunk holds only silence.
    package var audible: Range<Int>?
    /// Its gating blocks and true peak, from which a file's loudness is
    /// known before its first sample is encoded; nil when not measured.
    package var loudness: LoudnessProfile?
    /// When each sentence that starts in the chunk is spoken, in seconds
    /// from the chunk's first sample, as the voice reported it: one per
    /// place `SynthesisRequest.sentenceBoundaries` names, after the chunk's
    /// own start (so `boundaries.count + 1` of them). Nil when the voice
    /// reported none (captions then estimate them).
    package var sentenceTimes: [Double]?

    package init(samples: Int, audible: Range<Int>?, loudness: LoudnessProfile? = nil, sentenceTimes: [Double]? = nil) {
        self.samples = samples
        self.audible = audible
        self.loudness = loudness
        self.sentenceTimes = sentenceTimes
    }
}

/// Measures a `ChunkShape` block by block (without its loudness: see `ChunkMeter`).
package struct ShapeMeter {
    private(set) var count = 0
    private var first: Int?
    private var last: Int?
    private let threshold = PCMJoiner.silenceThreshold

    mutating func add(_ samples: UnsafeBufferPointer<Int16>) {
        for (offset, sample) in samples.enumerated() where abs(Int(sample)) > threshold {
            if first == nil { first = count + offset }
            last = count + offset
        }
        count += samples.count
    }

    var shape: ChunkShape {
        ChunkShape(samples: count, audible: first.flatMap { first in last.map { first..<($0 + 1) } })
    }

    package static func shape(of samples: [Int16]) -> ChunkShape {
        var meter = ShapeMeter()
        samples.withUnsafeBufferPointer { meter.add($0) }
        return meter.shape
    }
}

/// Joins a phase's TTS chunks into one PCM signal, so the phase is encoded
/// once (the contract's "Audio": never concatenate encoded files).
///
/// Each chunk arrives with its own lead-in and tail of near-silence. Left as
/// they are, the gap between chunks would vary with the voice and the text,
/// and a chunk that ends abruptly would click. So at every interior edge the
/// joiner finds where speech starts or ends (the first or last sample above
/// `silenceThreshold`), keeps up to `keepQuietMilliseconds` of the quiet
/// tail that sits there (breath and decay sound more natural than digital
/// zero), and fills the rest with digital silence so that the gap between the
/// last audible sample of one chunk and the first of the next is exactly
/// `pauseMilliseconds`. Short fades at each seam bring the signal to zero and
/// back, so no seam has a step in it. The first chunk's start and the last
/// chunk's end are kept, with only a short fade against clicks. Chunks that
/// hold only silence are dropped when any chunk holds speech; when none
/// does, every chunk is kept, a pause apart.
///
/// The join is planned from the chunks' shapes alone (`piece(at:of:)`): each
/// chunk contributes one `JoinPiece`, a range of its samples with fades and
/// the silence after it. So it runs as a stream (`JoinStream`): a chunk is
/// rendered as soon as it and the next chunk with speech are known, block
/// by block, and a narration is never held whole.
package struct PCMJoiner: Sendable {
    /// Why a join failed.
    package enum JoinError: Error, Sendable, Equatable, CustomStringConvertible {
        /// No chunks, or only chunks without samples: there is nothing to encode.
        case empty
        /// A chunk has a sample rate of zero or less.
        case invalidSampleRate(chunk: Int, rate: Int)
        /// A chunk ended before the samples its shape promised.
        case shortChunk(expected: Int, got: Int)

        package var description: String {
            switch self {
            case .empty: return "no audio to join: every chunk is empty"
            case .invalidSampleRate(let chunk, let rate): return "chunk \(chunk) has an invalid sample rate \(rate)"
            case .shortChunk(let expected, let got): return "a chunk ended after \(got) samples, its shape says \(expected)"
            }
        }
    }

    /// The pause between chunks, from the last audible sample of one chunk to
    /// the first audible sample of the next (`AudioSettings.pauseMilliseconds`).
    package var pauseMilliseconds: Int
    /// The length of the fade-out before and the fade-in after each seam.
    package var fadeMilliseconds: Int
    /// At most this much of the quiet tail or lead-in at a seam is kept; the
    /// rest of the pause is digital silence.
    package var keepQuietMilliseconds: Int

    /// A sample at or below this level counts as silence when edges are
    /// trimmed: -50 dBFS (peak), below TTS noise floors that matter and above
    /// the dither and reverb tails of every voice we have heard. It is fixed,
    /// because the synthesis cache keeps each chunk's shape measured with it.
    package static let silenceThresholdDBFS = -50.0
    /// The linear sample level of `silenceThresholdDBFS`.
    package static let silenceThreshold = Int((32768 * pow(10, silenceThresholdDBFS / 20)).rounded())

    package var silenceThreshold: Int { Self.silenceThreshold }

    /// - Parameters:
    ///   - pauseMilliseconds: 350 ms by default, the contract's "one natural pause".
    ///   - fadeMilliseconds: 8 ms by default: long enough to remove a click, short
    ///     enough not to soften a consonant.
    ///   - keepQuietMilliseconds: 40 ms by default.
    package init(pauseMilliseconds: Int = 350, fadeMilliseconds: Int = 8, keepQuietMilliseconds: Int = 40) {
        self.pauseMilliseconds = max(0, pauseMilliseconds)
        self.fadeMilliseconds = max(0, fadeMilliseconds)
        self.keepQuietMilliseconds = max(0, keepQuietMilliseconds)
    }

    /// What the join does with one chunk, once enough is known.
    package enum Step: Sendable, Hashable {
        /// The chunk's piece depends on a chunk whose shape is not known yet.
        case wait
        /// The chunk contributes nothing: it is empty, or silent beside speech.
        case skip
        case piece(JoinPiece)
    }

    /// The step for chunk `index` of `shapes` (nil: not known yet). It needs
    /// the shapes of the chunks before it and of those after it up to the
    /// next one with speech (or all of them, when none after it has speech).
    package func step(at index: Int, of shapes: [ChunkShape?], rate: Int) -> Step {
        guard let shape = shapes[index] else { return .wait }
        guard shape.samples > 0 else { return .skip }
        var speechBefore = false
        for earlier in shapes[..<index] {
            guard let earlier else { return .wait }
            if earlier.audible != nil { speechBefore = true }
        }
        var nextSpeech: Range<Int>?
        var laterSamples = false
        var restKnown = true
        for later in shapes[(index + 1)...] {
            guard let later else { restKnown = false; break }
            if later.samples > 0 { laterSamples = true }
            if let audible = later.audible { nextSpeech = audible; break }
        }
        let pause = samples(milliseconds: pauseMilliseconds, rate: rate)
        let fade = samples(milliseconds: fadeMilliseconds, rate: rate)
        guard let span = shape.audible else {
            // Silence beside speech is dropped; only silence: kept, a pause apart.
            if speechBefore || nextSpeech != nil { return .skip }
            guard restKnown else { return .wait }
            return .piece(JoinPiece(range: 0..<shape.samples, fade: min(fade, shape.samples / 2), silenceAfter: laterSamples ? pause : 0))
        }
        if nextSpeech == nil && !restKnown { return .wait }
        let keepQuiet = samples(milliseconds: keepQuietMilliseconds, rate: rate)
        // The quiet margins kept at this chunk's interior edges: each side of
        // a seam may use up to half the pause.
        let lead = speechBefore ? min(span.lowerBound, keepQuiet, pause / 2) : span.lowerBound
        let tail = nextSpeech == nil ? shape.samples - span.upperBound : min(shape.samples - span.upperBound, keepQuiet, pause / 2)
        let range = (span.lowerBound - lead)..<(span.upperBound + tail)
        var silence = 0
        if let next = nextSpeech {
            silence = max(0, pause - tail - min(next.lowerBound, keepQuiet, pause / 2))
        }
        return .piece(JoinPiece(range: range, fade: min(fade, range.count / 2), silenceAfter: silence))
    }

    private func samples(milliseconds: Int, rate: Int) -> Int {
        Int((Double(milliseconds) * Double(rate) / 1000).rounded())
    }
}

/// One chunk's part of a join: which of its samples are kept, how many at
/// each end are faded, and how much digital silence follows.
package struct JoinPiece: Sendable, Hashable {
    /// The kept samples, as indices into the chunk.
    package var range: Range<Int>
    /// A raised-cosine fade-in over the first `fade` kept samples and a
    /// fade-out over the last `fade`; at most half the piece, so they never overlap.
    package var fade: Int
    package var silenceAfter: Int
}

/// The join of one phase as its chunks become known, in order: record each
/// chunk's shape as it arrives (in any order); `next` hands out the chunks
/// that can be rendered now, in order, with their pieces.
///
/// Not thread-safe: one owner feeds it.
package final class JoinStream {
    package let joiner: PCMJoiner
    package let rate: Int
    private var shapes: [ChunkShape?]
    private var position = 0

    package init(joiner: PCMJoiner, chunks: Int, rate: Int) {
        self.joiner = joiner
        self.rate = rate
        shapes = Array(repeating: nil, count: chunks)
    }

    package func record(_ index: Int, _ shape: ChunkShape) { shapes[index] = shape }

    /// Every chunk has been handed out or skipped.
    package var isComplete: Bool { position == shapes.count }

    /// The next chunk to render and its piece, skipping chunks that add
    /// nothing; nil when the next chunk must wait (or all are done).
    package func next() -> (index: Int, piece: JoinPiece)? {
        while position < shapes.count {
            switch joiner.step(at: position, of: shapes, rate: rate) {
            case .wait:
                return nil
            case .skip:
                position += 1
            case .piece(let piece):
                position += 1
                return (position - 1, piece)
            }
        }
        return nil
    }
}

/// Renders one `JoinPiece` while its chunk's samples stream past: drops
/// what lies outside the range, fades its ends, then adds the silence.
/// Emits bounded blocks; holds one block at most.
package struct PieceRenderer {
    package let piece: JoinPiece
    /// The chunk's samples seen so far.
    private var position = 0
    private var block: [Int16] = []
    static let silenceBlock = [Int16](repeating: 0, count: 4096)

    package init(_ piece: JoinPiece) { self.piece = piece }

    /// Feeds the chunk's next samples; `emit` gets the kept ones, faded.
    package mutating func feed(_ samples: UnsafeBufferPointer<Int16>, emit: (UnsafeBufferPointer<Int16>) throws -> Void) rethrows {
        let start = position
        position += samples.count
        let lower = max(start, piece.range.lowerBound)
        let upper = min(position, piece.range.upperBound)
        guard lower < upper else { return }
        block.removeAll(keepingCapacity: true)
        block.append(contentsOf: UnsafeBufferPointer(rebasing: samples[(lower - start)..<(upper - start)]))
        let fade = piece.fade
        if fade > 0 {
            let fadeInEnd = piece.range.lowerBound + fade
            let fadeOutStart = piece.range.upperBound - fade
            for at in lower..<max(lower, min(upper, fadeInEnd)) {
                let step = at - piece.range.lowerBound
                block[at - lower] = Self.scaled(block[at - lower], by: Self.ramp(Double(step + 1) / Double(fade + 1)))
            }
            for at in min(upper, max(lower, fadeOutStart))..<upper {
                let step = at - fadeOutStart
                block[at - lower] = Self.scaled(block[at - lower], by: Self.ramp(Double(fade - step) / Double(fade + 1)))
            }
        }
        try block.withUnsafeBufferPointer { try emit($0) }
    }

    /// After the chunk's last sample: emits the silence that follows the piece.
    /// Throws when the chunk was shorter than its piece (its shape lied).
    package mutating func finish(emit: (UnsafeBufferPointer<Int16>) throws -> Void) throws {
        guard position >= piece.range.upperBound else {
            throw PCMJoiner.JoinError.shortChunk(expected: piece.range.upperBound, got: position)
        }
        var left = piece.silenceAfter
        while left > 0 {
            let count = min(left, Self.silenceBlock.count)
            try Self.silenceBlock.withUnsafeBufferPointer { try emit(UnsafeBufferPointer(rebasing: $0[0..<count])) }
            left -= count
        }
    }

    private static func ramp(_ position: Double) -> Double { 0.5 - 0.5 * cos(Double.pi * position) }

    private static func scaled(_ sample: Int16, by gain: Double) -> Int16 {
        Int16((Double(sample) * gain).rounded())
    }
}

package import TourpackAudio
package import TourpackCore

/// Times a narration's captions in the file as shipped, from its chunks'
/// shapes alone: the join is planned from shapes (`JoinStream`), so where
/// each chunk's kept samples land in the file (after trims, fades and the
/// pauses between chunks) is known exactly without reading a sample. The
/// loudness leveller delays nothing (its look-ahead is flushed inside it),
/// and the encoders' own delays are undone by every decoder (the MP4 edit
/// list, the MP3 LAME header, Opus' pre-skip).
///
/// Inside a chunk, a sentence starts:
/// - at the chunk's first audible sample, when it is the chunk's first;
/// - at the time the voice reported for it (`ChunkShape.sentenceTimes`),
///   when the chunk's times obey `ChunkShape.timesFit(rate:)`;
/// - otherwise at an estimate: its share of the chunk's spoken characters
///   laid over the chunk's measured speech, from its first audible sample
///   to its last.
///
/// Each cue lasts until the next sentence starts; the last until the last
/// audible sample. Cues are kept at least a millisecond long and in order.
package struct CaptionTimer: Sendable {
    package var joiner: PCMJoiner
    package var rate: Int

    package init(joiner: PCMJoiner, rate: Int) {
        self.joiner = joiner
        self.rate = rate
    }

    /// The cues of `script` over chunks of `shapes`, and whether every
    /// sentence start inside a chunk came from the voice.
    package func cues(_ script: CaptionScript, shapes: [ChunkShape]) -> (cues: [CaptionCue], timing: CaptionTiming) {
        let join = JoinStream(joiner: joiner, chunks: shapes.count, rate: rate)
        for (index, shape) in shapes.enumerated() { join.record(index, shape) }
        // Where each rendered chunk's piece starts in the file.
        var placed: [Int: (start: Int, piece: JoinPiece)] = [:]
        var cursor = 0
        while let (index, piece) = join.next() {
            placed[index] = (cursor, piece)
            cursor += piece.range.count + piece.silenceAfter
        }
        let total = cursor
        var timing = CaptionTiming.provider
        var starts: [Int] = []
        for sentence in script.sentences {
            guard sentence.chunk < shapes.count else {
                timing = .estimated
                starts.append(total)
                continue
            }
            let shape = shapes[sentence.chunk]
            let span = shape.audible ?? 0..<shape.samples
            let position: Int
            let wanted = script.boundaries.indices.contains(sentence.chunk) ? script.boundaries[sentence.chunk].count + 1 : -1
            if let times = shape.sentenceTimes, times.count == wanted, shape.timesFit(rate: rate), let mark = sentence.mark,
                let at = Int(checked: times[mark] * Double(rate))
            {
                position = mark == 0 ? span.lowerBound : min(at, shape.samples)
            } else {
                timing = .estimated
                let share = min(max(sentence.fraction.isFinite ? sentence.fraction : 0, 0), 1)
                position = span.lowerBound + Int(clamping: Double(span.count) * share, to: 0...span.count)
            }
            starts.append(fileOffset(of: position, chunk: sentence.chunk, placed: placed, chunks: shapes.count, total: total))
        }
        // The end of speech: the last rendered chunk's last audible sample.
        var speechEnd = total
        if let last = placed.keys.max(), let (start, piece) = placed[last] {
            let audibleEnd = shapes[last].audible?.upperBound ?? piece.range.upperBound
            speechEnd = start + min(max(audibleEnd - piece.range.lowerBound, 0), piece.range.count)
        }
        let millisecond = max(1, rate / 1000)
        var cues: [CaptionCue] = []
        var previous = -millisecond
        // Each start at least a millisecond after the one before, then each
        // early enough to leave a millisecond to every later cue before the
        // end: so cues never overlap, even where estimates crowd the end of
        // a short file (in a file too short for a millisecond each, the last
        // ones are empty, at its end).
        for index in starts.indices {
            starts[index] = max(starts[index], previous + millisecond)
            previous = starts[index]
        }
        var latest = total - millisecond
        for index in starts.indices.reversed() {
            starts[index] = max(0, min(starts[index], latest))
            latest = starts[index] - millisecond
        }
        for (index, start) in starts.enumerated() {
            let end = index + 1 < starts.count ? starts[index + 1] : min(max(speechEnd, start + millisecond), total)
            cues.append(CaptionCue(start: seconds(start), end: seconds(max(end, start)), text: script.sentences[index].text))
        }
        return (cues, timing)
    }

    /// Where a sample of chunk `chunk` lands in the file; a chunk the join
    /// dropped (only silence) maps to where the next rendered one starts.
    private func fileOffset(of position: Int, chunk: Int, placed: [Int: (start: Int, piece: JoinPiece)], chunks: Int, total: Int) -> Int {
        if let (start, piece) = placed[chunk] {
            return start + min(max(position - piece.range.lowerBound, 0), piece.range.count)
        }
        for later in (chunk + 1)..<max(chunk + 1, chunks) {
            if let (start, _) = placed[later] { return start }
        }
        return total
    }

    private func seconds(_ samples: Int) -> Double { Double(samples) / Double(rate) }
}

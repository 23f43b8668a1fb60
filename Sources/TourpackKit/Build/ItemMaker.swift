import Foundation
import NIOPosix

/// Makes one item: every format whose file the output cache can vouch for is
/// kept as it is; for the others, the chunks are synthesized concurrently
/// (through the synthesis cache and the ledger), joined as PCM the moment
/// the last one arrives, and encoded once per missing format into staged temps.
struct ItemMaker: Sendable {
    let builder: Builder
    let layout: Layout
    let staging: StagingArea
    let pool: NIOThreadPool
    let tour: Tour
    let synthesizer: any SpeechSynthesizer
    let outputs: OutputCache

    /// Never throws: a failure is an outcome, named by tour, POI and phase.
    func make(_ item: PlanItem, tourIndex: Int) async -> ItemOutcome {
        let config = builder.config
        let label = item.label(tourName: tour.name)
        let metadata = item.metadata(tour: tour)
        let chunkKeys = item.chunks.map { SynthesisKey(chunk: $0, voice: config.voice, sampleRateHz: config.tts.sampleRateHz) }
        let wanted = Dictionary(uniqueKeysWithValues: config.formats.map { format in
            (format, (
                final: layout.audioFile(tourID: tour.id, poiID: item.poiID, phase: item.phase, format: format).url,
                key: OutputKey(
                    chunks: chunkKeys, format: format, encoder: builder.encoder.fingerprint,
                    pauseMilliseconds: config.audio.pauseMilliseconds, metadata: metadata)))
        })
        var temps: [AudioFormat: URL] = [:]
        do {
            let outputs = self.outputs
            let reused = try await pool.runIfActive {
                var found: [AudioFormat: EncodedAudio] = [:]
                for (format, target) in wanted {
                    found[format] = try outputs.reusable(target.final, key: target.key, check: .sizeAndHash)
                }
                return found
            }
            var encoded = reused
            var duration = reused.values.first?.durationSeconds ?? 0
            let missing = config.formats.filter { reused[$0] == nil }
            if !missing.isEmpty {
                let pieces = try await synthesize(item, label: label)
                for format in missing { temps[format] = try staging.temporaryURL(for: wanted[format]!.final) }
                let (joiner, encoder, targets) = (builder.joiner, builder.encoder, temps)
                let (made, seconds) = try await pool.runIfActive {
                    let pcm = try joiner.join(pieces)
                    return (try encoder.encode(pcm, into: targets, metadata: metadata), pcm.durationSeconds)
                }
                encoded.merge(made) { _, new in new }
                duration = seconds
            }
            let files = config.formats.compactMap { format -> StagedFile? in
                guard let target = wanted[format], let audio = encoded[format] else { return nil }
                return StagedFile(
                    temp: temps[format], final: target.final,
                    audio: PackageAudio(poiID: item.poiID, phase: item.phase, encoded: audio, characters: item.characters),
                    key: target.key)
            }
            return .done(tourIndex: tourIndex, item: item, files: files, durationSeconds: duration)
        } catch {
            staging.discard(temps.values)
            if Task.isCancelled || error is CancellationError || (error as? TourpackError) == .cancelled {
                return .cancelled(tourIndex: tourIndex)
            }
            return .failed(tourIndex: tourIndex, item: item, error: Self.classify(error, label: label))
        }
    }

    /// Every chunk of the item, in order; requests run concurrently, up to
    /// the synthesizer's own in-flight limit. One chunk failing does not
    /// cancel the others: a request in flight may already be billed, so it is
    /// let land (and kept in the cache); then the first failure is thrown.
    private func synthesize(_ item: PlanItem, label: String) async throws -> [PCMAudio] {
        let (synthesizer, voice, rate) = (synthesizer, builder.config.voice, builder.config.tts.sampleRateHz)
        let outcomes = await withTaskGroup(of: ChunkOutcome.self, returning: [ChunkOutcome].self) { group in
            for (index, chunk) in item.chunks.enumerated() {
                group.addTask {
                    let request = SynthesisRequest(chunk: chunk, voice: voice, sampleRateHz: rate, itemLabel: label)
                    do { return ChunkOutcome(index: index, result: .success(try await synthesizer.synthesize(request))) } catch {
                        return ChunkOutcome(index: index, result: .failure(error))
                    }
                }
            }
            var outcomes: [ChunkOutcome] = []
            for await outcome in group { outcomes.append(outcome) }
            return outcomes
        }
        guard outcomes.count == item.chunks.count else { throw TourpackError.cancelled }
        let ordered = outcomes.sorted { $0.index < $1.index }
        // Never join audio out of order. (A tuple-typed child result once came
        // back with garbage indices in release builds; this form does not, and
        // this check keeps it that way.)
        guard ordered.map(\.index) == Array(item.chunks.indices) else {
            throw TourpackError.audioEncodingFailed(
                item: label, message: "internal error: chunk results came back as \(ordered.map(\.index)), not 0..<\(item.chunks.count)")
        }
        return try ordered.map { try $0.result.get() }
    }

    private struct ChunkOutcome: Sendable {
        var index: Int
        var result: Result<PCMAudio, any Error>
    }

    /// Puts a failure into the taxonomy: synthesis, storage and budget errors
    /// are already `TourpackError`s; anything from joining or FFmpeg is an encoding failure.
    static func classify(_ error: any Error, label: String) -> TourpackError {
        if let known = error as? TourpackError { return known }
        return .audioEncodingFailed(item: label, message: "\(error)")
    }
}

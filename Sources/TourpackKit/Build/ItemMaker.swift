import Foundation
import NIOPosix

/// Makes one item: its chunks synthesized concurrently, joined as PCM the
/// moment the last one arrives, and encoded once per format into staged temps.
struct ItemMaker: Sendable {
    let builder: Builder
    let layout: Layout
    let staging: StagingArea
    let pool: NIOThreadPool
    let tour: Tour

    /// Never throws: a failure is an outcome, named by tour, POI and phase.
    func make(_ item: PlanItem, tourIndex: Int) async -> ItemOutcome {
        let label = item.label(tourName: tour.name)
        let finals = Dictionary(uniqueKeysWithValues: builder.config.formats.map { format in
            (format, layout.audioFile(tourID: tour.id, poiID: item.poiID, phase: item.phase, format: format).url)
        })
        var temps: [AudioFormat: URL] = [:]
        do {
            let pieces = try await synthesize(item, label: label)
            for (format, final) in finals { temps[format] = try staging.temporaryURL(for: final) }
            let metadata = AudioMetadata(title: "\(item.poiName) – \(item.phase.fileLabel)", album: tour.name, language: tour.language)
            let (joiner, encoder, targets) = (builder.joiner, builder.encoder, temps)
            let (encoded, duration) = try await pool.runIfActive {
                let pcm = try joiner.join(pieces)
                return (try encoder.encode(pcm, into: targets, metadata: metadata), pcm.durationSeconds)
            }
            let files = builder.config.formats.compactMap { format -> StagedFile? in
                guard let temp = temps[format], let final = finals[format], let audio = encoded[format] else { return nil }
                return StagedFile(
                    temp: temp, final: final,
                    audio: PackageAudio(poiID: item.poiID, phase: item.phase, encoded: audio, characters: item.characters))
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
    /// the synthesizer's own in-flight limit.
    private func synthesize(_ item: PlanItem, label: String) async throws -> [PCMAudio] {
        let (synthesizer, voice, rate) = (builder.synthesizer, builder.config.voice, builder.config.tts.sampleRateHz)
        return try await withThrowingTaskGroup(of: (Int, PCMAudio).self) { group in
            for (index, chunk) in item.chunks.enumerated() {
                group.addTask {
                    let request = SynthesisRequest(chunk: chunk, voice: voice, sampleRateHz: rate, itemLabel: label)
                    return (index, try await synthesizer.synthesize(request))
                }
            }
            var pieces = [PCMAudio?](repeating: nil, count: item.chunks.count)
            for try await (index, pcm) in group { pieces[index] = pcm }
            return pieces.compactMap { $0 }
        }
    }

    /// Puts a failure into the taxonomy: synthesis and storage errors are
    /// already `TourpackError`s; anything from joining or FFmpeg is an encoding failure.
    static func classify(_ error: any Error, label: String) -> TourpackError {
        if let known = error as? TourpackError { return known }
        return .audioEncodingFailed(item: label, message: "\(error)")
    }
}

import Foundation
import NIOPosix
import TourpackAudio
import TourpackCore
import TourpackPlan
import TourpackSpeech
import TourpackState

/// What making one item needs from the build: the settings it reads, the
/// stages it drives, and where its files go. Nothing else of the `Builder`.
struct ItemRecipe: Sendable {
    /// The settings each file's output-cache key is made from (`PlanItem.outputKey`).
    var config: PipelineConfig
    var formats: [AudioFormat]
    /// The rate each format is encoded at (`PipelineConfig.sampleRate(for:)`).
    var sampleRates: [AudioFormat: Int]
    var voice: VoicePreset
    /// The rate asked of the endpoint, which every chunk is kept at.
    var endpointRate: Int
    var joiner: PCMJoiner
    var encoder: any AudioEncoding
    /// nil: files keep the endpoint's levels.
    var loudness: LoudnessTarget?

    init(config: PipelineConfig, joiner: PCMJoiner, encoder: any AudioEncoding) {
        self.config = config
        formats = config.formats
        sampleRates = Dictionary(uniqueKeysWithValues: config.formats.map { ($0, config.sampleRate(for: $0)) })
        voice = config.voice
        endpointRate = config.tts.sampleRateHz
        self.joiner = joiner
        self.encoder = encoder
        loudness = config.loudnessTarget
    }

    /// The output cache's key of one format's file of `item`, made where
    /// `plan` makes it too (`PlanItem.outputKey`).
    func outputKey(_ item: PlanItem, format: AudioFormat, tour: Tour) -> OutputKey {
        item.outputKey(format: format, tour: tour, config: config, encoder: encoder.fingerprint)
    }
}

/// Makes one item: every format whose file the output cache can vouch for is
/// kept as it is; for the others, the chunks are synthesized concurrently
/// (through the synthesis cache and the ledger) and streamed, in order, as
/// each becomes ready, through the join into one encoder per missing format,
/// writing staged temps.
///
/// A chunk that arrives early waits as its FLAC file in the synthesis cache;
/// only one block of samples is in memory at a time, so an item costs the
/// same memory whether it lasts thirty seconds or thirty minutes.
struct ItemMaker: Sendable {
    let recipe: ItemRecipe
    let layout: Layout
    let staging: StagingArea
    let pool: NIOThreadPool
    let tour: Tour
    let synthesizer: CachingSynthesizer
    let outputs: OutputCache

    /// Never throws: a failure is an outcome, named by tour, POI and phase.
    func make(_ item: PlanItem, tourIndex: Int) async -> ItemOutcome {
        let label = item.label(tourName: tour.name)
        let metadata = item.metadata(tour: tour)
        let wanted = Dictionary(
            uniqueKeysWithValues: recipe.formats.map { format in
                (
                    format,
                    (
                        final: layout.audioFileURL(tourID: tour.id, poiID: item.poiID, phase: item.phase, format: format),
                        key: recipe.outputKey(item, format: format, tour: tour)
                    )
                )
            })
        var temps: [AudioFormat: URL] = [:]
        do {
            let outputs = self.outputs
            let spoken = item.spokenCharacters
            let speakingRate = recipe.voice.speakingRate
            let captionKey = item.captionKey(joiner: recipe.joiner)
            let (reused, keptCaptions, captionSignatures) = try await pool.runIfActive {
                () throws -> ([AudioFormat: EncodedAudio], StoredCaptions?, [AudioFormat: String]) in
                var found: [AudioFormat: OutputCache.ReusedFile] = [:]
                for (format, target) in wanted {
                    // A file an older version made too short for its text (an empty answer joined in) is made again.
                    guard let file = try outputs.reusable(target.final, key: target.key, check: .sizeAndHash, captionKey: captionKey),
                        SpeechLength.shortfall(seconds: file.audio.durationSeconds, spokenCharacters: spoken, speakingRate: speakingRate)
                            == nil
                    else { continue }
                    found[format] = file
                }
                let audio = found.mapValues(\.audio)
                // Every file reused: the captions kept with them, when made from the same narration, chunks and join.
                guard found.count == wanted.count, let kept = recipe.formats.lazy.compactMap({ found[$0]?.captions }).first else {
                    return (audio, nil, [:])
                }
                return (audio, kept, found.compactMapValues(\.captionFileSignature))
            }
            var encoded = reused
            var duration = reused.values.first?.durationSeconds ?? 0
            var shapes: [ChunkShape]?
            // Laid out only when captions are made: for the requests' sentence marks, and the cues.
            let script = keptCaptions == nil ? item.captionScript() : nil
            let missing = recipe.formats.filter { reused[$0] == nil }
            if !missing.isEmpty {
                for format in missing { temps[format] = try staging.temporaryURL(for: wanted[format]!.final) }
                let targets = missing.map {
                    EncodeTarget(
                        format: $0, sampleRateHz: recipe.sampleRates[$0]!, bitrateKbps: recipe.config.bitrate(for: $0), url: temps[$0]!)
                }
                let made: (files: [AudioFormat: EncodedAudio], samples: Int, shapes: [ChunkShape])
                do {
                    made = try await stream(item, script: script, label: label, into: targets, metadata: metadata)
                } catch let damaged as DamagedChunk {
                    // A cache file that fails its checks is dropped and spoken again, once.
                    let cache = synthesizer.cache
                    try await pool.runIfActive { try cache.forget(damaged.key) }
                    made = try await stream(item, script: script, label: label, into: targets, metadata: metadata)
                }
                encoded.merge(made.files) { _, new in new }
                duration = Double(made.samples) / Double(recipe.endpointRate)
                shapes = made.shapes
            }
            var captions = keptCaptions
            if captions == nil, let script, let captionKey {
                // Made now: from the shapes of the chunks just joined or, when every file was
                // reused without its captions, from the synthesis cache (no audio is read).
                var known = shapes ?? []
                if shapes == nil { known = try await self.shapes(of: item, script: script, label: label) }
                let timed = CaptionTimer(joiner: recipe.joiner, rate: recipe.endpointRate).cues(script, shapes: known)
                let bytes = WebVTT.encode(timed.cues)
                let facts = PackageCaptions(bytes: bytes, cues: timed.cues.count, timing: timed.timing)
                captions = StoredCaptions(
                    key: captionKey.hex, bytes: bytes, sha256: facts.sha256, cues: facts.cues, timing: facts.timing.rawValue)
            }
            let facts = try captions.map { kept in
                guard let timing = CaptionTiming(rawValue: kept.timing) else {
                    throw TourpackError.internalInvariant("\(label): captions kept with the timing \(kept.timing)")
                }
                return PackageCaptions(sha256: kept.sha256, sizeBytes: Int64(kept.bytes.count), cues: kept.cues, timing: timing)
            }
            let files = recipe.formats.compactMap { format -> StagedFile? in
                guard let target = wanted[format], let audio = encoded[format] else { return nil }
                return StagedFile(
                    temp: temps[format], final: target.final,
                    audio: PackageAudio(poiID: item.poiID, phase: item.phase, encoded: audio, characters: item.characters, captions: facts),
                    key: target.key, captions: captions, captionsAreNew: keptCaptions == nil,
                    captionFileSignature: captionSignatures[format])
            }
            return .done(tourIndex: tourIndex, item: item, files: files, durationSeconds: duration)
        } catch {
            let (staging, made) = (staging, Array(temps.values))
            await pool.runRegardless { staging.discard(made) }
            if Task.isCancelled || error is CancellationError || (error as? TourpackError)?.kind == .cancelled {
                return .cancelled(tourIndex: tourIndex)
            }
            return .failed(tourIndex: tourIndex, item: item, error: Self.classify(error, label: label))
        }
    }

    /// Requests every chunk of the item concurrently (the synthesizer keeps
    /// its own in-flight limit) and, as they land, renders them in order
    /// through the join into the encoders. One chunk failing does not cancel
    /// the others: a request in flight may already be billed, so it is let
    /// land (and kept in the cache); then the first failure is thrown.
    ///
    /// With a loudness target, the file's one gain comes from every chunk's
    /// measurement (kept in the synthesis cache beside its shape), so the
    /// join starts once the last chunk has landed; until then the chunks
    /// wait as their files, as early ones always do. Each file is measured
    /// as written, by decoding it.
    private func stream(
        _ item: PlanItem, script: CaptionScript?, label: String, into targets: [EncodeTarget], metadata: AudioMetadata
    ) async throws -> (files: [AudioFormat: EncodedAudio], samples: Int, shapes: [ChunkShape]) {
        let (synthesizer, recipe, keys, pool) = (synthesizer, recipe, item.keys, pool)
        /// Opens the encoders, behind a leveler with `gainDB` when given one.
        let open = { @Sendable (gainDB: Double?) async throws -> SessionBox in
            try await pool.runIfActive {
                let session = try recipe.encoder.open(targets, inputRate: recipe.endpointRate, metadata: metadata)
                guard let gainDB, let target = recipe.loudness else { return SessionBox(session) }
                let leveler = LoudnessLeveler(gainDB: gainDB, ceilingDBTP: target.limiterCeilingDBTP, rate: recipe.endpointRate)
                return SessionBox(LevelingSession(session, leveler: leveler))
            }
        }
        var box: SessionBox? = recipe.loudness == nil ? try await open(nil) : nil
        let join = JoinStream(joiner: recipe.joiner, chunks: item.chunks.count, rate: recipe.endpointRate)
        var shapes = [ChunkShape?](repeating: nil, count: item.chunks.count)
        let failure: (any Error)? = await withTaskGroup(of: ChunkOutcome.self, returning: (any Error)?.self) { group in
            for (index, chunk) in item.chunks.enumerated() {
                group.addTask {
                    let neighbours = item.chunks
                    let request = SynthesisRequest(
                        chunk: chunk, voice: recipe.voice, sampleRateHz: recipe.endpointRate, itemLabel: label,
                        previousText: index > 0 ? neighbours[index - 1].plainText : nil,
                        nextText: index + 1 < neighbours.count ? neighbours[index + 1].plainText : nil,
                        sentenceBoundaries: script?.boundaries[index], chunkIndex: index, chunkCount: neighbours.count)
                    do { return ChunkOutcome(index: index, result: .success(try await synthesizer.chunk(request, key: keys[index]))) } catch
                    {
                        return ChunkOutcome(index: index, result: .failure(error))
                    }
                }
            }
            var ready: [Int: SpokenChunk] = [:]
            var profiles: [LoudnessProfile] = []
            var failure: (any Error)?
            /// Renders every chunk the join can take now, in order.
            func renderReady(into session: SessionBox) async -> (any Error)? {
                while let (index, piece) = join.next() {
                    guard let chunk = ready.removeValue(forKey: index) else {
                        return TourpackError.internalInvariant("\(label): chunk \(index) was joined before it arrived")
                    }
                    do {
                        let key = keys[index]
                        // A signal stops the read between blocks (the pool thread sees no task to cancel).
                        let stop = StopFlag()
                        try await withTaskCancellationHandler {
                            try await pool.runIfActive {
                                try Self.render(chunk, key: key, piece: piece, rate: recipe.endpointRate, into: session, stop: stop)
                            }
                        } onCancel: {
                            stop.raise()
                        }
                    } catch {
                        return error
                    }
                }
                return nil
            }
            for await outcome in group {
                switch outcome.result {
                case .success(let chunk):
                    ready[outcome.index] = chunk
                    shapes[outcome.index] = chunk.shape
                    join.record(outcome.index, chunk.shape)
                    if let loudness = chunk.shape.loudness { profiles.append(loudness) }
                case .failure(let error):
                    failure = failure ?? error
                }
                guard failure == nil, let box else { continue }
                failure = await renderReady(into: box)
            }
            if failure == nil, box == nil, let target = recipe.loudness {
                do {
                    let opened = try await open(target.gainDB(for: profiles))
                    box = opened
                    failure = await renderReady(into: opened)
                } catch {
                    failure = error
                }
            }
            return failure
        }
        let discard = { @Sendable (box: SessionBox?) async in
            guard let box else { return }
            await pool.runRegardless { box.session.discard() }
        }
        if let failure {
            await discard(box)
            throw failure
        }
        guard let session = box else { throw TourpackError.internalInvariant("\(label): no encode session was opened") }
        if Task.isCancelled {
            await discard(session)
            throw TourpackError.cancelled
        }
        guard join.isComplete else {
            await discard(session)
            throw TourpackError.internalInvariant("\(label): the join stopped before its last chunk")
        }
        let known = shapes.compactMap { $0 }
        return try await pool.runIfActive {
            do {
                var files = try session.session.finish()
                let report = (session.session as? LevelingSession)?.leveler.report ?? LevelingReport(gainDB: 0, limiterReductionDB: 0)
                for (format, _) in files {
                    guard let url = targets.first(where: { $0.format == format })?.url else { continue }
                    files[format]?.loudness = try Self.loudness(of: url, leveling: report)
                }
                return (files, session.session.samplesWritten, known)
            } catch {
                session.session.discard()
                throw error
            }
        }
        // (A cancelled task's finish never runs: the caller discards the temps.)
    }

    /// The shapes of an item's chunks, for captions when every file was
    /// reused: from the synthesis cache, which reads no audio for them;
    /// a chunk no longer there is fetched as a build would.
    private func shapes(of item: PlanItem, script: CaptionScript, label: String) async throws -> [ChunkShape] {
        var shapes: [ChunkShape] = []
        for (index, (chunk, key)) in zip(item.chunks, item.keys).enumerated() {
            let request = SynthesisRequest(
                chunk: chunk, voice: recipe.voice, sampleRateHz: recipe.endpointRate, itemLabel: label,
                sentenceBoundaries: script.boundaries[index], chunkIndex: index, chunkCount: item.chunks.count)
            shapes.append(try await synthesizer.shape(request, key: key))
        }
        return shapes
    }

    /// A written file's loudness, by decoding it: what package.json
    /// promises is the file as shipped, after the encoder. Blocking.
    static func loudness(of url: URL, leveling: LevelingReport) throws -> AudioLoudness {
        let inspection = try AudioFileInspector().inspect(url)
        return AudioLoudness(
            integratedLUFS: inspection.integratedLUFS, truePeakDBTP: inspection.truePeakDBTP, gainDB: leveling.gainDB,
            limiterReductionDB: leveling.limiterReductionDB)
    }

    /// One chunk's piece of the join, read block by block from its file into
    /// every encoder. Blocking.
    private static func render(
        _ chunk: SpokenChunk, key: SynthesisKey, piece: JoinPiece, rate: Int, into box: SessionBox, stop: StopFlag
    ) throws {
        guard let url = chunk.url, chunk.sampleRate == rate else {
            throw DamagedChunk(key: key, reason: "kept at \(chunk.sampleRate) Hz, not \(rate) Hz")
        }
        var renderer = PieceRenderer(piece)
        let session = box.session
        do {
            try FLACFile.stream(url, expecting: chunk.expectation, isCancelled: { stop.isRaised }) { block in
                try renderer.feed(block) { samples in
                    do { try session.write(samples) } catch { throw EncoderFailure(error: error) }
                }
            }
            try renderer.finish { samples in
                do { try session.write(samples) } catch { throw EncoderFailure(error: error) }
            }
        } catch let failure as EncoderFailure {
            throw failure.error
        } catch let error as TourpackError where error.kind == .cancelled {
            throw error
        } catch {
            throw DamagedChunk(key: key, reason: "\(error is FLACFile.Mismatch ? "" : "\(url.path): ")\(error)")
        }
    }

    private struct ChunkOutcome: Sendable {
        var index: Int
        var result: Result<SpokenChunk, any Error>
    }

    /// An error of the encoders, carried out of the chunk reader's callback.
    private struct EncoderFailure: Error { var error: any Error }

    /// Puts a failure into the taxonomy: synthesis, storage and budget errors
    /// are already `TourpackError`s; anything from joining or FFmpeg is an encoding failure.
    static func classify(_ error: any Error, label: String) -> TourpackError {
        if let known = error as? TourpackError { return known }
        return .audioEncodingFailed(item: label, message: "\(error)")
    }
}

/// Set once, from a cancellation handler; read between blocks on a pool thread.
final class StopFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var raised = false
    var isRaised: Bool { lock.withLock { raised } }
    func raise() { lock.withLock { raised = true } }
}

/// A synthesis-cache file that did not read back as it was kept.
struct DamagedChunk: Error, CustomStringConvertible {
    var key: SynthesisKey
    var reason: String
    var description: String { "a synthesis-cache file is damaged: \(reason)" }
}

/// The encode session (levelling its samples on the way in when files are
/// normalized), handed between the item's task and the thread pool, used by
/// one of them at a time.
private final class SessionBox: @unchecked Sendable {
    let session: any AudioEncodeSession
    init(_ session: any AudioEncodeSession) { self.session = session }
}

import Foundation
package import TourpackCore
import TourpackMaps
import TourpackState

/// Works out a `BuildPlan`: chunks every narration for the configured
/// endpoint and estimates characters, requests, duration, bytes and map tiles.
///
/// Planning spends nothing and touches no network, so `plan` and
/// `build --dry-run` can show the cost before any request.
package struct Planner: Sendable {
    package var config: PipelineConfig
    /// Plans an earlier build kept (`KeptPlans`): a narration found there,
    /// under the key of everything its plan reads (`PlanInputs`), is not cut again.
    package var kept: KeptPlans = .empty
    /// Speech rate assumed for estimates: 14 characters a second at speakingRate 1.0.
    package static let charactersPerSecond = 14.0

    package init(config: PipelineConfig, kept: KeptPlans = .empty) {
        self.config = config
        self.kept = kept
    }

    package var chunker: Chunker {
        Chunker(
            limit: config.requestLimit.reduced(by: config.chunking.headroom),
            sentenceMarkCost: config.audio.captions == .webvtt ? config.tts.api.provider.sentenceMarkCost : 0,
            sentencePerChunk: config.tts.api.sendsSentencePerRequest)
    }

    /// The pipeline's and the voice's lexicons, for this endpoint. They
    /// rewrite each narration before it is chunked, so the limit is measured
    /// on, and the chunk keys cover, the text as sent.
    package var rewriter: LexiconRewriter {
        LexiconRewriter(lexicons: config.lexicons, dialect: config.pronunciationDialect)
    }

    /// Plans every tour, or with `shard` only the tours in it (`--shards`);
    /// a narration that cannot be chunked is reported with its file and path.
    package func plan(_ tours: [Tour], shard: Shard? = nil, quotaUsedBefore: Int = 0) throws(DiagnosticsError) -> BuildPlan {
        let selection = shard?.select(tours)
        let tours = selection?.tours ?? tours
        var diagnostics = DiagnosticCollector()
        var plans: [TourPlan] = []
        for (plan, found) in planEach(tours) {
            diagnostics.append(contentsOf: found)
            if let plan { plans.append(plan) }
        }
        try diagnostics.throwIfErrors()
        // A chunk that appears twice (one sentence in two narrations) is spoken once:
        // the same key, since every chunk is spoken by the one voice at the one rate.
        var seen: Set<SynthesisKey> = []
        for index in plans.indices {
            var repeats = 0
            var billable = 0
            for item in plans[index].items {
                for (chunk, key) in item.keys.enumerated() {
                    if seen.insert(key).inserted {
                        billable += item.counts?.billingUnits[chunk] ?? config.billing.units(for: item.chunks[chunk])
                    } else {
                        repeats += 1
                    }
                }
            }
            plans[index].cacheHits = repeats
            plans[index].billableCharacters = billable
        }
        var plan = BuildPlan(
            tours: plans, voice: config.voice, formats: config.formats,
            monthlyQuota: config.budgets.monthlyQuota(for: config.voice.tier), quotaUsedBefore: quotaUsedBefore,
            shard: selection?.slice
        )
        plan.billingUnit = config.billing.unit
        return plan
    }

    /// Each tour's plan and problems, in tour order. Tours are planned side
    /// by side on every core: each is work for the CPU alone (no file, no
    /// network), and a warm rebuild of a large catalogue waits on it before
    /// anything else can start.
    private func planEach(_ tours: [Tour]) -> [(TourPlan?, [Diagnostic])] {
        sideBySide(tours.count) { index in
            var found = DiagnosticCollector()
            let plan = self.plan(tours[index], diagnostics: &found)
            return (plan, found.diagnostics)
        }
    }

    func plan(_ tour: Tour, diagnostics: inout DiagnosticCollector) -> TourPlan? {
        let chunker = self.chunker
        let rewriter = self.rewriter
        let inputs = PlanInputs(config: config, chunker: chunker)
        let provider = config.tts.api.provider
        var items: [PlanItem] = []
        var failed = false
        for (index, poi) in tour.pois.enumerated() {
            for phase in poi.phases {
                guard let narration = poi.narrations[phase] else { continue }
                do {
                    // The narration as the chunker cuts it, lexicons applied: with
                    // the settings (`inputs`), what its kept plan is keyed by. With
                    // lexicons, the narration as written names that key, so an
                    // unchanged one is not rewritten either.
                    let written = rewriter.isEmpty ? nil : inputs.writtenKey(narration)
                    let alias = written.flatMap { kept.alias($0) }
                    var rewritten = alias == nil ? rewriter.rewrite(narration) : nil
                    let key = alias?.key ?? inputs.key(rewritten!)
                    var origin = PlanOrigin(key: key, alias: written, aliasDay: alias?.day)
                    var item: PlanItem
                    if let found = kept.plan(key) {
                        origin.keptDay = found.day
                        item = PlanItem(
                            tourID: tour.id, poiID: poi.id, poiName: poi.name, poiIndex: index, phase: phase, chunks: found.plan.chunks,
                            keys: found.plan.keys, counts: found.plan.counts, origin: origin)
                    } else {
                        if rewritten == nil { rewritten = rewriter.rewrite(narration) }
                        let chunks = try rewriter.chunks(forRewritten: rewritten!, using: chunker)
                        // Markup the provider cannot honour (Piper's) is refused
                        // before anything is sent, rather than spoken as markup or dropped.
                        let problems = Set(chunks.filter(\.isSSML).flatMap { provider.unsupportedMarkup(inSSML: $0.text) }).sorted()
                        for problem in problems {
                            diagnostics.error(tour.sourceFile, "pois[\(index)].narrations.\(phase.rawValue)", problem)
                        }
                        if !problems.isEmpty {
                            failed = true
                            continue
                        }
                        item = PlanItem(
                            tourID: tour.id, poiID: poi.id, poiName: poi.name, poiIndex: index, phase: phase, chunks: chunks,
                            keys: chunks.map { SynthesisKey(chunk: $0, voice: config.voice, sampleRateHz: config.tts.sampleRateHz) },
                            counts: ChunkCounts(chunks: chunks, billing: config.billing), origin: origin)
                    }
                    if config.audio.captions == .webvtt { item.writtenNarration = narration }
                    items.append(item)
                } catch {
                    diagnostics.error(tour.sourceFile, "pois[\(index)].narrations.\(phase.rawValue)", error.message)
                    failed = true
                }
            }
        }
        guard !failed else { return nil }

        let speechSeconds = items.map { estimatedSeconds(for: $0) }
        let duration = speechSeconds.reduce(0, +)
        var bytes: [AudioFormat: Int] = [:]
        for format in config.formats {
            let kbps = config.bitrate(for: format)
            bytes[format] = speechSeconds.reduce(0) { $0 + Self.estimatedFileBytes(seconds: $1, format: format, bitrateKbps: kbps) }
        }
        let characters = items.reduce(0) { $0 + $1.characters }
        // The map's coverage is worked out here, once: the build reads it from the plan.
        let coverage = tour.mapCoverage(config.maps)
        var plan = TourPlan(
            tour: tour, items: items, cacheHits: 0, estimatedDurationSeconds: duration, estimatedBytes: bytes,
            mapCoverage: coverage, billableCharacters: characters
        )
        if config.maps.source != nil {
            plan.tileSelections = TileSelection.allCases.map { selection in
                var settings = config.maps
                settings.selection = selection
                let count = selection == config.maps.selection ? coverage?.tileCount ?? 0 : tour.mapCoverage(settings)?.tileCount ?? 0
                return TileSelectionPlan(selection: selection, tiles: count, fresh: 0, estimatedBytes: count * settings.tileKB * 1024)
            }
        }
        return plan
    }

    /// Spoken seconds of an item: its text at 14 characters a second, scaled
    /// by speakingRate, plus the pauses between chunks.
    func estimatedSeconds(for item: PlanItem) -> Double {
        let spokenCharacters = item.counts?.heard ?? item.chunks.reduce(0) { $0 + Self.spokenCharacters($1) }
        let speech = Double(spokenCharacters) / (Self.charactersPerSecond * config.voice.speakingRate)
        let pauses = Double(max(0, item.chunks.count - 1)) * Double(config.audio.pauseMilliseconds) / 1000
        return speech + pauses
    }

    /// Characters a listener hears: SSML tags are not spoken.
    static func spokenCharacters(_ chunk: Chunk) -> Int {
        guard chunk.isSSML else { return chunk.characters }
        var count = 0
        var inTag = false
        for scalar in chunk.text.unicodeScalars {
            if scalar == "<" { inTag = true } else if scalar == ">" { inTag = false } else if !inTag { count += 1 }
        }
        return count
    }

    /// Constant bitrate times duration, plus a small allowance for headers and tags.
    package static func estimatedFileBytes(seconds: Double, format: AudioFormat, bitrateKbps: Int? = nil) -> Int {
        Int((seconds * Double(bitrateKbps ?? format.bitrateKbps) * 1000 / 8).rounded(.up)) + 2048
    }
}

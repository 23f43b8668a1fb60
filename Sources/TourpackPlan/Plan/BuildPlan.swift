package import TourpackAudio
package import TourpackCore
import TourpackMaps
package import TourpackState

/// One unit of work: a POI's phase, chunked for the endpoint.
package struct PlanItem: Sendable, Hashable {
    package var tourID: SafeID
    package var poiID: SafeID
    package var poiName: String
    /// The POI's position in the tour's `pois` array, for messages.
    package var poiIndex: Int
    package var phase: Phase
    package var chunks: [Chunk]
    /// Each chunk's key in the synthesis cache, made once by the planner and
    /// carried through the plan, the caches and the build.
    package var keys: [SynthesisKey]
    /// The narration as written, before the lexicons: what the captions
    /// show. Nil with `captions: off`.
    package var writtenNarration: Narration? = nil
    /// What the chunks count, counted once when they were cut, or kept with
    /// them (`KeptPlans`); nil counts them again when asked.
    package var counts: ChunkCounts? = nil
    /// Where this item's chunks came from: cut by this plan, or kept from an
    /// earlier one, and under which key (`KeptPlans`).
    package var origin: PlanOrigin? = nil

    /// The narration's sentences and where they start among the chunks;
    /// nil with `captions: off`. Laid out when asked: a rebuild that reuses
    /// an item's files reuses the captions kept with them, and never needs it.
    package func captionScript() -> CaptionScript? {
        writtenNarration.map { CaptionScript(narration: $0, chunks: chunks) }
    }

    /// What this item's captions follow from besides its audio; nil with `captions: off`.
    package func captionKey(joiner: PCMJoiner) -> CaptionKey? {
        writtenNarration.map { CaptionKey(narration: $0, chunks: keys, joiner: joiner) }
    }

    package var characters: Int { counts?.characters ?? chunks.reduce(0) { $0 + $1.characters } }
    /// The letters and digits a voice speaks of the chunks (`SpeechLength`),
    /// which a reused file must be long enough for.
    package var spokenCharacters: Int {
        counts?.spoken ?? chunks.reduce(0) { $0 + SpeechLength.spokenCharacters($1.text, isSSML: $1.isSSML) }
    }
    /// `tour/poi/phase` by name, for messages a person reads.
    package func label(tourName: String) -> String { "\(tourName) / \(poiName) / \(phase.fileLabel)" }
    /// The tags written into the item's files.
    package func metadata(tour: Tour) -> AudioMetadata {
        AudioMetadata(title: "\(poiName) – \(phase.fileLabel)", album: tour.name, language: tour.language)
    }

    /// The output cache's key of this item's file in `format`, as a build
    /// with `config` and an encoder of fingerprint `encoder` makes it: the
    /// chunks, the encoder, the file's rate, the pause, the loudness target
    /// and the tags. The one place the key is made from the settings: the
    /// build (`ItemRecipe.outputKey`) and `plan`'s estimate
    /// (`BuildState.annotate`) both ask here, so a plan never counts on a
    /// file the build would make again.
    package func outputKey(format: AudioFormat, tour: Tour, config: PipelineConfig, encoder: String) -> OutputKey {
        OutputKey(
            chunks: keys, format: format, encoder: encoder, sampleRateHz: config.sampleRate(for: format),
            bitrateKbps: config.bitrate(for: format),
            pauseMilliseconds: config.audio.pauseMilliseconds, loudness: config.loudnessTarget, metadata: metadata(tour: tour))
    }
}

/// One tour's map under one selection, as `plan` shows it beside the other.
package struct TileSelectionPlan: Sendable, Hashable, Codable {
    package var selection: TileSelection
    package var tiles: Int
    /// Tiles the tile cache holds fresh: no request.
    package var fresh: Int
    /// The tiles of the pack at `maps.tileKB` each.
    package var estimatedBytes: Int
    /// Tiles a build would ask the server for (new, or stale: conditionally).
    package var toFetch: Int { tiles - fresh }
}

/// What building one tour costs and makes, worked out before anything is spent.
package struct TourPlan: Sendable, Hashable {
    package var tour: Tour
    package var items: [PlanItem]
    /// Chunks already in the synthesis cache: free. Zero until the cache exists.
    package var cacheHits: Int
    package var estimatedDurationSeconds: Double
    package var estimatedBytes: [AudioFormat: Int]
    package var mapCoverage: MapCoverage?
    /// With a tile source: the map under `bbox`, then under `corridor`.
    package var tileSelections: [TileSelectionPlan] = []

    package var phases: Int { items.count }
    package var chunks: Int { items.reduce(0) { $0 + $1.chunks.count } }
    package var requests: Int { chunks - cacheHits }
    package var characters: Int { items.reduce(0) { $0 + $1.characters } }
    /// Characters that will be billed: those of chunks not in the cache.
    package var billableCharacters: Int
}

/// The whole plan: per tour, totals, and what it does to the month's quota.
package struct BuildPlan: Sendable, Hashable {
    package var tours: [TourPlan]
    package var voice: VoicePreset
    package var formats: [AudioFormat]
    /// The tier's monthly quota, or nil when unlimited (`local`).
    package var monthlyQuota: Int?
    /// What the quota and the billable figures count: "characters", or ElevenLabs' "credits".
    package var billingUnit = "characters"
    /// Characters already used this month in this tier (from the ledger; 0 without one).
    package var quotaUsedBefore: Int
    /// The shard these tours are, with `--shards`; nil when the plan covers the whole pipeline.
    package var shard: ShardSlice? = nil

    package var pois: Int { tours.reduce(0) { $0 + $1.tour.pois.count } }
    package var phases: Int { tours.reduce(0) { $0 + $1.phases } }
    package var chunks: Int { tours.reduce(0) { $0 + $1.chunks } }
    package var requests: Int { tours.reduce(0) { $0 + $1.requests } }
    package var characters: Int { tours.reduce(0) { $0 + $1.characters } }
    package var billableCharacters: Int { tours.reduce(0) { $0 + $1.billableCharacters } }
    package var cacheHits: Int { tours.reduce(0) { $0 + $1.cacheHits } }
    /// Narrations this plan cut; the others' plans were kept from an earlier
    /// build (`KeptPlans`), unchanged in everything they follow from.
    package var narrationsPlanned: Int {
        tours.reduce(0) { count, tour in tour.items.reduce(count) { $0 + ($1.origin?.isPlanned ?? true ? 1 : 0) } }
    }
    package var estimatedDurationSeconds: Double { tours.reduce(0) { $0 + $1.estimatedDurationSeconds } }
    package var tileCount: Int { tours.reduce(0) { $0 + ($1.mapCoverage?.tileCount ?? 0) } }
    package var mapBytes: Int { tours.reduce(0) { $0 + ($1.mapCoverage?.estimatedBytes ?? 0) } }

    package func estimatedBytes(_ format: AudioFormat) -> Int {
        tours.reduce(0) { $0 + ($1.estimatedBytes[format] ?? 0) }
    }

    /// What is left of the quota after this build; nil when unlimited.
    package var quotaLeftAfter: Int? { monthlyQuota.map { $0 - quotaUsedBefore - billableCharacters } }

    /// The audio this build would put in the AudioCache, estimated, in every format.
    package var estimatedAudioBytes: Int { formats.reduce(0) { $0 + estimatedBytes($1) } }

    /// Why `maps.maxTiles` refuses this plan before any tile is fetched, with
    /// the numbers; nil when every tour's pack fits, or no tile source is set.
    package func tileRefusal(_ maps: MapSettings) -> String? {
        guard maps.source != nil else { return nil }
        let over = tours.compactMap { plan -> String? in
            guard let coverage = plan.mapCoverage, coverage.tileCount > maps.maxTiles else { return nil }
            return "\(plan.tour.name) needs \(coverage.tileCount.groupedText) tiles"
        }
        guard !over.isEmpty else { return nil }
        return "\(over.joined(separator: "; ")) (\(maps.selection.rawValue), zoom \(maps.minZoom)–\(maps.maxZoom), "
            + "\(maps.bufferMiles.compactText) miles), more than maps.maxTiles (\(maps.maxTiles.groupedText)) per package. "
            + "Try selection: corridor, a lower maxZoom or a smaller bufferMiles. Nothing was fetched."
    }

    /// Why a budget refuses this plan before anything is spent, with the
    /// numbers; nil when it fits. The build exits 3 with this message.
    package func budgetRefusal(cacheMaxBytes: Int64) -> String? {
        if let quota = monthlyQuota, let left = quotaLeftAfter, left < 0 {
            return "the \(voice.tier.rawValue) tier's monthly quota is \(quota.groupedText) \(billingUnit); "
                + "\(quotaUsedBefore.groupedText) are used or reserved this month and this build needs \(billableCharacters.groupedText) more "
                + "(\(cacheHits) chunks come from the cache), \((-left).groupedText) over. Nothing was sent."
        }
        let budget = Int(cacheMaxBytes)
        if estimatedAudioBytes > budget {
            return "this build's own audio is estimated at \(PlanReport.bytes(estimatedAudioBytes)) "
                + "(\(formats.map(\.rawValue).joined(separator: ", "))), more than cacheMaxMB (\(PlanReport.bytes(budget))). Nothing was sent."
        }
        return nil
    }

    /// Why the build of this plan would be refused (exit 3), in the order the
    /// build checks: the quota and the cache budget, then `maps.maxTiles`;
    /// nil when it would go ahead. `plan` prints it and `build --dry-run`
    /// exits 3 with it, so neither says yes to a build that will say no.
    package func refusal(_ config: PipelineConfig) -> String? {
        budgetRefusal(cacheMaxBytes: config.budgets.cacheMaxBytes) ?? tileRefusal(config.maps)
    }
}

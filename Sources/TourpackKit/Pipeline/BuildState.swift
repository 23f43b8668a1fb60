package import Foundation
package import TourpackCore
import TourpackMaps
package import TourpackPlan
package import TourpackState

/// A pipeline's state, opened once per command: the backend and the five
/// things kept in it, plus the local tile cache, all on one clock.
///
/// The backend is the local SQLite database (`<state>/state.sqlite`) by
/// default, with no server; when `state.postgres` is set it is that
/// PostgreSQL database, shared by workers on many machines. The map tile
/// cache stays in the local SQLite database either way: tiles are fetched
/// and kept per worker.
package struct BuildState: Sendable {
    package let layout: StateLayout
    /// The local SQLite database: everything by default; the tile cache (and
    /// nothing else in use) when PostgreSQL holds the rest.
    package let database: StateDatabase
    /// Where the ledger, the cache indexes and the build records live.
    package let backend: any StateBackend
    package let synthesis: SynthesisCache
    package let outputs: OutputCache
    package let ledger: QuotaLedger
    package let records: BuildRecords
    package let tiles: TileCache
    package let tilePacks: TilePackRecords
    /// The package.json files found sound, on this machine.
    package let manifests: ManifestSignatures
    /// Who is speaking which chunk, among every process sharing the backend.
    package let claims: ChunkClaims

    /// Opens the state of `config` (creating and migrating what is missing) for `account`.
    package init(config: PipelineConfig, account: QuotaAccount, clock: @escaping @Sendable () -> Date = { Date() }) throws {
        let database = try StateDatabase(folder: config.state)
        let backend: any StateBackend =
            try config.shared.postgres.map { try PostgresState(url: $0, password: config.shared.postgresPassword) }
            ?? database
        self.init(config: config, database: database, backend: backend, account: account, clock: clock)
    }

    private init(
        config: PipelineConfig, database: StateDatabase, backend: any StateBackend, account: QuotaAccount,
        clock: @escaping @Sendable () -> Date
    ) {
        layout = StateLayout(config)
        self.database = database
        self.backend = backend
        var synthesis = SynthesisCache(
            index: backend.synthesisIndex, folder: layout.synthesisFolder, maxAgeDays: config.budgets.audioMaxAgeDays, clock: clock)
        synthesis.measuresLoudness = config.loudnessTarget != nil
        synthesis.indexIsShared = config.shared.postgres != nil
        synthesis.bucketHoldsFiles = config.shared.objects != nil
        self.synthesis = synthesis
        outputs = OutputCache(index: backend.outputIndex, maxAgeDays: config.budgets.audioMaxAgeDays, clock: clock)
        ledger = QuotaLedger(store: backend.ledger, account: account, budgets: config.budgets, clock: clock)
        records = BuildRecords(store: backend.buildRecords, clock: clock)
        tiles = TileCache(database: database, folder: layout.tileFolder, clock: clock)
        tilePacks = TilePackRecords(database: database, clock: clock)
        manifests = ManifestSignatures(database: database)
        claims = ChunkClaims(store: backend.synthesisClaims, clock: clock)
    }

    /// The state when it exists already; nil (and nothing created) when the
    /// pipeline has never been built. For `plan` and `build --dry-run`, which touch nothing.
    ///
    /// With PostgreSQL, the shared state exists once any worker has migrated
    /// the database; a worker that has never built gets its local folder
    /// (the tile cache) then, since the plan must see the shared ledger.
    package static func existing(config: PipelineConfig, account: QuotaAccount, clock: @escaping @Sendable () -> Date = { Date() }) throws
        -> BuildState?
    {
        if let url = config.shared.postgres {
            guard let shared = try PostgresState.existing(url: url, password: config.shared.postgresPassword) else { return nil }
            return BuildState(
                config: config, database: try StateDatabase(folder: config.state), backend: shared, account: account, clock: clock)
        }
        guard FileManager.default.fileExists(atPath: config.state.appendingPathComponent(StateDatabase.fileName).path) else { return nil }
        return try BuildState(config: config, account: account, clock: clock)
    }

    /// `plan` with what the caches and the ledger know: per tour, the chunks
    /// a build would not pay for (every format of their item is reusable from
    /// the AudioCache, or the chunk is in the synthesis cache), the
    /// characters it would pay for, and the month's characters already used
    /// or reserved in the voice's tier. Reads no audio: reusable files are
    /// judged by their recorded size here, by size and SHA-256 in the build.
    package func annotate(_ plan: BuildPlan, config: PipelineConfig, encoder: String) throws -> BuildPlan {
        try annotate(plan, config: config, encoder: encoder, outputs: outputs(preloadingFor: plan, config: config))
    }

    /// The output cache with the rows of every file `plan` makes read at
    /// once (`OutputCache.preloading`), for `annotate` and the build's items.
    func outputs(preloadingFor plan: BuildPlan, config: PipelineConfig) throws -> OutputCache {
        let output = Layout(root: config.output)
        return try outputs.preloading(
            plan.tours.flatMap { tourPlan in
                tourPlan.items.flatMap { item in
                    config.formats.map { output.audioFileURL(tourID: tourPlan.tour.id, poiID: item.poiID, phase: item.phase, format: $0) }
                }
            })
    }

    /// `annotate`, asking `outputs` (preloaded) about the plan's files.
    func annotate(_ plan: BuildPlan, config: PipelineConfig, encoder: String, outputs: OutputCache) throws -> BuildPlan {
        var plan = plan
        let output = Layout(root: config.output)
        let reusable = try plan.tours.map { tourPlan in
            try tourPlan.items.map { item in
                try config.formats.allSatisfy { format in
                    let url = output.audioFileURL(tourID: tourPlan.tour.id, poiID: item.poiID, phase: item.phase, format: format)
                    let key = item.outputKey(format: format, tour: tourPlan.tour, config: config, encoder: encoder)
                    return try outputs.reusable(url, key: key, check: .size) != nil
                }
            }
        }
        // The synthesis cache is asked only about the chunks of items whose
        // files cannot all be kept: a warm rebuild asks about none.
        let fresh = try synthesis.freshKeys(
            among: plan.tours.indices.flatMap { tour in
                plan.tours[tour].items.indices.filter { !reusable[tour][$0] }.flatMap { plan.tours[tour].items[$0].keys }
            })
        // A chunk spoken once serves every narration that holds it.
        var paidFor: Set<SynthesisKey> = []
        for tourIndex in plan.tours.indices {
            var hits = 0
            var billable = 0
            for (itemIndex, item) in plan.tours[tourIndex].items.enumerated() {
                for (index, key) in item.keys.enumerated() {
                    if reusable[tourIndex][itemIndex] || fresh.contains(key) || !paidFor.insert(key).inserted {
                        hits += 1
                    } else {
                        billable += item.counts?.billingUnits[index] ?? config.billing.units(for: item.chunks[index])
                    }
                }
            }
            plan.tours[tourIndex].cacheHits = hits
            plan.tours[tourIndex].billableCharacters = billable
        }
        if let source = config.maps.source, case .url = source.location {
            for tourIndex in plan.tours.indices {
                let tour = plan.tours[tourIndex].tour
                for (index, selectionPlan) in plan.tours[tourIndex].tileSelections.enumerated() {
                    // A selection over maps.maxTiles is refused, never fetched: its tiles are
                    // counted (the plan did that without listing them), not listed and looked up,
                    // which for a continent's box would take minutes and gigabytes before the refusal.
                    guard selectionPlan.tiles <= config.maps.maxTiles else { continue }
                    var settings = config.maps
                    settings.selection = selectionPlan.selection
                    let known = try tiles.entries(source: source.cacheName, tiles: tour.mapTiles(settings))
                    plan.tours[tourIndex].tileSelections[index].fresh =
                        known.values.filter { entry in
                            tiles.isFresh(entry)
                                && (entry.sha256.map { FileManager.default.fileExists(atPath: tiles.blobURL($0).path) } ?? true)
                        }.count
                }
            }
        } else if config.maps.source != nil {
            // A local extract: nothing is fetched.
            for tourIndex in plan.tours.indices {
                for index in plan.tours[tourIndex].tileSelections.indices {
                    plan.tours[tourIndex].tileSelections[index].fresh = plan.tours[tourIndex].tileSelections[index].tiles
                }
            }
        }
        let usage = try ledger.usage(of: config.voice.tier)
        plan.quotaUsedBefore = usage.used + usage.reserved
        return plan
    }
}

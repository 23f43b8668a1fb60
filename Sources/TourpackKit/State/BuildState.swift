public import Foundation

/// A pipeline's state, opened once per command: the database and the four
/// things kept in it, all on one clock.
public struct BuildState: Sendable {
    public let layout: StateLayout
    public let database: StateDatabase
    public let synthesis: SynthesisCache
    public let outputs: OutputCache
    public let ledger: QuotaLedger
    public let records: BuildRecords
    public let tiles: TileCache
    public let tilePacks: TilePackRecords

    /// Opens the state of `config` (creating the database if needed) for `account`.
    public init(config: PipelineConfig, account: QuotaAccount, clock: @escaping @Sendable () -> Date = { Date() }) throws {
        layout = StateLayout(config)
        database = try StateDatabase(folder: config.state)
        synthesis = SynthesisCache(
            database: database, folder: layout.synthesisFolder, maxAgeDays: config.budgets.audioMaxAgeDays, clock: clock)
        outputs = OutputCache(database: database, maxAgeDays: config.budgets.audioMaxAgeDays, clock: clock)
        ledger = QuotaLedger(database: database, account: account, budgets: config.budgets, clock: clock)
        records = BuildRecords(database: database, clock: clock)
        tiles = TileCache(database: database, folder: layout.tileFolder, clock: clock)
        tilePacks = TilePackRecords(database: database, clock: clock)
    }

    /// The state when it exists already; nil (and nothing created) when the
    /// pipeline has never been built. For `plan` and `build --dry-run`, which touch nothing.
    public static func existing(config: PipelineConfig, account: QuotaAccount, clock: @escaping @Sendable () -> Date = { Date() }) throws -> BuildState? {
        guard FileManager.default.fileExists(atPath: config.state.appendingPathComponent(StateDatabase.fileName).path) else { return nil }
        return try BuildState(config: config, account: account, clock: clock)
    }

    /// `plan` with what the caches and the ledger know: per tour, the chunks
    /// a build would not pay for (every format of their item is reusable from
    /// the AudioCache, or the chunk is in the synthesis cache), the
    /// characters it would pay for, and the month's characters already used
    /// or reserved in the voice's tier. Reads no audio: reusable files are
    /// judged by their recorded size here, by size and SHA-256 in the build.
    public func annotate(_ plan: BuildPlan, config: PipelineConfig, encoder: String) throws -> BuildPlan {
        var plan = plan
        let output = Layout(root: config.output)
        let fresh = try synthesis.freshKeys(among: plan.tours.flatMap { $0.items.flatMap(\.keys) })
        // A chunk spoken once serves every narration that holds it.
        var paidFor: Set<SynthesisKey> = []
        for tourIndex in plan.tours.indices {
            var hits = 0
            var billable = 0
            let tour = plan.tours[tourIndex].tour
            for item in plan.tours[tourIndex].items {
                let keys = item.keys
                let reusable = try config.formats.allSatisfy { format in
                    let url = output.audioFile(tourID: tour.id, poiID: item.poiID, phase: item.phase, format: format).url
                    let key = OutputKey(
                        chunks: keys, format: format, encoder: encoder, sampleRateHz: config.sampleRate(for: format),
                        pauseMilliseconds: config.audio.pauseMilliseconds, loudness: config.loudnessTarget, metadata: item.metadata(tour: tour))
                    return try outputs.reusable(url, key: key, check: .size) != nil
                }
                for (chunk, key) in zip(item.chunks, keys) {
                    if reusable || fresh.contains(key) || !paidFor.insert(key).inserted { hits += 1 } else { billable += chunk.characters }
                }
            }
            plan.tours[tourIndex].cacheHits = hits
            plan.tours[tourIndex].billableCharacters = billable
        }
        if let source = config.maps.source, case .url = source.location {
            for tourIndex in plan.tours.indices {
                let tour = plan.tours[tourIndex].tour
                for (index, selectionPlan) in plan.tours[tourIndex].tileSelections.enumerated() {
                    var settings = config.maps
                    settings.selection = selectionPlan.selection
                    let known = try tiles.entries(source: source.cacheName, tiles: tour.mapTiles(settings))
                    plan.tours[tourIndex].tileSelections[index].fresh = known.values.filter { entry in
                        tiles.isFresh(entry) && (entry.sha256.map { FileManager.default.fileExists(atPath: tiles.blobURL($0).path) } ?? true)
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

package import Foundation
import NIOPosix
package import TourpackAudio
package import TourpackCore
package import TourpackHTTP
import TourpackMaps
package import TourpackPlan
package import TourpackSpeech
package import TourpackState

/// Runs a `BuildPlan`, one output root at a time. Its steps are drawn as
/// one map, the flow from plan to summary, in the TourpackKit
/// documentation's "One build, end to end" (`TourpackKit.docc/TourpackKit.md`),
/// the diagram's one home: each name on it is a step here or a type in `Pipeline/`.
///
/// Preflight, before any request: the state's lock (`lockOutputRoot`), then
/// (`preflight`) reconciliation, journal replay, the output tree's safety
/// check, and the budgets against the plan.
///
/// A shard's build (`--shards`, the plan's `shard`) is one worker of a
/// fleet writing into one shared root: it holds the root's lock shared with
/// the other shards and sweeps leftovers and evicts audio only in its own
/// tours' folders (`OutputScope`), so the other workers' packages and
/// publishes in flight are never touched.
///
/// Memory is bounded by the window of items in flight, never by a tour's
/// size or a narration's length: no chunk and no narration is ever held
/// whole; audio moves in blocks from the endpoint's answer (or the synthesis
/// cache) to the encoders. Every format of a phase is fed from one stream, so
/// it is synthesized once.
///
/// Blocking work (the state's flock and SQLite, files, fsync, renames, FFmpeg)
/// runs on the build's thread pool, never on the cooperative pool, which only
/// orchestrates.
///
/// Files wait in the `StagingArea` until every item of their tour has
/// succeeded; then the tour's audio and package.json files are published
/// together. A tour with a failed item publishes nothing, so its previous
/// package stays exactly as it was, and the other tours go on. An
/// unreachable endpoint stops the build (every other item would fail the
/// same way); cancelling the task stops it too, removing every temp, and the
/// summary says so.
package struct Builder: Sendable {
    package struct Options: Sendable {
        /// Wait for another build's lock (true) or fail at once with `alreadyBuilding`.
        package var waitForLock = true
        /// Encode threads; the machine's core count by default.
        package var encodeThreads = ProcessInfo.processInfo.activeProcessorCount
        /// The build's clock: `createdAt`, expiry, the caches' ages and the
        /// ledger's month all come from it, so tests need no sleeps.
        package var now: @Sendable () -> Date = { Date() }
        /// Give a new `createdAt` to packages expiring within this many days
        /// (`--refresh-expiring`); 0 refreshes only expired ones.
        package var refreshExpiringDays = 0
        /// The ledger's account; nil takes the pipeline's endpoint and the key from the environment.
        package var account: QuotaAccount?
        /// Overrides the tile fetches' retries (the TTS policy by default).
        package var tileRetry: RetryPolicy?
        /// Where `state.objects`' key variables are read: the process's environment by default.
        package var environment: [String: String] = ProcessInfo.processInfo.environment

        package init() {}
    }

    package let config: PipelineConfig
    package let synthesizer: any SpeechSynthesizer
    package let encoder: any AudioEncoding
    package let joiner: PCMJoiner
    package let options: Options

    package init(
        config: PipelineConfig, synthesizer: any SpeechSynthesizer, encoder: any AudioEncoding = FFmpegAudioEncoder(),
        options: Options = Options()
    ) {
        self.config = config
        self.synthesizer = synthesizer
        self.encoder = encoder
        self.joiner = PCMJoiner(pauseMilliseconds: config.audio.pauseMilliseconds)
        self.options = options
    }

    var account: QuotaAccount {
        options.account ?? QuotaAccount(settings: config.tts)
    }

    /// Builds every tour of `plan` and reports through `events`, in order.
    ///
    /// The build is recorded in the state database (queued, then running
    /// once the lock is held, then completed, failed or cancelled).
    ///
    /// - Parameters:
    ///   - plan: what to build, annotated with the state (`StateView.annotate`).
    ///   - skippedTours: tours of the pipeline left out (`--tour`), for the summary.
    ///   - events: called with every event, in order, from the build's tasks.
    /// - Returns: the summary, also sent as the last event. Failed tours are
    ///   in the summary, not thrown; only a failure before any work (the
    ///   lock, the state, a budget refusal) throws.
    package func build(_ plan: BuildPlan, skippedTours: Int = 0, events: @escaping @Sendable (BuildEvent) -> Void) async throws
        -> BuildSummary
    {
        // The bucket's keys are read first: a variable that is not set is a
        // configuration error (exit 2, naming the variable), before the
        // state is opened or a build recorded.
        let objects = try config.shared.objects.map { try ObjectStore(settings: $0, environment: options.environment) }
        // Every blocking step (the state's flock and SQLite, journal replay,
        // scans, fsync, renames, FFmpeg) runs on this pool, never on the
        // cooperative pool, which keeps only the orchestration.
        let pool = NIOThreadPool(numberOfThreads: max(1, options.encodeThreads))
        pool.start()
        do {
            let summary = try await runRecorded(plan, skippedTours: skippedTours, objects: objects, pool: pool, events: events)
            try? await pool.shutdownGracefully()
            return summary
        } catch {
            try? await pool.shutdownGracefully()
            throw error
        }
    }

    /// Opens the state and runs the build as one record in it: queued now,
    /// then finished as completed, failed or cancelled, whatever happens.
    private func runRecorded(
        _ plan: BuildPlan, skippedTours: Int, objects: ObjectStore?, pool: NIOThreadPool, events: @escaping @Sendable (BuildEvent) -> Void
    ) async throws -> BuildSummary {
        let (config, account, clock) = (config, account, options.now)
        let (state, record) = try await pool.runIfActive {
            try StateLayout(config).checkApart()
            let state = try BuildState(config: config, account: account, clock: clock)
            state.layout.adoptFormerRootFolder()
            // The narrations this plan cut are kept for the next build. A plan
            // that cannot be kept is cut again then: it costs time, never a file.
            _ = try? KeptPlans.keep(plan, in: state.layout.keptPlansFile, now: clock())
            return (state, try state.records.queue(pipeline: config.sourceFile, output: config.output))
        }
        do {
            let summary = try await run(
                plan, state: state, record: record, objects: objects, pool: pool, skippedTours: skippedTours, events: events)
            let status: BuildRecord.Status =
                summary.exitCode == ExitStatus.cancelled
                ? .cancelled
                : summary.exitCode == ExitStatus.ok ? .completed : .failed
            await pool.runRegardless {
                try? state.records.finish(record, status: status, summary: summary, error: summary.stoppedEarly ?? summary.failures.first)
            }
            return summary
        } catch {
            let status: BuildRecord.Status = (error as? TourpackError)?.kind == .cancelled ? .cancelled : .failed
            let message = (error as? TourpackError)?.description ?? "\(error)"
            await pool.runRegardless { try? state.records.finish(record, status: status, summary: nil, error: message) }
            throw error
        }
    }

    /// The build's steps, in the order of the diagram above.
    private func run(
        _ plan: BuildPlan, state: BuildState, record: Int64, objects: ObjectStore?, pool: NIOThreadPool, skippedTours: Int,
        events: @escaping @Sendable (BuildEvent) -> Void
    ) async throws -> BuildSummary {
        let started = ContinuousClock.now
        // A shard's build owns only its tours' folders in the root, which the
        // other workers of its fleet share with it: it holds the root's lock
        // shared, and sweeps and evicts only inside its scope.
        let scope =
            plan.shard == nil
            ? nil
            : OutputScope(
                tours: plan.tours.map(\.tour.id), voice: config.voice, formats: config.formats, bitrates: config.audio.bitrates)
        let lock = try await lockOutputRoot(state: state, shared: scope != nil, events: events)
        defer { lock.release() }
        let preflight = try await self.preflight(plan, state: state, record: record, scope: scope, pool: pool)
        events(.started(startEvent(plan, preflight)))

        let statsBefore = synthesizer.stats
        // Hits' last uses are written together once the items are made, not one write per chunk.
        var cache = state.synthesis
        cache.deferredTouches = DeferredTouches()
        // The plan's chunk rows in one query, not one per chunk.
        let keys = plan.tours.flatMap { $0.items.flatMap(\.keys) }
        cache = try await pool.runIfActive { [cache] in try cache.preloading(keys) }
        let synthesis = CachingSynthesizer(
            inner: synthesizer, cache: cache, ledger: state.ledger, billing: config.billing, pool: pool, objects: objects,
            claims: state.claims)
        var summary = try await makeItemsAndMaps(
            plan, preflight: preflight, state: state, record: record, synthesis: synthesis, pool: pool, events: events)
        await pool.runRegardless { [cache] in try? cache.flushTouches() }
        if summary.stoppedEarly == nil {
            await evictToBudgets(&summary, layout: preflight.layout, state: state, scope: scope, pool: pool)
        }

        summary.toursSkipped = skippedTours
        summary.shard = plan.shard
        summarizeRequests(&summary, since: statsBefore, counts: synthesis.counters.snapshot, sharedCache: objects != nil)
        summary.wallSeconds = started.duration(to: .now).seconds
        summary.peakMemoryBytes = Self.peakMemoryBytes()
        summary.processSeconds = Self.processSeconds()
        events(.finished(summary))
        return summary
    }

    /// Takes the output root's lock (shared with the other shards of a
    /// fleet), waiting for another build's when `waitForLock` says so.
    private func lockOutputRoot(state: BuildState, shared: Bool, events: @Sendable (BuildEvent) -> Void) async throws -> BuildLock {
        let rootFolder = state.layout.rootFolder
        do {
            return try await BuildLock.acquire(stateFolder: rootFolder, root: config.output, sharingRoot: shared, wait: false)
        } catch let busy as TourpackError where busy.kind == .alreadyBuilding && options.waitForLock {
            events(.waitingForLock(path: busy.context.path ?? rootFolder.path))
            do {
                return try await BuildLock.acquire(stateFolder: rootFolder, root: config.output, sharingRoot: shared, wait: true)
            } catch is CancellationError {
                throw TourpackError.cancelled
            }
        }
    }

    /// What the build finds and checks before its first request.
    private struct Preflight: Sendable {
        var resolved: PipelineConfig
        var layout: Layout
        var staging: StagingArea
        var recovered: Int
        var removed: Int
        var annotated: BuildPlan
        /// The output cache with the plan's rows read at once.
        var outputs: OutputCache
        var index: PackageIndex
        /// Map tiles the packs will hold; 0 without a tile source.
        var tiles: Int
    }

    /// Everything before the first request, under the lock: the build
    /// recorded as running, the ledger and records reconciled, a killed
    /// publish finished, the output tree checked, leftovers swept, and the
    /// budgets held against what the caches do not already have.
    private func preflight(_ plan: BuildPlan, state: BuildState, record: Int64, scope: OutputScope?, pool: NIOThreadPool) async throws
        -> Preflight
    {
        let (config, fingerprint, rootFolder) = (config, encoder.fingerprint, state.layout.rootFolder)
        return try await pool.runIfActive {
            try state.records.start(record)
            try state.records.reconcile()
            try state.ledger.reconcile()

            // The root may be reached through a symlink: resolved once, and every write goes under the real path.
            var resolved = config
            resolved.output = OutputTree.realPath(config.output)
            let layout = Layout(root: resolved.output)
            let staging = try StagingArea(state: rootFolder, output: layout.root)
            // A killed publish is finished as a publish runs: under the tour's lock.
            let recovered = try CommitJournal.replayAll(state: rootFolder, root: layout.root) { tourId, replay in
                try state.backend.publishing(tour: tourId, into: layout.root.path, replay)
            }
            // Before any request and before any folder under the root: no symlink may carry a write out of it.
            try OutputTree.check(layout, plan: plan, formats: config.formats, bitrates: config.audio.bitrates, voice: config.voice)
            let removed = try staging.removeLeftovers(in: layout, scope: scope)

            // Before any request: what the caches already hold, and whether the
            // quota and the cache budget can take the rest.
            // The packages already there are read meanwhile, for the publish.
            let settled = resolved
            let ((outputs, annotated), index) = try sideBySide(
                {
                    let outputs = try state.outputs(preloadingFor: plan, config: settled)
                    return (outputs, try state.annotate(plan, config: settled, encoder: fingerprint, outputs: outputs))
                },
                { PackageIndex.scan(layout) })
            if let refusal = annotated.refusal(config) {
                throw TourpackError.budgetExceeded(refusal)
            }
            return Preflight(
                resolved: resolved, layout: layout, staging: staging, recovered: recovered, removed: removed, annotated: annotated,
                outputs: outputs, index: index, tiles: config.maps.source == nil ? 0 : plan.tileCount)
        }
    }

    /// The `started` event: the plan's size and what preflight found.
    private func startEvent(_ plan: BuildPlan, _ preflight: Preflight) -> BuildStart {
        BuildStart(
            tours: plan.tours.count, items: plan.phases, chunks: plan.chunks, characters: plan.characters,
            formats: config.formats, output: preflight.layout.root.path, recoveredCommits: preflight.recovered,
            removedTemporaries: preflight.removed, cacheHits: preflight.annotated.cacheHits,
            billableCharacters: preflight.annotated.billableCharacters, tiles: preflight.tiles, shard: plan.shard,
            narrationsPlanned: plan.narrationsPlanned)
    }

    /// Makes every item and every tour's map, and publishes each tour once
    /// all of its are in (`BuildRun`); the summary so far, with the maps'
    /// fetches.
    private func makeItemsAndMaps(
        _ plan: BuildPlan, preflight: Preflight, state: BuildState, record: Int64, synthesis: CachingSynthesizer, pool: NIOThreadPool,
        events: @escaping @Sendable (BuildEvent) -> Void
    ) async throws -> BuildSummary {
        let (layout, staging) = (preflight.layout, preflight.staging)
        let tileProgress = TileProgress(total: preflight.tiles)
        let maps = try makeTilePackMaker(state: state, pool: pool, staging: staging, layout: layout, progress: tileProgress)
        // Claims held by this process stay fresh while its items are made.
        let heartbeat = ClaimHeartbeat(state.claims)
        heartbeat.start()
        defer { heartbeat.stop() }
        var run = BuildRun(
            builder: self, layout: layout, staging: staging, pool: pool, events: events, state: state, record: record,
            synthesizer: synthesis,
            publisher: TourPublisher(
                config: config, layout: layout, staging: staging, index: preflight.index, state: state.layout,
                outputs: preflight.outputs, tilePacks: state.tilePacks, manifests: state.manifests,
                refreshWithinDays: options.refreshExpiringDays),
            outputs: preflight.outputs,
            assemblies: plan.tours.map { TourAssembly(plan: $0, hasTileSource: maps != nil) }, maps: maps, tileProgress: tileProgress)
        await run.runAll()

        var summary = run.summary
        if let fetched = maps?.fetcher?.stats {
            summary.tileRequests = fetched.requests
            summary.tilesDownloaded = fetched.downloaded
            summary.tilesRenewed = fetched.notModified
            summary.tilesEmpty = fetched.empty
        }
        return summary
    }

    /// Evicts to the budgets once the packages are published, only inside
    /// `scope` for a shard: an eviction that fails is reported, never the
    /// build's undoing.
    private func evictToBudgets(
        _ summary: inout BuildSummary, layout: Layout, state: BuildState, scope: OutputScope?, pool: NIOThreadPool
    ) async {
        do {
            let evicted = try await pool.runIfActive { [config] in
                try CacheMaintenance.run(
                    layout: layout, budgets: config.budgets, state: state, now: state.ledger.clock(), overBudgetOnly: true, scope: scope)
            }
            summary.evictedFiles = evicted.removals.count
            summary.evictedBytes = evicted.freedBytes
        } catch {
            summary.failures.append("eviction after the build: \((error as? TourpackError)?.description ?? "\(error)")")
        }
    }

    /// The summary's requests, cache figures and warnings: what the
    /// endpoint was asked since `before`, and what the synthesis cache, the
    /// fleet's bucket and the publish's renames did.
    private func summarizeRequests(_ summary: inout BuildSummary, since before: SynthesisStats, counts: CacheCounts, sharedCache: Bool) {
        let after = synthesizer.stats
        summary.requests = after.requests - before.requests
        summary.retries = after.retries - before.retries
        summary.cacheHits = counts.hits
        summary.charactersBilled = counts.billedCharacters
        summary.billingUnit = config.billing.unit
        summary.cacheWriteFailures = counts.storeFailures
        if CommitJournal.fellBackToRenames {
            summary.warnings.append(
                "this file system cannot swap folders in one step (renameat2 RENAME_EXCHANGE), so tours were published file by file: "
                    + "a kill during a publish could leave a package naming audio not yet in place until the next build finishes it")
        }
        if sharedCache {
            summary.sharedCache = SharedCacheSummary(
                restored: counts.restored, shared: counts.shared, failures: counts.sharedFailures, waited: counts.claimWaits)
        }
        if let failure = counts.firstSharedFailure {
            let gaveUp =
                counts.bucketGivenUp
                ? "; after \(CacheCounts.bucketFailuresToGiveUp) failures in a row the build stopped using it" : ""
            summary.warnings.append(
                "the shared synthesis cache (state.objects) failed \(counts.sharedFailures) time\(counts.sharedFailures == 1 ? "" : "s")\(gaveUp); "
                    + "those chunks were requested or kept locally instead, and other workers may pay for them again; first: \(failure)")
        }
        if let failure = counts.firstStoreFailure {
            summary.warnings.append(
                "the synthesis cache could not keep \(counts.storeFailures) chunk\(counts.storeFailures == 1 ? "" : "s"), which the next build pays for again; first: \(failure)"
            )
        }
    }

    /// The maps phase's maker when the pipeline names a tile source; nil
    /// otherwise (packages then carry the coverage only). A key variable
    /// that is named but unset is a configuration error naming the variable.
    private func makeTilePackMaker(
        state: BuildState, pool: NIOThreadPool, staging: StagingArea, layout: Layout, progress: TileProgress
    ) throws -> TilePackMaker? {
        guard let source = config.maps.source else { return nil }
        var fetcher: TileFetcher?
        var extract: MBTilesReader?
        switch source.location {
        case .url(let template):
            // The key the loader read; a named variable that was unset is a configuration error.
            if let variable = source.apiKeyEnv, source.apiKey == nil {
                throw TourpackError.invalidInput("maps.source.apiKeyEnv: the environment variable \(variable) is not set")
            }
            fetcher = try TileFetcher(
                source: source, template: template, apiKey: source.apiKey?.value,
                retry: options.tileRetry ?? RetryPolicy(settings: config.tts),
                timeoutSeconds: config.tts.timeoutSeconds, clock: options.now)
        case .mbtiles(let file):
            do { extract = try MBTilesReader(file) } catch {
                throw TourpackError.invalidInput("maps.source.mbtiles: \(error)")
            }
        }
        return TilePackMaker(
            config: config, source: source, cache: state.tiles, packs: state.tilePacks, fetcher: fetcher, extract: extract,
            extractJSON: try? extract?.metadata()["json"], pool: pool, staging: staging, layout: layout, progress: progress)
    }

    /// How long this process has run: `/proc/uptime` less the process's
    /// start time (field 22 of `/proc/self/stat`, in clock ticks since boot).
    static func processSeconds() -> Double? {
        guard let stat = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8),
            let uptime = (try? String(contentsOfFile: "/proc/uptime", encoding: .utf8))?.split(separator: " ").first.flatMap({ Double($0) }
            ),
            let close = stat.lastIndex(of: ")")
        else { return nil }
        // Fields after the command name (which may hold spaces) start at field 3.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        guard fields.count > 19, let started = Double(fields[19]), ticks > 0 else { return nil }
        return max(0, uptime - started / ticks)
    }

    /// `VmHWM` of `/proc/self/status`: this program's own peak, not the
    /// `ru_maxrss` of a process started by `posix_spawn`, which also counts the
    /// parent's memory it briefly shared before `exec`.
    static func peakMemoryBytes() -> Int64? {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
            let kilobytes = Int64(line.split(separator: " ").dropFirst().first ?? "")
        else { return nil }
        return kilobytes * 1024
    }
}

public import Foundation
import NIOPosix

/// Runs a `BuildPlan`: tour JSON → plan → chunks → TTS → PCM join → encode
/// → AudioCache files → package.json, one output root at a time.
///
/// Work flows as a pipeline so TTS latency overlaps encoding. Items (tour,
/// POI, phase) start longest first, at most `tts.concurrency` + encode
/// threads at once; that window, not the tour's size, bounds memory. Each
/// item's chunks are synthesized concurrently (the synthesizer keeps
/// `tts.concurrency` requests in flight at most), joined as PCM as soon as the
/// last arrives, and encoded once per format on a thread pool as wide as the
/// machine. Every format is made from the same PCM, so it is synthesized once.
///
/// Files wait in the `StagingArea` until every item of their tour has
/// succeeded; then the tour's audio and package.json files are published
/// together through a `CommitJournal`. A tour with a failed item publishes
/// nothing, so its previous package stays exactly as it was, and the other
/// tours go on. An unreachable endpoint stops the build (every other item
/// would fail the same way); cancelling the task stops it too, removing every
/// temp, and the summary says so.
public struct Builder: Sendable {
    public struct Options: Sendable {
        /// Wait for another build's lock (true) or fail at once with `alreadyBuilding`.
        public var waitForLock = true
        /// Encode threads; the machine's core count by default.
        public var encodeThreads = ProcessInfo.processInfo.activeProcessorCount
        /// The build's clock: `createdAt`, expiry, the caches' ages and the
        /// ledger's month all come from it, so tests need no sleeps.
        public var now: @Sendable () -> Date = { Date() }
        /// Give a new `createdAt` to packages expiring within this many days
        /// (`--refresh-expiring`); 0 refreshes only expired ones.
        public var refreshExpiringDays = 0
        /// The ledger's account; nil takes the pipeline's endpoint and the key from the environment.
        public var account: QuotaAccount?
        /// Overrides the tile fetches' retries (the TTS policy by default).
        public var tileRetry: RetryPolicy?

        public init() {}
    }

    public let config: PipelineConfig
    public let synthesizer: any SpeechSynthesizer
    public let encoder: any AudioEncoding
    public let joiner: PCMJoiner
    public let options: Options

    public init(
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
        options.account ?? QuotaAccount(settings: config.tts, environment: ProcessInfo.processInfo.environment)
    }

    /// Builds every tour of `plan` and reports through `events`, in order.
    ///
    /// The build is recorded in the state database (queued, then running
    /// once the lock is held, then completed, failed or cancelled).
    ///
    /// - Parameter skippedTours: tours of the pipeline left out (`--tour`), for the summary.
    /// - Returns: the summary, also sent as the last event. Failed tours are
    ///   in the summary, not thrown; only a failure before any work (the
    ///   lock, the state, a budget refusal) throws.
    public func build(_ plan: BuildPlan, skippedTours: Int = 0, events: @escaping @Sendable (BuildEvent) -> Void) async throws -> BuildSummary {
        // Every blocking step (the state's flock and SQLite, journal replay,
        // scans, fsync, renames, FFmpeg) runs on this pool, never on the
        // cooperative pool, which keeps only the orchestration.
        let pool = NIOThreadPool(numberOfThreads: max(1, options.encodeThreads))
        pool.start()
        do {
            let summary = try await build(plan, skippedTours: skippedTours, pool: pool, events: events)
            try? await pool.shutdownGracefully()
            return summary
        } catch {
            try? await pool.shutdownGracefully()
            throw error
        }
    }

    private func build(
        _ plan: BuildPlan, skippedTours: Int, pool: NIOThreadPool, events: @escaping @Sendable (BuildEvent) -> Void
    ) async throws -> BuildSummary {
        let (config, account, clock) = (config, account, options.now)
        let (state, record) = try await pool.runIfActive {
            try StateLayout(config).checkApart()
            let state = try BuildState(config: config, account: account, clock: clock)
            return (state, try state.records.queue(pipeline: config.sourceFile, output: config.output))
        }
        do {
            let summary = try await run(plan, state: state, record: record, pool: pool, skippedTours: skippedTours, events: events)
            let status: BuildRecord.Status = summary.exitCode == ExitStatus.cancelled ? .cancelled
                : summary.exitCode == ExitStatus.ok ? .completed : .failed
            _ = try? await pool.runIfActive {
                try state.records.finish(record, status: status, summary: summary, error: summary.stoppedEarly ?? summary.failures.first)
            }
            return summary
        } catch {
            let status: BuildRecord.Status = (error as? TourpackError) == .cancelled ? .cancelled : .failed
            let message = (error as? TourpackError)?.description ?? "\(error)"
            _ = try? await pool.runIfActive { try state.records.finish(record, status: status, summary: nil, error: message) }
            throw error
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
        var index: PackageIndex
    }

    private func run(
        _ plan: BuildPlan, state: BuildState, record: Int64, pool: NIOThreadPool, skippedTours: Int,
        events: @escaping @Sendable (BuildEvent) -> Void
    ) async throws -> BuildSummary {
        let started = ContinuousClock.now
        let rootFolder = state.layout.rootFolder
        let lock: BuildLock
        do {
            lock = try await BuildLock.acquire(stateFolder: rootFolder, root: config.output, wait: false)
        } catch TourpackError.alreadyBuilding(let path) where options.waitForLock {
            events(.waitingForLock(path: path))
            do { lock = try await BuildLock.acquire(stateFolder: rootFolder, root: config.output, wait: true) } catch is CancellationError {
                throw TourpackError.cancelled
            }
        }
        defer { lock.release() }
        let (config, fingerprint) = (config, encoder.fingerprint)
        let preflight = try await pool.runIfActive {
            try state.records.start(record)
            try state.records.reconcile()
            try state.ledger.reconcile()

            // The root may be reached through a symlink: resolved once, and every write goes under the real path.
            var resolved = config
            resolved.output = OutputTree.realPath(config.output)
            let layout = Layout(root: resolved.output)
            let staging = try StagingArea(state: rootFolder, output: layout.root)
            let recovered = try CommitJournal.replayAll(state: rootFolder)
            // Before any request and before any folder under the root: no symlink may carry a write out of it.
            try OutputTree.check(layout, plan: plan, formats: config.formats, voice: config.voice)
            let removed = try staging.removeLeftovers(in: layout)

            // Before any request: what the caches already hold, and whether the
            // quota and the cache budget can take the rest.
            let annotated = try state.annotate(plan, config: resolved, encoder: fingerprint)
            if let refusal = annotated.refusal(config) {
                throw TourpackError.budgetExceeded(refusal)
            }
            return Preflight(
                resolved: resolved, layout: layout, staging: staging, recovered: recovered, removed: removed, annotated: annotated,
                index: .scan(layout))
        }
        let (layout, staging, annotated) = (preflight.layout, preflight.staging, preflight.annotated)
        let statsBefore = synthesizer.stats
        let mapTiles = config.maps.source == nil ? 0 : plan.tileCount

        events(.started(BuildStart(
            tours: plan.tours.count, items: plan.phases, chunks: plan.chunks, characters: plan.characters,
            formats: config.formats, output: layout.root.path, recoveredCommits: preflight.recovered, removedTemporaries: preflight.removed,
            cacheHits: annotated.cacheHits, billableCharacters: annotated.billableCharacters, tiles: mapTiles)))

        let tileProgress = TileProgress(total: mapTiles)
        let maps = try makeTilePackMaker(state: state, pool: pool, staging: staging, layout: layout, progress: tileProgress)
        let caching = CachingSynthesizer(
            inner: synthesizer, cache: state.synthesis, ledger: state.ledger, tier: config.voice.tier, pool: pool)
        var run = BuildRun(
            builder: self, layout: layout, staging: staging, pool: pool, events: events, state: state, record: record,
            synthesizer: caching,
            publisher: TourPublisher(
                config: config, layout: layout, staging: staging, index: preflight.index, state: state.layout,
                outputs: state.outputs, tilePacks: state.tilePacks, refreshWithinDays: options.refreshExpiringDays),
            assemblies: plan.tours.map { TourAssembly(plan: $0, hasTileSource: maps != nil) }, maps: maps, tileProgress: tileProgress)
        await run.runAll()

        var summary = run.summary
        if summary.stoppedEarly == nil {
            // The packages are published: an eviction that fails is reported, never the build's undoing.
            do {
                let evicted = try await pool.runIfActive { [config] in
                    try AudioCacheEviction.run(layout: layout, budgets: config.budgets, outputs: state.outputs, now: state.ledger.clock())
                }
                summary.evictedFiles = evicted.files
                summary.evictedBytes = evicted.bytes
                let synthesisBudget = config.budgets.synthesisCacheMaxBytes
                try await pool.runIfActive { _ = try state.synthesis.evict(toFit: synthesisBudget) }
                if maps != nil {
                    let tileBudget = config.budgets.tileCacheMaxBytes
                    try await pool.runIfActive { _ = try state.tiles.evict(toFit: tileBudget) }
                }
            } catch {
                summary.failures.append("eviction after the build: \((error as? TourpackError)?.description ?? "\(error)")")
            }
        }

        summary.toursSkipped = skippedTours
        let statsAfter = synthesizer.stats
        let counts = caching.counters.snapshot
        summary.requests = statsAfter.requests - statsBefore.requests
        summary.retries = statsAfter.retries - statsBefore.retries
        summary.cacheHits = counts.hits
        summary.charactersBilled = counts.billedCharacters
        summary.cacheWriteFailures = counts.storeFailures
        if let failure = counts.firstStoreFailure {
            summary.warnings.append("the synthesis cache could not keep \(counts.storeFailures) chunk\(counts.storeFailures == 1 ? "" : "s"), which the next build pays for again; first: \(failure)")
        }
        if let fetched = maps?.fetcher?.stats {
            summary.tileRequests = fetched.requests
            summary.tilesDownloaded = fetched.downloaded
            summary.tilesRenewed = fetched.notModified
            summary.tilesEmpty = fetched.empty
        }
        summary.wallSeconds = started.duration(to: .now).seconds
        summary.peakMemoryBytes = Self.peakMemoryBytes()
        events(.finished(summary))
        return summary
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
            var key: String?
            if let variable = source.apiKeyEnv {
                guard let value = ProcessInfo.processInfo.environment[variable], !value.isEmpty else {
                    throw TourpackError.invalidInput("maps.source.apiKeyEnv: the environment variable \(variable) is not set")
                }
                key = value
            }
            fetcher = try TileFetcher(
                source: source, template: template, apiKey: key, retry: options.tileRetry ?? RetryPolicy(settings: config.tts),
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

/// One build's moving parts and running totals; lives for one `build` call.
private struct BuildRun {
    let builder: Builder
    let layout: Layout
    let staging: StagingArea
    let pool: NIOThreadPool
    let events: @Sendable (BuildEvent) -> Void
    let state: BuildState
    let record: Int64
    let synthesizer: CachingSynthesizer
    let publisher: TourPublisher
    var assemblies: [TourAssembly]
    let maps: TilePackMaker?
    let tileProgress: TileProgress
    var summary = BuildSummary()
    /// The next tour whose maps to make, and how many tours' maps are under way.
    private var nextMaps = 0
    private var mapsInFlight = 0
    private var tickerRunning = false
    private var tilesReported = -1
    /// Every item in plan order, and the next one to start.
    private let jobs: [(tourIndex: Int, item: PlanItem)]
    private var nextJob = 0
    /// Why the build stops starting work: the endpoint is unreachable, or a signal.
    private var stopReason: String?
    private var cancelled = false

    init(builder: Builder, layout: Layout, staging: StagingArea, pool: NIOThreadPool,
         events: @escaping @Sendable (BuildEvent) -> Void, state: BuildState, record: Int64, synthesizer: CachingSynthesizer,
         publisher: TourPublisher, assemblies: [TourAssembly], maps: TilePackMaker?, tileProgress: TileProgress) {
        self.builder = builder
        self.layout = layout
        self.staging = staging
        self.pool = pool
        self.events = events
        self.state = state
        self.record = record
        self.synthesizer = synthesizer
        self.publisher = publisher
        self.assemblies = assemblies
        self.maps = maps
        self.tileProgress = tileProgress
        // Longest first: the long narrations are the critical path (their
        // synthesis and encode take longest), so starting them early lets the
        // short ones fill in around them. Ties keep plan order.
        let ordered = assemblies.indices.flatMap { tour in assemblies[tour].plan.items.map { (tourIndex: tour, item: $0) } }
        jobs = ordered.enumerated().sorted { lhs, rhs in
            lhs.element.item.characters != rhs.element.item.characters
                ? lhs.element.item.characters > rhs.element.item.characters : lhs.offset < rhs.offset
        }.map(\.element)
    }

    private var config: PipelineConfig { builder.config }
    private var recipe: ItemRecipe { ItemRecipe(config: builder.config, joiner: builder.joiner, encoder: builder.encoder) }

    /// Items in flight at most: enough to keep every request slot and every
    /// encode thread busy, and no more, so memory does not grow with the tour.
    private var window: Int { max(1, config.tts.concurrency + builder.options.encodeThreads) }

    mutating func runAll() async {
        await withTaskGroup(of: ItemOutcome.self) { group in
            for _ in 0..<window { await startNext(in: &group) }
            for _ in 0..<Self.mapsWindow { await startNextMaps(in: &group) }
            while let outcome = await group.next() {
                if case .tick = outcome {
                    tickerRunning = false
                    reportTiles()
                    startTicker(in: &group)
                    continue
                }
                await record(outcome)
                if Task.isCancelled, !cancelled {
                    cancelled = true
                    stopReason = TourpackError.cancelled.description
                }
                if stopReason != nil {
                    // Out of quota, the requests in flight are already paid
                    // for: let them land (and settle) rather than cancel them
                    // after the provider has billed. Anything else stops now.
                    if !summary.quotaRanOut || cancelled { group.cancelAll() }
                    skipUnstarted()
                } else if case .mapsReady = outcome {
                    await startNextMaps(in: &group)
                } else {
                    await startNext(in: &group)
                }
            }
        }
        if let stopReason {
            await offload { [staging] in staging.discardAll() }
            summary.stoppedEarly = stopReason
        }
        for index in assemblies.indices { await settle(index) }
    }

    /// Starts the next item whose tour has not failed; items of a failed tour
    /// are skipped, so no characters are spent on a package that cannot ship.
    private mutating func startNext(in group: inout TaskGroup<ItemOutcome>) async {
        while nextJob < jobs.count {
            let (tourIndex, item) = jobs[nextJob]
            nextJob += 1
            if assemblies[tourIndex].hasFailed {
                assemblies[tourIndex].skipped += 1
                assemblies[tourIndex].outstanding -= 1
                await settle(tourIndex)
                continue
            }
            let maker = ItemMaker(
                recipe: recipe, layout: layout, staging: staging, pool: pool, tour: assemblies[tourIndex].tour,
                synthesizer: synthesizer, outputs: state.outputs)
            group.addTask { await maker.make(item, tourIndex: tourIndex) }
            return
        }
    }

    /// Tours whose maps are made at once: their tiles share the fetcher's
    /// `concurrency`, so two keep it busy across a tour's end without
    /// holding every tour's tile list in memory.
    static let mapsWindow = 2

    /// Starts the maps of the next tour that has not failed, and the ticker that reports their progress.
    private mutating func startNextMaps(in group: inout TaskGroup<ItemOutcome>) async {
        guard let maps else { return }
        while nextMaps < assemblies.count {
            let index = nextMaps
            nextMaps += 1
            let tour = assemblies[index].tour
            guard !assemblies[index].hasFailed, let coverage = assemblies[index].plan.mapCoverage else {
                assemblies[index].mapsPending = false
                if assemblies[index].hasFailed { tileProgress.add(assemblies[index].plan.mapCoverage?.tileCount ?? 0) }
                await settle(index)
                continue
            }
            let packPaths = config.formats.map { layout.tilePack(packageID: PackageID.make(tourID: tour.id, voice: config.voice, format: $0)) }
            mapsInFlight += 1
            group.addTask {
                do {
                    return .mapsReady(tourIndex: index, result: .success(try await maps.make(tour: tour, coverage: coverage, packPaths: packPaths)))
                } catch {
                    return .mapsReady(tourIndex: index, result: .failure(error as? TourpackError ?? .cancelled))
                }
            }
            startTicker(in: &group)
            return
        }
    }

    /// A child that wakes the loop every 250 ms while tiles are moving, so
    /// `mapsProgress` goes out a few times a second at most.
    private mutating func startTicker(in group: inout TaskGroup<ItemOutcome>) {
        guard !tickerRunning, mapsInFlight > 0 else { return }
        tickerRunning = true
        group.addTask {
            try? await Task.sleep(for: .milliseconds(250))
            return .tick
        }
    }

    private mutating func reportTiles() {
        let done = tileProgress.done
        guard done != tilesReported, tileProgress.total > 0 else { return }
        tilesReported = done
        events(.mapsProgress(MapsProgress(tilesDone: min(done, tileProgress.total), tilesTotal: tileProgress.total)))
    }

    /// Counts the items that will never start once the build is stopping.
    private mutating func skipUnstarted() {
        while nextMaps < assemblies.count {
            assemblies[nextMaps].mapsPending = false
            nextMaps += 1
        }
        while nextJob < jobs.count {
            let tourIndex = jobs[nextJob].tourIndex
            assemblies[tourIndex].skipped += 1
            assemblies[tourIndex].outstanding -= 1
            nextJob += 1
        }
    }

    private mutating func record(_ outcome: ItemOutcome) async {
        switch outcome {
        case .done(let tourIndex, let item, let files, let duration):
            assemblies[tourIndex].outstanding -= 1
            assemblies[tourIndex].staged += files
            let tour = assemblies[tourIndex].tour
            var bytes: [String: Int64] = [:]
            for file in files { bytes[file.audio.encoded.format.rawValue] = file.audio.encoded.sizeBytes }
            let reused = files.filter { $0.temp == nil }.count
            summary.characters += item.characters
            summary.encodes += files.count - reused
            events(.itemDone(ItemDone(
                tourId: tour.id.value, tourName: tour.name, poiId: item.poiID.value, poiName: item.poiName, phase: item.phase,
                chunks: item.chunks.count, characters: item.characters, durationSeconds: duration, bytes: bytes,
                reusedFiles: reused)))
            await settle(tourIndex)
        case .failed(let tourIndex, let item, let error):
            assemblies[tourIndex].outstanding -= 1
            let failure = TourAssembly.failure(of: item, in: assemblies[tourIndex].tour, error: error)
            assemblies[tourIndex].failures.append(failure)
            summary.failures.append(failure.message)
            events(.itemFailed(failure))
            if case .networkUnavailable = error, stopReason == nil { stopReason = error.description }
            if case .budgetExceeded = error, stopReason == nil {
                // Another job took what was left of the month: every other request would be refused too.
                stopReason = error.description
                summary.quotaRanOut = true
            }
            await settle(tourIndex)
        case .cancelled(let tourIndex):
            assemblies[tourIndex].outstanding -= 1
            assemblies[tourIndex].skipped += 1
        case .mapsReady(let tourIndex, let result):
            mapsInFlight -= 1
            assemblies[tourIndex].mapsPending = false
            switch result {
            case .success(let pack):
                assemblies[tourIndex].pack = pack
                events(.mapsDone(tourID: assemblies[tourIndex].tour.id, tileCount: pack.storedTiles + pack.emptyTiles))
            case .failure(let error):
                if error == .cancelled {
                    if !cancelled { cancelled = true; stopReason = error.description }
                } else {
                    assemblies[tourIndex].mapFailure = error
                    summary.failures.append("\(assemblies[tourIndex].tour.name): \(error.description)")
                }
            }
            reportTiles()
            await settle(tourIndex)
        case .tick:
            break
        }
    }

    /// Publishes or gives up a tour once every item is settled; once only.
    /// After a signal nothing more is published: the build only cleans up.
    private mutating func settle(_ index: Int) async {
        guard !assemblies[index].isClosed, assemblies[index].outstanding == 0, !assemblies[index].mapsPending else { return }
        assemblies[index].isClosed = true
        let assembly = assemblies[index]
        let tour = assembly.tour
        guard !cancelled else {
            await discard(assembly.temps)
            return
        }
        if assembly.hasFailed || assembly.skipped > 0 || (maps != nil && assembly.pack == nil) {
            await discard(assembly.temps)
            let failed = assembly.failures.count
            let why = assembly.mapFailure.map { "its map failed: \($0.description)" }
                ?? (maps != nil && assembly.pack == nil && failed == 0 && assembly.skipped == 0 ? "stopped before its map was made: \(stopReason ?? "")" : nil)
                ?? (failed > 0 ? "\(failed) item\(failed == 1 ? "" : "s") failed" : "stopped before it finished: \(stopReason ?? "")")
            await fail(assembly, reason: "\(why); the previous package is untouched")
            return
        }
        guard let coverage = assembly.plan.mapCoverage else {
            await discard(assembly.temps)
            await fail(assembly, reason: "the route has no coordinates to cover with map tiles")
            return
        }
        if maps == nil { events(.mapsDone(tourID: tour.id, tileCount: coverage.tileCount)) }
        do {
            let (publisher, now) = (publisher, builder.options.now())
            let packaged = try await pool.runIfActive { try publisher.publish(assembly, coverage: coverage, now: now) }
            if packaged.packages.isEmpty { summary.toursUnchanged += 1 } else { summary.toursBuilt += 1 }
            summary.files += packaged.files
            summary.reusedFiles += packaged.reusedFiles
            summary.bytes += packaged.bytes
            summary.tilePacks += packaged.tilePacks.count
            let (records, build) = (state.records, record)
            await offload { try? records.recordTour(build, tourId: tour.id.value, outcome: packaged.packages.isEmpty ? "unchanged" : "packaged") }
            events(.tourPackaged(packaged))
        } catch {
            await discard(assembly.temps)
            let message = (error as? TourpackError)?.description ?? "\(error)"
            summary.failures.append("\(tour.name): \(message)")
            await fail(assembly, reason: message)
        }
    }

    /// Runs blocking work (files, fsync, SQLite) on the build's thread pool,
    /// never on the cooperative pool; a pool already shut down runs nothing.
    private func offload(_ work: @escaping @Sendable () -> Void) async {
        _ = try? await pool.runIfActive(work)
    }

    private func discard(_ temps: [URL]) async {
        await offload { [staging] in staging.discard(temps) }
    }

    private mutating func fail(_ assembly: TourAssembly, reason: String) async {
        summary.toursFailed += 1
        let (records, build, tourID) = (state.records, record, assembly.tour.id.value)
        await offload { try? records.recordTour(build, tourId: tourID, outcome: "failed", message: reason) }
        events(.tourFailed(TourFailure(
            tourId: assembly.tour.id.value, tourName: assembly.tour.name, failedItems: assembly.failures.count,
            skippedItems: assembly.skipped, reason: reason)))
    }
}

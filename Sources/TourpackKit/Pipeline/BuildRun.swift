import Foundation
import NIOPosix
import TourpackAudio
import TourpackCore
import TourpackMaps
import TourpackPlan
import TourpackState

/// One build's moving parts and running totals; lives for one `build` call.
struct BuildRun {
    let builder: Builder
    let layout: Layout
    let staging: StagingArea
    let pool: NIOThreadPool
    let events: @Sendable (BuildEvent) -> Void
    let state: BuildState
    let record: Int64
    let synthesizer: CachingSynthesizer
    let publisher: TourPublisher
    /// The output cache, with the plan's rows preloaded.
    let outputs: OutputCache
    var assemblies: [TourAssembly]
    let maps: TilePackMaker?
    let tileProgress: TileProgress
    var summary = BuildSummary()
    /// The next tour whose maps to make, and how many tours' maps are under way.
    private var nextMaps = 0
    private var mapsInFlight = 0
    private var tickerRunning = false
    /// Items, maps and publishes started and not yet come back (the ticker is not work).
    private var working = 0
    /// Tours whose items and map are all in, waiting for the loop to start their publish.
    private var readyToPublish: [(index: Int, coverage: MapCoverage)] = []
    /// Whether publishes still go ahead once the build's tasks are cancelled:
    /// yes when it stops for a reason of its own (a tour whose items are all
    /// in still ships), no after a signal (nothing more is published).
    private let publishesGoOn = SharedFlag()
    private var tilesReported = -1
    /// Every item in plan order, and the next one to start.
    private let jobs: [(tourIndex: Int, item: PlanItem)]
    private var nextJob = 0
    /// Why the build stops starting work, once something stops it (the
    /// endpoint unreachable, the state unwritable, a full disk, the month's
    /// quota taken by another job, or a signal): what the summary and the
    /// exit code report. The first reason wins.
    private var stop: TourpackError?
    private var stopReason: String? { stop?.description }
    private var cancelled = false

    init(
        builder: Builder, layout: Layout, staging: StagingArea, pool: NIOThreadPool,
        events: @escaping @Sendable (BuildEvent) -> Void, state: BuildState, record: Int64, synthesizer: CachingSynthesizer,
        publisher: TourPublisher, outputs: OutputCache, assemblies: [TourAssembly], maps: TilePackMaker?, tileProgress: TileProgress
    ) {
        self.builder = builder
        self.layout = layout
        self.staging = staging
        self.pool = pool
        self.events = events
        self.state = state
        self.record = record
        self.synthesizer = synthesizer
        self.publisher = publisher
        self.outputs = outputs
        self.assemblies = assemblies
        self.maps = maps
        self.tileProgress = tileProgress
        // Longest first: the long narrations are the critical path (their
        // synthesis and encode take longest), so starting them early lets the
        // short ones fill in around them. Ties keep plan order. Each item's
        // length is counted once: a comparison is not the place to count scalars.
        let ordered = assemblies.indices.flatMap { tour in assemblies[tour].plan.items.map { (tourIndex: tour, item: $0) } }
        jobs = ordered.enumerated().map { (offset: $0.offset, characters: $0.element.item.characters, job: $0.element) }
            .sorted { lhs, rhs in lhs.characters != rhs.characters ? lhs.characters > rhs.characters : lhs.offset < rhs.offset }
            .map(\.job)
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
            startPublishes(in: &group)
            while let outcome = await group.next() {
                if case .tick = outcome {
                    tickerRunning = false
                    reportTiles()
                    startTicker(in: &group)
                    continue
                }
                working -= 1
                await record(outcome)
                if Task.isCancelled, !cancelled {
                    cancelled = true
                    stop = .cancelled
                }
                if stopReason != nil {
                    // Out of quota, the requests in flight are already paid
                    // for: let them land (and settle) rather than cancel them
                    // after the provider has billed. Anything else stops now.
                    if !cancelled { publishesGoOn.set() }
                    if !summary.quotaRanOut || cancelled { group.cancelAll() }
                    skipUnstarted()
                } else if case .mapsReady = outcome {
                    await startNextMaps(in: &group)
                } else if case .published = outcome {
                    // Not an item: the window of items is as it was.
                } else {
                    await startNext(in: &group)
                }
                startPublishes(in: &group)
                // Only the ticker left: wake it now, or the build would wait out its sleep.
                if working == 0, tickerRunning { group.cancelAll() }
            }
        }
        if let stopReason {
            await offload { [staging] in staging.discardAll() }
            summary.stoppedEarly = stopReason
            summary.stoppedBy = stop?.kind
        }
        for index in assemblies.indices { await settle(index) }
        while let (index, coverage) = readyToPublish.popLast() {
            await record(await publishing(index, coverage: coverage)())
        }
    }

    /// Starts the publish of each tour that is ready, beside the items in
    /// flight: the loop goes on starting items meanwhile, so no core waits
    /// for a publish to end (a warm rebuild is mostly publishes).
    private mutating func startPublishes(in group: inout TaskGroup<ItemOutcome>) {
        for (index, coverage) in readyToPublish {
            working += 1
            group.addTask(operation: publishing(index, coverage: coverage))
        }
        readyToPublish.removeAll()
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
                synthesizer: synthesizer, outputs: outputs)
            working += 1
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
            let packPaths = config.formats.map {
                layout.tilePack(packageID: config.packageID(tourID: tour.id, format: $0))
            }
            mapsInFlight += 1
            working += 1
            group.addTask {
                do {
                    return .mapsReady(
                        tourIndex: index, result: .success(try await maps.make(tour: tour, coverage: coverage, packPaths: packPaths)))
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
            events(
                .itemDone(
                    ItemDone(
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
            if error.kind == .networkUnavailable, stop == nil { stop = error }
            // The state cannot be written, or a disk is full: every further
            // request would be paid for and not counted, or not kept.
            if error.kind == .stateFailed || error.isDiskFull, stop == nil { stop = error }
            if error.kind == .budgetExceeded, stop == nil {
                // Another job took what was left of the month: every other request would be refused too.
                stop = error
                summary.quotaRanOut = true
            }
            await settle(tourIndex)
        case .cancelled(let tourIndex):
            assemblies[tourIndex].outstanding -= 1
            assemblies[tourIndex].skipped += 1
        case .published(_, .success(let packaged)):
            if !packaged.packages.isEmpty {
                summary.toursBuilt += 1
            } else if packaged.wroteFiles {
                summary.toursRewritten += 1
            } else {
                summary.toursUnchanged += 1
            }
            summary.files += packaged.files
            summary.reusedFiles += packaged.reusedFiles
            summary.bytes += packaged.bytes
            summary.tilePacks += packaged.tilePacks.count
            events(.tourPackaged(packaged))
        case .published(let tourIndex, .failure(let failure)):
            let assembly = assemblies[tourIndex]
            await discard(assembly.temps)
            summary.failures.append("\(assembly.tour.name): \(failure.message)")
            await fail(assembly, reason: failure.message)
        case .mapsReady(let tourIndex, let result):
            mapsInFlight -= 1
            assemblies[tourIndex].mapsPending = false
            switch result {
            case .success(let pack):
                assemblies[tourIndex].pack = pack
                events(.mapsDone(tourID: assemblies[tourIndex].tour.id, tileCount: pack.storedTiles + pack.emptyTiles))
            case .failure(let error):
                if error.kind == .cancelled {
                    // Cancelled because the build is already stopping for
                    // another reason (a full disk, say) is not a signal:
                    // that reason is what the summary and exit code report.
                    if !cancelled, stop == nil { cancelled = true; stop = error }
                } else {
                    assemblies[tourIndex].mapFailure = error
                    summary.failures.append("\(assemblies[tourIndex].tour.name): \(error.description)")
                    if error.isDiskFull, stop == nil { stop = error }
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
            let why =
                assembly.mapFailure.map { "its map failed: \($0.description)" }
                ?? (maps != nil && assembly.pack == nil && failed == 0 && assembly.skipped == 0
                    ? "stopped before its map was made: \(stopReason ?? "")" : nil)
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
        readyToPublish.append((index, coverage))
    }

    /// The publish of a tour whose items and map are all in: its audio, tile
    /// packs and package.json files together (`TourPublisher`), under the
    /// tour's publishing lock, then the tour's build record. It runs even
    /// once the build is stopping, as a commit must; a publish that fails
    /// fails the tour only.
    private func publishing(_ index: Int, coverage: MapCoverage) -> @Sendable () async -> ItemOutcome {
        let assembly = assemblies[index]
        let (publisher, now, backend, root, pool) = (publisher, builder.options.now(), state.backend, layout.root.path, pool)
        let (records, build, tourID, goOn) = (state.records, record, assembly.tour.id.value, publishesGoOn)
        return {
            do {
                if Task.isCancelled, !goOn.isSet { throw TourpackError.cancelled }
                // Workers on other machines share the root: one tour is published by one at a time.
                let packaged = try await pool.runIfActiveOrHere {
                    let packaged = try backend.publishing(tour: tourID, into: root) {
                        try publisher.publish(assembly, coverage: coverage, now: now)
                    }
                    try? records.recordTour(build, tourId: tourID, outcome: packaged.wroteFiles ? "packaged" : "unchanged")
                    return packaged
                }
                return .published(tourIndex: index, result: .success(packaged))
            } catch {
                return .published(
                    tourIndex: index, result: .failure(PublishFailure(message: (error as? TourpackError)?.description ?? "\(error)")))
            }
        }
    }

    /// Runs blocking work (files, fsync, SQLite) on the build's thread pool,
    /// never on the cooperative pool, even once the build is cancelled: it is
    /// cleanup and bookkeeping that must happen.
    private func offload(_ work: @escaping @Sendable () -> Void) async {
        await pool.runRegardless(work)
    }

    private func discard(_ temps: [URL]) async {
        await offload { [staging] in staging.discard(temps) }
    }

    private mutating func fail(_ assembly: TourAssembly, reason: String) async {
        summary.toursFailed += 1
        let (records, build, tourID) = (state.records, record, assembly.tour.id.value)
        await offload { try? records.recordTour(build, tourId: tourID, outcome: "failed", message: reason) }
        events(
            .tourFailed(
                TourFailure(
                    tourId: assembly.tour.id.value, tourName: assembly.tour.name, failedItems: assembly.failures.count,
                    skippedItems: assembly.skipped, reason: reason)))
    }
}

/// A flag the build's loop sets and its child tasks read.
private final class SharedFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false

    func set() { lock.withLock { value = true } }
    var isSet: Bool { lock.withLock { value } }
}

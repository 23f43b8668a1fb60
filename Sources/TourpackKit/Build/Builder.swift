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
        /// The build's clock for `createdAt`.
        public var now: @Sendable () -> Date = { Date() }

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

    /// Builds every tour of `plan` and reports through `events`, in order.
    ///
    /// - Parameter skippedTours: tours of the pipeline left out (`--tour`), for the summary.
    /// - Returns: the summary, also sent as the last event. Failed tours are
    ///   in the summary, not thrown; only a failure before any work (the
    ///   lock, the state folder) throws.
    public func build(_ plan: BuildPlan, skippedTours: Int = 0, events: @escaping @Sendable (BuildEvent) -> Void) async throws -> BuildSummary {
        let started = ContinuousClock.now
        let lock: BuildLock
        do {
            lock = try await BuildLock.acquire(stateFolder: config.state, wait: false)
        } catch TourpackError.alreadyBuilding(let path) where options.waitForLock {
            events(.waitingForLock(path: path))
            do { lock = try await BuildLock.acquire(stateFolder: config.state, wait: true) } catch is CancellationError {
                throw TourpackError.cancelled
            }
        }
        defer { lock.release() }

        let layout = Layout(root: config.output)
        let staging = try StagingArea(state: config.state, output: config.output)
        let recovered = try CommitJournal.replayAll(state: config.state)
        let removed = try staging.removeLeftovers(in: layout)
        let statsBefore = synthesizer.stats

        events(.started(BuildStart(
            tours: plan.tours.count, items: plan.phases, chunks: plan.chunks, characters: plan.characters,
            formats: config.formats, output: layout.root.path, recoveredCommits: recovered, removedTemporaries: removed)))

        let pool = NIOThreadPool(numberOfThreads: max(1, options.encodeThreads))
        pool.start()
        var run = BuildRun(
            builder: self, layout: layout, staging: staging, pool: pool, events: events,
            publisher: TourPublisher(config: config, layout: layout, staging: staging, index: .scan(layout)),
            assemblies: plan.tours.map(TourAssembly.init))
        await run.runAll()
        try? await pool.shutdownGracefully()

        var summary = run.summary
        summary.toursSkipped = skippedTours
        let statsAfter = synthesizer.stats
        summary.requests = statsAfter.requests - statsBefore.requests
        summary.retries = statsAfter.retries - statsBefore.retries
        summary.wallSeconds = Self.seconds(started.duration(to: .now))
        events(.finished(summary))
        return summary
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}

/// One build's moving parts and running totals; lives for one `build` call.
private struct BuildRun {
    let builder: Builder
    let layout: Layout
    let staging: StagingArea
    let pool: NIOThreadPool
    let events: @Sendable (BuildEvent) -> Void
    let publisher: TourPublisher
    var assemblies: [TourAssembly]
    var summary = BuildSummary()
    /// Every item in plan order, and the next one to start.
    private let jobs: [(tourIndex: Int, item: PlanItem)]
    private var nextJob = 0
    /// Why the build stops starting work: the endpoint is unreachable, or a signal.
    private var stopReason: String?
    private var cancelled = false

    init(builder: Builder, layout: Layout, staging: StagingArea, pool: NIOThreadPool,
         events: @escaping @Sendable (BuildEvent) -> Void, publisher: TourPublisher, assemblies: [TourAssembly]) {
        self.builder = builder
        self.layout = layout
        self.staging = staging
        self.pool = pool
        self.events = events
        self.publisher = publisher
        self.assemblies = assemblies
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

    /// Items in flight at most: enough to keep every request slot and every
    /// encode thread busy, and no more, so memory does not grow with the tour.
    private var window: Int { max(1, config.tts.concurrency + builder.options.encodeThreads) }

    mutating func runAll() async {
        await withTaskGroup(of: ItemOutcome.self) { group in
            for _ in 0..<window { startNext(in: &group) }
            while let outcome = await group.next() {
                record(outcome)
                if Task.isCancelled, !cancelled {
                    cancelled = true
                    stopReason = TourpackError.cancelled.description
                }
                if stopReason != nil {
                    group.cancelAll()
                    skipUnstarted()
                } else {
                    startNext(in: &group)
                }
            }
        }
        if let stopReason {
            staging.discardAll()
            summary.stoppedEarly = stopReason
        }
        for index in assemblies.indices { settle(index) }
    }

    /// Starts the next item whose tour has not failed; items of a failed tour
    /// are skipped, so no characters are spent on a package that cannot ship.
    private mutating func startNext(in group: inout TaskGroup<ItemOutcome>) {
        while nextJob < jobs.count {
            let (tourIndex, item) = jobs[nextJob]
            nextJob += 1
            if assemblies[tourIndex].hasFailed {
                assemblies[tourIndex].skipped += 1
                assemblies[tourIndex].outstanding -= 1
                settle(tourIndex)
                continue
            }
            let maker = ItemMaker(builder: builder, layout: layout, staging: staging, pool: pool, tour: assemblies[tourIndex].tour)
            group.addTask { await maker.make(item, tourIndex: tourIndex) }
            return
        }
    }

    /// Counts the items that will never start once the build is stopping.
    private mutating func skipUnstarted() {
        while nextJob < jobs.count {
            let tourIndex = jobs[nextJob].tourIndex
            assemblies[tourIndex].skipped += 1
            assemblies[tourIndex].outstanding -= 1
            nextJob += 1
        }
    }

    private mutating func record(_ outcome: ItemOutcome) {
        switch outcome {
        case .done(let tourIndex, let item, let files, let duration):
            assemblies[tourIndex].outstanding -= 1
            assemblies[tourIndex].staged += files
            let tour = assemblies[tourIndex].tour
            var bytes: [String: Int64] = [:]
            for file in files { bytes[file.audio.encoded.format.rawValue] = file.audio.encoded.sizeBytes }
            summary.characters += item.characters
            events(.itemDone(ItemDone(
                tourId: tour.id.value, tourName: tour.name, poiId: item.poiID.value, poiName: item.poiName, phase: item.phase,
                chunks: item.chunks.count, characters: item.characters, durationSeconds: duration, bytes: bytes)))
            settle(tourIndex)
        case .failed(let tourIndex, let item, let error):
            assemblies[tourIndex].outstanding -= 1
            let failure = TourAssembly.failure(of: item, in: assemblies[tourIndex].tour, error: error)
            assemblies[tourIndex].failures.append(failure)
            summary.failures.append(failure.message)
            events(.itemFailed(failure))
            if case .networkUnavailable = error, stopReason == nil { stopReason = error.description }
            settle(tourIndex)
        case .cancelled(let tourIndex):
            assemblies[tourIndex].outstanding -= 1
            assemblies[tourIndex].skipped += 1
        }
    }

    /// Publishes or gives up a tour once every item is settled; once only.
    /// After a signal nothing more is published: the build only cleans up.
    private mutating func settle(_ index: Int) {
        guard !assemblies[index].isClosed, assemblies[index].outstanding == 0 else { return }
        assemblies[index].isClosed = true
        let assembly = assemblies[index]
        let tour = assembly.tour
        guard !cancelled else {
            staging.discard(assembly.staged.map(\.temp))
            return
        }
        if assembly.hasFailed || assembly.skipped > 0 {
            staging.discard(assembly.staged.map(\.temp))
            let failed = assembly.failures.count
            let why = failed > 0 ? "\(failed) item\(failed == 1 ? "" : "s") failed" : "stopped before it finished: \(stopReason ?? "")"
            fail(assembly, reason: "\(why); the previous package is untouched")
            return
        }
        let coordinates = tour.route.waypoints.map(\.coordinate) + tour.pois.map(\.location)
        guard let coverage = TileMath.coverage(of: coordinates, settings: config.maps) else {
            staging.discard(assembly.staged.map(\.temp))
            fail(assembly, reason: "the route has no coordinates to cover with map tiles")
            return
        }
        events(.mapsDone(tourID: tour.id, tileCount: coverage.tileCount))
        do {
            let packaged = try publisher.publish(assembly, coverage: coverage, createdAt: builder.options.now())
            summary.toursBuilt += 1
            summary.files += packaged.files
            summary.bytes += packaged.bytes
            events(.tourPackaged(packaged))
        } catch {
            staging.discard(assembly.staged.map(\.temp))
            let message = (error as? TourpackError)?.description ?? "\(error)"
            summary.failures.append("\(tour.name): \(message)")
            fail(assembly, reason: message)
        }
    }

    private mutating func fail(_ assembly: TourAssembly, reason: String) {
        summary.toursFailed += 1
        events(.tourFailed(TourFailure(
            tourId: assembly.tour.id.value, tourName: assembly.tour.name, failedItems: assembly.failures.count,
            skippedItems: assembly.skipped, reason: reason)))
    }
}

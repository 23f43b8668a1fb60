import ArgumentParser
import Dispatch
import Foundation
import TourpackCore
import TourpackKit

#if canImport(Glibc)
import Glibc
#endif

struct Build: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "build",
        abstract: "Run the pipeline: synthesize, encode and write the Documents layout.",
        discussion: """
            Writes <output>/AudioCache/<tourId>/<poiId>_<Phase>.<ext>, \
            <output>/OfflineTours/<packageId>/package.json and, with a map tile \
            source (maps.source), the tour's map as \
            <output>/OfflineTours/<packageId>/tiles.mbtiles. A tour's files appear \
            together, once every item of the tour has succeeded; a tour that fails \
            leaves its previous package untouched while the other tours go on. \
            One build per output root at a time: a second one waits, or with \
            --no-wait exits 1 at once. SIGINT or SIGTERM stops the build, removes \
            its temp files and exits 130; a second signal exits at once.

            Incremental: a file whose inputs did not change is kept (0 requests, \
            0 encodes), a chunk already spoken comes from the synthesis cache, and \
            a package that would say the same is left as it is; a map tile is \
            fetched once (a stale one is asked for conditionally). Before any \
            request, a build the monthly quota, cacheMaxMB or maps.maxTiles \
            cannot take is refused with exit code 3 and the numbers. A map tile \
            that keeps failing fails its tour (mapDownloadFailed).

            Several workers: --shards N with --shard I, or with the \
            JOB_COMPLETION_INDEX variable a Kubernetes Indexed Job sets, builds only \
            the tours whose ID hashes to shard I of N, into an output the other \
            shards share (shards hold its lock together; a whole build waits for \
            them); with state.objects in the pipeline, chunks come from and \
            go to the fleet's S3-compatible synthesis cache.

            Output: a progress bar on a terminal, one line per item otherwise, or \
            NDJSON events with --json (started, itemDone, itemFailed, mapsProgress, \
            mapsDone, tourPackaged, tourFailed, finished).
            """
    )

    @OptionGroup var options: PipelineOptions

    @OptionGroup var sharding: ShardOptions

    @Option(help: "Build only this tour (its id); the others are skipped.")
    var tour: String?

    @Flag(
        help:
            "Show the plan and the files a build would write, and stop: no request, no file. Exits 3 when a budget would refuse the build.")
    var dryRun = false

    @Flag(help: "Print NDJSON events on stdout instead of a progress display.")
    var json = false

    @Flag(help: "Fail at once when another build holds the lock, instead of waiting.")
    var noWait = false

    /// Unconditional, so `-1` is read as the value and refused by `validate` with a message.
    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            "Also give a new createdAt/expiresAt to packages that expire within DAYS (the nightly job's flag).",
            discussion:
                "Unchanged packages that do not expire within DAYS are left as they are; without the flag only expired ones are refreshed.",
            valueName: "DAYS"))
    var refreshExpiring: Int?

    func validate() throws {
        if let refreshExpiring, refreshExpiring < 0 {
            throw ValidationError("--refresh-expiring: DAYS must be 0 or more, not \(refreshExpiring)")
        }
        if tour != nil, sharding.shards != nil {
            throw ValidationError("--tour and --shards cannot be combined: --tour builds one tour, --shards one worker's share of them")
        }
    }

    func run() async throws {
        let loaded = try options.load()
        let tours = try TourLoader().loadAll(
            globs: loaded.tourGlobs, relativeTo: URL(fileURLWithPath: FileManager.default.currentDirectoryPath),
            pipelineFile: options.pipeline)
        let selected = try select(tours)
        // One build per quality of the ladder, each into its own Documents
        // root; the first speaks every chunk, the others find them in the
        // synthesis cache and only encode.
        var exitCode = ExitStatus.ok
        for config in loaded.qualityRoots() {
            let code = try await build(selected, skipped: tours.count - selected.count, config: config)
            if exitCode == ExitStatus.ok { exitCode = code }
        }
        if exitCode != ExitStatus.ok { throw ExitCode(exitCode) }
    }

    /// Builds one Documents root; returns the build's exit code (a refusal or a fault throws).
    private func build(_ selected: [Tour], skipped: Int, config: PipelineConfig) async throws -> Int32 {
        // The plans an earlier build kept: an unchanged narration is not cut again.
        let planner = Planner(config: config, kept: KeptPlans.load(for: config))
        let plan = try planner.plan(selected, shard: try sharding.resolved())

        if dryRun {
            try printDryRun(try StateView.annotate(plan, config: config), config: config)
            return ExitStatus.ok
        }
        if !json {
            // Written straight through, like the display's lines, so the order holds in a log.
            FileHandle.standardOutput.write(Data((config.settledDescription() + "\n\n").utf8))
        }

        let display = BuildDisplay(mode: Display.mode(json: json))
        let summary: BuildSummary
        do {
            let chunker = planner.chunker
            var synthesisOptions = HTTPSpeechSynthesizer.Options()
            synthesisOptions.measuresLoudness = config.loudnessTarget != nil
            let synthesizer = try HTTPSpeechSynthesizer(
                settings: config.tts, splitter: { chunker.split($0) }, options: synthesisOptions)
            var builderOptions = Builder.Options()
            builderOptions.waitForLock = !noWait
            builderOptions.now = CommandClock.now
            builderOptions.refreshExpiringDays = refreshExpiring ?? 0
            let builder = Builder(config: config, synthesizer: synthesizer, options: builderOptions)
            summary = try await SignalCancellation.run {
                try await builder.build(plan, skippedTours: skipped) { display.show($0) }
            }
        } catch {
            let code = (error as? TourpackError)?.exitCode ?? ExitStatus.failure
            display.showError(error, exitCode: code)
            throw error
        }
        return summary.exitCode
    }

    /// `--tour`: one tour by id; an unknown id is a usage error naming the known ones.
    private func select(_ tours: [Tour]) throws -> [Tour] {
        guard let tour else { return tours }
        guard let id = SafeID(validating: tour) else { throw ValidationError("--tour: '\(tour)' is not a UUID") }
        let chosen = tours.filter { $0.id == id }
        guard !chosen.isEmpty else {
            let known = tours.map { "\($0.id) (\($0.name))" }.joined(separator: ", ")
            throw TourpackError.invalidInput("--tour \(id): no such tour in the pipeline; it has \(known)")
        }
        return chosen
    }

    private func printDryRun(_ plan: BuildPlan, config: PipelineConfig) throws {
        let layout = Layout(root: config.output)
        var writes: [String] = []
        for tourPlan in plan.tours {
            for format in config.formats {
                for item in tourPlan.items {
                    writes.append(layout.audioFile(tourID: item.tourID, poiID: item.poiID, phase: item.phase, format: format).relativePath)
                }
                let packageID = config.packageID(tourID: tourPlan.tour.id, format: format)
                if config.maps.source != nil { writes.append(layout.tilePack(packageID: packageID).relativePath) }
                if config.audio.captions == .webvtt {
                    writes += tourPlan.items.map { Layout.captionsRelativePath(packageID: packageID, poiID: $0.poiID, phase: $0.phase) }
                }
                writes.append(layout.manifest(packageID: packageID).relativePath)
            }
        }
        let report = PlanReport(plan: plan, config: config)
        if json {
            let planObject = try JSONSerialization.jsonObject(with: Data(try report.json().utf8))
            let document: [String: Any] = ["dryRun": true, "output": layout.root.path, "plan": planObject, "writes": writes]
            let data = try JSONSerialization.data(
                withJSONObject: document, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
            print(String(decoding: data, as: UTF8.self))
        } else {
            print(config.settledDescription())
            print()
            print(report.text())
            print()
            print("dry run: nothing was synthesized or written. A build would write \(writes.count) files under \(layout.root.path):")
            for path in writes { print("  \(path)") }
        }
        // The real build would stop here with exit 3; the dry run says so the same way.
        if let refusal = report.refusal { throw TourpackError.budgetExceeded(refusal) }
    }
}

/// Runs an operation that SIGINT and SIGTERM cancel.
///
/// The first signal cancels the task, so the work stops, removes its temps
/// and reports. What a later signal does depends on `laterSignalsExit`:
///
/// - `true` (a build): it exits at once with 130; the next build removes
///   whatever that leaves, under the lock.
/// - `false` (an install): it is noted and ignored, so the clean-up the
///   first signal started always finishes before the exit. `timeout` sends
///   SIGTERM to the child and then to its whole process group, so one
///   `timeout` is two signals; exiting on the second left partial downloads
///   behind whenever they arrived apart.
///
/// Once a signal has arrived, SIGINT and SIGTERM stay ignored until the
/// process exits (with 130): one landing after the clean-up cannot kill it
/// with another status.
enum SignalCancellation {
    static func run<T: Sendable>(laterSignalsExit: Bool = true, _ operation: @escaping @Sendable () async throws -> T) async throws -> T {
        let task = Task { try await operation() }
        let signals = [SIGINT, SIGTERM]
        let received = SignalCount()
        let sources = signals.map { number -> any DispatchSourceSignal in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                if received.increment() > 1, laterSignalsExit { exit(ExitStatus.cancelled) }
                task.cancel()
            }
            source.resume()
            return source
        }
        defer {
            for source in sources { source.cancel() }
            if received.count == 0 {
                for number in signals { signal(number, SIG_DFL) }
            }
        }
        return try await task.value
    }

    private final class SignalCount: @unchecked Sendable {
        private let lock = NSLock()
        private var received = 0
        var count: Int { lock.withLock { received } }
        func increment() -> Int {
            lock.withLock {
                received += 1; return received
            }
        }
    }
}

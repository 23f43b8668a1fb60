import ArgumentParser
import Foundation
import TourpackCore
import TourpackKit
import TourpackState

struct Cache: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cache",
        abstract: "Storage statistics and cleanup of a pipeline's output and state.",
        subcommands: [Stats.self, Prune.self, Clear.self]
    )

    struct Stats: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "stats",
            abstract:
                "Packages, files, bytes (in total and per tour), expired and failed counts, unreferenced audio, temps, synthesis- and tile-cache sizes, tile packs."
        )

        @OptionGroup var options: PipelineOptions
        @Flag(help: "Print the statistics as JSON.") var json = false

        func run() async throws {
            // One report per Documents root: a quality ladder has one per quality.
            let roots = try options.load().qualityRoots()
            var all: [CacheStatistics] = []
            for config in roots {
                let now = CommandClock.now()
                let inventory = try CacheInventory.scan(Layout(root: config.output), now: now)
                var stats = CacheStatistics(inventory: inventory, config: config, now: now)
                try stats.add(try StateView.existing(config))
                all.append(stats)
                if !json { show(stats, config: config) }
            }
            // JSON: the root's object, or an array of them for a ladder's roots.
            if json { print(all.count == 1 ? try CacheText.json(all[0]) : try CacheText.json(all)) }
        }

        private func show(_ stats: CacheStatistics, config: PipelineConfig) {
            func size(_ bytes: Int64) -> String { PlanReport.bytes(Int(bytes)) }
            var lines = [
                "cache of \(stats.output)",
                "  packages     \(stats.packages) (\(stats.expiredPackages) expired, \(stats.unreadablePackages) unreadable)",
                "  audio        \(stats.files) files, \(size(stats.bytes)) of \(size(stats.budgetBytes)) budget",
                "  unreferenced \(stats.unreferencedFiles) files, \(size(stats.unreferencedBytes))",
                "  old audio    \(stats.expiredAudioFiles) files older than \(config.budgets.audioMaxAgeDays) days",
                "  temp files   \(stats.temporaries)",
                "  synthesis    \(stats.synthesisCacheEntries) chunks, \(size(stats.synthesisCacheBytes)) of \(size(stats.synthesisBudgetBytes)) budget",
                "  map tiles    \(stats.tileCacheEntries) cached, \(size(stats.tileCacheBytes)) of \(size(stats.tileBudgetBytes)) budget",
                "  tile packs   \(stats.tilePacks) packs, \(size(stats.tilePackBytes))",
                "  failed       \(stats.failedTours) tour\(stats.failedTours == 1 ? "" : "s") whose last build failed",
                "  builds       "
                    + (stats.builds.isEmpty
                        ? "none recorded"
                        : BuildRecord.Status.allCases.compactMap { status in
                            stats.builds[status.rawValue].map { "\($0) \(status.rawValue)" }
                        }.joined(separator: ", ")),
            ]
            if let last = stats.lastBuild {
                lines.append(
                    "  last build   #\(last.id) \(last.status.rawValue) at \(PackageManifest.timestamp(last.finishedAt ?? last.queuedAt)), "
                        + "\(last.requests) requests, \(PlanReport.grouped(last.characters)) characters billed"
                        + (last.error.map { ": \($0)" } ?? ""))
            }
            for (tourId, reason) in stats.failedTourReasons.sorted(by: { $0.key < $1.key }) {
                lines.append("  failed tour  \(tourId): \(reason)")
            }
            for tour in stats.tours {
                lines.append("  tour \(tour.tourId)  \(tour.files) files, \(size(tour.bytes))\(tour.tourName.map { "  \($0)" } ?? "")")
            }
            print(lines.joined(separator: "\n"))
        }
    }

    struct Prune: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "prune",
            abstract: "Remove expired packages, old unreferenced audio, and unreferenced audio over the budget.",
            discussion: "Audio that a live package lists is never removed. Takes the build lock, so it never runs beside a build.")

        @OptionGroup var options: PipelineOptions
        @Flag(help: "Show what would be removed and remove nothing.") var dryRun = false
        @Flag(help: "Print the plan and what was freed as JSON.") var json = false

        func run() async throws {
            for config in try options.load().qualityRoots() { try await prune(config) }
        }

        private func prune(_ config: PipelineConfig) async throws {
            let layout = Layout(root: config.output)
            if !dryRun { StateLayout(config).adoptFormerRootFolder() }
            let lock =
                dryRun
                ? nil
                : try await BuildLock.acquire(
                    stateFolder: StateLayout(config).rootFolder, root: config.output, wait: false, command: "cache prune")
            defer { lock?.release() }
            let now = CommandClock.now()
            let plan = try CacheMaintenance.run(
                layout: layout, budgets: config.budgets, state: try StateView.existing(config), now: now, overBudgetOnly: false,
                dryRun: dryRun)
            if json {
                print(try CacheText.json(plan))
                return
            }
            for removal in plan.removals {
                print("\(dryRun ? "would remove" : "removed") \(removal.path) (\(removal.reason), \(PlanReport.bytes(Int(removal.bytes))))")
            }
            print(
                "\(dryRun ? "would free" : "freed") \(PlanReport.bytes(Int(plan.freedBytes))) in \(plan.removals.count) removals; "
                    + "AudioCache \(PlanReport.bytes(Int(plan.bytesBefore))) → \(PlanReport.bytes(Int(plan.bytesAfter))) of \(PlanReport.bytes(Int(plan.budgetBytes))) budget"
            )
        }
    }

    struct Clear: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "clear",
            abstract:
                "Remove everything the pipeline wrote: AudioCache, OfflineTours, the synthesis and tile caches and the build records.",
            discussion:
                "The quota ledger stays: it records characters already paid for this month, so clearing it would let jobs pass the quota.")

        @OptionGroup var options: PipelineOptions
        @Flag(help: "Confirm: without it, nothing is removed.") var yes = false

        func run() async throws {
            for config in try options.load().qualityRoots() { try await clear(config) }
        }

        private func clear(_ config: PipelineConfig) async throws {
            guard yes else {
                throw TourpackError.invalidInput(
                    "cache clear removes \(config.output.path)/AudioCache, \(config.output.path)/OfflineTours, the synthesis and tile caches and the build records in \(config.state.path); run it again with --yes"
                )
            }
            StateLayout(config).adoptFormerRootFolder()
            let lock = try await BuildLock.acquire(
                stateFolder: StateLayout(config).rootFolder, root: config.output, wait: false, command: "cache clear")
            defer { lock.release() }
            let freed = try CacheClearing.clear(config, state: try StateView.existing(config))
            print(
                "cleared \(config.output.path) and the caches in \(config.state.path): freed \(PlanReport.bytes(Int(freed))); the quota ledger is kept"
            )
        }
    }
}

enum CacheText {
    static func json(_ value: some Encodable) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }
}

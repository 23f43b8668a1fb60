// `tourpack-bench early [--packages 100] [--skip-demo 1]`: starting a tour
// before its download ends, and the app's library against
// `tourpack install --all`. `make bench` runs it among the last: a missed
// goal exits 1.
//
// - The demo's largest tour (`pipelines/demo.yaml`, built with the embedded
//   espeak-ng voice and tile server, then published), installed over one
//   link held to 1 MB/s (`SiteServer`'s `.link`, shared by every answer):
//   the time until its first narration is playable and until its map has
//   arrived, against the whole download's, for each place the tile pack
//   could go. The product's is `afterFirstPOI`.
// - 100 small packages from a folder site (`file://`): one
//   `tourpack install --all` (the release binary, start-up included)
//   against `OfflineLibrary.download`, tour by tour, 5 runs, the
//   two sides taking turns to go first. Packages of 4 × 16 KiB and a tile
//   pack are the issue's: there the goal is at least 0.9× the CLI's
//   throughput, judged run by run (the median of the 5 pairs). A package
//   of one 1 KiB file is nearly all fixed cost: there the goal is 10 ms or
//   less per package, for the first ten as for the last ten (90 installed
//   already), and its throughput against the CLI's is shown beside it. The
//   bench exits 1 when either goal is missed.
import Foundation
import TourpackClient
import TourpackCore
import TourpackInstall
import TourpackTesting

enum EarlyPlayBench {
    static let libraryGoal = 0.9
    /// The library's time per package of one 1 KiB file, in seconds.
    static let fixedCostGoal = 0.010

    static func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }

    static func run(_ arguments: [String]) async throws {
        let options = try IntegerOptions(arguments, ["--packages": (100, 1), "--skip-demo": (0, 0)])
        let work = TemporaryFolder.path("tourpack-bench-early")
        defer { TemporaryFolder.remove(work) }
        print("early: \(ProcessInfo.processInfo.activeProcessorCount) cores")
        if options["--skip-demo"] == 0 { try await playWhileDownloading(work.appendingPathComponent("play")) }
        try await libraryAgainstCLI(work.appendingPathComponent("folder"), packages: options["--packages"])
    }

    static var tourpack: URL {
        URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
            .appendingPathComponent("tourpack")
    }

    /// A value several tasks set, read at the end.
    final class Moment: @unchecked Sendable {
        private let lock = NSLock()
        private var value: Duration?
        func set(_ new: Duration) { lock.withLock { if value == nil { value = new } } }
        var get: Duration? { lock.withLock { value } }
    }

    static func playWhileDownloading(_ work: URL) async throws {
        guard FileManager.default.isExecutableFile(atPath: tourpack.path) else {
            print("  first playable at 1 MB/s: skipped, \(tourpack.path) is not built (make bench builds it)")
            return
        }
        let built = try await BuildBench.measure(
            tourpack, pipeline: URL(fileURLWithPath: "pipelines/demo.yaml"), scratch: work, name: "demo", latencyMs: 0, tiles: true)
        guard built.exitStatus == 0 else { throw BenchError("the demo's build failed: \(built.failure ?? "")") }
        let source = work.appendingPathComponent("demo/Documents"), site = work.appendingPathComponent("site")
        let key = try await InstallBench.publish(source, to: site)
        func bytes(_ manifest: InstallBench.Manifest) -> Int64 {
            let audio = (manifest.json["audio"] as? [[String: Any]] ?? []).reduce(Int64(0)) {
                $0 + ($1["sizeBytes"] as? Int64 ?? Int64($1["sizeBytes"] as? Int ?? 0))
            }
            let map = manifest.json["mapTiles"] as? [String: Any]
            return audio + (map?["sizeBytes"] as? Int64 ?? Int64(map?["sizeBytes"] as? Int ?? 0))
        }
        guard let largest = try InstallBench.manifests(in: source).max(by: { bytes($0) < bytes($1) }) else {
            throw BenchError("the demo built no package")
        }
        let audio = largest.json["audio"] as? [[String: Any]] ?? []
        let pois = Set(audio.compactMap { $0["poiId"] as? String }).count
        let mapSHA = (largest.json["mapTiles"] as? [String: Any])?["sha256"] as? String
        let mapBytes = (largest.json["mapTiles"] as? [String: Any])?["sizeBytes"] as? Int ?? 0
        print(
            String(
                format:
                    "  the demo's largest tour (%@): %d POIs, %d narrations, %.2f MB with its %.2f MB map, over one link held to 1 MB/s",
                largest.json["tourName"] as? String ?? largest.tourId, pois, audio.count, Double(bytes(largest)) / 1e6,
                Double(mapBytes) / 1e6))
        let server = try SiteServer(root: site)
        defer { server.stop() }
        server.inject { _, _, _, _ in .link(bytesPerSecond: 1_000_000) }
        for placement in DownloadOrder.TilePackPlacement.allCases {
            let documents = work.appendingPathComponent("Documents-\(placement.rawValue)")
            var installer = try InstallBench.installer(documents, server, key)
            installer.tilePackPlacement = placement
            let (playable, map) = (Moment(), Moment())
            let started = ContinuousClock.now
            installer.report = { event in
                if case .job(let job) = event, !job.playable.isEmpty { playable.set(started.duration(to: .now)) }
            }
            // The map is there once its download is verified (renamed to its SHA-256).
            let watcher = Task {
                guard let mapSHA else { return }
                let file = documents.appendingPathComponent(".tourpack-install/downloads/\(mapSHA)")
                while !Task.isCancelled, map.get == nil {
                    if FileManager.default.fileExists(atPath: file.path) { map.set(started.duration(to: .now)) }
                    try? await Task.sleep(for: .milliseconds(10))
                }
            }
            _ = try await installer.install(PackageChoice(tours: [largest.tourId]))
            let whole = started.duration(to: .now)
            watcher.cancel()
            try InstallBench.verify(documents, against: source, packages: [largest.packageId])
            let first = playable.get?.seconds ?? .nan, mapped = map.get?.seconds ?? .nan
            print(
                String(
                    format: "    tile pack %@: first narration playable after %.2f s (%.0f%%), map after %.2f s, whole download %.2f s",
                    placement.rawValue.padding(toLength: 13, withPad: " ", startingAt: 0), first, 100 * first / whole.seconds, mapped,
                    whole.seconds))
            try FileManager.default.removeItem(at: documents)
        }
    }

    static func libraryAgainstCLI(_ work: URL, packages: Int, runs: Int = 5) async throws {
        guard FileManager.default.isExecutableFile(atPath: tourpack.path) else {
            print("  library against the CLI: skipped, \(tourpack.path) is not built (make bench builds it)")
            return
        }
        var missed: [String] = []
        for (files, bytes) in [(4, 16 * 1024), (1, 1024)] {
            let source = work.appendingPathComponent("built-\(files)"), site = work.appendingPathComponent("site-\(files)")
            let payload = try PublishBench.makeRoot(
                at: source, packages: packages, files: files, bytes: bytes, tilePack: files > 1 ? bytes : 0)
            let key = try await InstallBench.publish(source, to: site)
            var cli: [Double] = [], library: [Double] = []
            var cliCPU: [Double] = [], libraryCPU: [Double] = []
            var firstTen: [Double] = [], lastTen: [Double] = []
            // Each side makes and removes thousands of files, and on some file
            // systems making one costs more after many were removed: the sides
            // take turns going first, so neither always pays for the other.
            for run in 0..<runs {
                let documents = work.appendingPathComponent("cli-\(run)")
                let device = work.appendingPathComponent("library-\(run)")
                for side in run.isMultiple(of: 2) ? [0, 1] : [1, 0] {
                    if side == 0 {
                        let started = ContinuousClock.now
                        let (status, _, cpu) = try await Task.detached {
                            try Child.runCounting(
                                tourpack.path,
                                ["install", site.path, "--into", documents.path, "--all", "--public-key", key.verifyingKey.base64],
                                stdout: "/dev/null")
                        }.value
                        guard status == 0 else { throw BenchError("tourpack install --all exited \(status)") }
                        cli.append(started.duration(to: .now).seconds)
                        cliCPU.append(cpu)
                        continue
                    }
                    let offline = OfflineLibrary(
                        documents: device, site: site, trust: try .publicKey(base64: key.verifyingKey.base64),
                        policy: DownloadPolicy(maxStorageBytes: .max))
                    let begun = ContinuousClock.now
                    let cpuBefore = CPUTime.ownSeconds()
                    let catalog = try await offline.refreshCatalog()
                    var each: [Double] = []
                    for tour in catalog.tours {
                        let one = ContinuousClock.now
                        var last: DownloadJob?
                        for try await job in offline.download(tourId: tour.id) { last = job }
                        guard last?.status == .completed else { throw BenchError("\(tour.name): \(String(describing: last))") }
                        each.append(one.duration(to: .now).seconds)
                    }
                    library.append(begun.duration(to: .now).seconds)
                    libraryCPU.append(CPUTime.ownSeconds() - cpuBefore)
                    firstTen.append(each.prefix(10).reduce(0, +) / 10)
                    lastTen.append(each.suffix(10).reduce(0, +) / 10)
                }
                try InstallBench.verify(documents, against: source)
                try InstallBench.verify(device, against: source)
            }
            // The libraries write their last plays a couple of seconds after the downloads.
            try await Task.sleep(for: .seconds(3))
            for run in 0..<runs {
                for name in ["cli-\(run)", "library-\(run)"] { try FileManager.default.removeItem(at: work.appendingPathComponent(name)) }
            }
            let (cliMedian, libraryMedian) = (median(cli), median(library))
            // The goal is judged run by run: the two sides of a run go back to
            // back, so the file system's drift from one run to the next (both
            // sides slow as removed files pile up) cancels out within a pair.
            let pairs = zip(cli, library).map { $0 / $1 }
            let ratio = median(pairs)
            let each = pairs.map { String(format: "%.2f", $0) }.joined(separator: ", ")
            print(
                String(
                    format:
                        "  %d packages of %d × %d KiB from a folder site: tourpack install --all %.2f s, the library tour by tour %.2f s (medians of %d, taking turns to go first)",
                    packages, files, bytes / 1024, cliMedian, libraryMedian, runs)
                    + String(format: "; %.1f MB", Double(payload) / 1e6))
            print(
                "    the library's throughput against the CLI's, run by run: \(each); median "
                    + (files > 1 ? String(format: "%.2f× (goal ≥ %.1f×)", ratio, libraryGoal) : String(format: "%.2f×", ratio)))
            print(
                String(
                    format: "    the library's time per package: %.1f ms for the first ten, %.1f ms for the last ten (median of %d)",
                    median(firstTen) * 1000, median(lastTen) * 1000, runs)
                    + (files == 1 ? String(format: " (goal ≤ %.0f ms: nearly all fixed cost)", fixedCostGoal * 1000) : ""))
            print(
                String(
                    format: "    CPU (user + system), which load changes less: the CLI %.2f s, the library %.2f s (median of %d)",
                    median(cliCPU), median(libraryCPU), runs))
            if files > 1, ratio < libraryGoal {
                missed.append(
                    String(format: "%d × %d KiB: %.2f× the CLI's throughput (goal ≥ %.1f×)", files, bytes / 1024, ratio, libraryGoal))
            }
            let slowest = max(median(firstTen), median(lastTen))
            if files == 1, slowest > fixedCostGoal {
                missed.append(
                    String(format: "1 × 1 KiB: %.1f ms per package (goal ≤ %.0f ms)", slowest * 1000, fixedCostGoal * 1000))
            }
        }
        guard missed.isEmpty else {
            throw BenchError("the library missed its goal: \(missed.joined(separator: "; "))")
        }
    }
}

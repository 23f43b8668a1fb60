package import Foundation
package import NIOPosix
import TourpackCore
import TourpackPlan

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The validate stage: a Documents root in, every problem in it out.
///
/// CI gates each bundle with this before it ships to phones, where a defect
/// cannot be fixed. So, like `swift-format lint --strict`, it never stops at
/// the first problem: each check records what it finds and the run fails
/// once, at the end, with all of it (`ValidationReport`).
///
/// The work has three parts:
/// 1. `BundleInventory` lists the root once: package folders, every file
///    under AudioCache, temps, entries outside the layout.
/// 2. `PackageCheck` reads each package.json: JSON, schema, IDs, the audio
///    list, expiry, map tiles, content hash, sizes, and each path's safety.
/// 3. `AudioFileCheck` checks each listed audio file: size, sha256, a full FFmpeg
///    decode, the format table, duration, and the container details; and
///    `TilePackCheck` each named tile pack: size, sha256, SQLite's
///    integrity check, the metadata and every tile; `CaptionFileCheck` each
///    listed caption file: size, sha256, WebVTT, the cues' count, times and
///    texts. This is the expensive
///    part, so it runs on a `NIOThreadPool`, one thread per core, with at
///    most two files per thread in flight; neither FFmpeg nor SQLite ever
///    blocks Swift's cooperative pool.
/// Then the bundle as a whole: symlinks, stray files, temps, the cache budget.
package struct BundleValidator: Sendable {
    package var options: ValidationOptions

    package init(options: ValidationOptions = .init()) {
        self.options = options
    }

    /// Validates the bundle at `root` on a thread pool of its own.
    /// - Throws: `TourpackError.invalidInput` when `root` is not a folder (exit 2);
    ///   problems in the bundle are findings in the report, never thrown.
    package func validate(root: URL) async throws -> ValidationReport {
        let pool = NIOThreadPool(numberOfThreads: options.threads)
        pool.start()
        do {
            let report = try await validate(root: root, on: pool)
            try await pool.shutdownGracefully()
            return report
        } catch {
            try? await pool.shutdownGracefully()
            throw error
        }
    }

    /// Validates the bundle at `root`, doing all blocking work on `pool`.
    package func validate(root: URL, on pool: NIOThreadPool) async throws -> ValidationReport {
        var status = stat()
        guard stat(root.path, &status) == 0, status.st_mode & S_IFMT == S_IFDIR else {
            throw TourpackError.invalidInput(
                "\(root.path): no such folder; validate takes the Documents root (the one holding AudioCache and OfflineTours)")
        }
        let layout = Layout(root: root)
        let options = self.options
        let inventory = try await pool.runIfActive { try BundleInventory(root: layout.root) }
        let packages = try await pool.runIfActive {
            inventory.packageFolders.map { PackageCheck(layout: layout, name: $0, options: options).run() }
        }
        let fileChecks = packages.flatMap(Self.fileChecks)
        let fileOutcomes = try await run(fileChecks, on: pool)

        // Report order: packages by folder name, each package.json's checks,
        // then its audio files in list order, its caption files and its tile pack; the bundle's own checks last.
        var outcomes: [CheckOutcome] = []
        var checkIndex = 0
        for package in packages {
            outcomes += package.outcomes
            for _ in Self.fileChecks(package) {
                outcomes += fileOutcomes[checkIndex]
                checkIndex += 1
            }
        }
        let listed = packages.reduce(into: Set<String>()) { $0.formUnion($1.listedPaths) }
        let unreadable = packages.filter { $0.summary.tourId == nil }.count
        outcomes += bundleOutcomes(inventory, listed: listed, unreadablePackages: unreadable)
        if options.strict {
            outcomes = outcomes.map { outcome in
                var outcome = outcome
                outcome.findings = outcome.findings.map {
                    var f = $0; f.severity = .error; return f
                }
                return outcome
            }
        }
        return ValidationReport(root: layout.root.path, strict: options.strict, packages: packages.map(\.summary), outcomes: outcomes)
    }

    /// A package's files to check on the pool: its audio in list order, its caption files, then its tile pack.
    private static func fileChecks(_ package: PackageCheck.Result) -> [any FileCheck] {
        package.audioChecks + package.captionChecks + (package.tilePackCheck.map { [$0] } ?? [])
    }

    /// Each file's checks on the pool, at most `2 × threads` at a time, results in input order.
    private func run(_ checks: [any FileCheck], on pool: NIOThreadPool) async throws -> [[CheckOutcome]] {
        var results = [[CheckOutcome]](repeating: [], count: checks.count)
        let width = options.threads * 2
        try await withThrowingTaskGroup(of: (Int, [CheckOutcome]).self) { group in
            var next = 0
            func start() {
                let index = next
                let check = checks[index]
                group.addTask { (index, try await pool.runIfActive { check.run() }) }
                next += 1
            }
            while next < min(width, checks.count) { start() }
            for try await (index, outcomes) in group {
                results[index] = outcomes
                if next < checks.count { start() }
            }
        }
        return results
    }

    /// Temps, symlinks, strays, package folders without package.json, and the cache budget.
    /// A file of a package whose package.json cannot be read looks stray; the
    /// message says so, since the fix is then the package.json, not the file.
    private func bundleOutcomes(_ inventory: BundleInventory, listed: Set<String>, unreadablePackages: Int) -> [CheckOutcome] {
        var bundle = OutcomeRecorder(package: nil, subject: ".")
        bundle.ran(.packages)
        if inventory.packageFolders.isEmpty {
            bundle.warning(
                .packages, "no package.json under \(Layout.offlineToursFolder); nothing to ship", path: Layout.offlineToursFolder)
        }
        for folder in inventory.foldersWithoutManifest {
            bundle.warning(.packages, "package folder without package.json (left by an interrupted build?)", path: folder)
        }
        bundle.ran(.temporary)
        for temp in inventory.temporaries {
            bundle.error(.temporary, "leftover temp file of an interrupted write; the next build removes it, or delete it", path: temp)
        }
        bundle.ran(.symlink)
        // A link a package lists is that package's finding (`PackageCheck`); every other one is the bundle's.
        for link in inventory.symlinks where !listed.contains(link.path) {
            bundle.error(
                .symlink,
                "symlink to \(link.target): AudioCache, OfflineTours and everything in them must be real folders and files, "
                    + "since a link can take the app's reads and a build's writes out of the root; never followed",
                path: link.path)
        }
        bundle.ran(.stray)
        let caveat =
            unreadablePackages == 0
            ? ""
            : "; \(unreadablePackages == 1 ? "a package.json" : "\(unreadablePackages) package.json files") could not be read and may list it"
        for file in inventory.audioCacheFiles where !listed.contains(file.path) {
            let kind = file.isSymlink ? "symlink" : "file"
            bundle.warning(.stray, "stray \(kind): no package lists it (\(PlanReport.bytes(Int(file.size))))\(caveat)", path: file.path)
        }
        for pack in inventory.tilePacks where !listed.contains(pack.path) {
            let kind = pack.isSymlink ? "symlink" : "tile pack"
            bundle.warning(
                .stray, "stray \(kind): its folder's package.json does not list it (\(PlanReport.bytes(Int(pack.size))))\(caveat)",
                path: pack.path)
        }
        for file in inventory.captionFiles where !listed.contains(file.path) {
            bundle.warning(
                .stray, "stray caption file: its folder's package.json does not list it (\(PlanReport.bytes(Int(file.size))))\(caveat)",
                path: file.path)
        }
        for path in inventory.tilePackSideFiles {
            bundle.warning(
                .stray, "SQLite side file beside the tile pack (the pack was opened for writing in place?); the app never reads it",
                path: path)
        }
        for path in inventory.misplaced {
            bundle.warning(
                .stray,
                "not part of the layout (AudioCache/<tourId>/..., OfflineTours/<packageId>/package.json, tiles.mbtiles or captions/*.vtt)",
                path: path)
        }
        if let limits = options.limits {
            bundle.ran(.cacheBudget)
            if inventory.audioCacheBytes > limits.cacheMaxBytes {
                bundle.error(
                    .cacheBudget,
                    "AudioCache holds \(PlanReport.bytes(Int(inventory.audioCacheBytes))), over the budget of \(PlanReport.bytes(Int(limits.cacheMaxBytes))) (budgets.cacheMaxMB)",
                    path: Layout.audioCacheFolder)
            }
        }
        return bundle.outcomes
    }
}

/// Blocking checks of one file, run on the pool: nothing throws, every problem is an outcome.
protocol FileCheck: Sendable {
    func run() -> [CheckOutcome]
}

extension AudioFileCheck: FileCheck {}
extension TilePackCheck: FileCheck {}
extension CaptionFileCheck: FileCheck {}

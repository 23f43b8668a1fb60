package import Foundation
package import TourpackPackage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// `tourpack install`: the device's side of publishing. The packages a
/// person chose, from a site's catalogue into a Documents root, as the app
/// would download them:
///
/// ```
///  lock ─▶ finish a killed commit ─▶ catalog.json (If-None-Match; signature) ─▶ choose ─▶ plan
///        (journal)                  (CatalogReader)                          (PackageSelection, PackagePlanner:
///                                                                             package.json checked, files that differ)
///  ─▶ download every file (resume, retry) ─▶ verify size and SHA-256 ─▶ commit each package (PackageCommit)
///     (SiteSource)                          (downloads/<sha256>)        (package.json last; superseded, obsolete go)
/// ```
///
/// Nothing is committed until every file of every chosen package has
/// arrived and matched its SHA-256: a tampered or missing file, manifest or
/// catalogue installs nothing, and every installed package stays as it was,
/// byte for byte. An up-to-date package costs the conditional catalogue
/// request and nothing more. A caller that verified the catalogue and read
/// the installed packages moments before (the app's library) hands them
/// over (`known`), and the install reads neither again.
///
/// Each plan's package.json waits in `downloads` under its SHA-256 until the
/// package is committed. Once the plans are made, whatever `downloads` holds
/// that neither a plan nor such a waiting package.json of a package the
/// catalogue still lists names goes. Each file's download is bounded in
/// size, rate, time and tries (`ResumableDownload`). A cancelled install
/// (SIGINT, SIGTERM) removes its partial downloads; one that fails
/// otherwise keeps them, and a later install of the package resumes them,
/// even after installs of other packages.
///
/// The file work (the lock, mkdir, fsync, the manifests read, the clean-up)
/// runs on `Blocking`'s queue, never on the cooperative pool.
package struct Installer: Sendable {
    /// Set by the app's library before it cancels an install to pause it.
    package final class SuspensionFlag: @unchecked Sendable {
        private let lock = NSLock()
        private var set = false

        package init() {}

        package var isSet: Bool { lock.withLock { set } }
        package func raise() { lock.withLock { set = true } }
    }

    package let folder: InstallFolder
    package let source: any SiteSource
    /// What the catalogue must be signed by; nil installs an unsigned site unchecked.
    package let trust: CatalogTrust?
    /// Files downloading at once.
    package var concurrency = 4
    package var report: @Sendable (InstallEvent) -> Void = { _ in }
    /// The clock the catalogue's and the packages' `expiresAt` are judged by.
    package var now: @Sendable () -> Date = { Date() }
    /// What the caller verified and read already; nil: the install reads both.
    package var known: Known?
    /// The CLI holds the Documents root's lock for the whole install; the
    /// app's library (false) only while the folder changes (the recovery,
    /// the downloads' sweep, each commit), so that a delete or another
    /// tour's removal proceeds while a download runs.
    package var holdsLockThroughout = true
    /// Set before the install's task is cancelled to stop it as a pause,
    /// not a cancel: its downloads stay to be resumed.
    package var suspension: SuspensionFlag?
    /// The phone's side of every folder and file the install makes.
    package var storage: DeviceStorage = .system
    /// The POIs whose files go first, changed while the install runs.
    package var priorities: DownloadPriorities?
    /// Whether the install checks the state folders (a symlink in the place
    /// of one refused, missing ones made, the library's folders excluded
    /// from backup) and sweeps what killed runs left half made in the
    /// Documents layout (one listing per tour and package folder). The app's
    /// library does both on its first install of a process and after one
    /// that failed; the others only finish journalled commits, so that a
    /// download's fixed cost does not grow with the packages installed.
    package var checksFolder = true
    /// Whether progress is also reported at each percent (the command
    /// line's `--json`), not only every quarter second (`JobBoard`).
    package var reportsPercentSteps = true
    /// Where a first download's tile pack goes: the product's choice unless a bench compares.
    package var tilePackPlacement: DownloadOrder.TilePackPlacement = .afterFirstPOI

    /// A catalogue the caller verified for this folder, and the packages
    /// installed as the caller holds them. The CLI has neither and the
    /// install reads both; the app's library has both from moments before.
    package struct Known: Sendable {
        /// Accepted by a `CatalogReader` of this folder and its trust: the
        /// install makes no catalogue request and walks no root. It is still
        /// refused past its `expiresAt`, and the site's is read after all
        /// when the folder has verified another generation since.
        package var catalog: Catalog
        /// Asked once the install holds the lock, so the caller can check
        /// what it holds against the disk then.
        package var installed: @Sendable () async -> [PackageOnDisk]
        /// What the caller read before, taken as it is when the install's
        /// start changed nothing in the layout (no killed commit finished,
        /// no sweep) and `holdsCurrent` accepts `OfflineTours` as the start
        /// finds it: `installed` is not asked then.
        package var held: [PackageOnDisk]?
        /// Whether `held` is current for `OfflineTours` in this state (nil: absent). Called off the cooperative pool.
        package var holdsCurrent: @Sendable (FileStatus?) -> Bool
        /// `trust.json` as it was once the caller verified `catalog` (its
        /// record then naming that generation at this site): while the file
        /// is still that one, no other process verified another generation
        /// since, and the record is not read again.
        package var trustFile: FileStatus?
        /// The downloads folder as the caller's last install left it
        /// (`Outcome.downloadsLeft`): while it is still that folder, unchanged,
        /// nothing was left in it since, and the install does not sweep it.
        package var downloadsLeft: FileStatus?

        package init(
            catalog: Catalog, trustFile: FileStatus? = nil, held: [PackageOnDisk]? = nil,
            holdsCurrent: @escaping @Sendable (FileStatus?) -> Bool = { _ in true },
            installed: @escaping @Sendable () async -> [PackageOnDisk]
        ) {
            self.catalog = catalog
            self.trustFile = trustFile
            self.held = held
            self.holdsCurrent = holdsCurrent
            self.installed = installed
        }
    }

    package init(documents: URL, source: any SiteSource, trust: CatalogTrust?) {
        self.folder = InstallFolder(documents: documents)
        self.source = source
        self.trust = trust
    }

    package init(documents: URL, source: any SiteSource, publicKey: VerifyingKey?) {
        self.init(documents: documents, source: source, trust: publicKey.map(CatalogTrust.key))
    }

    package var documents: URL { folder.documents }

    /// What an install did.
    package struct Outcome: Sendable {
        package var catalog: CatalogSummary
        package var installed: [String] = []
        package var updated: [String] = []
        /// Only package.json changed (a renewed expiry): no file was downloaded.
        package var refreshed: [String] = []
        package var upToDate: [String] = []
        /// Packages of another voice whose files the new ones replaced, now removed.
        package var superseded: [String] = []
        package var downloadedFiles = 0
        package var downloadedBytes: Int64 = 0
        package var removedFiles = 0
        package var jobs: [DownloadJob] = []
        /// The packages committed, with their package.json's identity as
        /// the commit left it (read under the lock, right after it).
        package var committed: [PackageOnDisk] = []
        /// `OfflineTours` before this install's first commit and after its
        /// last, under the lock: when the first is what a caller saw, no
        /// other process added or removed a package folder in between.
        package var toursFolder: (before: FileStatus?, after: FileStatus?)?
        /// The downloads folder as the last commit left it, emptied of what
        /// the install fetched (nil when nothing was committed).
        package var downloadsLeft: FileStatus?
    }

    /// Installs or updates the chosen packages.
    /// - Parameter noReinstall: a chosen package installed at the
    ///   catalogue's version is `alreadyDownloaded` (nothing is done), not
    ///   quietly up to date.
    package func install(_ choice: PackageChoice, noReinstall: Bool = false) async throws -> Outcome {
        let prepared = await prepare(choice)
        let start = try await begin(prepared: prepared)
        defer { start.lock.release() }
        let staging = start.staging
        let downloading: InstallLock
        if let held = start.downloading { downloading = held } else { downloading = try await downloadsLock() }
        defer { downloading.release() }
        let board = JobBoard(percentSteps: reportsPercentSteps, report: report)
        do {
            return try await run(
                choice, noReinstall: noReinstall, staging: staging, trustUnchanged: start.trustUnchanged,
                changedLayout: start.changedLayout, prepared: prepared, found: start.ready, board: board)
        } catch {
            if suspension?.isSet == true, Task.isCancelled {
                // Paused (by the user or the network): what arrived stays for the resume.
                throw CancellationError()
            }
            if error is CancellationError || (error as? TourpackError)?.kind == .cancelled || Task.isCancelled {
                // Cancelled: nothing partial stays behind.
                await Blocking.cleanUp { [folder] in
                    folder.discardDownloads()
                    staging.discardAll()
                }
                board.settleOthers(as: .cancelled, message: "cancelled")
                throw TourpackError.cancelled
            }
            await Blocking.cleanUp { staging.discardAll() }
            let message = (error as? TourpackError)?.description ?? "\(error)"
            board.settleOthers(as: .failed, message: "not installed: \(message)")
            throw error
        }
    }

    /// How an install starts, in one trip off the cooperative pool: the
    /// state folders checked (`checksFolder`), the Documents root's lock,
    /// a killed commit finished (`recover`), then the downloads' lock. The
    /// app's library lets the root's lock go before it takes the downloads'
    /// one (a process holding that one may need the root's to commit), and
    /// when another process downloads, `downloading` is nil: the caller
    /// waits for it (`downloadsLock`). `trustUnchanged`: `trust.json` is the
    /// file `known` names, so the record it verified is still the folder's.
    private struct Start: Sendable {
        var lock: InstallLock
        var staging: StagingArea
        var downloading: InstallLock?
        var trustUnchanged: Bool
        /// A killed commit was finished, the layout swept, or `OfflineTours`
        /// is not what the caller saw: the packages may differ from what it holds.
        var changedLayout: Bool
        /// The downloads readied for the `Prepared` plans (`ready`), when the
        /// trip found the folder as the caller saw it and took the downloads' lock.
        var ready: [String: Found]?
    }

    /// The plans of a download of the app's library, made before the
    /// install's first trip from the catalogue and packages its caller holds
    /// (`Known`). When that trip finds the folder as the caller saw it, it
    /// also readies the downloads for them (`ready`): one trip off the pool
    /// and one lock before the first byte, not two.
    private struct Prepared: Sendable {
        var installed: [PackageOnDisk]
        var plans: [PackagePlan]
        /// Why a plan could not be made (the site unreachable, a package.json
        /// refused): thrown where the install plans, when it would plan from
        /// the same catalogue and packages, rather than asking the site twice.
        var failure: TourpackError?
    }

    /// What `downloads` holds of a file the install fetches, as the trip
    /// that readied the downloads found it (under the downloads' lock).
    struct Found: Sendable {
        var verified: Bool
        var partialBytes: Int64
    }

    /// The plans an install of the app's library can make before it starts
    /// (`Prepared`); nil for the command line, the library's first install
    /// of a process, and whenever a warning or a refusal is due: those go
    /// the usual way, reported once.
    private func prepare(_ choice: PackageChoice) async -> Prepared? {
        guard !holdsLockThroughout, !checksFolder, let known, let held = known.held else { return nil }
        let moment = now()
        var warned = false
        guard let chosen = try? PackageSelection.choose(known.catalog, installed: held, choice: choice, warn: { _ in warned = true }),
            !warned, !chosen.isEmpty, chosen.allSatisfy({ $0.package.expiresAt > moment })
        else { return nil }
        let planner = PackagePlanner(source: source, documents: documents)
        var plans: [PackagePlan] = []
        for entry in chosen {
            do { plans.append(try await planner.plan(entry, installed: held)) } catch let error as TourpackError {
                return Prepared(installed: held, plans: [], failure: error)
            } catch {
                return nil
            }
        }
        return Prepared(installed: held, plans: plans)
    }

    private func begin(prepared: Prepared?) async throws -> Start {
        let (folder, storage, checksFolder, throughout) = (self.folder, self.storage, self.checksFolder, holdsLockThroughout)
        let (held, holdsCurrent) = (known?.trustFile, known?.holdsCurrent)
        let (verifies, catalog, left) = (trust != nil, known?.catalog, known?.downloadsLeft)
        return try await Blocking.run {
            if checksFolder { try folder.prepare(storage: storage) }
            // The library waits a moment for a holder that holds it per operation.
            let lock = try InstallLock.acquire(documents: folder.documents, waitingUpTo: throughout ? 0 : 60)
            do {
                let (staging, replayed) = try Self.recover(folder, sweeps: checksFolder)
                // Taken without waiting, so holding the root's lock meanwhile
                // cannot deadlock with a process that holds it and waits for the root's.
                let downloading: InstallLock?
                do {
                    downloading = try Self.takeDownloadsLock(folder, storage: storage)
                } catch let error as TourpackError where error.kind == .alreadyDownloading && !throughout {
                    downloading = nil
                }
                do {
                    let unchanged = held != nil && FileStatus(path: folder.trustFile.path) == held
                    var start = Start(
                        lock: lock, staging: staging, downloading: downloading, trustUnchanged: unchanged,
                        changedLayout: checksFolder || replayed > 0
                            || holdsCurrent?(FileStatus(path: folder.toursFolder.path)) == false
                    )
                    // The catalogue is the caller's when no trust is asked or
                    // no other process verified another since (`verifiedCatalog`).
                    if let prepared, prepared.failure == nil, let catalog, downloading != nil, !start.changedLayout,
                        !verifies || unchanged
                    {
                        start.ready = try Self.ready(
                            prepared.plans.filter { $0.action != .upToDate }, of: prepared.plans, catalog: catalog,
                            installed: prepared.installed, folder: folder, storage: storage, left: left)
                    }
                    if !throughout { lock.release() }
                    return start
                } catch {
                    downloading?.release()
                    throw error
                }
            } catch {
                lock.release()
                throw error
            }
        }
    }

    /// Readies `downloads` for the plans that fetch (`work`), under both
    /// locks: what earlier installs left there for files neither a plan nor
    /// a package of the catalogue waiting for its commit names goes first,
    /// unless the folder is as the caller's last install left it (`left`,
    /// `Known.downloadsLeft`), with nothing in it. Then each plan's
    /// package.json waits there, the files another installed package holds
    /// are linked in (`reuseInstalledCopies`), the room is checked, and what
    /// the folder holds of each file is returned for its fetch. Blocking.
    private static func ready(
        _ work: [PackagePlan], of plans: [PackagePlan], catalog: Catalog, installed: [PackageOnDisk],
        folder: InstallFolder, storage: DeviceStorage, left: FileStatus?
    ) throws -> [String: Found] {
        let unchanged = left != nil && FileStatus(path: folder.downloads.path) == left
        for plan in work { try folder.keepWaiting(plan) }
        if !unchanged {
            let planned = Set(work.map(\.entry.package.manifest.sha256))
            let named = Set(plans.flatMap(\.downloads).map(\.sha256)).union(planned)
                .union(folder.waitingFiles(of: catalog, besides: planned))
            _ = folder.sweepDownloads(keeping: named)
        }
        reuseInstalledCopies(of: work, installed: installed, folder: folder)
        var found: [String: Found] = [:]
        for file in work.flatMap(\.downloads) where found[file.sha256] == nil {
            found[file.sha256] = Found(
                verified: OutputTree.kind(folder.verified(file.sha256)) == .file,
                partialBytes: InstallFolder.size(of: folder.partial(file.sha256)))
        }
        try checkSpace(for: work, found: found, folder: folder, storage: storage)
        return found
    }

    private static func takeDownloadsLock(_ folder: InstallFolder, storage: DeviceStorage) throws -> InstallLock {
        let lock = try InstallLock.acquireDownloads(folder)
        storage.protect(folder.url.appendingPathComponent("download.lock"))
        return lock
    }

    /// The downloads' lock (`InstallLock.acquireDownloads`): the CLI's
    /// install, which holds the root's lock, takes it at once or fails; the
    /// app's library waits its turn behind another process's downloads.
    private func downloadsLock() async throws -> InstallLock {
        let folder = self.folder
        while true {
            do {
                return try await Blocking.run { [storage] in try Self.takeDownloadsLock(folder, storage: storage) }
            } catch let error as TourpackError
                where error.kind == .alreadyDownloading && !holdsLockThroughout
            {
                try await Task.sleep(for: .milliseconds(100))
            }
        }
    }

    /// `work` under the lock when the install holds it per operation; as it is otherwise.
    private func whileLocked<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        guard !holdsLockThroughout else { return try await Blocking.run(work) }
        let folder = self.folder
        return try await Blocking.run {
            let lock = try InstallLock.acquire(documents: folder.documents, waitingUpTo: 60)
            defer { lock.release() }
            return try work()
        }
    }

    /// Finishes a commit a killed install left (its journal), then removes
    /// what such an install left half made (`sweeps`); and how many
    /// commits it finished. Blocking.
    private static func recover(_ folder: InstallFolder, sweeps: Bool) throws -> (StagingArea, replayed: Int) {
        let replayed = try CommitJournal.replayAll(state: folder.url, root: folder.documents)
        let staging = try StagingArea(state: folder.url, output: folder.documents)
        guard sweeps else { return (staging, replayed) }
        let layout = Layout(root: folder.documents)
        _ = try staging.removeLeftovers(in: layout)
        // Caption temps wait beside their final paths when the state is on
        // another file system: one level deeper than the sweep above looks.
        if staging.folder == nil {
            let tours = layout.root.appendingPathComponent(Layout.offlineToursFolder, isDirectory: true)
            for name in ((try? FileManager.default.contentsOfDirectory(atPath: tours.path)) ?? []).sorted() {
                guard let packageID = SafeID(validating: name), packageID.value == name else { continue }
                let captions = layout.captionsFolder(packageID: packageID).url
                if OutputTree.kind(captions) == .folder { try AtomicFile.removeStaleTemporaries(in: captions) }
            }
        }
        return (staging, replayed)
    }

    /// - Parameters:
    ///   - prepared: the plans made before the install's first trip (`prepare`).
    ///   - found: what that trip found of their files, when it readied them (`Start.ready`).
    private func run(
        _ choice: PackageChoice, noReinstall: Bool, staging: StagingArea, trustUnchanged: Bool, changedLayout: Bool,
        prepared: Prepared?, found readied: [String: Found]?, board: JobBoard
    ) async throws -> Outcome {
        let (catalog, summary) = try await verifiedCatalog(trustUnchanged: trustUnchanged)
        report(.catalog(summary))
        var outcome = Outcome(catalog: summary)
        let installed: [PackageOnDisk]
        let plans: [PackagePlan]
        if let prepared, readied != nil {
            (installed, plans) = (prepared.installed, prepared.plans)
        } else {
            if let known {
                if let held = known.held, !changedLayout { installed = held } else { installed = await known.installed() }
            } else {
                let (read, unreadable) = try await Blocking.run { [documents] in PackageOnDisk.read(documents: documents) }
                for path in unreadable { report(.warning("\(path) cannot be read as a package.json; left as it is")) }
                installed = read
            }
            let chosen = try unexpired(try PackageSelection.choose(catalog, installed: installed, choice: choice) { report(.warning($0)) })
            if chosen.isEmpty { report(.warning("no package of the catalogue was chosen")) }
            // Planned from the same catalogue and packages, it would fail the same way.
            if let failure = prepared?.failure, !changedLayout, trust == nil || trustUnchanged { throw failure }
            let planner = PackagePlanner(source: source, documents: documents)
            var made: [PackagePlan] = []
            for entry in chosen { made.append(try await planner.plan(entry, installed: installed)) }
            plans = made
        }
        let current = plans.filter { $0.action == .upToDate }
        if noReinstall, !current.isEmpty {
            throw TourpackError.alreadyDownloaded(
                package: current.map(\.name).joined(separator: ", "),
                message: "installed at the catalogue's version already (generation \(catalog.generation)); nothing was downloaded")
        }
        for plan in current {
            outcome.upToDate.append(plan.packageId)
            report(.upToDate(packageId: plan.packageId, tourName: plan.entry.tour.tourName))
        }
        let work = plans.filter { $0.action != .upToDate }
        for plan in work {
            let audio = plan.downloads.filter { !$0.isTilePack }.reduce(Int64(0)) { $0 + $1.sizeBytes }
            board.add(
                DownloadJob(
                    packageId: plan.packageId, tourKey: plan.entry.tour.tourId, tourName: plan.entry.tour.tourName, audioBytes: audio,
                    mapBytes: plan.downloadBytes - audio),
                narrations: plan.playableNarrations)
        }
        let found: [String: Found]
        if let readied {
            found = readied
        } else {
            let left = checksFolder ? nil : known?.downloadsLeft
            found = try await whileLocked { [folder, plans, storage] in
                try Self.ready(work, of: plans, catalog: catalog, installed: installed, folder: folder, storage: storage, left: left)
            }
        }
        try await download(work, found: found, board: board)

        let commit = PackageCommit(folder: folder, staging: staging)
        for (index, plan) in work.enumerated() {
            board.move(plan.packageId, to: .downloading, step: .bundling)
            // A blob that a later package of this install names too (the same
            // sentence in two tours) stays until that package's commit.
            let later = Set(work.dropFirst(index + 1).flatMap { $0.downloads.map(\.sha256) })
            let done = plan.downloads.map(\.sha256).filter { !later.contains($0) } + [plan.entry.package.manifest.sha256]
            let held = plan.manifest.map {
                PackageOnDisk(
                    manifest: $0, manifestBytes: plan.manifestBytes, manifestSHA256: plan.entry.package.manifest.sha256, files: plan.files)
            }
            let tours = folder.toursFolder.path
            do {
                let (committed, before, after, downloadsLeft) = try await whileLocked { [storage, documents, folder] in
                    let before = FileStatus(path: tours)
                    try commit.commit(plan)
                    plan.protectCommitted(in: documents, storage: storage)
                    folder.discardDownloads(of: done)
                    let downloadsLeft = FileStatus(path: folder.downloads.path)
                    let read = held.map { PackageOnDisk.read(documents: documents, packageId: plan.packageId, reusing: $0) }
                    guard case .package(let committed) = read else {
                        return (PackageOnDisk?.none, before, FileStatus(path: tours), downloadsLeft)
                    }
                    return (committed, before, FileStatus(path: tours), downloadsLeft)
                }
                if let committed { outcome.committed.append(committed) }
                outcome.toursFolder = (outcome.toursFolder?.before ?? before, after)
                outcome.downloadsLeft = downloadsLeft
            } catch {
                board.move(plan.packageId, to: .failed, message: (error as? TourpackError)?.description ?? "\(error)")
                throw error
            }
            board.move(plan.packageId, to: .completed)
            switch plan.action {
            case .install: outcome.installed.append(plan.packageId)
            case .update: outcome.updated.append(plan.packageId)
            case .refresh: outcome.refreshed.append(plan.packageId)
            case .upToDate: break
            }
            outcome.superseded += plan.superseded.map(\.packageId)
            outcome.downloadedFiles += plan.downloads.count
            outcome.downloadedBytes += plan.downloadBytes
            outcome.removedFiles += plan.obsolete.count
        }
        outcome.jobs = board.all
        return outcome
    }

    /// The chosen packages not past their own `expiresAt`: an expired one is
    /// never installed. Left out with a warning; when every one chosen has
    /// expired, the install fails with `catalogExpired`, naming them.
    private func unexpired(_ chosen: [CatalogEntry]) throws -> [CatalogEntry] {
        let moment = now()
        let expired = chosen.filter { $0.package.expiresAt <= moment }
        guard !expired.isEmpty else { return chosen }
        let names = expired.map {
            "\(TourpackError.packageName($0.package.packageId, tourName: $0.tour.tourName)) expired at \(PackageManifest.timestamp($0.package.expiresAt))"
        }
        if expired.count == chosen.count {
            throw TourpackError(
                .catalogExpired,
                "\(names.joined(separator: "; ")): an expired package is never installed; the publisher must rebuild it",
                context: TourpackError.Context(
                    item: expired.count == 1
                        ? TourpackError.packageName(expired[0].package.packageId, tourName: expired[0].tour.tourName) : nil,
                    url: source.location))
        }
        for name in names { report(.warning("\(name); not installed")) }
        return chosen.filter { $0.package.expiresAt > moment }
    }

    /// The catalogue to install from: the one the caller verified (`known`)
    /// while it is the one this folder verified last and not expired, else
    /// the site's, read and verified.
    private func verifiedCatalog(trustUnchanged: Bool) async throws -> (Catalog, CatalogSummary) {
        let site = source.location
        if let catalog = known?.catalog {
            let record = trustUnchanged ? nil : try await Blocking.run { [folder] in folder.trustRecord() }
            if trust == nil || trustUnchanged || (record?.site == site && record?.generation == catalog.generation) {
                if trust != nil { try CatalogReader.checkExpiry(catalog, at: now(), site: site) }
                let summary = CatalogSummary(
                    catalog, site: site, notModified: true, verifiedBy: trust.map { catalog.signedBy ?? $0.description })
                return (catalog, summary)
            }
        }
        return try await CatalogReader(source: source, folder: folder, trust: trust, now: now).read()
    }

    /// Refuses up front a download the file system has no room for, naming the root.
    private static func checkSpace(
        for plans: [PackagePlan], found: [String: Found], folder: InstallFolder, storage: DeviceStorage
    ) throws {
        let documents = folder.documents
        var needed: Int64 = 0
        var seen: Set<String> = []
        for file in plans.flatMap(\.downloads) where seen.insert(file.sha256).inserted {
            guard let held = found[file.sha256], !held.verified else { continue }
            needed += file.sizeBytes - held.partialBytes
        }
        guard needed > 0, let free = storage.availableBytes(documents) else { return }
        if needed > free {
            throw TourpackError.storageFailed(
                path: documents.path, errno: ENOSPC,
                operation: "download \(needed) bytes (\(free) free)")
        }
    }
}

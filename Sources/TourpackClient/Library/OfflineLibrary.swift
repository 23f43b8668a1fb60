public import Foundation
import TourpackPackage

#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

/// The touring app's offline layer: the catalogue of a published site,
/// the packages on the device, and their downloads, in one actor.
///
/// ```swift
/// let library = OfflineLibrary(documents: documents, site: site, trust: try .publicKey(base64: key))
/// _ = await library.resumeDownloads()            // at launch: what the last run left
/// let catalog = try await library.refreshCatalog()
/// for try await job in library.download(tourId: tour.id) { show(job) }
/// let url = await library.audioFile(tourId: tour.id, poiId: poi, phase: .approaching)
/// ```
///
/// Everything it writes lives in `documents`, in the layout the app plays
/// from (`AudioCache/…`, `OfflineTours/<packageId>/…`) and its own hidden
/// `.tourpack-install` folder: the catalogue last verified, the download
/// queue, the downloads on their way, the commit journal, and when each
/// tour was last played. On a phone the three folders stay out of backups
/// and their files are readable once the phone was unlocked after boot.
///
/// Downloads go one at a time, in the order asked, and only over a network
/// the policy allows (Wi-Fi by default: `NetworkMonitoring`). The queue is
/// kept on disk: after the app is killed, a new library on the same folder
/// knows every download, and `resumeDownloads()` continues them from the
/// last byte. Every file is verified against the signed catalogue before
/// the package is committed, and the package installed before stays until then.
///
/// Nothing here waits on the network but `refreshCatalog()` and the
/// downloads: `state(of:)` and the files read only what is on the device,
/// off the actor and the cooperative pool.
public actor OfflineLibrary {
    public nonisolated let documents: URL
    public nonisolated let site: URL
    public nonisolated let trust: TrustAnchor?
    public internal(set) var policy: DownloadPolicy

    let folder: InstallFolder
    let source: any SiteSource
    let now: @Sendable () -> Date
    let network: any NetworkMonitoring
    let storage: DeviceStorage
    let broadcast = JobBroadcast()
    let queueFile: DownloadQueueFile
    var verified: (catalog: Catalog, snapshot: CatalogSnapshot)?

    // The queue (OfflineLibrary+Download.swift).
    var downloads: [QueuedDownload] = []
    var opened: Task<Void, Never>?
    var running: RunningDownload?
    var path: NetworkPath?
    var watcher: Task<Void, Never>?

    var playing: UUID?
    /// Whether an install of this library checked the state folders and
    /// swept what killed runs left (`Installer.checksFolder`): the first of
    /// a process does, and the first after a failure.
    var folderChecked = false
    /// The downloads folder as this library's last install left it, none
    /// after a failure (`Installer.Known.downloadsLeft`).
    var downloadsLeft: FileStatus?
    /// `trust.json` as it was when its record was last read and named this
    /// generation (`trustFile(of:)`).
    var trustFileSeen: (generation: Int, file: FileStatus)?
    /// The POIs the app wants first, per tour (`prioritize`), until its download ends.
    var preferred: [UUID: DownloadPriorities] = [:]
    /// The downloads read back from queue.json, which an earlier process
    /// asked for: one whose package it committed before it was killed,
    /// ahead of its record's removal, ends as completed, not as a second ask.
    var restoredDownloads: Set<UUID> = []
    /// Files of first downloads this library hashed, as they were then:
    /// each is hashed again only once it changed (OfflineLibrary+Playing.swift).
    var arrivedChecked: [String: FileStatus] = [:]
    /// The package.json files waiting in `downloads`, read and checked, by SHA-256.
    var waitingManifests: [String: PackageManifest] = [:]
    /// What an update of a package would download, by its catalogue
    /// `contentHash`: worked out when the catalogue is refreshed.
    var updateBytes: [String: Int64] = [:]
    /// The packages on disk and the access log, as last read.
    private var device: DeviceView?
    /// Plays recorded since the access log was last written (`markAccessed`).
    private var accessed: [String: Date] = [:]
    private var accessFlush: Task<Void, Never>?

    /// - Parameters:
    ///   - documents: the app's Documents folder.
    ///   - site: the published site (an `https://` base URL, or a `file://` folder).
    ///   - trust: the key, or root of trust, the catalogue must be signed with.
    ///   - policy: storage budget, networks and retry limits.
    ///   - network: where the library learns the device's network; the system's by default.
    ///   - configuration: the URLSession configuration to read the site
    ///     with (an app's tests hand one whose `protocolClasses` serve a
    ///     site in process); the library sets its caching and limits on a copy.
    public init(
        documents: URL, site: URL, trust: TrustAnchor, policy: DownloadPolicy = DownloadPolicy(),
        network: any NetworkMonitoring = SystemNetworkMonitor(), configuration: URLSessionConfiguration? = nil
    ) {
        self.init(
            documents: documents, site: site, trust: Optional(trust), policy: policy, network: network, configuration: configuration,
            now: { Date() })
    }

    /// The same, with the clock the library judges expiry by (tests pin it),
    /// and `trust` nil for a site published without a key.
    public init(
        documents: URL, site: URL, trust: TrustAnchor?, policy: DownloadPolicy = DownloadPolicy(),
        network: any NetworkMonitoring = SystemNetworkMonitor(), configuration: URLSessionConfiguration? = nil,
        now: @escaping @Sendable () -> Date
    ) {
        self.init(
            documents: documents, site: site, trust: trust, policy: policy, network: network, configuration: configuration,
            storage: .system, now: now)
    }

    /// Every seam, the storage one included (the tests record its calls).
    package init(
        documents: URL, site: URL, trust: TrustAnchor?, policy: DownloadPolicy, network: any NetworkMonitoring,
        configuration: URLSessionConfiguration?, storage: DeviceStorage, now: @escaping @Sendable () -> Date
    ) {
        self.documents = documents.standardizedFileURL
        self.site = site
        self.trust = trust
        self.policy = policy
        self.now = now
        self.network = network
        self.storage = storage
        folder = InstallFolder(documents: documents)
        queueFile = DownloadQueueFile(folder: folder, storage: storage)
        if site.isFileURL {
            source = FolderSiteSource(root: site)
        } else {
            source = URLSessionSiteSource(base: site, policy: policy.transfer, configuration: configuration)
        }
    }

    deinit {
        // The network watcher holds the library weakly; it ends with it.
        watcher?.cancel()
    }

    // MARK: The catalogue

    /// The catalogue last verified, read from the device when this library
    /// has not refreshed it yet: what the app lists with no signal.
    public var catalog: CatalogSnapshot? {
        get async { await loadRemembered()?.snapshot }
    }

    /// The catalogue verified last: this run's, else the one remembered on
    /// the device, checked again against the trust anchor (off the actor).
    func loadRemembered() async -> (catalog: Catalog, snapshot: CatalogSnapshot)? {
        if let verified { return verified }
        let (folder, site, trust, moment) = (self.folder, source.location, self.trust, now())
        let found = try? await Blocking.run { () -> (Catalog, [String: Int64])? in
            guard let remembered = folder.rememberedCatalog(site: site) else { return nil }
            let catalog = try CatalogReader.check(
                remembered.bytes, signature: remembered.signature, trust: trust?.trust, folder: folder, site: site)
            return (catalog, UpdateSizes.read(folder))
        }
        guard let (catalog, sizes) = found ?? nil else { return nil }
        if verified == nil {
            verified = (catalog, CatalogSnapshot(catalog, notModified: true, now: moment))
            if updateBytes.isEmpty { updateBytes = sizes }
        }
        return verified
    }

    /// Reads the site's catalogue (conditionally: a 304 costs one small
    /// exchange), verifies its signature, keeps it, and works out what
    /// each update of an installed package would download.
    ///
    /// It may use any network, cellular included: the catalogue is small
    /// and read conditionally. With no network at all it throws at once.
    ///
    /// - Throws: `OfflineError` (`networkUnavailable` with no signal,
    ///   `integrityFailed` for a bad signature, `rollbackRefused` for a
    ///   generation older than one verified, `catalogExpired` for one past
    ///   its `expiresAt`); `catalog` keeps the last one accepted, and the
    ///   installed packages keep playing.
    public func refreshCatalog() async throws -> CatalogSnapshot {
        await open()
        if await !currentPath().isSatisfied {
            throw OfflineError(.networkUnavailable, "\(source.location): no network; the catalogue last verified stays in use")
        }
        let refreshed = try await refresh()
        await sizeUpdates(of: refreshed.catalog)
        return refreshed.snapshot
    }

    /// The catalogue to download from: the one verified last, else the site's.
    func currentCatalog() async throws -> Catalog {
        if let known = await loadRemembered() { return known.catalog }
        return try await refresh().catalog
    }

    /// `trust.json` as it is now, when its record names `catalog`'s
    /// generation at this site (`Installer.Known.trustFile`): read once per
    /// catalogue, not once per download.
    func trustFile(of catalog: Catalog) async -> FileStatus? {
        if let (generation, status) = trustFileSeen, generation == catalog.generation { return status }
        let (folder, site) = (self.folder, source.location)
        let seen = try? await Blocking.run { () -> FileStatus? in
            let status = FileStatus(path: folder.trustFile.path)
            guard let record = folder.trustRecord(), record.site == site, record.generation == catalog.generation,
                FileStatus(path: folder.trustFile.path) == status
            else { return nil }
            return status
        }
        guard let status = seen ?? nil else { return nil }
        trustFileSeen = (catalog.generation, status)
        return status
    }

    private func refresh() async throws -> (catalog: Catalog, snapshot: CatalogSnapshot) {
        let (folder, storage) = (self.folder, self.storage)
        do {
            try await Blocking.run { try folder.prepare(storage: storage) }
            let (catalog, summary) = try await CatalogReader(source: source, folder: folder, trust: trust?.trust, now: now).read()
            await Blocking.cleanUp { folder.protectFiles(storage: storage) }
            let snapshot = CatalogSnapshot(catalog, notModified: summary.notModified, now: now())
            verified = (catalog, snapshot)
            return (catalog, snapshot)
        } catch {
            throw OfflineError.from(error)
        }
    }

    /// What updating each installed package to the catalogue's version
    /// would download (its new package.json fetched and compared), kept for
    /// `state(of:)`, which must not wait on the network.
    private func sizeUpdates(of catalog: Catalog) async {
        let installed = await installedPackages()
        let planner = PackagePlanner(source: source, documents: documents)
        var sizes: [String: Int64] = [:]
        for package in installed {
            guard let tour = catalog.tours.first(where: { $0.tourId == package.manifest.tourId }),
                let offered = tour.packages.first(where: { $0.packageId == package.packageId }),
                offered.contentHash != package.manifest.contentHash
            else { continue }
            if let known = updateBytes[offered.contentHash] {
                sizes[offered.contentHash] = known
            } else if let plan = try? await planner.plan(CatalogEntry(tour: tour.info, package: offered), installed: installed) {
                sizes[offered.contentHash] = plan.downloadBytes
            }
        }
        updateBytes = sizes
        let (folder, kept, storage) = (self.folder, sizes, self.storage)
        await Blocking.cleanUp {
            UpdateSizes.write(kept, folder)
            storage.protect(UpdateSizes.url(folder))
        }
    }

    // MARK: What the device has

    /// Where a tour stands on this device: its download, else its
    /// installed package against the catalogue last verified. Reads only
    /// what is on the device; never waits on the network.
    public func state(of tourId: UUID) async -> PackState {
        await open()
        // A download that just completed is the package it installed.
        if let queued = downloads.first(where: { $0.tourId == tourId }), broadcast.job(tourId)?.status != .completed {
            let job = broadcast.job(tourId) ?? queued.job
            switch queued.state {
            case .failed: return .failed(job, queued.failure?.error ?? OfflineError(.storageFailed, job.errorMessage ?? "failed"))
            case .paused: return .paused(job)
            case .queued, .running:
                switch job.status {
                case .waiting: return .waiting(job, reason: job.waitReason ?? .forNetwork)
                case .downloading: return .downloading(job)
                default: return .queued(job)
                }
            }
        }
        let key = tourId.key
        let remembered = await loadRemembered()
        let tour = remembered?.catalog.tours.first { $0.tourId == key }
        let offers = tour?.packages.map(Offer.init) ?? []
        let device = await deviceView()
        guard let installed = device.packages.first(where: { $0.manifest.tourId == key }) else {
            return .notDownloaded(offers: offers)
        }
        let package = await describe([installed], device)[0]
        // A stale catalogue offers no update: it is refused for downloads.
        if remembered?.snapshot.isStale == false, let tour,
            let offered = tour.packages.first(where: { $0.packageId == installed.packageId }),
            offered.contentHash != installed.manifest.contentHash || package.damagedFiles > 0
        {
            let bytes = updateBytes[offered.contentHash] ?? offered.sizeBytes
            return .updateAvailable(package, offer: Offer(offered), bytesToDownload: bytes)
        }
        if installed.manifest.isExpired(at: now()) { return .expired(package) }
        return .downloaded(package)
    }

    /// Every package installed, by tour.
    public func installed() async -> [InstalledPackage] {
        let device = await deviceView()
        return await describe(device.packages, device)
    }

    /// The audio file of a narration: the installed package's, whole; or,
    /// while the tour's first download runs (or waits, or was cut short),
    /// the file as it arrived, once it matched the SHA-256 its signed
    /// package.json names. Nil otherwise: no unverified byte is ever handed out.
    ///
    /// A file of a first download lives in the library's own folder until
    /// the package is committed: ask again once the download completes. During
    /// an update, the installed version is what plays until the new one is
    /// committed whole.
    public func audioFile(tourId: UUID, poiId: UUID, phase: NarrationPhase) async -> URL? {
        await file(tourId: tourId) { manifest in
            manifest.audio.first { $0.poiId == poiId.key && $0.phase == phase.phase }.map { ($0.path, $0.sha256, $0.sizeBytes) }
        }
    }

    /// The WebVTT captions of a narration, as `audioFile` finds its audio.
    public func captionFile(tourId: UUID, poiId: UUID, phase: NarrationPhase) async -> URL? {
        await file(tourId: tourId) { manifest in
            manifest.audio.first { $0.poiId == poiId.key && $0.phase == phase.phase }?.captions.map { ($0.path, $0.sha256, $0.sizeBytes) }
        }
    }

    /// The tour's MBTiles pack, as `audioFile` finds a narration.
    public func tilePack(tourId: UUID) async -> URL? {
        await file(tourId: tourId) { manifest in
            guard let path = manifest.mapTiles.file, let sha256 = manifest.mapTiles.sha256, let size = manifest.mapTiles.sizeBytes else {
                return nil
            }
            return (path, sha256, size)
        }
    }

    /// The installed package's file `pick` names, whole; with no package of
    /// the tour installed, its first download's, verified.
    ///
    /// A file that is not whole may be one a commit is replacing (this
    /// library's update, or another process's): the commit holds the
    /// Documents root's lock, so the packages are read again under it, where
    /// no commit is half made (one a kill cut short is finished there), and
    /// the file is looked at there. One version or the other is handed out,
    /// never nil for a moment, never a mix.
    private func file(
        tourId: UUID, _ pick: @escaping @Sendable (PackageManifest) -> (path: String, sha256: String, size: Int64)?
    ) async -> URL? {
        let key = tourId.key
        guard let package = await installedPackages().first(where: { $0.manifest.tourId == key }) else {
            return await arrivedFile(tourId: tourId) { pick($0).map { ($0.sha256, $0.size) } }
        }
        let documents = self.documents
        if let url = try? await Blocking.run({ Self.whole(package, pick, in: documents) }) { return url }
        let (folder, held) = (self.folder, device)
        guard
            let (view, url) = try? await Blocking.run({ () -> (DeviceView, URL?) in
                let lock = try? InstallLock.acquire(documents: documents, waitingUpTo: 1)
                defer { lock?.release() }
                // A commit killed among its renames is finished first, as the next install would.
                if lock != nil { _ = try? CommitJournal.replayAll(state: folder.url, root: documents) }
                let view = DeviceView.read(folder, reusing: held)
                let url = view.packages.first { $0.manifest.tourId == key }.flatMap { Self.whole($0, pick, in: documents) }
                return (view, url)
            })
        else { return nil }
        adopt(view)
        return url
    }

    /// The file `pick` names in `package`, when it is there at its size. Blocking.
    private static func whole(
        _ package: PackageOnDisk, _ pick: (PackageManifest) -> (path: String, sha256: String, size: Int64)?, in documents: URL
    ) -> URL? {
        guard let (path, _, size) = pick(package.manifest), package.files.contains(where: { $0.path == path }),
            let url = try? Layout(root: documents).resolve(relativePath: path),
            OutputTree.kind(url) == .file, InstallFolder.size(of: url) == size
        else { return nil }
        return url
    }

    /// Records that the tour was just used, for eviction's order. Costs no
    /// disk work on the play path: plays are written together, a few
    /// seconds later, off the actor.
    public func markAccessed(tourId: UUID) {
        accessed[tourId.key] = now()
        device?.accessed[tourId.key] = now()
        guard accessFlush == nil else { return }
        accessFlush = Task {
            try? await Task.sleep(for: .seconds(2))
            await self.flushAccesses()
        }
    }

    /// Writes the plays recorded since the last write into the access log.
    func flushAccesses() async {
        accessFlush = nil
        guard !accessed.isEmpty else { return }
        let (plays, folder, storage) = (accessed, self.folder, self.storage)
        accessed = [:]
        await Blocking.cleanUp {
            // A Documents folder removed meanwhile is not made again for the plays.
            guard OutputTree.kind(folder.url) == .folder else { return }
            AccessLog.update(folder) { $0.merge(plays) { max($0, $1) } }
            storage.protect(AccessLog.url(folder))
        }
        device?.stamp.access = []
    }

    /// Marks the packages as last read stale: the library changed them. The
    /// next read decodes only the package.json files that changed.
    func packagesChanged() { device?.stamp.tours = [-1] }

    /// Takes in what this library's own install changed (the package it
    /// committed, read right after its commit, and the packages it
    /// superseded) without listing every package again: a download then
    /// costs the same however many packages are installed. The view is
    /// carried forward only while `OfflineTours` was, just before the
    /// commit, what the view last saw: no other process added or removed a
    /// package folder since.
    func packagesInstalled(
        _ packageId: String, superseded: [String], committed: PackageOnDisk?, toursFolder: (before: FileStatus?, after: FileStatus?)?
    ) {
        guard var current = device, let committed, let toursFolder,
            current.stamp.tours == DeviceView.Stamp.identity(toursFolder.before)
        else { return packagesChanged() }
        // Changed in place (the library lets its own reference go first, so
        // the array is not copied), kept sorted by package ID.
        device = nil
        let gone = Set(superseded + [packageId])
        current.packages.removeAll { gone.contains($0.packageId) }
        let place = current.packages.firstIndex { $0.packageId > committed.packageId } ?? current.packages.endIndex
        current.packages.insert(committed, at: place)
        current.stamp.tours = DeviceView.Stamp.identity(toursFolder.after)
        device = current
    }

    /// The tour whose narration is playing (nil: none): never evicted while it plays.
    public func setPlaying(tourId: UUID?) { playing = tourId }

    /// What the packages take.
    public func storageStatistics() async -> StorageStatistics {
        let inventory = InstalledInventory(documents: documents)
        let moment = now()
        guard let statistics = try? await Blocking.run({ try inventory.statistics(now: moment) }) else {
            return StorageStatistics(packageCount: 0, bytesOnDisk: 0, downloaded: 0, failed: 0, expired: 0, bytesPerTour: [:])
        }
        let packages = statistics.tours.flatMap(\.packages)
        var perTour: [UUID: Int64] = [:]
        for tour in statistics.tours { if let id = UUID(uuidString: tour.tourId) { perTour[id] = tour.bytes } }
        let failed = packages.filter { $0.damagedFiles > 0 }.count + statistics.unreadable.count
        return StorageStatistics(
            packageCount: statistics.packages, bytesOnDisk: statistics.bytes,
            downloaded: packages.filter { $0.damagedFiles == 0 && !$0.expired }.count, failed: failed, expired: statistics.expired,
            bytesPerTour: perTour)
    }

    // MARK: Removing

    /// Deletes the tour's packages and the files no other package names;
    /// its download, if one is queued, running or failed, goes first.
    /// Another tour's download goes on meanwhile.
    public func delete(tourId: UUID) async throws {
        await open()
        if downloads.contains(where: { $0.tourId == tourId }) { await cancelDownload(tourId: tourId) }
        defer { packagesChanged() }
        try await remove([tourId.key])
        accessed[tourId.key] = nil
        let (folder, key) = (self.folder, tourId.key)
        await Blocking.cleanUp { AccessLog.update(folder) { $0.removeValue(forKey: key) } }
    }

    /// Deletes every expired package; returns how many.
    @discardableResult
    public func clearExpired() async throws -> Int {
        let moment = now()
        let expired = await installedPackages().filter { $0.manifest.isExpired(at: moment) }
        defer { packagesChanged() }
        try await remove(expired.map(\.packageId))
        return expired.count
    }

    /// Deletes every package whose tour is not downloading.
    public func clearAll() async throws {
        await open()
        defer { packagesChanged() }
        let busy = Set(downloads.filter { $0.state != .failed }.map(\.tourId))
        try await remove(
            await installedPackages().filter { !busy.contains(UUID(tourKey: $0.manifest.tourId)) }.map(\.packageId))
    }

    /// Removes the packages (or tours) `ids` with `InstalledInventory`, off
    /// the cooperative pool, under the Documents root's lock (waited for
    /// while another operation holds it for a moment).
    func remove(_ ids: [String]) async throws {
        guard !ids.isEmpty else { return }
        let inventory = InstalledInventory(documents: documents)
        do { try await Blocking.run { for id in ids { _ = try inventory.remove(id, waitingUpTo: 60) } } } catch {
            throw OfflineError.from(error)
        }
    }

    // MARK: Helpers

    func installedPackages() async -> [PackageOnDisk] { await deviceView().packages }

    /// The view as last read or carried forward, not checked against the
    /// disk (read when there is none, or it was marked stale): for a
    /// download, whose install checks it in its first trip.
    func heldDeviceView() async -> DeviceView {
        if let device, device.stamp.tours != [-1] { return device }
        return await deviceView()
    }

    /// The packages and the access log, read again (off the actor) only
    /// when `OfflineTours` or `access.json` changed since (a commit or a
    /// removal renames an entry of `OfflineTours`), so an app that asks the
    /// state of every tour in a list reads the manifests once.
    func deviceView() async -> DeviceView {
        let (folder, held) = (self.folder, device)
        let view =
            (try? await Blocking.run { () -> DeviceView in
                let stamp = DeviceView.Stamp(folder)
                if let held, held.stamp == stamp { return held }
                return DeviceView.read(folder, reusing: held, stamp: stamp)
            }) ?? DeviceView(packages: [], accessed: [:], stamp: DeviceView.Stamp(tours: [], access: []))
        return adopt(view)
    }

    /// Takes `view` as the library's own, with the plays not written yet.
    @discardableResult
    private func adopt(_ view: DeviceView) -> DeviceView {
        var current = view
        current.accessed.merge(accessed) { max($0, $1) }
        device = current
        return current
    }

    func catalogTour(_ tourId: String) async -> CatalogTour? {
        await loadRemembered()?.catalog.tours.first { $0.tourId == tourId }
    }

    /// The packages as the app sees them. Their files are looked at (off
    /// the actor) each time, only theirs: a file deleted or cut behind the
    /// library's back shows at once, and a list of tours costs one package's
    /// files per row, not every package's.
    private func describe(_ packages: [PackageOnDisk], _ device: DeviceView) async -> [InstalledPackage] {
        let documents = self.documents
        let damaged = (try? await Blocking.run { packages.map { $0.damagedPaths(in: documents) } }) ?? packages.map { _ in [] }
        return zip(packages, damaged).map { describe($0, damaged: $1, device) }
    }

    private func describe(_ package: PackageOnDisk, damaged: Set<String>, _ device: DeviceView) -> InstalledPackage {
        let manifest = package.manifest
        let bytes = package.files.filter { !damaged.contains($0.path) }.reduce(Int64(package.manifestBytes.count)) { $0 + $1.sizeBytes }
        return InstalledPackage(
            packageId: manifest.packageId, tourId: UUID(tourKey: manifest.tourId), tourName: manifest.tourName,
            format: manifest.audio.first?.format ?? .aac, quality: manifest.quality ?? .high, voice: manifest.voice.name,
            contentHash: manifest.contentHash, createdAt: manifest.createdAt, expiresAt: manifest.expiresAt, bytesOnDisk: bytes,
            lastAccessed: device.accessed[manifest.tourId], damagedFiles: damaged.count,
            narrations: manifest.audio.compactMap { entry in
                guard let poi = UUID(uuidString: entry.poiId), let phase = NarrationPhase(rawValue: entry.phase.rawValue) else {
                    return nil
                }
                let name = manifest.pois.first { $0.id == entry.poiId }?.name ?? entry.poiId
                return InstalledPackage.Narration(poiId: poi, poiName: name, phase: phase, durationSeconds: entry.durationSeconds)
            })
    }
}

/// The packages installed and when each tour was last used, with what
/// tells whether they changed on disk since.
struct DeviceView: Sendable {
    /// The inodes and modification times of `OfflineTours` and
    /// `access.json` (written by rename, so a new inode each time: a
    /// change within the clock's tick is still seen).
    struct Stamp: Equatable, Sendable {
        var tours: [Int]
        var access: [Int]

        init(tours: [Int], access: [Int]) {
            self.tours = tours
            self.access = access
        }

        init(_ folder: InstallFolder) {
            tours = Self.identity(folder.toursFolder)
            access = Self.identity(AccessLog.url(folder))
        }

        static func identity(_ url: URL) -> [Int] { identity(FileStatus(path: url.path)) }

        static func identity(_ status: FileStatus?) -> [Int] {
            guard let status else { return [] }
            return [Int(truncatingIfNeeded: status.inode), status.modifiedSeconds, status.modifiedNanoseconds]
        }
    }

    var packages: [PackageOnDisk]
    var accessed: [String: Date]
    var stamp: Stamp

    /// The packages and the access log as the disk holds them, `held`'s
    /// decoded packages kept where their package.json did not change;
    /// `stamp` read first, so a change made meanwhile is seen at the next
    /// read. Blocking.
    static func read(_ folder: InstallFolder, reusing held: DeviceView?, stamp: Stamp? = nil) -> DeviceView {
        let stamp = stamp ?? Stamp(folder)
        return DeviceView(
            packages: PackageOnDisk.read(documents: folder.documents, reusing: held?.packages ?? []).packages,
            accessed: AccessLog.read(folder), stamp: stamp)
    }
}

/// When each tour was last used (`markAccessed`), in `.tourpack-install/access.json`.
enum AccessLog {
    static func url(_ folder: InstallFolder) -> URL { folder.url.appendingPathComponent("access.json") }

    static func read(_ folder: InstallFolder) -> [String: Date] {
        guard let data = FileManager.default.contents(atPath: url(folder).path) else { return [:] }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return (try? decoder.decode([String: Date].self, from: data)) ?? [:]
    }

    /// Reads the log, changes it and writes it back (when it changed) under
    /// the Documents root's lock, so that two libraries (the app and its
    /// background task) never lose each other's plays. The lock is waited
    /// for a moment; past that (an install of the command line holds it
    /// throughout), the log is changed without it. Blocking.
    static func update(_ folder: InstallFolder, _ change: (inout [String: Date]) -> Void) {
        let lock = try? InstallLock.acquire(documents: folder.documents, waitingUpTo: 2)
        defer { lock?.release() }
        let before = read(folder)
        var times = before
        change(&times)
        if times != before { try? write(times, folder) }
    }

    static func write(_ times: [String: Date], _ folder: InstallFolder) throws {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.sortedKeys]
        try AtomicFile.createFolder(folder.url)
        // Not synced: plays a power cut loses only move a package in eviction's order.
        try AtomicFile.replace(Array(try encoder.encode(times)), at: url(folder))
    }
}

/// What each update would download, by the catalogue's `contentHash`, as
/// the last refresh worked it out: `.tourpack-install/updates.json`, so
/// that a relaunched app offline still shows an update's size.
enum UpdateSizes {
    static func url(_ folder: InstallFolder) -> URL { folder.url.appendingPathComponent("updates.json") }

    static func read(_ folder: InstallFolder) -> [String: Int64] {
        guard let data = FileManager.default.contents(atPath: url(folder).path) else { return [:] }
        return (try? JSONDecoder().decode([String: Int64].self, from: data)) ?? [:]
    }

    static func write(_ sizes: [String: Int64], _ folder: InstallFolder) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        guard let data = try? encoder.encode(sizes) else { return }
        try? AtomicFile.write(Array(data), to: url(folder))
    }
}

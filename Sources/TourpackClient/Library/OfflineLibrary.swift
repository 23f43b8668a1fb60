public import Foundation
import TourpackPackage

/// The touring app's offline layer: the catalogue of a published site,
/// the packages on the device, and their downloads, in one actor.
///
/// ```swift
/// let library = OfflineLibrary(documents: documents, site: site, trust: try .publicKey(base64: key))
/// let catalog = try await library.refreshCatalog()
/// for try await job in library.download(tourId: tour.id) { show(job.progress) }
/// let url = await library.audioFile(tourId: tour.id, poiId: poi, phase: .approaching)
/// ```
///
/// Everything it writes lives in `documents`, in the layout the app plays
/// from (`AudioCache/…`, `OfflineTours/<packageId>/…`) and its own hidden
/// `.tourpack-install` folder: the catalogue last verified, the downloads
/// on their way, the commit journal, and when each tour was last played.
/// A download resumes where it stopped, even after the process is killed;
/// every file is verified against the signed catalogue before the package
/// is committed, and the package installed before stays until then.
public actor OfflineLibrary {
    public let documents: URL
    public let site: URL
    public let trust: TrustAnchor?
    public private(set) var policy: DownloadPolicy

    let folder: InstallFolder
    let source: any SiteSource
    let now: @Sendable () -> Date
    var verified: (catalog: Catalog, snapshot: CatalogSnapshot)?
    var jobs: [UUID: DownloadJob] = [:]
    var tasks: [UUID: Task<Void, Never>] = [:]
    /// The downloads in order: each waits for the one before it (one install at a time per Documents folder).
    var queue: Task<Void, Never>?
    var playing: UUID?
    /// What an update of a package would download, by its catalogue `contentHash`.
    var updateBytes: [String: Int64] = [:]
    /// The packages on disk and the access log, as last read.
    private var device: DeviceView?

    /// - Parameters:
    ///   - documents: the app's Documents folder.
    ///   - site: the published site (an `https://` base URL, or a `file://` folder).
    ///   - trust: the key the catalogue must be signed with.
    ///   - policy: storage budget, network and retry limits.
    public init(documents: URL, site: URL, trust: TrustAnchor, policy: DownloadPolicy = DownloadPolicy()) {
        self.init(documents: documents, site: site, trust: Optional(trust), policy: policy, now: { Date() })
    }

    /// The same, with the clock the library judges expiry by (tests pin it),
    /// and `trust` nil for a site published without a key.
    public init(
        documents: URL, site: URL, trust: TrustAnchor?, policy: DownloadPolicy = DownloadPolicy(), now: @escaping @Sendable () -> Date
    ) {
        self.documents = documents.standardizedFileURL
        self.site = site
        self.trust = trust
        self.policy = policy
        self.now = now
        folder = InstallFolder(documents: documents)
        if site.isFileURL {
            source = FolderSiteSource(root: site)
        } else {
            source = URLSessionSiteSource(base: site, policy: policy.transfer, allowsCellular: policy.allowsCellular)
        }
    }

    /// Changes the budget or the pins (the network settings apply to a new library).
    public func update(policy: DownloadPolicy) { self.policy = policy }

    // MARK: The catalogue

    /// The catalogue last verified, read from the device when this library
    /// has not refreshed it yet: what the app lists with no signal.
    public var catalog: CatalogSnapshot? { loadRemembered()?.snapshot }

    /// The catalogue verified last: this run's, else the one remembered on
    /// the device, checked again against the trust anchor.
    private func loadRemembered() -> (catalog: Catalog, snapshot: CatalogSnapshot)? {
        if let verified { return verified }
        guard let remembered = folder.rememberedCatalog(site: source.location),
            let catalog = try? CatalogReader.check(
                remembered.bytes, signature: remembered.signature, trust: trust?.trust, folder: folder, site: source.location)
        else { return nil }
        verified = (catalog, CatalogSnapshot(catalog, notModified: true, now: now()))
        return verified
    }

    /// Reads the site's catalogue (conditionally: a 304 costs one small
    /// exchange), verifies its signature, and keeps it.
    ///
    /// - Throws: `OfflineError` (`networkUnavailable` with no signal,
    ///   `integrityFailed` for a bad signature, `rollbackRefused` for a
    ///   generation older than one verified, `catalogExpired` for one past
    ///   its `expiresAt`); `catalog` keeps the last one accepted, and the
    ///   installed packages keep playing.
    public func refreshCatalog() async throws -> CatalogSnapshot { try await refresh().snapshot }

    /// The catalogue to download from: the one verified last, else the site's.
    func currentCatalog() async throws -> Catalog {
        if let known = loadRemembered() { return known.catalog }
        return try await refresh().catalog
    }

    private func refresh() async throws -> (catalog: Catalog, snapshot: CatalogSnapshot) {
        try folder.prepare()
        do {
            let (catalog, summary) = try await CatalogReader(source: source, folder: folder, trust: trust?.trust, now: now).read()
            let snapshot = CatalogSnapshot(catalog, notModified: summary.notModified, now: now())
            if verified?.catalog != catalog { updateBytes = [:] }
            verified = (catalog, snapshot)
            return (catalog, snapshot)
        } catch {
            throw OfflineError.from(error)
        }
    }

    // MARK: What the device has

    /// Where a tour stands on this device.
    public func state(of tourId: UUID) async -> PackState {
        let key = tourId.uuidString.lowercased()
        if let job = jobs[tourId], job.status == .queued || job.status == .downloading || job.status == .paused {
            return job.status == .paused ? .paused(job) : .downloading(job)
        }
        let offers = catalogTour(key)?.packages.map(Offer.init) ?? []
        let device = deviceView()
        guard let installed = device.packages.first(where: { $0.manifest.tourId == key }) else {
            return .notDownloaded(offers: offers)
        }
        let package = describe(installed, accessed: device.accessed)
        if installed.manifest.isExpired(at: now()) { return .expired(package) }
        // A stale catalogue offers no update: it is refused for downloads.
        if catalog?.isStale == false, let tour = catalogTour(key),
            let offered = tour.packages.first(where: { $0.packageId == installed.packageId }),
            offered.contentHash != installed.manifest.contentHash || !installed.damagedPaths(in: documents).isEmpty
        {
            let bytes = await bytesToUpdate(CatalogEntry(tour: tour.info, package: offered))
            return .updateAvailable(package, offer: Offer(offered), bytesToDownload: bytes)
        }
        return .downloaded(package)
    }

    /// Every package installed, by tour.
    public func installed() -> [InstalledPackage] {
        let device = deviceView()
        return device.packages.map { describe($0, accessed: device.accessed) }
    }

    /// The audio file of a narration, or nil unless it is installed whole.
    public func audioFile(tourId: UUID, poiId: UUID, phase: NarrationPhase) -> URL? {
        file(tourId: tourId) { package in
            package.manifest.audio.first { $0.poiId == poiId.uuidString.lowercased() && $0.phase == phase.phase }
                .map { ($0.path, $0.sizeBytes) }
        }
    }

    /// The WebVTT captions of a narration, or nil unless installed whole.
    public func captionFile(tourId: UUID, poiId: UUID, phase: NarrationPhase) -> URL? {
        file(tourId: tourId) { package in
            package.manifest.audio.first { $0.poiId == poiId.uuidString.lowercased() && $0.phase == phase.phase }?.captions
                .map { ($0.path, $0.sizeBytes) }
        }
    }

    /// The tour's MBTiles pack, or nil unless installed whole.
    public func tilePack(tourId: UUID) -> URL? {
        file(tourId: tourId) { package in
            guard let path = package.manifest.mapTiles.file, let size = package.manifest.mapTiles.sizeBytes else { return nil }
            return (path, size)
        }
    }

    private func file(tourId: UUID, _ pick: (PackageOnDisk) -> (String, Int64)?) -> URL? {
        let key = tourId.uuidString.lowercased()
        guard let package = installedPackages().first(where: { $0.manifest.tourId == key }), let (path, size) = pick(package),
            package.files.contains(where: { $0.path == path }), let url = try? Layout(root: documents).resolve(relativePath: path),
            OutputTree.kind(url) == .file, InstallFolder.size(of: url) == size
        else { return nil }
        return url
    }

    /// Records that the tour was just used, for eviction's order.
    public func markAccessed(tourId: UUID) {
        // The log alone: the packages as held stay valid.
        var times = AccessLog.read(folder)
        times[tourId.uuidString.lowercased()] = now()
        try? AccessLog.write(times, folder)
        device?.accessed = times
        device?.stamp.access = DeviceView.Stamp.identity(AccessLog.url(folder))
    }

    /// Marks the packages as last read stale: the library changed them. The
    /// next read decodes only the package.json files that changed.
    func packagesChanged() { device?.stamp.tours = [-1] }

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

    /// Deletes the tour's packages and the files no other package names.
    public func delete(tourId: UUID) async throws {
        if jobs[tourId].map({ $0.status == .downloading || $0.status == .queued || $0.status == .paused }) == true {
            throw OfflineError(.alreadyDownloading, "tour \(tourId.uuidString.lowercased()) is downloading; cancel it first")
        }
        defer { packagesChanged() }
        try await remove([tourId.uuidString.lowercased()])
        var times = AccessLog.read(folder)
        if times.removeValue(forKey: tourId.uuidString.lowercased()) != nil { try? AccessLog.write(times, folder) }
    }

    /// Deletes every expired package; returns how many.
    @discardableResult
    public func clearExpired() async throws -> Int {
        let expired = installedPackages().filter { $0.manifest.isExpired(at: now()) }
        defer { packagesChanged() }
        try await remove(expired.map(\.packageId))
        return expired.count
    }

    /// Deletes every package not downloading.
    public func clearAll() async throws {
        defer { packagesChanged() }
        let busy = Set(jobs.filter { $0.value.status != .completed && $0.value.status != .failed && $0.value.status != .cancelled }.keys)
        try await remove(
            installedPackages().filter { package in UUID(uuidString: package.manifest.tourId).map { !busy.contains($0) } ?? false }
                .map(\.packageId))
    }

    /// Removes the packages (or tours) `ids` with `InstalledInventory`, off the cooperative pool.
    func remove(_ ids: [String]) async throws {
        guard !ids.isEmpty else { return }
        let inventory = InstalledInventory(documents: documents)
        do { try await Blocking.run { for id in ids { _ = try inventory.remove(id) } } } catch { throw OfflineError.from(error) }
    }

    // MARK: Helpers

    func installedPackages() -> [PackageOnDisk] { deviceView().packages }

    /// The packages and the access log, read again only when
    /// `OfflineTours` or `access.json` changed since (a commit or a removal
    /// renames an entry of `OfflineTours`), so an app that asks the state
    /// of every tour in a list reads the manifests once.
    func deviceView() -> DeviceView {
        let stamp = DeviceView.Stamp(documents: documents, folder: folder)
        if let device, device.stamp == stamp { return device }
        let view = DeviceView(
            packages: PackageOnDisk.read(documents: documents, reusing: device?.packages ?? []).packages, accessed: AccessLog.read(folder),
            stamp: stamp)
        device = view
        return view
    }

    func catalogTour(_ tourId: String) -> CatalogTour? {
        loadRemembered()?.catalog.tours.first { $0.tourId == tourId }
    }

    private func describe(_ package: PackageOnDisk, accessed: [String: Date]) -> InstalledPackage {
        let manifest = package.manifest
        let damaged = package.damagedPaths(in: documents)
        let bytes = package.files.filter { !damaged.contains($0.path) }.reduce(Int64(package.manifestBytes.count)) { $0 + $1.sizeBytes }
        return InstalledPackage(
            packageId: manifest.packageId, tourId: UUID(uuidString: manifest.tourId) ?? UUID(), tourName: manifest.tourName,
            format: manifest.audio.first?.format ?? .aac, quality: manifest.quality ?? .high, voice: manifest.voice.name,
            contentHash: manifest.contentHash, createdAt: manifest.createdAt, expiresAt: manifest.expiresAt, bytesOnDisk: bytes,
            lastAccessed: accessed[manifest.tourId], damagedFiles: damaged.count,
            narrations: manifest.audio.compactMap { entry in
                guard let poi = UUID(uuidString: entry.poiId), let phase = NarrationPhase(rawValue: entry.phase.rawValue) else {
                    return nil
                }
                let name = manifest.pois.first { $0.id == entry.poiId }?.name ?? entry.poiId
                return InstalledPackage.Narration(poiId: poi, poiName: name, phase: phase, durationSeconds: entry.durationSeconds)
            })
    }

    private func bytesToUpdate(_ entry: CatalogEntry) async -> Int64 {
        if let known = updateBytes[entry.package.contentHash] { return known }
        let planner = PackagePlanner(source: source, documents: documents)
        guard let plan = try? await planner.plan(entry, installed: installedPackages()) else { return entry.package.sizeBytes }
        updateBytes[entry.package.contentHash] = plan.downloadBytes
        return plan.downloadBytes
    }
}

/// The packages installed and when each tour was last used, with what
/// tells whether they changed on disk since.
struct DeviceView {
    /// The inodes and modification times of `OfflineTours` and
    /// `access.json` (written by rename, so a new inode each time: a
    /// change within the clock's tick is still seen).
    struct Stamp: Equatable {
        var tours: [Int]
        var access: [Int]

        init(documents: URL, folder: InstallFolder) {
            tours = Self.identity(documents.appendingPathComponent(Layout.offlineToursFolder))
            access = Self.identity(AccessLog.url(folder))
        }

        static func identity(_ url: URL) -> [Int] {
            var info = stat()
            guard lstat(url.path, &info) == 0 else { return [] }
            #if canImport(Darwin)
            let modified = info.st_mtimespec
            #else
            let modified = info.st_mtim
            #endif
            return [Int(info.st_ino), Int(modified.tv_sec), Int(modified.tv_nsec)]
        }
    }

    var packages: [PackageOnDisk]
    var accessed: [String: Date]
    var stamp: Stamp
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

    static func write(_ times: [String: Date], _ folder: InstallFolder) throws {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.sortedKeys]
        try AtomicFile.createFolder(folder.url)
        try AtomicFile.write(Array(try encoder.encode(times)), to: url(folder))
    }
}

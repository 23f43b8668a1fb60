public import Foundation
public import TourpackPackage

/// The download running now: one at a time per library.
struct RunningDownload: Sendable {
    var tourId: UUID
    var task: Task<Void, Never>
    /// Raised before the task is cancelled to pause it: its bytes stay.
    var suspension: Installer.SuspensionFlag
}

extension QueuedDownload {
    /// The job as the record alone tells it (before the installer reports one).
    var job: DownloadJob {
        var job = DownloadJob(packageId: "", tourId: tourId, tourName: tourName, audioBytes: 0, mapBytes: 0)
        switch state {
        case .queued, .running: break
        case .paused: job.move(to: .paused)
        case .failed: job.move(to: .failed, message: failure?.message)
        }
        return job
    }
}

extension OfflineLibrary {
    // MARK: Asking for downloads

    /// Downloads the tour's package (or its update) and installs it.
    ///
    /// The download joins the queue, which is kept on disk: it goes on after
    /// the stream is dropped, and after the app is killed (`resumeDownloads()`).
    /// It runs only over a network it may use: on cellular, unless allowed,
    /// it waits as `.waiting(reason: .forWiFi)` and fetches nothing, and it
    /// starts by itself on Wi-Fi. A network lost mid-download is waited for,
    /// and the download resumes from the last byte.
    ///
    /// The stream yields the job at every change of status, step or
    /// playable narrations, and otherwise about four times a second; it finishes once the job
    /// completes, and throws an `OfflineError` when it fails (the failure is
    /// kept: `state(of:)` says `.failed` until the app retries, deletes or
    /// dismisses it). Asking again for a tour already in the queue follows
    /// that download; asking again for a failed one retries it.
    ///
    /// - Parameters:
    ///   - tourId: the tour, as the catalogue names it.
    ///   - format: the format to take where the tour offers several (the installed one, else AAC, by default).
    ///   - quality: likewise (the installed one, else the best).
    ///   - allowsCellular: this download's own answer to the cellular
    ///     warning ("Download anyway"); nil takes the policy's.
    public nonisolated func download(
        tourId: UUID, format: AudioFormat? = nil, quality: AudioQuality? = nil, allowsCellular: Bool? = nil
    ) -> AsyncThrowingStream<DownloadJob, any Error> {
        AsyncThrowingStream { continuation in
            broadcast.follow(tourId, continuation)
            Task { await self.enqueue(tourId: tourId, format: format, quality: quality, allowsCellular: allowsCellular) }
        }
    }

    /// Every job's updates, as they happen: for a downloads screen or a
    /// badge. Any number of observers may each hold one; each call makes a new stream.
    public nonisolated var jobs: AsyncStream<DownloadJob> { broadcast.stream() }

    /// Continues every download the queue holds that is neither paused nor
    /// failed, as a new library finds them after the app was killed. One
    /// whose package the killed process had already installed ends completed.
    /// Call it at launch, and from a `BGProcessingTask` or a background
    /// session's wake-up.
    ///
    /// - Returns: the tours whose downloads it continues.
    @discardableResult
    public func resumeDownloads() async -> [UUID] {
        await open()
        let resumed = downloads.filter { $0.state == .queued || $0.state == .running }.map(\.tourId)
        await schedule()
        return resumed
    }

    /// Pauses the tour's download: what arrived is kept, and
    /// `resumeDownload(tourId:)` continues from the last byte.
    public func pauseDownload(tourId: UUID) async {
        await open()
        guard let index = downloads.firstIndex(where: { $0.tourId == tourId }), downloads[index].state != .failed else { return }
        downloads[index].state = .paused
        await persist()
        if let running, running.tourId == tourId {
            running.suspension.raise()
            running.task.cancel()
            await running.task.value
        }
        publish(tourId) { $0.move(to: .paused) }
        await schedule()
    }

    /// Continues a download the user paused.
    public func resumeDownload(tourId: UUID) async {
        await open()
        guard let index = downloads.firstIndex(where: { $0.tourId == tourId }), downloads[index].state == .paused else { return }
        downloads[index].state = .queued
        await persist()
        publish(tourId) { $0.move(to: .queued) }
        await schedule()
    }

    /// Stops the tour's download, removes its partial data and forgets it;
    /// the package installed before (if any) stays as it was.
    public func cancelDownload(tourId: UUID) async {
        await open()
        guard downloads.contains(where: { $0.tourId == tourId }) else { return }
        if let running, running.tourId == tourId {
            running.task.cancel()
            await running.task.value
            return
        }
        downloads.removeAll { $0.tourId == tourId }
        forgetEarlyPlay(of: tourId)
        await persist()
        publish(tourId) { $0.move(to: .cancelled) }
        broadcast.finish(tourId, throwing: OfflineError(.cancelled, "cancelled"))
        broadcast.forget(tourId)
    }

    /// Forgets a failed download; the tour is as its installed package says.
    public func dismissFailure(tourId: UUID) async {
        await open()
        guard downloads.contains(where: { $0.tourId == tourId && $0.state == .failed }) else { return }
        downloads.removeAll { $0.tourId == tourId }
        forgetEarlyPlay(of: tourId)
        broadcast.forget(tourId)
        await persist()
    }

    /// Changes the budget, the pins and the networks downloads may use; it
    /// applies to queued and running downloads at once (turning cellular off
    /// moves a download running on cellular to `.waiting(.forWiFi)`).
    public func update(policy: DownloadPolicy) async {
        self.policy = policy
        await schedule()
    }

    // MARK: The queue

    /// Reads the queue the last run left, once, and excludes the library's
    /// folders from backup again; starts watching the network.
    func open() async {
        if let opened { return await opened.value }
        let task = Task {
            let (documents, storage) = (self.documents, self.storage)
            await Blocking.cleanUp { if OutputTree.kind(documents) == .folder { try? storage.prepare(documents: documents) } }
            let restored = await self.queueFile.read()
            self.restore(restored)
        }
        opened = task
        await task.value
    }

    private func restore(_ restored: [QueuedDownload]) {
        for record in restored where !downloads.contains(where: { $0.tourId == record.tourId }) {
            downloads.append(record)
            restoredDownloads.insert(record.tourId)
            // What the app preferred before the relaunch, unless it has chosen again since.
            if let poiIds = record.preferredPOIs, preferred[record.tourId] == nil { preferred[record.tourId] = DownloadPriorities(poiIds) }
            broadcast.publish(record.job)
        }
        guard watcher == nil else { return }
        let network = self.network
        watcher = Task { [weak self] in
            for await path in network.paths() {
                guard let self else { return }
                await self.pathChanged(path)
            }
        }
    }

    func currentPath() async -> NetworkPath {
        if let path { return path }
        let current = await network.currentPath
        if path == nil { path = current }
        return path ?? current
    }

    private func pathChanged(_ new: NetworkPath) async {
        path = new
        await schedule()
    }

    func persist() async { await queueFile.write(downloads) }

    /// The job of `tourId` as last published, changed by `change`, published again.
    func publish(_ tourId: UUID, _ change: (inout DownloadJob) -> Void) {
        guard var job = broadcast.job(tourId) ?? downloads.first(where: { $0.tourId == tourId })?.job else { return }
        change(&job)
        broadcast.publish(job)
    }

    private func enqueue(tourId: UUID, format: AudioFormat?, quality: AudioQuality?, allowsCellular: Bool?) async {
        await open()
        if let index = downloads.firstIndex(where: { $0.tourId == tourId }) {
            switch downloads[index].state {
            case .failed, .paused:
                // Asked again: a retry, with this call's choice.
                downloads[index].state = .queued
                downloads[index].failure = nil
                downloads[index].format = format ?? downloads[index].format
                downloads[index].quality = quality ?? downloads[index].quality
                downloads[index].allowsCellular = allowsCellular ?? downloads[index].allowsCellular
                broadcast.publish(downloads[index].job)
            case .queued, .running:
                // Followed already (`download` registered the stream).
                if let allowsCellular, downloads[index].allowsCellular != allowsCellular {
                    downloads[index].allowsCellular = allowsCellular
                } else {
                    return
                }
            }
        } else {
            let name = await catalogTour(tourId.key)?.tourName ?? tourId.key
            var record = QueuedDownload(
                tourId: tourId, tourName: name, format: format, quality: quality, allowsCellular: allowsCellular, state: .queued)
            record.preferredPOIs = preferred[tourId].map(\.preferred).flatMap { $0.isEmpty ? nil : $0 }
            restoredDownloads.remove(tourId)
            downloads.append(record)
            broadcast.publish(record.job)
        }
        // Written in turn, not waited for: a download starts at once, and
        // the record reaches the disk a moment later, before any later change.
        queueFile.post(downloads, promptly: true)
        await schedule()
    }

    /// Puts the queue in order with the network: pauses the running
    /// download if the path no longer allows it, starts the first one the
    /// path allows when none runs, and tells every other why it waits.
    func schedule() async {
        await open()
        let path = await currentPath()
        if let running, let record = downloads.first(where: { $0.tourId == running.tourId }),
            policy.waitReason(on: path, allowsCellular: record.allowsCellular) != nil
        {
            // The path no longer allows it: stopped as a pause, resumed from the last byte.
            running.suspension.raise()
            running.task.cancel()
            await running.task.value
        }
        for record in downloads where record.state == .queued || record.state == .running {
            if running?.tourId == record.tourId { continue }
            let reason = policy.waitReason(on: path, allowsCellular: record.allowsCellular)
            if running == nil, reason == nil {
                start(record.tourId)
                continue
            }
            let job = broadcast.job(record.tourId) ?? record.job
            if job.status != (reason == nil ? .queued : .waiting) || job.waitReason != reason {
                publish(record.tourId) { job in
                    if let reason {
                        job.move(to: .waiting)
                        job.waitReason = reason
                    } else {
                        job.move(to: .queued)
                    }
                }
            }
        }
    }

    private func start(_ tourId: UUID) {
        guard let index = downloads.firstIndex(where: { $0.tourId == tourId }) else { return }
        downloads[index].state = .running
        let suspension = Installer.SuspensionFlag()
        let record = downloads[index]
        let task = Task { await self.perform(record, suspension: suspension) }
        running = RunningDownload(tourId: tourId, task: task, suspension: suspension)
    }

    /// The download itself: the package chosen from the catalogue, room
    /// made, then the install; and what follows its end.
    private func perform(_ record: QueuedDownload, suspension: Installer.SuspensionFlag) async {
        // queue.json is not written for the start: a running download is
        // restored as a queued one, and resumed the same way.
        let tourId = record.tourId
        let key = tourId.key
        do {
            try Task.checkCancellation()
            let catalog = try await currentCatalog()
            guard let tour = catalog.tours.first(where: { $0.tourId == key }) else {
                throw OfflineError(.notOffered, "tour \(key) is not in the catalogue")
            }
            let (entry, outcome) = try await install(record, from: catalog, tour: tour, suspension: suspension)
            // Taken in once the install's own references to the view are gone:
            // the view's array is changed in place, not copied.
            packagesInstalled(
                entry.package.packageId, superseded: outcome.superseded,
                committed: outcome.committed.first { $0.packageId == entry.package.packageId }, toursFolder: outcome.toursFolder)
            if outcome.jobs.isEmpty {
                // Nothing to fetch: the installer reported no job of its own.
                publish(tourId) { $0.move(to: .completed) }
            }
            updateBytes[entry.package.contentHash] = nil
            // A download counts as a use, written with the next plays (a
            // process that ends first leaves the install time, which
            // eviction falls back on).
            markAccessed(tourId: tourId)
            await finished(tourId, failure: nil, suspended: false)
        } catch {
            let failure = OfflineError.from(error)
            await finished(tourId, failure: failure, suspended: suspension.isSet)
        }
    }

    /// The tour's package chosen, room made for it, and installed; a failed
    /// install leaves the view stale and the folder to be checked again.
    private func install(
        _ record: QueuedDownload, from catalog: Catalog, tour: CatalogTour, suspension: Installer.SuspensionFlag
    ) async throws -> (CatalogEntry, Installer.Outcome) {
        let (tourId, key) = (record.tourId, record.tourId.key)
        var choice = PackageChoice(tours: [key], format: record.format, quality: record.quality)
        choice.namesFlags = false
        // The view the last download carried forward, as it is: the install
        // checks it against OfflineTours in its first trip, and reads the
        // packages again if another process changed them since.
        let device = await heldDeviceView()
        guard let entry = try PackageSelection.choose(catalog, installed: device.packages, choice: choice).first else {
            throw OfflineError(.notOffered, "tour \(key) (\(tour.tourName)) offers no package for that choice")
        }
        try await makeRoom(for: entry, tourId: tourId, device: device)
        var installer = Installer(documents: documents, source: source, trust: trust?.trust)
        installer.concurrency = 4
        installer.now = now
        installer.holdsLockThroughout = false
        installer.suspension = suspension
        installer.storage = storage
        installer.priorities = priorities(of: tourId)
        installer.reportsPercentSteps = false  // The stream's promise: about four times a second.
        installer.checksFolder = !folderChecked
        // The catalogue was verified moments ago and the packages are held:
        // the install reads neither again (the held ones are checked against the disk).
        let seen = device.stamp.tours
        installer.known = Installer.Known(
            catalog: catalog, trustFile: await trustFile(of: catalog), held: device.packages,
            holdsCurrent: { DeviceView.Stamp.identity($0) == seen }
        ) { await self.installedPackages() }
        installer.known?.downloadsLeft = downloadsLeft
        let broadcast = self.broadcast
        installer.report = { event in
            guard case .job(let job) = event, !suspension.isSet else { return }
            broadcast.publish(job)
        }
        do {
            let outcome = try await installer.install(choice, noReinstall: true)
            folderChecked = true
            downloadsLeft = outcome.downloadsLeft
            return (entry, outcome)
        } catch {
            packagesChanged()
            folderChecked = false
            downloadsLeft = nil
            throw error
        }
    }

    /// Where a download goes once its task ends: out of the queue when it
    /// completed or was cancelled, back to waiting when it was paused or
    /// the network went, kept as failed otherwise.
    private func finished(_ tourId: UUID, failure: OfflineError?, suspended: Bool) async {
        running = nil
        let restored = suspended ? restoredDownloads.contains(tourId) : restoredDownloads.remove(tourId) != nil
        defer { if !downloads.contains(where: { $0.tourId == tourId }) { forgetEarlyPlay(of: tourId) } }
        guard let index = downloads.firstIndex(where: { $0.tourId == tourId }) else { return await schedule() }
        // On disk first: an app told of the end may relaunch at once.
        if suspended {
            if downloads[index].state != .paused { downloads[index].state = .queued }
            await persist()
        } else if let failure, failure.kind != .cancelled, failure.kind != .alreadyDownloaded {
            downloads[index].state = .failed
            downloads[index].failure = QueuedDownload.Failure(failure)
            await persist()
            publish(tourId) { $0.move(to: .failed, message: failure.description) }
            broadcast.finish(tourId, throwing: failure)
        } else {
            downloads.remove(at: index)
            // Not waited for: a record a kill kept finds its package installed, and goes.
            queueFile.post(downloads, promptly: false)
            // Cancelled: observers see it end. Installed at the catalogue's
            // version already: nothing happened, and only this call's stream is
            // told; unless an earlier process asked, and committed the package
            // before it was killed: that download is complete.
            if failure?.kind == .cancelled { publish(tourId) { $0.move(to: .cancelled, message: "cancelled") } }
            if failure?.kind == .alreadyDownloaded, restored {
                publish(tourId) { $0.move(to: .completed) }
                broadcast.finish(tourId, throwing: nil)
            } else {
                broadcast.finish(tourId, throwing: failure)
            }
            broadcast.forget(tourId)
        }
        await schedule()
    }

    /// Evicts least recently accessed packages until the new one fits the
    /// budget; refuses (`storageFailed`) when only pinned, playing or
    /// downloading packages stand in the way.
    private func makeRoom(for entry: CatalogEntry, tourId: UUID, device: DeviceView) async throws {
        var protected = Set(policy.pinned.map(\.key))
        if let playing { protected.insert(playing.key) }
        for record in downloads where record.tourId != tourId && record.state != .failed { protected.insert(record.tourId.key) }
        let budget = StorageBudget(maxBytes: policy.maxStorageBytes, protected: protected)
        func evictions(_ device: DeviceView) -> [PackageOnDisk]? {
            budget.evictions(
                from: device.packages, adding: entry.package.sizeBytes, replacing: entry.tour.tourId, accessed: device.accessed)
        }
        var evict = evictions(device)
        // Packages go only by what the device holds now.
        if evict?.isEmpty != true { evict = evictions(await deviceView()) }
        guard let evict else {
            let name = "package \(entry.package.packageId) (\(entry.tour.tourName))"
            throw OfflineError(
                .storageFailed,
                "\(name) needs \(entry.package.sizeBytes) bytes and the budget of \(policy.maxStorageBytes) bytes is short of it; "
                    + "only pinned, playing or downloading packages could make room",
                package: name)
        }
        // Nothing evicted leaves the view as it was: the download that follows
        // carries it forward (`packagesInstalled`) without listing every package.
        guard !evict.isEmpty else { return }
        defer { packagesChanged() }
        try await remove(evict.map(\.packageId))
    }
}

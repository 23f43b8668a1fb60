public import Foundation
public import TourpackPackage

extension OfflineLibrary {
    /// Downloads the tour's package (or its update) and installs it.
    ///
    /// The stream yields the job at every change of status or step and
    /// otherwise about four times a second, and finishes after the job
    /// completes, or throws an `OfflineError`. One download runs at a time;
    /// another waits as `queued`. Before it starts, least recently accessed
    /// packages are evicted to keep `maxStorageBytes`.
    ///
    /// - Parameters:
    ///   - format: the format to take where the tour offers several (the installed one, else AAC, by default).
    ///   - quality: likewise (the installed one, else the best).
    public nonisolated func download(
        tourId: UUID, format: AudioFormat? = nil, quality: AudioQuality? = nil
    ) -> AsyncThrowingStream<DownloadJob, any Error> {
        AsyncThrowingStream { continuation in
            let task = Task { await self.enqueue(tourId: tourId, format: format, quality: quality, continuation: continuation) }
            continuation.onTermination = { termination in
                if case .cancelled = termination { task.cancel() }
            }
        }
    }

    /// Stops the tour's download and removes its partial data; the package
    /// installed before (if any) stays as it was.
    public func cancelDownload(tourId: UUID) async {
        guard let task = tasks[tourId] else { return }
        task.cancel()
        await task.value
    }

    private func enqueue(
        tourId: UUID, format: AudioFormat?, quality: AudioQuality?, continuation: AsyncThrowingStream<DownloadJob, any Error>.Continuation
    ) async {
        if let job = jobs[tourId], job.status == .queued || job.status == .downloading || job.status == .paused {
            continuation.finish(
                throwing: OfflineError(.alreadyDownloading, "tour \(tourId.uuidString.lowercased()) is downloading already"))
            return
        }
        let key = tourId.uuidString.lowercased()
        var job = DownloadJob(packageId: "", tourId: key, tourName: catalogTour(key)?.tourName ?? key, audioBytes: 0, mapBytes: 0)
        jobs[tourId] = job
        continuation.yield(job)
        let previous = queue
        let task = Task {
            await previous?.value
            await self.run(tourId: tourId, format: format, quality: quality, continuation: continuation)
        }
        tasks[tourId] = task
        queue = task
        await withTaskCancellationHandler {
            await task.value
        } onCancel: {
            task.cancel()
        }
        if tasks[tourId] == task { tasks[tourId] = nil }
        job = jobs[tourId] ?? job
        if job.status == .queued { jobs[tourId] = nil }
    }

    private func run(
        tourId: UUID, format: AudioFormat?, quality: AudioQuality?, continuation: AsyncThrowingStream<DownloadJob, any Error>.Continuation
    ) async {
        let key = tourId.uuidString.lowercased()
        do {
            try Task.checkCancellation()
            let catalog = try await currentCatalog()
            guard let tour = catalog.tours.first(where: { $0.tourId == key }) else {
                throw OfflineError(.notOffered, "tour \(key) is not in the catalogue")
            }
            let choice = PackageChoice(tours: [key], format: format, quality: quality)
            let installed = installedPackages()
            guard let entry = try PackageSelection.choose(catalog, installed: installed, choice: choice).first else {
                throw OfflineError(.notOffered, "tour \(key) (\(tour.tourName)) offers no package for that choice")
            }
            try await makeRoom(for: entry, tourId: tourId)
            var installer = Installer(documents: documents, source: source, trust: trust?.trust)
            installer.concurrency = 4
            installer.now = now
            // The catalogue was verified moments ago and the packages are held:
            // the install reads neither again (the held ones are checked against the disk).
            installer.known = Installer.Known(catalog: catalog) { await self.installedPackages() }
            installer.report = { [weak self] event in
                guard case .job(let job) = event else { return }
                continuation.yield(job)
                Task { await self?.record(job, tourId: tourId) }
            }
            defer { packagesChanged() }
            let outcome = try await installer.install(choice, noReinstall: true)
            var done =
                outcome.jobs.first ?? jobs[tourId]
                ?? DownloadJob(
                    packageId: entry.package.packageId, tourId: key, tourName: tour.tourName, audioBytes: 0, mapBytes: 0)
            if outcome.jobs.isEmpty { done.move(to: .completed) }
            jobs[tourId] = done
            updateBytes = [:]
            markAccessed(tourId: tourId)
            // The installer reported its own completion already; a job with
            // nothing to fetch completes here.
            if outcome.jobs.isEmpty { continuation.yield(done) }
            continuation.finish()
        } catch {
            let failure = OfflineError.from(error)
            var job = jobs[tourId] ?? DownloadJob(packageId: "", tourId: key, tourName: key, audioBytes: 0, mapBytes: 0)
            job.move(to: failure.kind == .cancelled ? .cancelled : .failed, message: failure.description)
            jobs[tourId] = job
            continuation.yield(job)
            continuation.finish(throwing: failure)
        }
    }

    private func record(_ job: DownloadJob, tourId: UUID) {
        if let held = jobs[tourId], held.status == .completed || held.status == .failed || held.status == .cancelled,
            job.status != held.status, job.packageId == held.packageId
        {
            return
        }
        jobs[tourId] = job
    }

    /// Evicts least recently accessed packages until the new one fits the
    /// budget; refuses (`storageFailed`) when only pinned, playing or
    /// downloading packages stand in the way.
    private func makeRoom(for entry: CatalogEntry, tourId: UUID) async throws {
        var protected = Set(policy.pinned.map { $0.uuidString.lowercased() })
        if let playing { protected.insert(playing.uuidString.lowercased()) }
        for (id, job) in jobs where id != tourId && (job.status == .downloading || job.status == .paused || job.status == .queued) {
            protected.insert(id.uuidString.lowercased())
        }
        let budget = StorageBudget(maxBytes: policy.maxStorageBytes, protected: protected)
        let device = deviceView()
        guard
            let evict = budget.evictions(
                from: device.packages, adding: entry.package.sizeBytes, replacing: entry.tour.tourId, accessed: device.accessed)
        else {
            let name = "package \(entry.package.packageId) (\(entry.tour.tourName))"
            throw OfflineError(
                .storageFailed,
                "\(name) needs \(entry.package.sizeBytes) bytes and the budget of \(policy.maxStorageBytes) bytes is short of it; "
                    + "only pinned, playing or downloading packages could make room",
                package: name)
        }
        defer { packagesChanged() }
        try await remove(evict.map(\.packageId))
    }
}

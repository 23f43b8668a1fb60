public import Foundation
public import TourpackPackage

extension OfflineLibrary {
    // MARK: Playing before the download ends

    /// Moves these POIs' narrations to the front of the tour's download,
    /// running or queued: the app calls it with the POIs nearest the
    /// traveller, nearest first. Each time a download slot frees, the first
    /// named POI with a file still to fetch goes next. A new call replaces
    /// the last; the choice lasts until the download ends, and is kept with
    /// the queued download across a relaunch.
    public func prioritize(tourId: UUID, poiIds: [UUID]) {
        let keys = poiIds.map(\.key)
        priorities(of: tourId).prefer(keys)
        guard let index = downloads.firstIndex(where: { $0.tourId == tourId }) else { return }
        downloads[index].preferredPOIs = keys.isEmpty ? nil : keys
        queueFile.post(downloads, promptly: false)
    }

    /// The POIs preferred for the tour's download, shared with its installer.
    func priorities(of tourId: UUID) -> DownloadPriorities {
        if let known = preferred[tourId] { return known }
        let made = DownloadPriorities()
        preferred[tourId] = made
        return made
    }

    /// A file of the tour's first download that arrived whole and matched
    /// the SHA-256 the signed package.json names, before the package is
    /// committed; nil when there is none yet.
    ///
    /// A file is in `downloads/<sha256>` only once the download that fetched
    /// it checked it (a kill keeps it there for the resume), but a file
    /// another installed package holds is linked there before it is checked:
    /// so this library hashes each file itself once, and again only if it
    /// changed, before it hands it out.
    func arrivedFile(tourId: UUID, _ pick: (PackageManifest) -> (sha256: String, size: Int64)?) async -> URL? {
        await open()
        guard downloads.contains(where: { $0.tourId == tourId }), let manifest = await waitingManifest(of: tourId),
            let (sha256, size) = pick(manifest)
        else { return nil }
        let url = folder.verified(sha256)
        let known = arrivedChecked[sha256]
        let checked = try? await Blocking.run { () -> FileStatus? in
            guard let status = FileStatus(path: url.path), status.kind == .file, status.size == size else { return nil }
            if status == known { return status }
            let digest = try FileDigest.sha256(of: url)
            return digest.size == size && digest.hex == sha256 ? status : nil
        }
        guard let status = checked ?? nil else {
            arrivedChecked[sha256] = nil
            return nil
        }
        arrivedChecked[sha256] = status
        return url
    }

    /// The package.json of the package the tour's queued download installs,
    /// as it waits in `downloads` (the catalogue's SHA-256, checked), once
    /// the download has fetched it; read from the device only.
    private func waitingManifest(of tourId: UUID) async -> PackageManifest? {
        guard let record = downloads.first(where: { $0.tourId == tourId }), let catalog = await loadRemembered()?.catalog,
            let entry = try? PackageSelection.choose(
                catalog, installed: [], choice: PackageChoice(tours: [tourId.key], format: record.format, quality: record.quality)
            ).first
        else { return nil }
        let sha256 = entry.package.manifest.sha256
        if let known = waitingManifests[sha256] { return known }
        let folder = self.folder
        let read = try? await Blocking.run { folder.waitingManifest(entry.package)?.manifest }
        guard let manifest = read ?? nil, manifest.packageId == entry.package.packageId, manifest.tourId == entry.tour.tourId else {
            return nil
        }
        waitingManifests[sha256] = manifest
        return manifest
    }

    /// Forgets what was kept to play the tour's download early, once it ended.
    func forgetEarlyPlay(of tourId: UUID) {
        preferred[tourId] = nil
        if downloads.isEmpty {
            arrivedChecked.removeAll()
            waitingManifests.removeAll()
        }
    }

    // MARK: Streaming what is not downloaded

    /// The site URL of a narration's audio, for streaming a tour that is not
    /// downloaded (the podcast app's fallback).
    ///
    /// The URL names the narration's content-addressed file on the site, as
    /// the verified catalogue and the package.json it names (fetched and
    /// checked against the catalogue's SHA-256, or the one waiting on the
    /// device) give it. The library hands out only the URL: the player that
    /// streams it, not the library, is trusted with those bytes, which no
    /// one checks against the SHA-256 as they play.
    ///
    /// - Parameters:
    ///   - tourId: the tour, as the catalogue names it.
    ///   - poiId: the POI whose narration to stream.
    ///   - phase: the narration's phase at that POI.
    ///   - format: the format to stream where the tour offers several (the
    ///     installed one, else AAC, by default).
    ///   - quality: likewise (the installed one, else the best).
    /// - Throws: `OfflineError`: `notOffered` when the catalogue has no such
    ///   tour, offer, POI or phase; as `refreshCatalog()` when no catalogue
    ///   was verified yet, or the package.json cannot be fetched or checked.
    public func remoteAudioURL(
        tourId: UUID, poiId: UUID, phase: NarrationPhase, format: AudioFormat? = nil, quality: AudioQuality? = nil
    ) async throws -> URL {
        await open()
        do {
            let catalog = try await currentCatalog()
            var choice = PackageChoice(tours: [tourId.key], format: format, quality: quality)
            choice.namesFlags = false
            guard let entry = try PackageSelection.choose(catalog, installed: await installedPackages(), choice: choice).first else {
                throw OfflineError(.notOffered, "tour \(tourId.key) offers no package for that choice")
            }
            let manifest = try await offeredManifest(entry)
            guard let audio = manifest.audio.first(where: { $0.poiId == poiId.key && $0.phase == phase.phase }) else {
                throw OfflineError(
                    .notOffered, "\(entry.tour.tourName) has no \(phase.rawValue) narration for POI \(poiId.key)",
                    package: TourpackError.packageName(entry.package.packageId, tourName: entry.tour.tourName))
            }
            return site.appendingPathComponent(SiteLayout.blob(sha256: audio.sha256))
        } catch {
            throw OfflineError.from(error)
        }
    }

    /// The package.json the catalogue names for `entry`: kept from before,
    /// waiting in `downloads`, or fetched; checked against the catalogue either way.
    private func offeredManifest(_ entry: CatalogEntry) async throws -> PackageManifest {
        let sha256 = entry.package.manifest.sha256
        if let known = waitingManifests[sha256] { return known }
        let (_, manifest) = try await PackagePlanner(source: source, documents: documents).fetchManifest(entry)
        _ = try PackageFiles.of(manifest, file: entry.package.manifest.path)
        waitingManifests[sha256] = manifest
        return manifest
    }
}

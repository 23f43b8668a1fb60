import Foundation
import TourpackAudio
import TourpackCore
import TourpackMaps
import TourpackState

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Writes one tour's packages: a manifest per format, then the journalled commit.
///
/// A package whose audio was all reused and whose manifest would be the same
/// bytes under its old `createdAt` is left alone, unless it expires within
/// `refreshWithinDays` (0: only an expired one is refreshed). So a nightly
/// build rewrites nothing that did not change, and `--refresh-expiring DAYS`
/// gives the packages near their end a new `createdAt` and `expiresAt`.
package struct TourPublisher: Sendable {
    let config: PipelineConfig
    let layout: Layout
    let staging: StagingArea
    let index: PackageIndex
    let state: StateLayout
    let outputs: OutputCache
    let tilePacks: TilePackRecords
    let manifests: ManifestSignatures
    let refreshWithinDays: Int

    /// Builds the manifests from the staged audio, stages those that
    /// changed, and commits everything through a `CommitJournal`; then
    /// records the new files in the output cache.
    func publish(_ assembly: TourAssembly, coverage: MapCoverage, now: Date) throws -> TourPackaged {
        let tour = assembly.tour
        var manifestMoves: [CommitJournal.Move] = []
        var packMoves: [CommitJournal.Move] = []
        var packPaths: [String] = []
        var packagePaths: [String] = []
        var unchangedPaths: [String] = []
        var writtenFormats: [AudioFormat] = []
        var packageIDs: Set<String> = []
        var manifestTemps: [URL] = []
        var packTemps: [URL] = []
        var packSource = assembly.pack?.temp
        var packDeletions: [String] = []
        var captionSwaps: [CommitJournal.FolderSwap] = []
        var captionFiles = 0
        do {
            for format in config.formats {
                let staged = assembly.staged.filter { $0.audio.encoded.format == format }
                let audio = staged.map(\.audio)
                let packageID = config.packageID(tourID: tour.id, format: format)
                var mapTiles = coverage
                if assembly.pack == nil {
                    // No tile source now: a pack an earlier build left goes with the new package.json.
                    let target = layout.tilePack(packageID: packageID)
                    if FileManager.default.fileExists(atPath: target.url.path) { packDeletions.append(target.url.path) }
                }
                if let pack = assembly.pack, let source = config.maps.source {
                    let target = layout.tilePack(packageID: packageID)
                    mapTiles = pack.coverage(coverage, file: target.relativePath, source: source)
                    if !pack.upToDate.contains(target.relativePath), let made = pack.temp {
                        // The first package takes the staged pack; each other one a hard link to it.
                        let temp: URL
                        if let first = packSource {
                            temp = first
                            packSource = nil
                        } else {
                            temp = try staging.temporaryURL(for: target.url)
                            packTemps.append(temp)
                            try AtomicFile.link(made, to: temp)
                        }
                        packMoves.append(CommitJournal.Move(from: temp.path, to: target.url.path))
                        packPaths.append(target.relativePath)
                    }
                }
                if let captions = try prepareCaptions(staged, packageID: packageID) {
                    captionSwaps.append(captions.swap)
                    captionFiles += captions.written
                }
                let final = layout.manifest(packageID: packageID)
                // Looked at before it is read: a file found sound is as the build's scan read it.
                let look = manifests.look(at: final.url.path)
                let previous = (look.isSound ? index.scanned(at: final.url) : nil) ?? Self.readManifest(final.url, known: index)
                // Left alone when unchanged; only a changed package is made again under a new `createdAt`.
                if let same = try unchanged(previous, look: look, tour: tour, format: format, audio: audio, coverage: mapTiles, now: now) {
                    packageIDs.insert(same.packageId)
                    unchangedPaths.append(final.relativePath)
                    continue
                }
                let manifest = try self.manifest(
                    tour: tour, format: format, audio: audio, coverage: mapTiles,
                    createdAt: Self.creationTime(now, after: previous?.manifest))
                packageIDs.insert(manifest.packageId)
                let temp = try staging.temporaryURL(for: final.url)
                manifestTemps.append(temp)
                try AtomicFile.fill(temp, with: manifest.encoded())
                manifestMoves.append(CommitJournal.Move(from: temp.path, to: final.url.path))
                packagePaths.append(final.relativePath)
                writtenFormats.append(format)
            }
            if let unused = packSource { staging.discard([unused]) }
            for temp in assembly.staged.compactMap(\.temp) { try AtomicFile.syncFile(temp) }
        } catch {
            staging.discard(manifestTemps + packTemps)
            CaptionsFolder.discard(captionSwaps, root: layout.root)
            throw error
        }
        let removals = index.superseded(tourID: tour.id, formats: writtenFormats, keeping: packageIDs)
        let fresh = assembly.staged.filter { $0.temp != nil }
        // The new audio folder, complete beside the old one; then the packs, then the package.json files that name them.
        let swap: CommitJournal.FolderSwap?
        do {
            swap = try prepareAudioFolder(tourID: tour.id, fresh: fresh)
        } catch {
            staging.discard(manifestTemps + packTemps)
            CaptionsFolder.discard(captionSwaps, root: layout.root)
            throw error
        }
        let moves = packMoves + manifestMoves
        // The new files are recorded before the commit, so a build killed
        // during it, whose journal the next build finishes, has its files
        // reused rather than encoded again. A record is only trusted while the
        // file at its path has its size and SHA-256, so a commit rolled back
        // leaves records that match nothing. Losing them costs an encode, not this tour.
        try? outputs.record(fresh.map { (url: $0.final, key: $0.key, audio: $0.audio.encoded, captions: $0.captions) })
        if swap != nil || !moves.isEmpty || !removals.isEmpty || !packDeletions.isEmpty || !captionSwaps.isEmpty {
            let journal = CommitJournal(
                tourId: tour.id.value, moves: moves, removals: removals.map(\.path), deletions: packDeletions, swap: swap,
                captionSwaps: captionSwaps)
            try journal.commit(state: state.rootFolder)
        }
        for temp in assembly.temps + manifestTemps + packTemps { staging.committed(temp) }
        let reused = assembly.staged.filter { $0.temp == nil }
        // Captions made again for a reused file go into its row.
        let remade = reused.filter(\.captionsAreNew).compactMap { file in file.captions.map { (file.final, $0) } }
        try? outputs.touch(reused.map(\.final), captions: Dictionary(remade) { first, _ in first })
        if let pack = assembly.pack {
            for path in packPaths { try? tilePacks.save(pack.record, for: path) }
        }
        return TourPackaged(
            tourId: tour.id.value, tourName: tour.name, packages: packagePaths, unchangedPackages: unchangedPaths,
            files: fresh.count, reusedFiles: assembly.staged.count - fresh.count,
            bytes: fresh.reduce(0) { $0 + $1.audio.encoded.sizeBytes },
            superseded: removals.map { "\(Layout.offlineToursFolder)/\($0.lastPathComponent)" }, tilePacks: packPaths,
            captionFiles: captionFiles)
    }

    /// One format's package's next captions folder (`CaptionsFolder`), when
    /// its captions differ from the live folder's: a file whose bytes
    /// changed, a missing or damaged one (written again even when
    /// package.json is not), a narration the tour no longer has, or
    /// `captions: off` (an empty folder, which the commit removes). Nil
    /// when the live folder is already exactly right. `written` counts the
    /// files that are new.
    private func prepareCaptions(_ staged: [StagedFile], packageID: SafeID) throws -> (swap: CommitJournal.FolderSwap, written: Int)? {
        var wanted: [String: (file: StagedFile, captions: StoredCaptions)] = [:]
        for file in staged {
            guard let captions = file.captions else { continue }
            wanted[Layout.captionsFileName(poiID: file.audio.poiID, phase: file.audio.phase)] = (file, captions)
        }
        let live = layout.captionsFolder(packageID: packageID).url
        let livePath = live.path
        // Listed with each file's `lstat` at once: one path walk for the folder.
        var present: [String: FileStatus] = [:]
        for (name, status) in (try? FileStatus.entries(of: livePath)) ?? [] where !AtomicFile.isTemporaryName(name) {
            present[name] = status
        }
        // The names whose file is already right. Captions just made again
        // are not in the row yet: their file is read.
        var same: Set<String> = []
        for (name, entry) in wanted
        where outputs.captionFile(
            atPath: "\(livePath)/\(name)", status: present[name], holds: entry.captions, signed: entry.file.captionFileSignature,
            keptWith: entry.file.captionsAreNew ? nil : entry.file.final)
        {
            same.insert(name)
        }
        guard same.count != wanted.count || present.count != wanted.count else { return nil }
        guard !wanted.isEmpty || !present.isEmpty else { return nil }
        let root = layout.root
        let swap = try CaptionsFolder.prepare(packageFolder: layout.packageFolder(packageID: packageID).url, root: root) { next in
            for (name, file) in wanted.sorted(by: { $0.key < $1.key }) {
                let target = next.appendingPathComponent(name)
                if same.contains(name) {
                    try AtomicFile.hardLink(live.appendingPathComponent(name), to: target, under: root)
                } else {
                    try AtomicFile.write(file.captions.bytes, to: target)
                }
            }
        }
        return (swap, wanted.count - same.count)
    }

    /// Makes the tour's next audio folder beside the live one: the new files
    /// (renamed from their temps) and a hard link to every other file the
    /// live folder holds, all synced. Nil when no audio changed.
    private func prepareAudioFolder(tourID: SafeID, fresh: [StagedFile]) throws -> CommitJournal.FolderSwap? {
        guard !fresh.isEmpty else { return nil }
        let live = layout.audioFolder(tourID: tourID).url
        let next = live.deletingLastPathComponent()
            .appendingPathComponent(".\(tourID.value)\(Layout.nextFolderMarker)\(UInt32.random(in: .min ... .max))", isDirectory: true)
        let root = layout.root
        try AtomicFile.createFolder(next, under: root)
        do {
            let replaced = Set(fresh.map(\.final.lastPathComponent))
            let kept = ((try? FileManager.default.contentsOfDirectory(atPath: live.path)) ?? []).filter {
                !replaced.contains($0) && !AtomicFile.isTemporaryName($0)
                    && Layout.parseAudioPath("\(Layout.audioCacheFolder)/\(tourID.value)/\($0)") != nil
            }
            for name in kept {
                try AtomicFile.hardLink(live.appendingPathComponent(name), to: next.appendingPathComponent(name), under: root)
            }
            for file in fresh {
                guard let temp = file.temp else { continue }
                try AtomicFile.move(temp, to: next.appendingPathComponent(file.final.lastPathComponent), under: root)
                staging.committed(temp)
            }
            try AtomicFile.syncFolder(next)
        } catch {
            try? AtomicFile.removeFolder(next, under: root)
            throw error
        }
        return CommitJournal.FolderSwap(live: live.path, next: next.path, liveInode: AtomicFile.inode(of: live))
    }

    /// The package.json at `url` and its bytes; nil when there is none, or
    /// none that reads. Decoded only when `known` (the build's scan) has not
    /// already decoded these bytes.
    static func readManifest(_ url: URL, known: PackageIndex? = nil) -> (bytes: [UInt8], manifest: PackageManifest)? {
        guard let data = try? Data(contentsOf: url) else { return nil }
        let bytes = Array(data)
        if let manifest = known?.manifest(at: url, bytes: bytes) { return (bytes, manifest) }
        guard let manifest = try? PackageManifest.decode(bytes) else { return nil }
        return (bytes, manifest)
    }

    /// `now`, or a second after the `createdAt` of the package it replaces
    /// when that is not earlier: package.json keeps whole seconds, and a
    /// rebuild within the second of the last one must still be the newer
    /// build, or a publisher merging catalogues (which keeps the later
    /// `createdAt` of two builds of one package) could keep the old one.
    static func creationTime(_ now: Date, after previous: PackageManifest?) -> Date {
        let second = Date(timeIntervalSince1970: now.timeIntervalSince1970.rounded(.down))
        guard let previous, previous.createdAt >= second else { return second }
        return previous.createdAt.addingTimeInterval(1)
    }

    /// The package as it stands when the `previous` package.json already
    /// says exactly what a new one would (the same bytes under its own
    /// `createdAt`) and does not expire within `refreshWithinDays`; nil otherwise.
    ///
    /// The content is compared field by field first, under the old hash:
    /// different fields are different bytes. The same fields are the same
    /// bytes when a build found the file as the store writes it and nothing
    /// has written it since (`look`); otherwise the package is encoded and
    /// its bytes compared, and a file found sound is noted so.
    private func unchanged(
        _ previous: (bytes: [UInt8], manifest: PackageManifest)?, look: ManifestSignatures.Look, tour: Tour, format: AudioFormat,
        audio: [PackageAudio], coverage: MapCoverage, now: Date
    ) throws -> PackageManifest? {
        guard let (bytes, existing) = previous else { return nil }
        guard existing.expiresAt > now.addingTimeInterval(Double(refreshWithinDays) * 86_400) else { return nil }
        let same = try manifest(
            tour: tour, format: format, audio: audio, coverage: coverage, createdAt: existing.createdAt, hash: existing.contentHash)
        guard same == existing else { return nil }
        if look.isSound { return same }
        let made = try manifest(tour: tour, format: format, audio: audio, coverage: coverage, createdAt: existing.createdAt)
        guard made.encoded() == bytes else { return nil }
        manifests.noteSound(look)
        return made
    }

    /// The format's package.json under `createdAt`, with its content hash
    /// worked out, or `hash` taken as it.
    private func manifest(
        tour: Tour, format: AudioFormat, audio: [PackageAudio], coverage: MapCoverage, createdAt: Date, hash: String? = nil
    ) throws -> PackageManifest {
        try PackageManifest(
            tour: tour, voice: config.voice, format: format, bitrateKbps: config.bitrate(for: format), quality: config.quality,
            audio: audio, mapTiles: coverage, createdAt: createdAt, maxAgeDays: config.budgets.packageMaxAgeDays,
            loudness: config.audio.loudness, contentHash: hash)
    }
}

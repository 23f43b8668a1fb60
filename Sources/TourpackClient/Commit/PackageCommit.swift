import Foundation
import TourpackPackage

/// Moves one package's verified downloads into the Documents layout, the
/// way a build publishes a tour (`CommitJournal`), so the app never sees
/// half a package:
///
/// ```
///  downloads/<sha256> ─▶ AudioCache/.<tourId>.next-… (new files + links to every file that stays)
///                     ─▶ staging/ (caption and tile pack links, package.json temp)
///                     ─▶ OfflineTours/<id>/.captions.next-… (new captions + links to those that stay)
///  journal/<tourId>.json ─▶ swap AudioCache/<tourId> ⇄ next ─▶ swap captions ⇄ next ─▶ tiles.mbtiles ─▶ package.json (last)
///                        ─▶ superseded packages and files no package lists any more go
/// ```
///
/// Until the journal is written nothing in the layout has changed: a
/// failure there removes what was prepared and leaves the installed
/// package byte for byte. From the journal on, the renames are a few system
/// calls; an install killed among them is finished by the next one
/// (`CommitJournal.replayAll`). Blocking: run it on a thread pool.
struct PackageCommit: Sendable {
    let folder: InstallFolder
    let staging: StagingArea

    var layout: Layout { Layout(root: folder.documents) }

    func commit(_ plan: PackagePlan) throws {
        guard let manifest = plan.manifest, let tourID = SafeID(validating: manifest.tourId),
            let packageID = SafeID(validating: manifest.packageId)
        else { throw TourpackError.internalInvariant("\(plan.name): a commit without a checked package.json") }
        let root = layout.root
        var temps: [URL] = []
        var next: URL?
        var captionSwaps: [CommitJournal.FolderSwap] = []
        let journal: CommitJournal
        do {
            next = try prepareAudioFolder(plan, tourID: tourID)
            var moves: [CommitJournal.Move] = []
            // The package's captions folder is made whole beside the live one
            // (verified downloads and links to the files that stay) and swapped
            // in by the journal, so a final caption path only ever holds a
            // whole, verified file, and the package.json in force names its own.
            let captionsPrefix = layout.captionsFolder(packageID: packageID).relativePath + "/"
            let placedCaptions = plan.placements.filter { $0.kind == .captions }
            let obsoleteCaptions = Set(plan.obsolete.filter { $0.hasPrefix(captionsPrefix) }.map { ($0 as NSString).lastPathComponent })
            if !placedCaptions.isEmpty || !obsoleteCaptions.isEmpty {
                let live = layout.captionsFolder(packageID: packageID).url
                let placed = Set(placedCaptions.map { ($0.path as NSString).lastPathComponent })
                let folder = self.folder
                captionSwaps.append(
                    try CaptionsFolder.prepare(packageFolder: layout.packageFolder(packageID: packageID).url, root: root) { next in
                        for file in placedCaptions {
                            try AtomicFile.link(
                                folder.verified(file.sha256), to: next.appendingPathComponent((file.path as NSString).lastPathComponent))
                        }
                        let kept = ((try? FileManager.default.contentsOfDirectory(atPath: live.path)) ?? []).sorted().filter {
                            $0.hasSuffix(".vtt") && !placed.contains($0) && !obsoleteCaptions.contains($0)
                                && !AtomicFile.isTemporaryName($0)
                        }
                        for name in kept {
                            try AtomicFile.hardLink(live.appendingPathComponent(name), to: next.appendingPathComponent(name), under: root)
                        }
                    })
            }
            let packFinal = layout.tilePack(packageID: packageID).url
            if let pack = plan.placements.first(where: \.isTilePack) {
                let temp = try staging.temporaryURL(deferringFolderOf: packFinal)
                temps.append(temp)
                try AtomicFile.link(folder.verified(pack.sha256), to: temp)
                moves.append(CommitJournal.Move(from: temp.path, to: packFinal.path))
            }
            let manifestFinal = layout.manifest(packageID: packageID).url
            let temp = try staging.temporaryURL(for: manifestFinal)
            temps.append(temp)
            try AtomicFile.fill(temp, with: plan.manifestBytes)
            moves.append(CommitJournal.Move(from: temp.path, to: manifestFinal.path))
            var deletions: [String] = []
            if !plan.files.contains(where: \.isTilePack), OutputTree.kind(packFinal) == .file { deletions.append(packFinal.path) }
            // Files outside the swapped audio folder that nothing will list
            // (a dropped narration's captions) go with the journal too.
            let audioPrefix = layout.audioFolder(tourID: tourID).relativePath + "/"
            for path in plan.obsolete where !path.hasPrefix(audioPrefix) && !path.hasPrefix(captionsPrefix) {
                let url = try layout.resolve(relativePath: path)
                if !deletions.contains(url.path) { deletions.append(url.path) }
            }
            let live = layout.audioFolder(tourID: tourID).url
            let swap = next.map { CommitJournal.FolderSwap(live: live.path, next: $0.path, liveInode: AtomicFile.inode(of: live)) }
            let removals = plan.superseded.compactMap { SafeID(validating: $0.packageId) }.map {
                layout.packageFolder(packageID: $0).url.path
            }
            journal = CommitJournal(
                tourId: tourID.value, moves: moves, removals: removals, deletions: deletions, swap: swap, captionSwaps: captionSwaps)
        } catch {
            staging.discard(temps)
            CaptionsFolder.discard(captionSwaps, root: root)
            if let next { try? AtomicFile.removeFolder(next, under: root) }
            throw error
        }
        try journal.commit(state: folder.url)
        for temp in temps { staging.committed(temp) }
    }

    /// The tour's next audio folder beside the live one: the files this
    /// package places (hard links to their verified downloads), and a hard
    /// link to every other file of the live folder but the obsolete ones,
    /// all synced. Nil when no audio file changes.
    private func prepareAudioFolder(_ plan: PackagePlan, tourID: SafeID) throws -> URL? {
        let audio = plan.placements.filter { $0.kind == .audio }
        let tourFolder = layout.audioFolder(tourID: tourID)
        let obsolete = Set(plan.obsolete.filter { $0.hasPrefix(tourFolder.relativePath + "/") }.map { ($0 as NSString).lastPathComponent })
        guard !audio.isEmpty || !obsolete.isEmpty else { return nil }
        let live = tourFolder.url
        let next = live.deletingLastPathComponent()
            .appendingPathComponent(
                ".\(tourID.value)\(Layout.nextFolderMarker)\(UInt32.random(in: .min ... .max))", isDirectory: true)
        let root = layout.root
        try AtomicFile.createFolder(next, under: root)
        do {
            let placed = Set(audio.map { ($0.path as NSString).lastPathComponent })
            let kept = ((try? FileManager.default.contentsOfDirectory(atPath: live.path)) ?? []).sorted().filter {
                !placed.contains($0) && !obsolete.contains($0) && !AtomicFile.isTemporaryName($0)
                    && Layout.parseAudioPath("\(tourFolder.relativePath)/\($0)") != nil
            }
            for name in kept {
                try AtomicFile.hardLink(live.appendingPathComponent(name), to: next.appendingPathComponent(name), under: root)
            }
            for file in audio {
                try AtomicFile.link(
                    folder.verified(file.sha256), to: next.appendingPathComponent((file.path as NSString).lastPathComponent))
            }
            try AtomicFile.syncFolder(next)
        } catch {
            try? AtomicFile.removeFolder(next, under: root)
            throw error
        }
        return next
    }
}

extension PackagePlan {
    /// Hands every folder and file the committed package put in the layout
    /// to the phone's storage seam: the tour's audio folder and its files,
    /// the package folder, its package.json, tile pack and captions.
    /// Files linked from verified downloads were protected as downloads
    /// already (a hard link shares its file's protection); they are named
    /// again, which costs a phone nothing.
    func protectCommitted(in documents: URL, storage: DeviceStorage) {
        guard let manifest, let tourID = SafeID(validating: manifest.tourId), let packageID = SafeID(validating: manifest.packageId)
        else { return }
        let layout = Layout(root: documents)
        let folders = [
            layout.audioFolder(tourID: tourID).url, layout.packageFolder(packageID: packageID).url,
            layout.captionsFolder(packageID: packageID).url,
        ]
        for folder in folders where OutputTree.kind(folder) == .folder {
            storage.protect(folder)
            for name in (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? [] {
                let file = folder.appendingPathComponent(name)
                if OutputTree.kind(file) == .file { storage.protect(file) }
            }
        }
    }
}

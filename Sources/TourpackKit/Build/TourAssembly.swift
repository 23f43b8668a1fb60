import Foundation

/// One item's file in one format, encoded and waiting as a temp.
struct StagedFile: Sendable, Hashable {
    var temp: URL
    var final: URL
    var audio: PackageAudio
}

/// What one item of work came to.
enum ItemOutcome: Sendable {
    case done(tourIndex: Int, item: PlanItem, files: [StagedFile], durationSeconds: Double)
    case failed(tourIndex: Int, item: PlanItem, error: TourpackError)
    case cancelled(tourIndex: Int)
}

/// A tour on its way to being packaged: which items are still out, the
/// staged files of those that are done, and the failures.
///
/// The build's main loop owns every assembly, so none of this is shared.
struct TourAssembly {
    let plan: TourPlan
    /// Items not yet finished, failed or skipped.
    var outstanding: Int
    var staged: [StagedFile] = []
    var failures: [ItemFailure] = []
    /// Items never started because the tour had already failed.
    var skipped = 0
    /// Published or given up; nothing more happens to it.
    var isClosed = false

    init(plan: TourPlan) {
        self.plan = plan
        outstanding = plan.items.count
    }

    var tour: Tour { plan.tour }
    var hasFailed: Bool { !failures.isEmpty }

    /// The failure of `item` as the event and summary report it.
    static func failure(of item: PlanItem, in tour: Tour, error: TourpackError) -> ItemFailure {
        let label = item.label(tourName: tour.name)
        let text = error.description
        return ItemFailure(
            tourId: tour.id.value, tourName: tour.name, poiId: item.poiID.value, poiName: item.poiName, phase: item.phase,
            message: text.hasPrefix(label) ? text : "\(label): \(text)")
    }
}

/// Writes one tour's packages: a manifest per format, then the journalled commit.
struct TourPublisher: Sendable {
    let config: PipelineConfig
    let layout: Layout
    let staging: StagingArea
    let index: PackageIndex

    /// Builds the manifests from the staged audio, stages them, and commits
    /// everything through a `CommitJournal`. Returns the package paths and what was superseded.
    func publish(_ assembly: TourAssembly, coverage: MapCoverage, createdAt: Date) throws -> TourPackaged {
        let tour = assembly.tour
        var manifestMoves: [CommitJournal.Move] = []
        var packagePaths: [String] = []
        var packageIDs: Set<String> = []
        var manifestTemps: [URL] = []
        do {
            for format in config.formats {
                let audio = assembly.staged.filter { $0.audio.encoded.format == format }.map(\.audio)
                let manifest = try PackageManifest(
                    tour: tour, voice: config.voice, format: format, audio: audio, mapTiles: coverage,
                    createdAt: createdAt, maxAgeDays: config.budgets.packageMaxAgeDays)
                guard let packageID = SafeID(validating: manifest.packageId) else {
                    throw TourpackError.invalidInput("package ID \(manifest.packageId) is not a UUID")
                }
                let final = layout.manifest(packageID: packageID)
                let temp = try staging.temporaryURL(for: final.url)
                manifestTemps.append(temp)
                try AtomicFile.fill(temp, with: manifest.encoded())
                manifestMoves.append(CommitJournal.Move(from: temp.path, to: final.url.path))
                packagePaths.append(final.relativePath)
                packageIDs.insert(manifest.packageId)
            }
            for file in assembly.staged { try AtomicFile.syncFile(file.temp) }
        } catch {
            staging.discard(manifestTemps)
            throw error
        }
        let removals = index.superseded(tourID: tour.id, formats: config.formats, keeping: packageIDs)
        let journal = CommitJournal(
            tourId: tour.id.value,
            moves: assembly.staged.map { CommitJournal.Move(from: $0.temp.path, to: $0.final.path) } + manifestMoves,
            removals: removals.map(\.path))
        try journal.commit(state: config.state)
        for temp in assembly.staged.map(\.temp) + manifestTemps { staging.committed(temp) }
        return TourPackaged(
            tourId: tour.id.value, tourName: tour.name, packages: packagePaths, files: assembly.staged.count,
            bytes: assembly.staged.reduce(0) { $0 + $1.audio.encoded.sizeBytes },
            superseded: removals.map { "\(Layout.offlineToursFolder)/\($0.lastPathComponent)" })
    }
}

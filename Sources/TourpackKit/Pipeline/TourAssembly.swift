import Foundation
import TourpackCore
import TourpackPlan
import TourpackState

/// One item's file in one format: encoded and waiting as a temp, or (no
/// temp) the file already at its final path, reused from the output cache.
struct StagedFile: Sendable, Hashable {
    var temp: URL?
    var final: URL
    var audio: PackageAudio
    /// What the file was made from, recorded once it is committed.
    var key: OutputKey
    /// The narration's WebVTT file, written into the format's package
    /// folder with its package.json and kept in the file's row of the
    /// output index; nil with `captions: off`.
    var captions: StoredCaptions? = nil
    /// Whether `captions` were made by this build, not read from the row:
    /// a reused file's row is then given them.
    var captionsAreNew = false
    /// What the file's row keeps of the package's caption file, when
    /// `captions` were kept with the file (`OutputCache.ReusedFile`).
    var captionFileSignature: String? = nil
}

/// What one item of work came to.
enum ItemOutcome: Sendable {
    case done(tourIndex: Int, item: PlanItem, files: [StagedFile], durationSeconds: Double)
    case failed(tourIndex: Int, item: PlanItem, error: TourpackError)
    case cancelled(tourIndex: Int)
    /// A tour's maps phase is over: its tile pack is staged, or it failed.
    case mapsReady(tourIndex: Int, result: Result<StagedTilePack, TourpackError>)
    /// Time to report the tiles' progress.
    case tick
    /// A tour's publish is over: its packages are in place, or it failed.
    case published(tourIndex: Int, result: Result<TourPackaged, PublishFailure>)
}

/// Why a tour's publish failed, as its summary and event say it.
struct PublishFailure: Error, Sendable {
    var message: String
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
    /// The temps among `staged`: what a failed or cancelled tour discards.
    var temps: [URL] { staged.compactMap(\.temp) + (pack?.temp.map { [$0] } ?? []) }
    var failures: [ItemFailure] = []
    /// Items never started because the tour had already failed.
    var skipped = 0
    /// Published or given up; nothing more happens to it.
    var isClosed = false
    /// The tile pack is still being made (a tile source is set and its maps are not ready).
    var mapsPending: Bool
    var pack: StagedTilePack?
    /// Why the maps phase failed (`mapDownloadFailed`, storage): the tour is not packaged.
    var mapFailure: TourpackError?

    init(plan: TourPlan, hasTileSource: Bool) {
        self.plan = plan
        outstanding = plan.items.count
        mapsPending = hasTileSource
    }

    var tour: Tour { plan.tour }
    var hasFailed: Bool { !failures.isEmpty || mapFailure != nil }

    /// The failure of `item` as the event and summary report it.
    static func failure(of item: PlanItem, in tour: Tour, error: TourpackError) -> ItemFailure {
        let label = item.label(tourName: tour.name)
        let text = error.description
        return ItemFailure(
            tourId: tour.id.value, tourName: tour.name, poiId: item.poiID.value, poiName: item.poiName, phase: item.phase,
            message: text.hasPrefix(label) ? text : "\(label): \(text)")
    }
}

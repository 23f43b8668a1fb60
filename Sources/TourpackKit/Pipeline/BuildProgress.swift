import TourpackCore

/// How far a build has come, worked out from its events.
///
/// The weights are the app's own (`ProgressWeights`): audio 70%, maps 25%, bundling 5%. Audio
/// advances per item (done, failed or skipped alike, so the bar always
/// reaches the end); maps advance per tile when the pipeline names a tile
/// source (per tour otherwise: its coverage worked out); bundling per tour.
package struct BuildProgress: Sendable, Hashable {
    package private(set) var items = 0
    package private(set) var tours = 0
    package private(set) var itemsDone = 0
    package private(set) var itemsFailed = 0
    package private(set) var itemsSkipped = 0
    package private(set) var toursMapped = 0
    package private(set) var tiles = 0
    package private(set) var tilesDone = 0
    package private(set) var toursBundled = 0
    package private(set) var toursFailed = 0
    /// The tour whose item finished last.
    package private(set) var currentTour: String?

    package init() {}

    package mutating func record(_ event: BuildEvent) {
        switch event {
        case .started(let start):
            items = start.items
            tours = start.tours
            tiles = start.tiles
        case .mapsProgress(let maps):
            tilesDone = maps.tilesDone
        case .itemDone(let done):
            itemsDone += 1
            currentTour = done.tourName
        case .itemFailed(let failure):
            itemsFailed += 1
            currentTour = failure.tourName
        case .mapsDone:
            toursMapped += 1
        case .tourPackaged:
            toursBundled += 1
        case .tourFailed(let failure):
            itemsSkipped += failure.skippedItems
            toursFailed += 1
        case .waitingForLock, .finished:
            break
        }
    }

    /// Items settled one way or another.
    package var itemsSettled: Int { itemsDone + itemsFailed + itemsSkipped }

    /// 0...1 by the weights.
    package var fraction: Double {
        guard items > 0, tours > 0 else { return 0 }
        // A failed tour will never be mapped or bundled; its shares count as settled.
        let audio = Double(min(itemsSettled, items)) / Double(items)
        let maps = tiles > 0 ? Double(min(tilesDone, tiles)) / Double(tiles) : Double(min(toursMapped + toursFailed, tours)) / Double(tours)
        let bundling = Double(min(toursBundled + toursFailed, tours)) / Double(tours)
        return ProgressWeights.fraction(audio: audio, maps: maps, bundling: bundling)
    }

    /// Seconds left at the pace so far; nil until there is a pace to go by.
    package func secondsLeft(elapsed: Double) -> Double? {
        let done = fraction
        guard done > 0.01, elapsed > 0.5 else { return nil }
        return max(0, elapsed / done - elapsed)
    }
}

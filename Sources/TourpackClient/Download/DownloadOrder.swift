import Foundation
import TourpackPackage

/// The POIs the app wants first, in its order: the ones nearest the
/// traveller (`OfflineLibrary.prioritize(tourId:poiIds:)`). Shared between
/// the library, which changes it at any moment, and the download it
/// reorders, which reads it each time a file's turn comes.
package final class DownloadPriorities: @unchecked Sendable {
    private let lock = NSLock()
    private var poiIds: [String] = []

    package init(_ poiIds: [String] = []) { self.poiIds = poiIds }

    /// These POIs first, the first named first; replaces what was preferred.
    package func prefer(_ poiIds: [String]) { lock.withLock { self.poiIds = poiIds } }

    package var preferred: [String] { lock.withLock { poiIds } }
}

/// The order a download's files go in, decided file by file as each
/// download slot frees.
///
/// A package's files go in route order: the first POI's narrations (each
/// phase's audio, then its captions), then the next POI's, as package.json
/// lists them (POIs in tour order, then phases). The tile pack goes after
/// the first POI's narrations: the traveller hears the first POI once its
/// own files have arrived, and gets the map (what they navigate by) before
/// the rest of the narration; the Installing article gives the figures
/// behind that choice. POIs the app prefers (`DownloadPriorities`) jump the
/// queue whenever a slot frees.
package final class DownloadOrder: @unchecked Sendable {
    /// Where a first download's tile pack goes among the narrations.
    /// `afterFirstPOI` is the product's; the others are measured against it
    /// (`tourpack-bench install`).
    package enum TilePackPlacement: String, Sendable, CaseIterable {
        case first, afterFirstPOI, last
    }

    struct Item: Sendable {
        var plan: PackagePlan
        var file: PackageFile
        /// The POI whose narration the file is; nil for the tile pack.
        var poiId: String?
    }

    private let lock = NSLock()
    private var pending: [Item]
    private let priorities: DownloadPriorities?

    /// Every file the plans download, each SHA-256 once, packages in the plans' order.
    init(_ plans: [PackagePlan], priorities: DownloadPriorities?, tilePack: TilePackPlacement = .afterFirstPOI) {
        var seen: Set<String> = []
        var items: [Item] = []
        for plan in plans {
            for (file, poiId) in Self.routeOrder(plan, tilePack: tilePack) where seen.insert(file.sha256).inserted {
                items.append(Item(plan: plan, file: file, poiId: poiId))
            }
        }
        pending = items
        self.priorities = priorities
    }

    /// A first narration this large or larger goes alone (`startsAlone`).
    static let aloneFromBytes: Int64 = 32 * 1024

    /// Whether the first file to go is a narration's audio large enough to
    /// fetch alone: on a slow link, files fetched together share it, and the
    /// first sentence would wait for all of them. A small one arrives in
    /// moments either way, and going alone would only cost a round trip.
    var startsAlone: Bool {
        lock.withLock { pending.first.map { $0.file.kind == .audio && $0.file.sizeBytes >= Self.aloneFromBytes } ?? false }
    }

    /// The next file to download: the first of a preferred POI's, else the first in route order.
    func next() -> Item? {
        let preferred = priorities?.preferred ?? []
        return lock.withLock {
            guard !pending.isEmpty else { return nil }
            for poiId in preferred {
                if let index = pending.firstIndex(where: { $0.poiId == poiId }) { return pending.remove(at: index) }
            }
            return pending.removeFirst()
        }
    }

    /// A plan's downloads in route order, each with its POI.
    static func routeOrder(_ plan: PackagePlan, tilePack placement: TilePackPlacement) -> [(file: PackageFile, poiId: String?)] {
        guard let manifest = plan.manifest else { return plan.downloads.map { ($0, nil) } }
        let wanted = Dictionary(plan.downloads.map { ($0.sha256, $0) }, uniquingKeysWith: { first, _ in first })
        var ordered: [(file: PackageFile, poiId: String?)] = []
        var placed: Set<String> = []
        func place(_ sha256: String?, poiId: String?) {
            guard let sha256, let file = wanted[sha256], placed.insert(sha256).inserted else { return }
            ordered.append((file, poiId))
        }
        let tilePack = manifest.mapTiles.sha256
        if placement == .first { place(tilePack, poiId: nil) }
        for (index, entry) in manifest.audio.enumerated() {
            place(entry.sha256, poiId: entry.poiId)
            place(entry.captions?.sha256, poiId: entry.poiId)
            let endsFirstPOI = index + 1 == manifest.audio.count || manifest.audio[index + 1].poiId != manifest.audio[0].poiId
            if placement == .afterFirstPOI, entry.poiId == manifest.audio[0].poiId, endsFirstPOI { place(tilePack, poiId: nil) }
        }
        place(tilePack, poiId: nil)
        // Anything package.json names elsewhere (nothing today) goes last, as listed.
        for file in plan.downloads { place(file.sha256, poiId: nil) }
        return ordered
    }
}

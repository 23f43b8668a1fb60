import Foundation
package import TourpackCore
import TourpackPlan

/// The part of an output root that one shard's build owns: its tours' audio
/// folders and its packages' folders.
///
/// Several workers of one fleet (`build --shards N`) publish into one root
/// at once, each holding the root's lock shared. Whatever a build sweeps or
/// evicts on its own judgement (leftover temps, a killed run's next-folders,
/// unlisted audio over the cache budget) it takes only from its own scope:
/// in another shard's folders the same sight is a publish in flight, and
/// audio that no package lists yet is audio whose package.json is about to
/// be renamed into place. A whole-root build has no scope and holds the
/// root's lock alone.
package struct OutputScope: SweepScope, Hashable {
    /// Lowercase tour IDs: the `AudioCache/<tourId>` folders.
    package let tourIDs: Set<String>
    /// The `OfflineTours/<packageId>` folders of those tours in this voice and these formats.
    package let packageIDs: Set<String>

    /// `bitrates`: the rates other than the contract's (a ladder's rung).
    package init(tours: some Sequence<SafeID>, voice: VoicePreset, formats: [AudioFormat], bitrates: [AudioFormat: Int] = [:]) {
        let tours = Array(tours)
        tourIDs = Set(tours.map(\.value))
        packageIDs = Set(
            tours.flatMap { tour in
                formats.map { PackageID.make(tourID: tour, voice: voice, format: $0, bitrateKbps: bitrates[$0]).value }
            })
    }

    /// Whether `name`, a folder right under `top` (`AudioCache` or
    /// `OfflineTours`), is this scope's: a tour's audio folder or its next
    /// folder (`.<tourId>.next-<n>`), or a package folder.
    package func owns(_ name: String, in top: String) -> Bool {
        switch top {
        case Layout.audioCacheFolder:
            if tourIDs.contains(name) { return true }
            guard name.hasPrefix("."), let marker = name.range(of: Layout.nextFolderMarker) else { return false }
            return tourIDs.contains(String(name[name.index(after: name.startIndex)..<marker.lowerBound]))
        case Layout.offlineToursFolder:
            return packageIDs.contains(name)
        default:
            return false
        }
    }

    /// Whether the root-relative path (`AudioCache/<tourId>/…`) lies in one of this scope's audio folders.
    package func ownsAudio(at path: String) -> Bool {
        let parts = path.split(separator: "/", maxSplits: 2, omittingEmptySubsequences: false)
        return parts.count == 3 && parts[0] == Layout.audioCacheFolder && tourIDs.contains(String(parts[1]))
    }
}

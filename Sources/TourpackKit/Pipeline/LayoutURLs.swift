import Foundation
import TourpackCore

extension Layout {
    /// `audioFile(…).url`, without the `stat` Foundation makes to learn
    /// whether a path it appends is a folder (an audio file never is). A
    /// build asks for each item's files several times; with the synthesis
    /// cache's paths and the root's listing, those `stat`s were 8% of a warm
    /// rebuild's CPU.
    func audioFileURL(tourID: SafeID, poiID: SafeID, phase: Phase, format: AudioFormat) -> URL {
        root.appendingPathComponent(
            Layout.audioRelativePath(tourID: tourID, poiID: poiID, phase: phase, format: format), isDirectory: false)
    }
}

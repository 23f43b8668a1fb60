/// How the app's progress bar shares a tour's work among its three phases:
/// audio 70%, maps 25%, bundling 5%. A build (`BuildProgress`) and a
/// download (`DownloadJob`) weigh by these same shares, so a bar reads
/// alike whichever of the two it follows.
package enum ProgressWeights {
    package static let audio = 0.70
    package static let maps = 0.25
    package static let bundling = 0.05

    /// The whole's fraction, 0…1, from each phase's own (each 0…1).
    package static func fraction(audio: Double, maps: Double, bundling: Double) -> Double {
        min(1, Self.audio * audio + Self.maps * maps + Self.bundling * bundling)
    }
}

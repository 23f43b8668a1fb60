public import TourpackPackage

// The app's library names the package's types its API speaks in, one by
// one, so `import TourpackClient` alone gives an app those and nothing of
// the pipeline (no exit codes, atomic files or pricing tiers).

/// A package's audio format: AAC, MP3 or Opus.
public typealias AudioFormat = TourpackPackage.AudioFormat
/// The option a package is offered as: high, medium or low.
public typealias AudioQuality = TourpackPackage.AudioQuality

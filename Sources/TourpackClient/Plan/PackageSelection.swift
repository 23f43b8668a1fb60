package import TourpackPackage

/// Which packages an install takes: the tours asked for (or all), one
/// package each.
package struct PackageChoice: Sendable, Hashable {
    /// Tour IDs, as `--tour` gives them; ignored with `all`.
    package var tours: [String]
    package var all: Bool
    /// `--format`: the format to take where a tour offers several.
    package var format: AudioFormat?
    /// `--quality`: the quality to take where a tour offers several.
    package var quality: AudioQuality?
    /// Whether a refusal names the command line's flag (`--format opus: …`):
    /// the CLI's choice does, the app's library's does not.
    package var namesFlags = true

    package init(tours: [String] = [], all: Bool = false, format: AudioFormat? = nil, quality: AudioQuality? = nil) {
        self.tours = tours
        self.all = all
        self.format = format
        self.quality = quality
    }

    /// Whether the choice names tours at all (`--check` without one looks at every tour).
    package var isExplicit: Bool { all || !tours.isEmpty }

    /// `--flag value: ` before a refusal, for the CLI; nothing for the app.
    func flag(_ name: String, _ value: String) -> String { namesFlags ? "--\(name) \(value): " : "" }
}

/// Picks one package per chosen tour.
///
/// A tour offers a package per voice, format and quality. `--format` picks
/// the format; without it, a tour already installed keeps the package it has
/// (an update, not a second copy in another format), and otherwise AAC is
/// taken when offered, else the catalogue's first package. `--quality` then
/// picks the quality in that format; without it, the installed one, else the
/// best offered (high first). Among several voices, the installed one, else
/// the first.
package enum PackageSelection {
    package static func choose(
        _ catalog: Catalog, installed: [PackageOnDisk], choice: PackageChoice, warn: (String) -> Void = { _ in }
    ) throws -> [CatalogEntry] {
        let installedIDs = Set(installed.lazy.map { $0.packageId })
        let tours: [CatalogTour]
        if choice.all {
            tours = catalog.tours
        } else {
            var picked: [CatalogTour] = []
            for id in choice.tours {
                let wanted = id.lowercased()
                guard let tour = catalog.tours.first(where: { $0.tourId == wanted }) else {
                    let known = catalog.tours.map { "\($0.tourId) (\($0.tourName))" }.joined(separator: ", ")
                    throw TourpackError.invalidInput(
                        (choice.namesFlags ? "--tour \(id): no such tour" : "no tour \(id)")
                            + " in the catalogue; it lists \(known.isEmpty ? "none" : known)")
                }
                if !picked.contains(where: { $0.tourId == tour.tourId }) { picked.append(tour) }
            }
            tours = picked
        }
        var chosen: [CatalogEntry] = []
        for tour in tours {
            var candidates = tour.packages
            if let format = choice.format {
                candidates = candidates.filter { $0.format == format }
                guard !candidates.isEmpty else {
                    let offered = Set(tour.packages.map(\.format.rawValue)).sorted().joined(separator: ", ")
                    let message = "tour \(tour.tourId) (\(tour.tourName)) is not offered in \(format.rawValue); it is in \(offered)"
                    if choice.all {
                        warn(message + "; skipped")
                        continue
                    }
                    throw TourpackError.invalidInput(choice.flag("format", format.rawValue) + message)
                }
            } else {
                // With --quality, a format that offers it.
                let atQuality = candidates.filter { $0.quality == choice.quality }
                let pool = atQuality.isEmpty ? candidates : atQuality
                if let kept = pool.first(where: { installedIDs.contains($0.packageId) }) {
                    candidates = candidates.filter { $0.format == kept.format }
                } else if pool.contains(where: { $0.format == .aac }) {
                    candidates = candidates.filter { $0.format == .aac }
                } else if let first = pool.first {
                    candidates = candidates.filter { $0.format == first.format }
                }
            }
            if let quality = choice.quality {
                let offered = candidates
                candidates = candidates.filter { $0.quality == quality }
                guard !candidates.isEmpty else {
                    let qualities = Set(offered.map(\.quality)).sorted().map(\.rawValue).joined(separator: ", ")
                    let message =
                        "tour \(tour.tourId) (\(tour.tourName)) is not offered at quality \(quality.rawValue)"
                        + (offered.isEmpty ? "" : " in \(offered[0].format.rawValue); it is at \(qualities)")
                    if choice.all {
                        warn(message + "; skipped")
                        continue
                    }
                    throw TourpackError.invalidInput(choice.flag("quality", quality.rawValue) + message)
                }
            } else if let kept = candidates.first(where: { installedIDs.contains($0.packageId) }) {
                candidates = candidates.filter { $0.quality == kept.quality }
            } else if let best = candidates.map(\.quality).min() {
                candidates = candidates.filter { $0.quality == best }
            }
            guard let package = candidates.first(where: { installedIDs.contains($0.packageId) }) ?? candidates.first else { continue }
            chosen.append(CatalogEntry(tour: tour.info, package: package))
        }
        return chosen
    }
}

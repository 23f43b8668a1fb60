import Foundation
import TourpackPackage

/// `tourpack install SITE --into DOCUMENTS --check`: per tour of the
/// catalogue, whether it is downloaded, up to date, or has an update, and
/// what each would cost, without downloading a file.
///
/// An installed package is up to date when its `contentHash` is the
/// catalogue's (a package.json renewed only in its dates is no update for
/// the listener). An update's size is what `install` would download: the
/// new package.json is fetched and checked, and only its files not already
/// in place count.
package struct UpdateCheck: Sendable {
    package let installer: Installer

    package init(installer: Installer) { self.installer = installer }

    /// What one tour's packages are to this Documents root.
    package enum Status: String, Sendable, Hashable, Codable {
        case notDownloaded, upToDate, updateAvailable
    }

    /// One package the catalogue offers, as a person choosing one sees it.
    package struct Offer: Sendable, Hashable, Codable {
        package var packageId: String
        package var format: AudioFormat
        package var bitrateKbps: Int
        /// The option the app shows it as (high, medium, low).
        package var quality: AudioQuality
        package var voice: String
        package var sizeBytes: Int64
    }

    /// One installed package of a tour.
    package struct Installed: Sendable, Hashable, Codable {
        package var packageId: String
        package var format: AudioFormat
        package var status: Status
        /// What the update downloads (0 when up to date).
        package var updateBytes: Int64
        package var updateFiles: Int
    }

    package struct Tour: Sendable, Hashable, Codable {
        package var tourId: String
        package var tourName: String
        package var status: Status
        /// Every package the catalogue offers for the tour.
        package var offers: [Offer]
        /// The tour's installed packages the catalogue lists.
        package var installed: [Installed]
    }

    package struct Report: Sendable, Hashable, Codable {
        package var catalog: CatalogSummary
        package var tours: [Tour]
    }

    /// Checks the tours `choice` names (every tour when it names none).
    package func check(_ choice: PackageChoice) async throws -> Report {
        let folder = installer.folder
        // The lock and the folder's file work run off the cooperative pool.
        let lock = try await Blocking.run {
            try folder.prepare()
            return try InstallLock.acquire(documents: folder.documents)
        }
        defer { lock.release() }
        let (catalog, summary) = try await CatalogReader(
            source: installer.source, folder: folder, trust: installer.trust, now: installer.now
        ).read()
        let (installed, _) = try await Blocking.run { PackageOnDisk.read(documents: folder.documents) }
        let planner = PackagePlanner(source: installer.source, documents: folder.documents)
        var tours: [Tour] = []
        let wanted = Set(choice.tours.map { $0.lowercased() })
        for id in wanted.sorted() where !catalog.tours.contains(where: { $0.tourId == id }) {
            let known = catalog.tours.map { "\($0.tourId) (\($0.tourName))" }.joined(separator: ", ")
            throw TourpackError.invalidInput("--tour \(id): no such tour in the catalogue; it lists \(known.isEmpty ? "none" : known)")
        }
        for tour in catalog.tours where choice.all || wanted.isEmpty || wanted.contains(tour.tourId) {
            let offers = tour.packages.map {
                Offer(
                    packageId: $0.packageId, format: $0.format, bitrateKbps: $0.bitrateKbps, quality: $0.quality, voice: $0.voice.name,
                    sizeBytes: $0.sizeBytes)
            }
            var states: [Installed] = []
            for package in tour.packages {
                guard let present = installed.first(where: { $0.packageId == package.packageId }) else { continue }
                if present.manifest.contentHash == package.contentHash, present.damagedPaths(in: folder.documents).isEmpty {
                    states.append(
                        Installed(packageId: package.packageId, format: package.format, status: .upToDate, updateBytes: 0, updateFiles: 0))
                    continue
                }
                let plan = try await planner.plan(CatalogEntry(tour: tour.info, package: package), installed: installed)
                let status: Status = plan.action == .upToDate ? .upToDate : .updateAvailable
                states.append(
                    Installed(
                        packageId: package.packageId, format: package.format, status: status, updateBytes: plan.downloadBytes,
                        updateFiles: plan.downloads.count))
            }
            let status: Status =
                states.isEmpty ? .notDownloaded : states.contains { $0.status == .updateAvailable } ? .updateAvailable : .upToDate
            tours.append(Tour(tourId: tour.tourId, tourName: tour.tourName, status: status, offers: offers, installed: states))
        }
        return Report(catalog: summary, tours: tours)
    }
}

// The touring app's offline layer in a few lines: what an app does with
// `TourpackClient`. `swift build` compiles it with the package, so the
// sample in the "Embedding the client in an app" article cannot go stale.
//
//     offline-tour-example SITE_URL DOCUMENTS PUBLIC_KEY_BASE64 [TOUR_ID]
//
// It refreshes the catalogue, lists each tour's offers with their sizes,
// downloads one tour with progress, finds a narration to play, and prints
// the storage statistics. Run it again after it is killed: the download
// resumes where it stopped.
import Foundation
import TourpackClient

@main
struct OfflineTourExample {
    static func main() async {
        let arguments = CommandLine.arguments.dropFirst()
        guard arguments.count >= 3, let site = URL(string: arguments[arguments.startIndex]) else {
            print("usage: offline-tour-example SITE_URL DOCUMENTS PUBLIC_KEY_BASE64 [TOUR_ID]")
            exit(2)
        }
        let documents = URL(fileURLWithPath: arguments[arguments.startIndex + 1])
        let tourArgument = arguments.count > 3 ? UUID(uuidString: arguments[arguments.startIndex + 3]) : nil
        do {
            try await run(site: site, documents: documents, key: arguments[arguments.startIndex + 2], tour: tourArgument)
        } catch {
            print("failed: \(error)")
            exit(1)
        }
    }

    // snippet: flow
    static func run(site: URL, documents: URL, key: String, tour wanted: UUID?) async throws {
        let library = OfflineLibrary(
            documents: documents, site: site, trust: try .publicKey(base64: key),
            policy: DownloadPolicy(maxStorageBytes: 500_000_000, allowsCellular: false))

        // Refresh: a conditional request, verified against the key. Offline,
        // `library.catalog` still has the last verified one.
        let catalog = try await library.refreshCatalog()

        // Offers with their sizes, before anything is downloaded.
        for tour in catalog.tours {
            for offer in tour.offers {
                let megabytes = Double(offer.sizeBytes) / 1_000_000
                print("\(tour.name): \(offer.format.rawValue) \(offer.quality.rawValue) \(offer.bitrateKbps) kbps, \(megabytes) MB")
            }
        }
        guard let tour = catalog.tours.first(where: { wanted == nil || $0.id == wanted }) else { return }

        // Download with progress (audio 70%, maps 25%, bundling 5%).
        if case .notDownloaded = await library.state(of: tour.id) {
            for try await job in library.download(tourId: tour.id, format: .aac) {
                let percent = Int(job.progress * 100)
                print("\(job.status.rawValue) \(percent)% \(job.downloadedBytes)/\(job.totalBytes) bytes")
            }
        } else if case .updateAvailable(_, _, let bytes) = await library.state(of: tour.id) {
            print("update: \(bytes) bytes")
            for try await job in library.download(tourId: tour.id) { print("\(job.status.rawValue) \(Int(job.progress * 100))%") }
        }

        // Play a narration: a file URL, or nil unless it is installed whole.
        if case .downloaded(let package) = await library.state(of: tour.id), let first = package.narrations.first {
            if let audio = await library.audioFile(tourId: tour.id, poiId: first.poiId, phase: first.phase) {
                print("play \(first.poiName) (\(first.phase.rawValue), \(first.durationSeconds) s): \(audio.path)")
            }
            await library.markAccessed(tourId: tour.id)
        }

        // Storage statistics: shared files counted once.
        let statistics = await library.storageStatistics()
        print("\(statistics.packageCount) package(s), \(statistics.bytesOnDisk) bytes, \(statistics.expired) expired")
    }
    // snippet: end
}

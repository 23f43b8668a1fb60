// The touring app's offline layer in a few lines: what an app does with
// `TourpackClient`. `swift build` compiles it with the package, so the
// sample in the "Embedding the client in an app" article cannot go stale.
//
//     offline-tour-example SITE_URL DOCUMENTS PUBLIC_KEY_BASE64 [TOUR_ID]
//     offline-tour-example --resume SITE_URL DOCUMENTS PUBLIC_KEY_BASE64
//
// It refreshes the catalogue, lists each tour's offers with their sizes,
// downloads one tour with progress, finds a narration to play, and prints
// the storage statistics. Run it again after it is killed: the download
// resumes where it stopped. With `--resume` it does only what a
// background task does: continue the queued downloads, and end when they do.
import Foundation
import TourpackClient

@main
struct OfflineTourExample {
    static func main() async {
        var arguments = Array(CommandLine.arguments.dropFirst())
        let resumeOnly = arguments.first == "--resume"
        if resumeOnly { arguments.removeFirst() }
        guard arguments.count >= 3, let site = URL(string: arguments[0]) else {
            print("usage: offline-tour-example [--resume] SITE_URL DOCUMENTS PUBLIC_KEY_BASE64 [TOUR_ID]")
            exit(2)
        }
        let documents = URL(fileURLWithPath: arguments[1])
        let tourArgument = arguments.count > 3 ? UUID(uuidString: arguments[3]) : nil
        do {
            if resumeOnly {
                let library = OfflineLibrary(documents: documents, site: site, trust: try .publicKey(base64: arguments[2]))
                let failed = await continueDownloads(library)
                exit(failed ? 1 : 0)
            }
            try await run(site: site, documents: documents, key: arguments[2], tour: tourArgument)
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

        // Launch: continue the downloads the last run left (the app was
        // killed, or the phone restarted). The queue lives in Documents.
        let resumed = await library.resumeDownloads()
        if !resumed.isEmpty { print("resuming \(resumed.count) download(s)") }

        // Refresh: a conditional request, verified against the key. Offline,
        // `library.catalog` still has the last verified one.
        let catalog: CatalogSnapshot
        do {
            catalog = try await library.refreshCatalog()
        } catch let error as OfflineError where error.kind == .networkUnavailable {
            guard let known = await library.catalog else { throw error }
            catalog = known
        }

        // Offers with their sizes, before anything is downloaded.
        for tour in catalog.tours {
            for offer in tour.offers {
                let megabytes = Double(offer.sizeBytes) / 1_000_000
                print("\(tour.name): \(offer.format.rawValue) \(offer.quality.rawValue) \(offer.bitrateKbps) kbps, \(megabytes) MB")
            }
        }
        guard let tour = catalog.tours.first(where: { wanted == nil || $0.id == wanted }) else { return }

        // Download with progress (audio 70%, maps 25%, bundling 5%), or
        // follow the download already queued; a failure says what to do.
        switch await library.state(of: tour.id) {
        case .notDownloaded, .failed:
            try await follow(library.download(tourId: tour.id, format: .aac))
        case .updateAvailable(_, _, let bytes):
            print("update: \(bytes) bytes")
            try await follow(library.download(tourId: tour.id))
        case .queued, .waiting, .downloading:
            try await follow(library.download(tourId: tour.id))
        case .paused, .downloaded, .expired:
            break
        }

        // Play a narration: a file URL, or nil until it is on the device, verified.
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

    /// Prints a download's progress until it ends; a failure carries the
    /// words an alert shows (`LocalizedError`).
    static func follow(_ download: AsyncThrowingStream<DownloadJob, any Error>) async throws {
        do {
            for try await job in download {
                let percent = Int(job.progress * 100)
                let why = job.waitReason.map { " (\($0))" } ?? ""
                // A first download's narrations play as they arrive, verified.
                let playable = job.playable.isEmpty ? "" : ", \(job.playable.count) narration(s) playable"
                print("\(job.status.rawValue)\(why) \(percent)% \(job.downloadedBytes)/\(job.totalBytes) bytes\(playable)")
            }
        } catch let error as OfflineError {
            print("\(error.localizedDescription) \(error.recoverySuggestion ?? "")")
            throw error
        }
    }
    // snippet: end

    // snippet: background
    /// What a `BGProcessingTask` (or a background URLSession's wake-up)
    /// does: continue the queue the app left, and report when it is done.
    /// Returns whether a download failed.
    static func continueDownloads(_ library: OfflineLibrary) async -> Bool {
        let updates = library.jobs  // subscribe first: no update is missed
        var left = Set(await library.resumeDownloads())
        var failed = false
        if left.isEmpty { return false }
        for await job in updates where left.contains(job.tourId) {
            switch job.status {
            case .completed: left.remove(job.tourId)
            case .failed, .cancelled:
                print("\(job.tourName): \(job.status.rawValue): \(job.errorMessage ?? "")")
                failed = true
                left.remove(job.tourId)
            default: continue
            }
            if left.isEmpty { break }
        }
        return failed
    }
    // snippet: end

    // snippet: early
    /// What the player plays at a POI, downloaded or not: the installed
    /// file, or the first download's once it has arrived and matched its
    /// signed SHA-256; else the site's file, streamed. `nearest` are the
    /// POIs closest to the traveller: their narrations download next.
    static func narration(
        tour: UUID, poi: UUID, phase: NarrationPhase, nearest: [UUID], library: OfflineLibrary
    ) async -> (url: URL, streamed: Bool)? {
        await library.prioritize(tourId: tour, poiIds: nearest)
        if let file = await library.audioFile(tourId: tour, poiId: poi, phase: phase) { return (file, false) }
        // Not on the device yet: stream it. The player, not the library,
        // is then trusted with the bytes; nothing checks them as they play.
        guard let remote = try? await library.remoteAudioURL(tourId: tour, poiId: poi, phase: phase) else { return nil }
        return (remote, true)
    }
    // snippet: end

    // snippet: row
    /// A tour's row in the app's list: its state in words, and what its
    /// button does. On cellular a download waits for Wi-Fi; the warning's
    /// "Download anyway" lets that one download use cellular.
    static func row(_ state: PackState, on path: NetworkPath) -> (status: String, action: String?) {
        func megabytes(_ bytes: Int64) -> String { "\((bytes + 999_999) / 1_000_000) MB" }
        switch state {
        case .notDownloaded(let offers):
            let size = offers.first.map { megabytes($0.sizeBytes) } ?? ""
            if !path.isSatisfied { return ("\(size) · needs a connection", nil) }
            return path.isExpensive ? ("\(size) · downloads on Wi-Fi", "Download anyway") : (size, "Download")
        case .queued: return ("Queued", "Cancel")
        case .waiting(_, .forWiFi): return ("Waiting for Wi-Fi", "Download anyway")
        case .waiting(_, .forNetwork): return ("Waiting for a connection", "Cancel")
        case .waiting(_, .lowDataMode): return ("Waiting: Low Data Mode is on", "Cancel")
        case .downloading(let job): return ("Downloading · \(Int(job.progress * 100))%", "Pause")
        case .paused(let job): return ("Paused · \(Int(job.progress * 100))%", "Resume")
        case .failed(_, let error): return (error.recoverySuggestion ?? error.localizedDescription, "Retry")
        case .downloaded: return ("Available offline", "Delete")
        case .updateAvailable(_, _, let bytes): return ("Update · \(megabytes(bytes))", path.isSatisfied ? "Update" : nil)
        case .expired: return ("Expired: connect to renew it", "Delete")
        }
    }

    /// What the row's button does.
    static func act(_ action: String, tour: UUID, library: OfflineLibrary) async {
        switch action {
        case "Download", "Update", "Retry": _ = library.download(tourId: tour)
        case "Download anyway": _ = library.download(tourId: tour, allowsCellular: true)
        case "Pause": await library.pauseDownload(tourId: tour)
        case "Resume": await library.resumeDownload(tourId: tour)
        case "Cancel": await library.cancelDownload(tourId: tour)
        case "Delete": try? await library.delete(tourId: tour)
        default: break
        }
    }
    // snippet: end
}

import Foundation
import TourpackClient

// OutsideApp SITE_URL DOCUMENTS PUBLIC_KEY_BASE64: the app's flow (refresh, offers,
// download with progress, a narration to play, storage statistics), then a
// pause for a republish (a line on stdin), the update, and delete.
/// A line on standard output, unbuffered (a driver waits for it).
func say(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }

let arguments = CommandLine.arguments
let site = URL(string: arguments[1])!
let documents = URL(fileURLWithPath: arguments[2])
let library = OfflineLibrary(documents: documents, site: site, trust: try .publicKey(base64: arguments[3]))

func statistics(_ step: String) async {
    let s = await library.storageStatistics()
    say(
        "[\(step)] statistics: packages=\(s.packageCount) bytes=\(s.bytesOnDisk) downloaded=\(s.downloaded) failed=\(s.failed) expired=\(s.expired)"
    )
}

let catalog = try await library.refreshCatalog()
say("refresh: \(catalog.tours.count) tours")
await statistics("refreshed")
let tour = catalog.tours.sorted { $0.name < $1.name }[0]
for offer in tour.offers {
    say(
        "offer \(tour.name): \(offer.format) \(offer.quality) \(offer.bitrateKbps) kbps \(offer.voice) size=\(offer.sizeBytes) audio=\(offer.audioBytes) map=\(offer.mapBytes)"
    )
}
var events = 0
for try await job in library.download(tourId: tour.id) {
    events += 1
    say(
        "progress \(job.status) \(Int(job.progress * 100))% \(job.downloadedBytes)/\(job.totalBytes) \(job.currentStep.map { "\($0)" } ?? "-")"
    )
}
say("download events: \(events)")
guard case .downloaded(let package) = await library.state(of: tour.id) else { fatalError("not downloaded") }
let narration = package.narrations[0]
let audio = await library.audioFile(tourId: tour.id, poiId: narration.poiId, phase: narration.phase)!
say("AUDIO \(audio.path)")
await statistics("downloaded")
say("READY-FOR-REPUBLISH")
_ = readLine()
_ = try await library.refreshCatalog()
guard case .updateAvailable(_, let offer, let bytes) = await library.state(of: tour.id) else { fatalError("no update available") }
say("update available: \(offer.sizeBytes) bytes offered, \(bytes) bytes to download")
for try await job in library.download(tourId: tour.id) where job.status == .completed { say("updated: \(job.downloadedBytes) bytes") }
guard case .downloaded(let updated) = await library.state(of: tour.id) else { fatalError("not downloaded after update") }
say("installed content \(updated.contentHash)")
await statistics("updated")
try await library.delete(tourId: tour.id)
guard case .notDownloaded = await library.state(of: tour.id) else { fatalError("still there after delete") }
await statistics("deleted")
say("FLOW OK")

public import Foundation
import TourpackPackage

/// One tour's download as the app's download manager shows it: where it
/// stands, how far it got, and why it waits or failed.
///
/// `progress` weighs the app's three phases: audio 70%, maps 25%,
/// bundling 5% (`ProgressWeights`, a build's too). A phase with nothing to
/// download counts as done once the job has moved past it.
public struct DownloadJob: Sendable, Hashable {
    public enum Status: String, Sendable, Hashable, Codable, CaseIterable {
        /// In the queue, behind another download.
        case queued
        /// Not running though nothing failed: `waitReason` says why. It
        /// starts by itself when the network allows.
        case waiting
        /// Fetching or installing; a try the server failed is retried
        /// (`errorMessage` says so meanwhile).
        case downloading
        /// The user paused it (`pauseDownload(tourId:)`); its bytes are kept.
        case paused
        case completed
        /// Kept until the app retries, deletes or dismisses it; `errorMessage` says why.
        case failed
        case cancelled
    }

    /// The phase the job is in, as `currentStep` names it.
    public enum Step: String, Sendable, Hashable, Codable, CaseIterable {
        case audio, maps, bundling
    }

    public internal(set) var packageId: String
    public internal(set) var tourId: UUID
    public internal(set) var tourName: String
    public internal(set) var status: Status
    /// 0…1 by the phase weights.
    public internal(set) var progress: Double
    public internal(set) var currentStep: Step?
    /// Bytes this job downloads (files already in place are not counted).
    public internal(set) var totalBytes: Int64
    public internal(set) var downloadedBytes: Int64
    /// Why the job failed, or what a retry is about; nil otherwise.
    public internal(set) var errorMessage: String?
    /// Why a `waiting` job waits; nil otherwise.
    public internal(set) var waitReason: WaitReason?

    /// The narrations of a first download that can play already, in the
    /// order they became playable: their audio arrived and matched the
    /// SHA-256 its signed package.json names, and `audioFile` returns it
    /// before the package is committed. Empty for an update: the installed
    /// version plays until the new one is committed whole.
    public internal(set) var playable: [NarrationID] = []

    /// Seconds until the job's bytes have arrived at the rate seen so far;
    /// nil before any byte has, or once none are left to fetch.
    public internal(set) var estimatedSecondsRemaining: Double?

    /// The audio and map shares of `totalBytes`, and what has arrived of each.
    var audioBytes: Int64 = 0
    var audioDone: Int64 = 0
    var mapBytes: Int64 = 0
    var mapDone: Int64 = 0

    package init(packageId: String, tourId: UUID, tourName: String, audioBytes: Int64, mapBytes: Int64) {
        self.packageId = packageId
        self.tourId = tourId
        self.tourName = tourName
        status = .queued
        progress = 0
        totalBytes = audioBytes + mapBytes
        downloadedBytes = 0
        self.audioBytes = audioBytes
        self.mapBytes = mapBytes
    }

    /// Records `bytes` more of the audio or the map, and moves the step on.
    mutating func received(_ bytes: Int64, map: Bool) {
        if map {
            mapDone = min(mapBytes, max(0, mapDone + bytes))
        } else {
            audioDone = min(audioBytes, max(0, audioDone + bytes))
        }
        downloadedBytes = audioDone + mapDone
        if status == .queued || status == .waiting { status = .downloading }
        if status == .downloading { errorMessage = nil }
        currentStep = audioDone < audioBytes ? .audio : (mapDone < mapBytes ? .maps : .bundling)
        update()
    }

    /// A catalogue's tour id (a lowercase UUID) as the job's.
    package init(packageId: String, tourKey: String, tourName: String, audioBytes: Int64, mapBytes: Int64) {
        self.init(packageId: packageId, tourId: UUID(tourKey: tourKey), tourName: tourName, audioBytes: audioBytes, mapBytes: mapBytes)
    }

    mutating func move(to status: Status, step: Step? = nil, message: String? = nil) {
        if status != .waiting { waitReason = nil }
        self.status = status
        if let step { currentStep = step }
        errorMessage = message
        update()
    }

    private mutating func update() {
        let reached = currentStep.flatMap { Step.allCases.firstIndex(of: $0) }
        func past(_ step: Step) -> Bool {
            guard let reached, let index = Step.allCases.firstIndex(of: step) else { return false }
            return reached > index
        }
        let audio = audioBytes > 0 ? Double(audioDone) / Double(audioBytes) : (past(.audio) || status == .completed ? 1 : 0)
        let maps = mapBytes > 0 ? Double(mapDone) / Double(mapBytes) : (past(.maps) || status == .completed ? 1 : 0)
        let bundled: Double = status == .completed ? 1 : 0
        progress = ProgressWeights.fraction(audio: audio, maps: maps, bundling: bundled)
    }
}

/// What an install tells whoever watches it (`--json` prints each as a line).
package enum InstallEvent: Sendable, Equatable {
    /// The catalogue in use: read anew, or (`notModified`) the one remembered, confirmed by a 304.
    case catalog(CatalogSummary)
    /// A job changed: its status, its step, or its bytes.
    case job(DownloadJob)
    /// A download of `file` failed and is tried again after `seconds`.
    case retrying(packageId: String, file: String, seconds: Double, reason: String)
    /// A package whose installed files already match the catalogue.
    case upToDate(packageId: String, tourName: String)
    case warning(String)
}

/// The catalogue an install works from.
package struct CatalogSummary: Sendable, Hashable, Codable {
    init(_ catalog: Catalog, site: String, notModified: Bool, verifiedBy: String?) {
        self.site = site
        generation = catalog.generation
        self.notModified = notModified
        self.verifiedBy = verifiedBy
        tours = catalog.tours.count
        packages = catalog.tours.reduce(0) { $0 + $1.packages.count }
    }

    package var site: String
    package var generation: Int
    /// The site answered 304: the remembered catalogue is still the one in force.
    package var notModified: Bool
    /// The key id that signed it, when a public key checked it.
    package var verifiedBy: String?
    package var tours: Int
    package var packages: Int
}

extension UUID {
    /// A catalogue's or package.json's tour id; the nil UUID for one that is
    /// not a UUID.
    package init(tourKey: String) {
        self = UUID(uuidString: tourKey) ?? UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
    }

    /// The lowercase form package.json and the catalogue write.
    package var key: String { uuidString.lowercased() }
}

public import Foundation
public import TourpackPackage

/// What the device trusts to sign the catalogue: one Ed25519 key, or a
/// root of trust the app ships (`root.json` version 1), which the library
/// walks forward to the site's newest root (`roots/<n>.json`), so that the
/// publisher can replace a lost or leaked catalogue key without an app update.
public struct TrustAnchor: Sendable, Hashable, CustomStringConvertible {
    let trust: CatalogTrust

    /// An anchor from the Ed25519 public key's base64 (its 32 raw bytes), as
    /// `tourpack keys generate` prints it and `install --public-key` takes it.
    /// The key never changes: prefer a root (`init(rootJSON:)`).
    public static func publicKey(base64: String) throws -> TrustAnchor {
        do { return TrustAnchor(trust: .key(try VerifyingKey(base64: base64))) } catch {
            throw OfflineError(.integrityFailed, "\(error)")
        }
    }

    /// An anchor from `root.json`'s bytes, as `tourpack keys root` wrote
    /// it (`roots/1.json`): the app ships it, and it is trusted as it is.
    public init(rootJSON: Data) throws {
        do { trust = try CatalogTrust.root(bytes: Array(rootJSON)) } catch {
            throw OfflineError(.integrityFailed, "\(error)")
        }
    }

    init(trust: CatalogTrust) { self.trust = trust }

    /// The key's id, as the catalogue's `signedBy` names it; for a root,
    /// its first catalogue key.
    public var keyId: String {
        switch trust {
        case .key(let key): return key.keyId
        case .root(let root, _): return root.roles.catalog.keyIds.first ?? ""
        }
    }

    public var description: String { trust.description }
}

/// How the library may spend the device's storage and network.
public struct DownloadPolicy: Sendable, Hashable {
    /// The packages' budget on disk. Before a download that would pass it,
    /// the least recently accessed packages are evicted: never a pinned
    /// one, the one playing, or one downloading.
    public var maxStorageBytes: Int64
    /// Tours whose packages are never evicted.
    public var pinned: Set<UUID>
    /// Whether downloads may use cellular (and any other expensive path).
    /// Off by default: a download on cellular waits for Wi-Fi
    /// (`WaitReason.forWiFi`) unless it was started with
    /// `allowsCellular: true`. The catalogue is read on any network.
    public var allowsCellular: Bool
    /// Whether downloads may use a Wi-Fi the system marks expensive: a
    /// Personal Hotspot (an iPad tethered to a phone in the car).
    public var allowsPersonalHotspot: Bool
    /// Whether downloads may run in Low Data Mode (`WaitReason.lowDataMode` otherwise).
    public var allowsLowDataMode: Bool
    /// A try slower than this, over 15 s, is abandoned and tried again.
    public var minimumBytesPerSecond: Int64
    /// How long one file may take, every try included.
    public var fileDeadline: TimeInterval
    /// Tries of one file that the server failed (an error status, a cut
    /// answer) before the download fails. A network that is missing is
    /// waited for, and counts for nothing.
    public var maximumAttempts: Int

    public init(
        maxStorageBytes: Int64 = 500_000_000, pinned: Set<UUID> = [], allowsCellular: Bool = false, allowsPersonalHotspot: Bool = false,
        allowsLowDataMode: Bool = false, minimumBytesPerSecond: Int64 = 1024, fileDeadline: TimeInterval = 3600, maximumAttempts: Int = 6
    ) {
        self.maxStorageBytes = maxStorageBytes
        self.pinned = pinned
        self.allowsCellular = allowsCellular
        self.allowsPersonalHotspot = allowsPersonalHotspot
        self.allowsLowDataMode = allowsLowDataMode
        self.minimumBytesPerSecond = minimumBytesPerSecond
        self.fileDeadline = fileDeadline
        self.maximumAttempts = maximumAttempts
    }

    var transfer: TransferPolicy {
        TransferPolicy(maximumAttempts: maximumAttempts, minimumBytesPerSecond: minimumBytesPerSecond, fileDeadlineSeconds: fileDeadline)
    }
}

/// The three narrations of a point of interest.
public enum NarrationPhase: String, Sendable, Hashable, CaseIterable, Codable {
    case approaching
    case detailed
    case guidedTour

    var phase: Phase {
        switch self {
        case .approaching: return .approaching
        case .detailed: return .detailed
        case .guidedTour: return .guidedTour
        }
    }

    init(_ phase: Phase) {
        switch phase {
        case .approaching: self = .approaching
        case .detailed: self = .detailed
        case .guidedTour: self = .guidedTour
        }
    }
}

/// One narration: a point of interest and a phase, as `audioFile` and
/// `captionFile` take them.
public struct NarrationID: Sendable, Hashable {
    public var poiId: UUID
    public var phase: NarrationPhase

    public init(poiId: UUID, phase: NarrationPhase) {
        self.poiId = poiId
        self.phase = phase
    }
}

/// One package the catalogue offers for a tour: what the app shows before a download.
public struct Offer: Sendable, Hashable, Identifiable {
    public var id: String { packageId }
    public var packageId: String
    public var format: AudioFormat
    public var quality: AudioQuality
    public var bitrateKbps: Int
    /// The voice's name.
    public var voice: String
    /// What the download takes on the device: `audioBytes` + `mapBytes`.
    public var sizeBytes: Int64
    public var audioBytes: Int64
    public var mapBytes: Int64
    public var contentHash: String
    public var expiresAt: Date

    init(_ package: CatalogPackage) {
        packageId = package.packageId
        format = package.format
        quality = package.quality
        bitrateKbps = package.bitrateKbps
        voice = package.voice.name
        sizeBytes = package.sizeBytes
        audioBytes = package.audioBytes
        mapBytes = package.mapBytes
        contentHash = package.contentHash
        expiresAt = package.expiresAt
    }
}

/// One tour of the catalogue.
public struct TourListing: Sendable, Hashable, Identifiable {
    public var id: UUID
    public var name: String
    public var version: Int
    public var language: String
    public var offers: [Offer]
}

/// The catalogue last verified: what the app lists, with or without a signal.
public struct CatalogSnapshot: Sendable, Hashable {
    /// The publication's number; a device never goes back to a lower one.
    public var generation: Int
    public var publishedAt: Date
    public var tours: [TourListing]
    /// The key id the catalogue names as its signer: what it says, for a
    /// screen; what verified it is the library's trust anchor, never this.
    public var signedBy: String?
    /// The site answered 304: the snapshot held was still the one in force.
    public var notModified: Bool
    /// When the catalogue stops being trusted for downloads (nil: it has no expiry).
    public var expiresAt: Date?
    /// Past `expiresAt` (or without one): the catalogue last verified is
    /// stale. Installed packages keep playing; downloads and updates wait
    /// for a fresh one (`refreshCatalog` throws `catalogExpired` until then).
    public var isStale: Bool

    init(_ catalog: Catalog, notModified: Bool, now: Date) {
        generation = catalog.generation
        publishedAt = catalog.publishedAt
        expiresAt = catalog.expiresAt
        isStale = catalog.isExpired(at: now)
        signedBy = catalog.signedBy
        self.notModified = notModified
        tours = catalog.tours.compactMap { tour in
            UUID(uuidString: tour.tourId).map {
                TourListing(
                    id: $0, name: tour.tourName, version: tour.tourVersion, language: tour.language,
                    offers: tour.packages.map(Offer.init))
            }
        }
    }
}

/// A package on the device.
public struct InstalledPackage: Sendable, Hashable, Identifiable {
    public var id: String { packageId }
    public var packageId: String
    public var tourId: UUID
    public var tourName: String
    public var format: AudioFormat
    public var quality: AudioQuality
    public var voice: String
    public var contentHash: String
    public var createdAt: Date
    public var expiresAt: Date
    /// Its files and package.json on disk (a file shared with another package counted here too).
    public var bytesOnDisk: Int64
    /// When the app last called `markAccessed`; nil if never.
    public var lastAccessed: Date?
    /// Files package.json names that are missing or not at their size.
    public var damagedFiles: Int
    /// What it narrates, in tour order: what `audioFile` and `captionFile` take.
    public var narrations: [Narration]

    /// One narration of a point of interest.
    public struct Narration: Sendable, Hashable {
        public var poiId: UUID
        public var poiName: String
        public var phase: NarrationPhase
        public var durationSeconds: Double
    }
}

/// What `state(of:)` says of a tour: read from the device alone, never
/// waiting on the network.
public enum PackState: Sendable, Hashable {
    case notDownloaded(offers: [Offer])
    /// In the download queue, behind another download.
    case queued(DownloadJob)
    /// Its download waits for Wi-Fi, for a network, or for Low Data Mode to end; it starts by itself.
    case waiting(DownloadJob, reason: WaitReason)
    case downloading(DownloadJob)
    /// The user paused it (`pauseDownload(tourId:)`).
    case paused(DownloadJob)
    /// Its download failed; kept until the app retries (`download`), deletes or dismisses it (`dismissFailure`).
    case failed(DownloadJob, OfflineError)
    case downloaded(InstalledPackage)
    /// The catalogue has a newer version of the installed package (expired
    /// or not); `bytesToDownload` is what the update fetches, as worked out
    /// when the catalogue was refreshed.
    case updateAvailable(InstalledPackage, offer: Offer, bytesToDownload: Int64)
    /// Past its `expiresAt`, with no newer version offered: it keeps
    /// playing, and a refresh may bring its update.
    case expired(InstalledPackage)
}

/// What the packages take on the device.
public struct StorageStatistics: Sendable, Hashable {
    public var packageCount: Int
    /// Every file once, however many packages name it, plus their package.json files.
    public var bytesOnDisk: Int64
    public var downloaded: Int
    /// Packages with a damaged or missing file, and package.json files that do not read.
    public var failed: Int
    public var expired: Int
    /// Per tour, each shared file once.
    public var bytesPerTour: [UUID: Int64]
}

/// Why the library could not do what it was asked, in the app's taxonomy.
/// Each names the package and the file where there is one;
/// `recoverySuggestion` says what the traveller can do about it.
public struct OfflineError: Error, Sendable, Hashable, CustomStringConvertible, LocalizedError {
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        /// No network, or the server failed every try of a file.
        case networkUnavailable
        case alreadyDownloading
        case alreadyDownloaded
        case mapDownloadFailed
        /// The device is out of room, or the storage budget could not make any.
        case storageFailed
        /// Something the site served is not what the signed catalogue names.
        case integrityFailed
        /// The request named no tour the catalogue has, or no offer of it.
        case notOffered
        case cancelled
        /// The site's catalogue is past its `expiresAt`; installed packages keep playing.
        case catalogExpired
        /// The site served a catalogue older than one this device verified; nothing changed.
        case rollbackRefused
    }

    public var kind: Kind
    public var message: String
    /// `package <id> (<tour name>)`, when one is concerned.
    public var package: String?
    /// The file, relative to Documents or to the site.
    public var file: String?

    init(_ kind: Kind, _ message: String, package: String? = nil, file: String? = nil) {
        self.kind = kind
        self.message = message
        self.package = package
        self.file = file
    }

    public var description: String { "\(kind.rawValue): \(message)" }

    /// What happened, in a sentence an alert can show.
    public var errorDescription: String? { message }

    /// What the traveller can do about it.
    public var recoverySuggestion: String? {
        switch kind {
        case .networkUnavailable: return "Connect to Wi-Fi, or allow downloads over cellular, and try again."
        case .alreadyDownloading: return "Wait for the download in progress to finish."
        case .alreadyDownloaded: return "The tour is already on this device and up to date."
        case .mapDownloadFailed: return "Try the download again later; what arrived is kept, and it resumes from there."
        case .storageFailed: return "Free some space on the device, or remove tours you no longer need, and try again."
        case .integrityFailed:
            return "The tour could not be verified, so nothing was installed. Try again later; if it keeps failing, contact support."
        case .notOffered: return "Refresh the list of tours; this tour or format is no longer offered."
        case .cancelled: return nil
        case .catalogExpired:
            return "The list of tours is out of date. Connect to the internet to refresh it; downloaded tours keep playing."
        case .rollbackRefused: return "The server sent an older list of tours than this device has seen. Try again later."
        }
    }

    /// The library's error for whatever the engine threw, in the app's
    /// words: the command line's hints (a flag, a command to run) left out.
    static func from(_ error: any Error) -> OfflineError {
        if let error = error as? OfflineError { return error }
        if error is CancellationError { return OfflineError(.cancelled, "cancelled") }
        guard let error = error as? TourpackError else { return OfflineError(.storageFailed, "\(error)") }
        let kind: Kind
        switch error.kind {
        case .networkUnavailable: kind = .networkUnavailable
        case .alreadyDownloading, .alreadyBuilding: kind = .alreadyDownloading
        case .alreadyDownloaded: kind = .alreadyDownloaded
        case .mapDownloadFailed: kind = .mapDownloadFailed
        case .integrityFailed: kind = .integrityFailed
        case .cancelled: kind = .cancelled
        case .invalidInput: kind = .notOffered
        case .catalogExpired: kind = .catalogExpired
        case .rollbackRefused: kind = .rollbackRefused
        default: kind = .storageFailed
        }
        var message: String
        switch error.kind {
        case .alreadyDownloading, .alreadyBuilding:
            message =
                "another download or build is changing this folder (\(error.context.path ?? "Documents")); try again when it has finished"
        default:
            message = error.description
        }
        // Some of the engine's texts open with the kind's name (`catalogExpired: …`);
        // `description` puts it first already, so it is said once.
        if let named = message.range(of: "\(kind.rawValue): ") { message.removeSubrange(named) }
        for (cli, app) in Self.commandLineHints { message = message.replacingOccurrences(of: cli, with: app) }
        return OfflineError(kind, message, package: error.context.item, file: error.context.path)
    }

    /// The engine's words for a person at a terminal, and the app's.
    private static let commandLineHints = [
        ("or the publisher has not run `tourpack publish --refresh`", "or the publisher has not refreshed it")
    ]
}

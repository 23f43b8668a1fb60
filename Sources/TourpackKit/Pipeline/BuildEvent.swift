public import TourpackCore
public import TourpackState

/// What a running build reports, in order. The CLI turns these into a
/// progress bar, plain log lines or NDJSON (`--json`); tests read them to
/// know how far a build has come.
public enum BuildEvent: Sendable, Hashable {
    /// Another build holds the lock and this one waits for it.
    case waitingForLock(path: String)
    /// The lock is held and the work is known.
    case started(BuildStart)
    /// One item (tour, POI, phase) is encoded in every format and staged.
    case itemDone(ItemDone)
    /// One item failed; its tour will not be packaged.
    case itemFailed(ItemFailure)
    /// Tiles settled so far across the build (fresh in the cache, fetched,
    /// renewed or empty); sent a few times a second at most while tiles move.
    case mapsProgress(MapsProgress)
    /// A tour's map is ready: its tile pack staged, or, without a tile
    /// source, its coverage worked out.
    case mapsDone(tourID: SafeID, tileCount: Int)
    /// A tour's audio and package.json files are at their final paths.
    case tourPackaged(TourPackaged)
    /// A tour was not packaged; its previous package is untouched.
    case tourFailed(TourFailure)
    /// The build is over; the summary is final.
    case finished(BuildSummary)
}

/// The maps phase's count of tiles.
public struct MapsProgress: Sendable, Hashable, Codable {
    public var tilesDone: Int
    public var tilesTotal: Int
}

/// The work a build is about to do.
public struct BuildStart: Sendable, Hashable, Codable {
    public var tours: Int
    /// Items (tour, POI, phase) to make; each is one file per format.
    public var items: Int
    public var chunks: Int
    public var characters: Int
    public var formats: [AudioFormat]
    public var output: String
    /// Journalled commits of a killed run that were finished first.
    public var recoveredCommits: Int
    /// Leftover temp files of a killed run that were removed.
    public var removedTemporaries: Int
    /// Chunks the build will not pay for: in the synthesis cache, or of an item whose files are all reusable.
    public var cacheHits: Int
    /// Characters the build expects to send and pay for.
    public var billableCharacters: Int
    /// Map tiles the packs hold, summed over tours (a tile two tours share
    /// counts twice); 0 without a tile source.
    public var tiles: Int = 0
    /// With `--shards`: the shard and its share of the pipeline's tours.
    public var shard: ShardSlice? = nil
    /// Narrations the plan cut; the others' chunks and keys were kept from
    /// an earlier build (`KeptPlans`).
    public var narrationsPlanned: Int = 0
}

/// One finished item.
public struct ItemDone: Sendable, Hashable, Codable {
    public var tourId: String
    public var tourName: String
    public var poiId: String
    public var poiName: String
    public var phase: Phase
    public var chunks: Int
    public var characters: Int
    public var durationSeconds: Double
    /// Bytes per format of the item's files.
    public var bytes: [String: Int64]
    /// Formats whose file was reused from the output cache (no synthesis, no encode).
    public var reusedFiles: Int
}

/// One failed item, named by tour, POI and phase, with the reason.
public struct ItemFailure: Sendable, Hashable, Codable {
    public var tourId: String
    public var tourName: String
    public var poiId: String
    public var poiName: String
    public var phase: Phase
    /// The error in full: HTTP status and the server's message, or the path and errno.
    public var message: String
}

/// One tour whose packages (one per format) are in place.
public struct TourPackaged: Sendable, Hashable, Codable {
    public var tourId: String
    public var tourName: String
    /// Root-relative paths of the package.json files written.
    public var packages: [String]
    /// Packages that already said exactly this and were left as they were.
    public var unchangedPackages: [String]
    /// Audio files written.
    public var files: Int
    /// Audio files kept from an earlier build (the output cache).
    public var reusedFiles: Int
    /// Bytes of the audio files written.
    public var bytes: Int64
    /// Packages of the same tour and format under another voice: their audio
    /// paths were just replaced, so they were removed.
    public var superseded: [String]
    /// Root-relative paths of the tile packs written (unchanged packs are not).
    public var tilePacks: [String] = []
    /// Caption files written, in every package (unchanged ones are not).
    public var captionFiles = 0

    /// Whether the tour wrote anything: a package.json, an audio file, a
    /// tile pack or a caption file. A tour that wrote nothing is up to date;
    /// one whose package.json files were already right but some of whose
    /// files were written again (damaged, missing, or not found in the
    /// output index) is not.
    public var wroteFiles: Bool { !packages.isEmpty || files > 0 || !tilePacks.isEmpty || captionFiles > 0 }
}

/// A tour that was not packaged.
public struct TourFailure: Sendable, Hashable, Codable {
    public var tourId: String
    public var tourName: String
    public var failedItems: Int
    /// Items of the tour that were never started once it had failed.
    public var skippedItems: Int
    public var reason: String
}

/// What a build did, for the last line of its output and for scheduled jobs.
public struct BuildSummary: Sendable, Hashable, Codable {
    public var toursBuilt = 0
    public var toursFailed = 0
    /// Tours of the pipeline left out by `--tour`.
    public var toursSkipped = 0
    /// Tours of which nothing was written: their packages were all up to
    /// date and left as they were, and so were their files.
    public var toursUnchanged = 0
    /// Tours whose packages were all up to date but some of whose files
    /// were written again under them (`TourPackaged.wroteFiles`): never
    /// counted as up to date.
    public var toursRewritten = 0
    /// Audio files written.
    public var files = 0
    /// Audio files kept from an earlier build: no request, no encode.
    public var reusedFiles = 0
    /// Bytes of audio written.
    public var bytes: Int64 = 0
    /// Tile requests sent (retries included), tiles downloaded, renewed by a 304, and found empty.
    public var tileRequests = 0
    public var tilesDownloaded = 0
    public var tilesRenewed = 0
    public var tilesEmpty = 0
    /// Tile packs written (one per package whose pack changed).
    public var tilePacks = 0
    /// Characters of the narration the built tours hold.
    public var characters = 0
    /// Characters sent to the endpoint and paid for (settled in the ledger).
    public var charactersBilled = 0
    /// The unit `charactersBilled` counts in: "characters", or ElevenLabs' "credits".
    public var billingUnit = "characters"
    /// Chunks taken from the synthesis cache.
    public var cacheHits = 0
    /// Files encoded.
    public var encodes = 0
    /// HTTP requests sent, retries included.
    public var requests = 0
    public var retries = 0
    /// AudioCache files evicted after the build to keep within cacheMaxMB.
    public var evictedFiles = 0
    public var evictedBytes: Int64 = 0
    /// From taking the output root's lock to the summary; loading the tours
    /// and planning them (chunking, captions' sentences), which come before
    /// the build starts, are not in it.
    public var wallSeconds: Double = 0
    /// From the process's start (`/proc/self/stat`) to the summary: start-up,
    /// loading and planning included, to 10 ms; nil when `/proc` does not tell it.
    public var processSeconds: Double?
    /// The process's peak resident memory (`VmHWM`), when `/proc` tells it.
    public var peakMemoryBytes: Int64?
    /// Set when the build stopped early: a signal, the endpoint unreachable, or the quota.
    public var stoppedEarly: String?
    /// The kind of failure that stopped it, when one did: `cancelled` is exit 130.
    public var stoppedBy: TourpackError.Kind?
    /// The monthly quota ran out during the build (another job took what was left).
    public var quotaRanOut = false
    /// One line per failed item or tour.
    public var failures: [String] = []
    /// Chunks that were paid for but could not be kept in the synthesis cache (a full disk).
    public var cacheWriteFailures = 0
    /// Things that went wrong without failing a tour, one line each.
    public var warnings: [String] = []
    /// With `--shards`: the shard built and its share of the pipeline's tours.
    public var shard: ShardSlice?
    /// With `state.objects`: what the build took from and gave to the fleet's bucket.
    public var sharedCache: SharedCacheSummary?

    public init() {}

    /// The exit code the contract gives this outcome.
    public var exitCode: Int32 {
        if stoppedBy == .cancelled { return ExitStatus.cancelled }
        if quotaRanOut { return ExitStatus.budget }
        return toursFailed > 0 || stoppedEarly != nil ? ExitStatus.failure : ExitStatus.ok
    }
}

/// What one build did with the fleet's synthesis cache (`state.objects`).
public struct SharedCacheSummary: Sendable, Hashable, Codable {
    /// Chunks restored from the bucket instead of requested: no characters billed.
    public var restored = 0
    /// Chunks this build spoke and put into the bucket for the other workers.
    public var shared = 0
    /// Restores and shares the bucket failed; each is a warning, never a failed item.
    public var failures = 0
    /// Chunks another worker was speaking when this build wanted them: it
    /// waited for that worker's audio instead of paying for it too.
    public var waited = 0

    public init(restored: Int = 0, shared: Int = 0, failures: Int = 0, waited: Int = 0) {
        self.restored = restored
        self.shared = shared
        self.failures = failures
        self.waited = waited
    }
}

extension BuildRecords {
    /// The build is over: its record keeps the summary's totals (none when it stopped before one).
    public func finish(_ id: Int64, status: BuildRecord.Status, summary: BuildSummary?, error: String?) throws {
        let totals = BuildTotals(
            toursBuilt: summary?.toursBuilt ?? 0, toursFailed: summary?.toursFailed ?? 0, requests: summary?.requests ?? 0,
            characters: summary?.charactersBilled ?? 0)
        try finish(id, status: status, totals: totals, error: error)
    }
}

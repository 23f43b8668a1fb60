package import TourpackCore
package import TourpackPlan
package import TourpackState

/// What a running build reports, in order. The CLI turns these into a
/// progress bar, plain log lines or NDJSON (`--json`); tests read them to
/// know how far a build has come.
package enum BuildEvent: Sendable, Hashable {
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
package struct MapsProgress: Sendable, Hashable, Codable {
    package var tilesDone: Int
    package var tilesTotal: Int
}

/// The work a build is about to do.
package struct BuildStart: Sendable, Hashable, Codable {
    package var tours: Int
    /// Items (tour, POI, phase) to make; each is one file per format.
    package var items: Int
    package var chunks: Int
    package var characters: Int
    package var formats: [AudioFormat]
    package var output: String
    /// Journalled commits of a killed run that were finished first.
    package var recoveredCommits: Int
    /// Leftover temp files of a killed run that were removed.
    package var removedTemporaries: Int
    /// Chunks the build will not pay for: in the synthesis cache, or of an item whose files are all reusable.
    package var cacheHits: Int
    /// Characters the build expects to send and pay for.
    package var billableCharacters: Int
    /// Map tiles the packs hold, summed over tours (a tile two tours share
    /// counts twice); 0 without a tile source.
    package var tiles: Int = 0
    /// With `--shards`: the shard and its share of the pipeline's tours.
    package var shard: ShardSlice? = nil
    /// Narrations the plan cut; the others' chunks and keys were kept from
    /// an earlier build (`KeptPlans`).
    package var narrationsPlanned: Int = 0
}

/// One finished item.
package struct ItemDone: Sendable, Hashable, Codable {
    package var tourId: String
    package var tourName: String
    package var poiId: String
    package var poiName: String
    package var phase: Phase
    package var chunks: Int
    package var characters: Int
    package var durationSeconds: Double
    /// Bytes per format of the item's files.
    package var bytes: [String: Int64]
    /// Formats whose file was reused from the output cache (no synthesis, no encode).
    package var reusedFiles: Int
}

/// One failed item, named by tour, POI and phase, with the reason.
package struct ItemFailure: Sendable, Hashable, Codable {
    package var tourId: String
    package var tourName: String
    package var poiId: String
    package var poiName: String
    package var phase: Phase
    /// The error in full: HTTP status and the server's message, or the path and errno.
    package var message: String
}

/// One tour whose packages (one per format) are in place.
package struct TourPackaged: Sendable, Hashable, Codable {
    package var tourId: String
    package var tourName: String
    /// Root-relative paths of the package.json files written.
    package var packages: [String]
    /// Packages that already said exactly this and were left as they were.
    package var unchangedPackages: [String]
    /// Audio files written.
    package var files: Int
    /// Audio files kept from an earlier build (the output cache).
    package var reusedFiles: Int
    /// Bytes of the audio files written.
    package var bytes: Int64
    /// Packages of the same tour and format under another voice: their audio
    /// paths were just replaced, so they were removed.
    package var superseded: [String]
    /// Root-relative paths of the tile packs written (unchanged packs are not).
    package var tilePacks: [String] = []
    /// Caption files written, in every package (unchanged ones are not).
    package var captionFiles = 0

    /// Whether the tour wrote anything: a package.json, an audio file, a
    /// tile pack or a caption file. A tour that wrote nothing is up to date;
    /// one whose package.json files were already right but some of whose
    /// files were written again (damaged, missing, or not found in the
    /// output index) is not.
    package var wroteFiles: Bool { !packages.isEmpty || files > 0 || !tilePacks.isEmpty || captionFiles > 0 }
}

/// A tour that was not packaged.
package struct TourFailure: Sendable, Hashable, Codable {
    package var tourId: String
    package var tourName: String
    package var failedItems: Int
    /// Items of the tour that were never started once it had failed.
    package var skippedItems: Int
    package var reason: String
}

/// What a build did, for the last line of its output and for scheduled jobs.
package struct BuildSummary: Sendable, Hashable, Codable {
    package var toursBuilt = 0
    package var toursFailed = 0
    /// Tours of the pipeline left out by `--tour`.
    package var toursSkipped = 0
    /// Tours of which nothing was written: their packages were all up to
    /// date and left as they were, and so were their files.
    package var toursUnchanged = 0
    /// Tours whose packages were all up to date but some of whose files
    /// were written again under them (`TourPackaged.wroteFiles`): never
    /// counted as up to date.
    package var toursRewritten = 0
    /// Audio files written.
    package var files = 0
    /// Audio files kept from an earlier build: no request, no encode.
    package var reusedFiles = 0
    /// Bytes of audio written.
    package var bytes: Int64 = 0
    /// Tile requests sent (retries included), tiles downloaded, renewed by a 304, and found empty.
    package var tileRequests = 0
    package var tilesDownloaded = 0
    package var tilesRenewed = 0
    package var tilesEmpty = 0
    /// Tile packs written (one per package whose pack changed).
    package var tilePacks = 0
    /// Characters of the narration the built tours hold.
    package var characters = 0
    /// Characters sent to the endpoint and paid for (settled in the ledger).
    package var charactersBilled = 0
    /// The unit `charactersBilled` counts in: "characters", or ElevenLabs' "credits".
    package var billingUnit = "characters"
    /// Chunks taken from the synthesis cache.
    package var cacheHits = 0
    /// Files encoded.
    package var encodes = 0
    /// HTTP requests sent, retries included.
    package var requests = 0
    package var retries = 0
    /// AudioCache files evicted after the build to keep within cacheMaxMB.
    package var evictedFiles = 0
    package var evictedBytes: Int64 = 0
    /// From taking the output root's lock to the summary; loading the tours
    /// and planning them (chunking, captions' sentences), which come before
    /// the build starts, are not in it.
    package var wallSeconds: Double = 0
    /// From the process's start (`/proc/self/stat`) to the summary: start-up,
    /// loading and planning included, to 10 ms; nil when `/proc` does not tell it.
    package var processSeconds: Double?
    /// The process's peak resident memory (`VmHWM`), when `/proc` tells it.
    package var peakMemoryBytes: Int64?
    /// Set when the build stopped early: a signal, the endpoint unreachable, or the quota.
    package var stoppedEarly: String?
    /// The kind of failure that stopped it, when one did: `cancelled` is exit 130.
    package var stoppedBy: TourpackError.Kind?
    /// The monthly quota ran out during the build (another job took what was left).
    package var quotaRanOut = false
    /// One line per failed item or tour.
    package var failures: [String] = []
    /// Chunks that were paid for but could not be kept in the synthesis cache (a full disk).
    package var cacheWriteFailures = 0
    /// Things that went wrong without failing a tour, one line each.
    package var warnings: [String] = []
    /// With `--shards`: the shard built and its share of the pipeline's tours.
    package var shard: ShardSlice?
    /// With `state.objects`: what the build took from and gave to the fleet's bucket.
    package var sharedCache: SharedCacheSummary?

    package init() {}

    /// The exit code the contract gives this outcome.
    package var exitCode: Int32 {
        if stoppedBy == .cancelled { return ExitStatus.cancelled }
        if quotaRanOut { return ExitStatus.budget }
        return toursFailed > 0 || stoppedEarly != nil ? ExitStatus.failure : ExitStatus.ok
    }
}

/// What one build did with the fleet's synthesis cache (`state.objects`).
package struct SharedCacheSummary: Sendable, Hashable, Codable {
    /// Chunks restored from the bucket instead of requested: no characters billed.
    package var restored = 0
    /// Chunks this build spoke and put into the bucket for the other workers.
    package var shared = 0
    /// Restores and shares the bucket failed; each is a warning, never a failed item.
    package var failures = 0
    /// Chunks another worker was speaking when this build wanted them: it
    /// waited for that worker's audio instead of paying for it too.
    package var waited = 0

    package init(restored: Int = 0, shared: Int = 0, failures: Int = 0, waited: Int = 0) {
        self.restored = restored
        self.shared = shared
        self.failures = failures
        self.waited = waited
    }
}

extension BuildRecords {
    /// The build is over: its record keeps the summary's totals (none when it stopped before one).
    package func finish(_ id: Int64, status: BuildRecord.Status, summary: BuildSummary?, error: String?) throws {
        let totals = BuildTotals(
            toursBuilt: summary?.toursBuilt ?? 0, toursFailed: summary?.toursFailed ?? 0, requests: summary?.requests ?? 0,
            characters: summary?.charactersBilled ?? 0)
        try finish(id, status: status, totals: totals, error: error)
    }
}

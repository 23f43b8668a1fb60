package import Foundation
package import TourpackCore

/// Where the rows of a pipeline's state live, behind five small stores: the
/// quota ledger, the synthesis-cache index, the output-cache index, the
/// build records and the synthesis claims. Two backends implement them:
///
/// - SQLite (`StateDatabase`), `<state>/state.sqlite`: the default, one
///   machine, no server. Jobs on that machine share it.
/// - PostgreSQL (`PostgresState`), when `state.postgres` is set: workers on
///   several machines share one ledger, one cache index and one set of
///   records.
///
/// The stores hold rows, never files, and no policy: what a reservation may
/// take, which owner is gone, when an entry is too old, are decided once, in
/// `QuotaLedger`, `SynthesisCache`, `OutputCache` and `BuildRecords`, for
/// both backends. A store promises only that each call is atomic against
/// every other process using the same backend.
///
/// The map tile cache is not here: tiles are fetched per worker and kept on
/// its local disk, so `TileCache` and `TilePackRecords` stay in the local
/// SQLite database even when PostgreSQL holds the rest.
///
/// Every call blocks (a file, a socket); call them from a thread pool, as
/// the build does, never from the cooperative pool's hot paths.
package protocol StateBackend: Sendable {
    var location: StateLocation { get }
    var ledger: any LedgerStore { get }
    var synthesisIndex: any SynthesisIndex { get }
    var outputIndex: any OutputIndex { get }
    var buildRecords: any BuildRecordStore { get }
    /// Who is speaking which chunk now (`ChunkClaims`).
    var synthesisClaims: any SynthesisClaimStore { get }
    /// Runs `body` while this process alone, among all that share the
    /// backend, publishes `tour` into the output root `output`. SQLite
    /// serves one machine, whose root lock already keeps publishers apart:
    /// there it only runs `body`. PostgreSQL takes an advisory lock per
    /// tour, because a folder's flock does not hold across machines.
    func publishing<T>(tour: String, into output: String, _ body: () throws -> T) throws -> T
    /// The names of the migrations applied, oldest first.
    func appliedMigrations() throws -> [String]
}

/// Which database holds the state, as errors and `tourpack state migrate` name it.
package enum StateLocation: Sendable, Hashable, CustomStringConvertible {
    /// `<state>/state.sqlite`.
    case sqlite(path: String)
    /// A PostgreSQL server, by its URL without a password
    /// (`postgresql://tourpack@127.0.0.1:5432/tourpack`).
    case postgres(url: String)

    package var description: String {
        switch self {
        case .sqlite(let path): path
        case .postgres(let url): url
        }
    }

    /// A failure of this backend, naming it (never a password: neither form holds one).
    package func failure(_ message: String, cause: (any Error & Sendable)? = nil) -> TourpackError {
        switch self {
        case .sqlite(let path): TourpackError(.stateFailed, message, context: .init(path: path), cause: cause)
        case .postgres(let url): TourpackError(.stateFailed, message, context: .init(url: url), cause: cause)
        }
    }
}

// MARK: The quota ledger

/// One tier's month of one account: where a reservation counts.
package struct QuotaSlot: Sendable, Hashable {
    package var account: String
    /// `yyyy-MM`, UTC.
    package var month: String
    package var tier: String

    package init(account: String, month: String, tier: String) {
        self.account = account
        self.month = month
        self.tier = tier
    }
}

/// What a reservation came to.
package enum ReservationOutcome: Sendable, Hashable {
    case granted(id: Int64)
    /// The month could not take it; the numbers it saw, for the message.
    case refused(used: Int, reserved: Int)
}

/// A reservation not yet settled or released, as `reconcile` judges it.
package struct OpenReservation: Sendable, Hashable {
    package var id: Int64
    package var characters: Int
    /// `ProcessOwner.description`.
    package var owner: String
    package var createdAt: Double
    /// Its request went out: the endpoint may have billed it.
    package var sent: Bool
}

/// A reservation becoming used characters: what was billed, in its month.
package struct LedgerSettlement: Sendable, Hashable {
    package var id: Int64
    package var slot: QuotaSlot
    package var characters: Int
}

/// The ledger's rows. The policy (limits, months, which owners are gone) is `QuotaLedger`'s.
package protocol LedgerStore: Sendable {
    var location: StateLocation { get }
    /// Records a reservation of `characters` in `slot` when the slot's used
    /// plus reserved characters plus these stay within `limit` (nil: no
    /// limit), in one transaction that no other process can interleave
    /// with, so N processes together never pass the limit.
    func reserve(_ characters: Int, in slot: QuotaSlot, limit: Int?, owner: String, at time: Double) throws -> ReservationOutcome
    /// Marks a reservation sent (once; again changes nothing).
    func markSent(_ id: Int64, at time: Double) throws
    /// Raises an open reservation to `characters` when it holds fewer (its
    /// request is being retried after answers that were billed), and the
    /// slot's reserved characters with it; a closed one is left alone.
    func raise(_ id: Int64, to characters: Int) throws
    /// Removes the reservation, if it is still there, and adds what was
    /// billed to its month's used characters. A reservation that reconcile
    /// already closed is still settled: the audio did come back.
    func settle(_ settlement: LedgerSettlement) throws
    /// Removes the reservation: nothing was billed.
    func release(_ id: Int64) throws
    /// In one transaction, closes the open reservations (of every account)
    /// that `closing` picks: an unsent one is released, a sent one settled
    /// in full. A reservation another process closes meanwhile is not
    /// counted twice.
    func reconcile(closing: (OpenReservation) -> Bool) throws -> QuotaLedger.Reconciliation
    /// The slot's settled and reserved characters.
    func usage(in slot: QuotaSlot) throws -> (used: Int, reserved: Int)
}

// MARK: The synthesis-cache index

/// One chunk's row in the synthesis-cache index.
package struct SynthesisEntry: Sendable, Hashable {
    /// `SynthesisKey.hex`.
    package var key: String
    package var characters: Int
    package var sampleRate: Int
    package var samples: Int
    package var fileBytes: Int64
    package var createdAt: Double
    package var lastUsedAt: Double
    /// Where speech starts and ends (`ChunkShape`): nil, not measured yet
    /// (an entry from before chunk shapes); -1 and -1, only silence.
    package var audibleStart: Int?
    package var audibleEnd: Int?
    /// The chunk's gating blocks and true peak (`LoudnessProfile.encoded`); nil, not measured yet.
    package var loudness: Data?
    /// Lowercase hex SHA-256 of the chunk's FLAC file; nil for an entry from
    /// before digests were kept (recorded at its next lookup).
    package var fileSHA256: String?
    /// When each sentence the chunk holds starts, as the voice reported it
    /// (`ChunkShape.sentenceTimes`, in `SentenceTimes.encode`'s text form);
    /// nil when it reported none.
    package var sentenceTimes: String?

    package init(
        key: String, characters: Int, sampleRate: Int, samples: Int, fileBytes: Int64, createdAt: Double, lastUsedAt: Double,
        audibleStart: Int?, audibleEnd: Int?, loudness: Data?, fileSHA256: String? = nil, sentenceTimes: String? = nil
    ) {
        self.fileSHA256 = fileSHA256
        self.sentenceTimes = sentenceTimes
        self.key = key
        self.characters = characters
        self.sampleRate = sampleRate
        self.samples = samples
        self.fileBytes = fileBytes
        self.createdAt = createdAt
        self.lastUsedAt = lastUsedAt
        self.audibleStart = audibleStart
        self.audibleEnd = audibleEnd
        self.loudness = loudness
    }
}

/// The synthesis cache's rows (the FLAC files are `SynthesisCache`'s).
package protocol SynthesisIndex: Sendable {
    var location: StateLocation { get }
    /// The keys among `keys` with an entry created at or after `cutoff`.
    func freshKeys(among keys: [String], createdSince cutoff: Double) throws -> Set<String>
    func entry(_ key: String) throws -> SynthesisEntry?
    /// The entries of `keys` that exist, by key.
    func entries(_ keys: [String]) throws -> [String: SynthesisEntry]
    /// A hit: the entry becomes the most recently used, with its shape and loudness.
    func touch(_ key: String, at time: Double, audibleStart: Int, audibleEnd: Int, loudness: Data?) throws
    /// Hits whose shape and loudness were already recorded: only their last
    /// use changes, all in one transaction.
    func touch(_ keys: [String], at time: Double) throws
    /// Hits deferred by a build (`DeferredTouches`), each batch at its own
    /// time, in one transaction where the backend can: a warm build's hits
    /// each have their own time, and a transaction apiece cost more than
    /// the writes.
    func touch(_ batches: [(time: Double, keys: [String])]) throws
    /// Records (or replaces) an entry, with the ledger's settlement in the
    /// same transaction when given: the chunk is paid for exactly when it is
    /// kept, and a crash between the two cannot make it paid twice.
    func keep(_ entry: SynthesisEntry, settling: LedgerSettlement?) throws
    func totals() throws -> (entries: Int, bytes: Int64)
    /// Every entry's key, size and age, least recently used first (ties by key).
    func byLastUse() throws -> [(key: String, bytes: Int64, createdAt: Double)]
    func allKeys() throws -> Set<String>
    func forget(_ key: String) throws
    func forgetAll() throws
}

extension SynthesisIndex {
    /// A row at a time; a backend that can read them together does.
    package func entries(_ keys: [String]) throws -> [String: SynthesisEntry] {
        var found: [String: SynthesisEntry] = [:]
        for key in keys { found[key] = try entry(key) }
        return found
    }

    /// A batch at a time; a backend that can write them together does.
    package func touch(_ batches: [(time: Double, keys: [String])]) throws {
        for batch in batches { try touch(batch.keys, at: batch.time) }
    }

    /// A row at a time, keeping each row's shape and loudness; a backend that can write them together does.
    package func touch(_ keys: [String], at time: Double) throws {
        for key in keys {
            guard let entry = try entry(key) else { continue }
            try touch(key, at: time, audibleStart: entry.audibleStart ?? -1, audibleEnd: entry.audibleEnd ?? -1, loudness: entry.loudness)
        }
    }
}

// MARK: The output-cache index

/// One AudioCache file's row: what it was made from and its measurements.
///
/// A row names its file by the output root it was written under and the
/// file's path relative to that root, so a root that is moved or mounted
/// elsewhere keeps its rows' worth (`OutputCache`).
package struct OutputEntry: Sendable, Hashable {
    /// The output root the file was written under, as its absolute path
    /// read then (`OutputCache.rootName`).
    package var root: String
    /// The file's path relative to `root`: `AudioCache/<tour>/<file>`.
    package var path: String
    /// `OutputKey.hex`.
    package var inputKey: String
    package var format: String
    package var codec: String
    package var sampleRateHz: Int
    package var channels: Int
    package var bitrateKbps: Int
    package var durationSeconds: Double
    package var sizeBytes: Int64
    package var sha256: String
    package var createdAt: Double
    package var lastUsedAt: Double
    /// The file's loudness as shipped and how it was levelled (`AudioLoudness`);
    /// a nil gain: recorded before loudness was measured.
    package var integratedLUFS: Double?
    package var truePeakDBTP: Double?
    package var gainDB: Double?
    package var limiterReductionDB: Double?
    /// What `lstat` said of the file when a build last found its SHA-256
    /// right (`FileSignature`); nil until then, and again once the file is
    /// made anew. While the file still has it, the file is not hashed again.
    package var fileSignature: String?
    /// The narration's captions as the build that made or last reused the
    /// file made them, and what they were made from; nil until a build with
    /// captions records them.
    package var captions: StoredCaptions?
    /// What `lstat` said of the caption file holding `captions` when a
    /// build last found its bytes right, after their SHA-256
    /// (`OutputCache.captionFile(_:holds:keptWith:)`); nil until then, and
    /// again once the captions are made anew.
    package var captionsFileSignature: String?

    package init(
        root: String, path: String, inputKey: String, format: String, codec: String, sampleRateHz: Int, channels: Int, bitrateKbps: Int,
        durationSeconds: Double, sizeBytes: Int64, sha256: String, createdAt: Double, lastUsedAt: Double,
        integratedLUFS: Double?, truePeakDBTP: Double?, gainDB: Double?, limiterReductionDB: Double?, fileSignature: String? = nil,
        captions: StoredCaptions? = nil, captionsFileSignature: String? = nil
    ) {
        self.root = root
        self.path = path
        self.inputKey = inputKey
        self.format = format
        self.codec = codec
        self.sampleRateHz = sampleRateHz
        self.channels = channels
        self.bitrateKbps = bitrateKbps
        self.durationSeconds = durationSeconds
        self.sizeBytes = sizeBytes
        self.sha256 = sha256
        self.createdAt = createdAt
        self.lastUsedAt = lastUsedAt
        self.integratedLUFS = integratedLUFS
        self.truePeakDBTP = truePeakDBTP
        self.gainDB = gainDB
        self.limiterReductionDB = limiterReductionDB
        self.fileSignature = fileSignature
        self.captions = captions
        self.captionsFileSignature = captionsFileSignature
    }
}

/// One narration's WebVTT file as a build made it beside an AudioCache file,
/// kept in that file's row so a build that reuses the file reuses its
/// captions too, without laying out the narration or timing its cues again.
package struct StoredCaptions: Sendable, Hashable {
    /// `CaptionKey.hex`: what the captions follow from besides the audio.
    package var key: String
    /// The WebVTT file's bytes.
    package var bytes: [UInt8]
    /// Lowercase hex SHA-256 of `bytes`.
    package var sha256: String
    package var cues: Int
    /// `CaptionTiming`'s raw value: where the cue times came from.
    package var timing: String

    package init(key: String, bytes: [UInt8], sha256: String, cues: Int, timing: String) {
        self.key = key
        self.bytes = bytes
        self.sha256 = sha256
        self.cues = cues
        self.timing = timing
    }
}

/// The output cache's rows (the files, their checks and ages are `OutputCache`'s).
///
/// A row is keyed by its root and its root-relative path. Lookups are by
/// the relative path alone and answer every root's row for it: the cache
/// takes its own root's, or, for a root with none (moved, or mounted
/// elsewhere), one another root wrote whose file is found at the same
/// place under this one.
package protocol OutputIndex: Sendable {
    var location: StateLocation { get }
    /// Every root's row of the root-relative `path`.
    func entries(path: String) throws -> [OutputEntry]
    /// Every root's rows of `paths`, by path: a build asks for every file
    /// of its plan at once rather than a row at a time.
    func entries(paths: [String]) throws -> [String: [OutputEntry]]
    /// Records (or replaces) entries, each under its own root, all in one transaction.
    func record(_ entries: [OutputEntry]) throws
    /// Marks `root`'s `paths` used at `time`, in one transaction, with what
    /// the build learned of them (by path): `signatures` of files whose
    /// SHA-256 was just found right, `captions` made again (which clears
    /// their file's signature), and `captionSignatures` of caption files
    /// whose bytes were just found right.
    func touch(
        root: String, _ paths: [String], at time: Double, signatures: [String: String], captions: [String: StoredCaptions],
        captionSignatures: [String: String]
    ) throws
    /// Forgets `root`'s rows of `paths`.
    func forget(root: String, _ paths: [String]) throws
    /// Path (root-relative) and last use of every row of `root`.
    func lastUsed(root: String) throws -> [(path: String, lastUsedAt: Double)]
    /// Forgets every row of `root`.
    func forgetAll(root: String) throws
}

extension OutputIndex {
    /// A path at a time; a backend that can read them together does.
    package func entries(paths: [String]) throws -> [String: [OutputEntry]] {
        var found: [String: [OutputEntry]] = [:]
        for path in paths {
            let rows = try entries(path: path)
            if !rows.isEmpty { found[path] = rows }
        }
        return found
    }
}

// MARK: Build records

/// A build's totals as it finishes.
package struct BuildTotals: Sendable, Hashable {
    package var toursBuilt = 0
    package var toursFailed = 0
    package var requests = 0
    package var characters = 0

    package init(toursBuilt: Int = 0, toursFailed: Int = 0, requests: Int = 0, characters: Int = 0) {
        self.toursBuilt = toursBuilt
        self.toursFailed = toursFailed
        self.requests = requests
        self.characters = characters
    }
}

/// The build records' rows: a lifecycle per build and each tour's outcome.
package protocol BuildRecordStore: Sendable {
    var location: StateLocation { get }
    /// A new queued record; its id.
    func queue(pipeline: String, output: String, owner: String, at time: Double) throws -> Int64
    func start(_ id: Int64, at time: Double) throws
    /// Records (or replaces) one tour's outcome in a build.
    func recordTour(_ id: Int64, tourId: String, outcome: String, message: String?) throws
    /// The build is over; a build never started gets `time` as its start too.
    func finish(_ id: Int64, status: BuildRecord.Status, at time: Double, totals: BuildTotals, error: String?) throws
    /// In one transaction, marks failed every queued or running build whose
    /// owner `interrupted` gives a message for; returns how many.
    func reconcile(at time: Double, interrupted: (String) -> String?) throws -> Int
    /// Forgets `output`'s finished builds and every tour outcome of its builds.
    func forgetAll(output: String) throws
    /// Newest first.
    func recent(limit: Int, output: String?) throws -> [BuildRecord]
    func counts(output: String) throws -> [BuildRecord.Status: Int]
    /// Tours of `output` whose latest outcome is `failed`, by tour ID, with the message.
    func failedTours(output: String) throws -> [(tourId: String, message: String?)]
}

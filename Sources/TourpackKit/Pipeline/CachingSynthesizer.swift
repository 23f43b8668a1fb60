import Foundation
import NIOPosix
import TourpackCore
import TourpackAudio
import TourpackState

/// The synthesize stage as a build runs it: the synthesis cache first, and
/// on a miss the endpoint, paid for through the quota ledger.
///
/// A miss reserves the chunk's characters (refused with `budgetExceeded`
/// when the month cannot take them, even if another job took them a moment
/// ago) and asks the wrapped synthesizer to speak the chunk into a temp
/// beside its cache file. When audio came back, the temp is renamed into
/// the cache and the reservation settled in one transaction, for what the
/// endpoint billed: every 2xx answer, so a reply retried because its body
/// was cut short counts twice. When no answer came back, the reservation is
/// released; when answers came back but no usable audio, what they billed
/// is settled. A cache that cannot be written costs the next build a
/// request, not this one its item: the temp is used as it is, the
/// reservation settled on its own, and the failure counted.
///
/// The same chunk asked for twice at once (one sentence in two narrations)
/// is requested once: later callers wait for the first one's audio. The
/// shared request is cancelled only when every caller waiting for it is.
///
/// With `state.objects`, the fleet's bucket (`SharedSynthesisCache`) sits
/// between the local cache and the endpoint: a local miss is looked for in
/// the bucket before any character is reserved, and a chunk just spoken and
/// kept goes to the bucket for the other workers. The bucket can only save
/// requests, never cost an item: a bucket that cannot be reached is a miss
/// on the way in and a warning on the way out, and a damaged object is a
/// miss. After `bucketFailuresToGiveUp` failures in a row (each already
/// tried three times by `ObjectStore`), the build stops asking the bucket,
/// so a bucket that is down costs seconds, not a wait on every chunk.
///
/// Processes that share the state (jobs on one machine, workers on many)
/// pay for a chunk once too: a miss everywhere is claimed (`ChunkClaims`)
/// before a character is reserved. The claim's winner speaks the chunk;
/// the others wait, looking in the cache and the bucket between tries, and
/// find the winner's audio there, or win the claim in their turn when the
/// winner let go without audio.
///
/// What comes back is a file and its shape, never samples: the join reads
/// the file block by block. SQLite and file work run on the build's thread
/// pool, never on the cooperative pool.
struct CachingSynthesizer: Sendable {
    let inner: any SpeechSynthesizer
    let cache: SynthesisCache
    let ledger: QuotaLedger
    let tier: PricingTier
    let pool: NIOThreadPool
    /// The fleet's bucket behind `cache`, when the pipeline names one.
    let shared: SharedSynthesisCache?
    /// Who speaks a chunk that other processes want too; nil: this process only.
    let claims: ChunkClaims?
    let counters = CacheCounters(CacheCounts())
    private let inFlight = InFlightChunks()

    init(
        inner: any SpeechSynthesizer, cache: SynthesisCache, ledger: QuotaLedger, tier: PricingTier, pool: NIOThreadPool,
        objects: ObjectStore? = nil, claims: ChunkClaims? = nil
    ) {
        self.inner = inner
        self.cache = cache
        self.ledger = ledger
        self.tier = tier
        self.pool = pool
        self.shared = objects.map { SharedSynthesisCache(local: cache, objects: $0, pool: pool) }
        self.claims = claims
    }

    var stats: SynthesisStats { inner.stats }

    /// The chunk's audio, from the cache or the endpoint.
    func chunk(_ request: SynthesisRequest, key: SynthesisKey) async throws -> SpokenChunk {
        let cache = cache
        if let cached = try await pool.runIfActive({ try cache.lookup(key) }) {
            counters.update { $0.hits += 1 }
            return SpokenChunk(cached)
        }
        let inFlight = inFlight
        let (task, ticket) = inFlight.join(key) {
            Task {
                defer { inFlight.finish(key) }
                return try await fetch(request, key: key)
            }
        }
        if !ticket.isFirst { counters.update { $0.hits += 1 } }
        defer { inFlight.leave(key, ticket, cancelling: false) }
        return try await withTaskCancellationHandler {
            try await task.value
        } onCancel: {
            inFlight.leave(key, ticket, cancelling: true)
        }
    }

    /// A miss: found after all (kept meanwhile by another item or process),
    /// or claimed, then spoken.
    private func fetch(_ request: SynthesisRequest, key: SynthesisKey) async throws -> SpokenChunk {
        // Another item may have fetched and kept it since this one looked.
        if let found = try await lookAgain(request, key: key) { return found }
        guard let claims else { return try await speak(request, key: key) }
        if let found = try await waitForClaim(claims, request, key: key) { return found }
        do {
            let spoken = try await speak(request, key: key)
            await pool.runRegardless { try? claims.release(key) }
            return spoken
        } catch {
            // Let go, so that a waiting process tries in its turn (its stale-claim rules would free it anyway).
            await pool.runRegardless { try? claims.release(key) }
            throw error
        }
    }

    /// The chunk from the cache or the bucket, without a request; nil on a miss in both.
    private func lookAgain(_ request: SynthesisRequest, key: SynthesisKey) async throws -> SpokenChunk? {
        let cache = cache
        if let cached = try await pool.runIfActive({ try cache.lookup(key) }) {
            counters.update { $0.hits += 1 }
            return SpokenChunk(cached)
        }
        return try await restore(request, key: key)
    }

    /// Claims the chunk, waiting while another process holds it. Returns
    /// nil once this process holds the claim (and must speak the chunk), or
    /// the holder's audio once it is in the cache or the bucket.
    private func waitForClaim(_ claims: ChunkClaims, _ request: SynthesisRequest, key: SynthesisKey) async throws -> SpokenChunk? {
        var pause = 0.05
        var waited = false
        while true {
            if try await pool.runIfActive({ try claims.claim(key) }) {
                // A holder may have kept it and let go between the last look
                // and this claim: one more look before paying.
                guard let found = try await lookAgain(request, key: key) else { return nil }
                await pool.runRegardless { try? claims.release(key) }
                return found
            }
            if !waited { counters.update { $0.claimWaits += 1 } }
            waited = true
            do {
                try await Task.sleep(for: .seconds(pause))
            } catch {
                throw TourpackError.cancelled
            }
            pause = min(pause * 2, 1)
            if let found = try await lookAgain(request, key: key) { return found }
        }
    }

    /// Reserve, request, keep and settle (or release).
    private func speak(_ request: SynthesisRequest, key: SynthesisKey) async throws -> SpokenChunk {
        let (cache, ledger, tier, characters) = (cache, ledger, tier, request.chunk.characters)
        let temp = try await pool.runIfActive { try cache.temporaryURL(for: key) }
        let reservation = try await pool.runIfActive { try ledger.reserve(characters, tier: tier) }
        let pool = pool
        let billed = BilledCharacters(onSend: { first, billedSoFar in
            try await Self.writingLedger(ledger) {
                try await pool.runIfActive {
                    // reserved → sent: from here a crash settles it instead of releasing it.
                    if first { try ledger.markSent(reservation) }
                    // A retry after billed answers: a crash from here settles those and this one.
                    if billedSoFar > 0 { try ledger.raise(reservation, to: billedSoFar + characters) }
                }
            }
        })
        let shape: ChunkShape
        do {
            shape = try await BilledCharacters.$current.withValue(billed) { try await inner.synthesize(request, to: temp) }
        } catch {
            let answered = billed.value
            await pool.runRegardless { AtomicFile.discard(temp: temp) }
            try await Self.writingLedger(ledger) {
                try await pool.runIfActiveOrHere {
                    if answered > 0 { try ledger.settle(reservation, characters: answered) } else { try ledger.release(reservation) }
                }
            }
            if answered > 0 { counters.update { $0.billedCharacters += answered } }
            throw error
        }
        // A synthesizer that does not count answers (not HTTP) bills the chunk once.
        let charged = billed.value > 0 ? billed.value : characters
        let rate = request.sampleRateHz
        guard shape.samples > 0 else {
            // Nothing to keep: an empty answer is paid for and asked again next time.
            await pool.runRegardless { AtomicFile.discard(temp: temp) }
            try await Self.writingLedger(ledger) { try await pool.runIfActiveOrHere { try ledger.settle(reservation, characters: charged) } }
            counters.update {
                $0.misses += 1
                $0.billedCharacters += charged
            }
            return SpokenChunk(url: nil, shape: shape, sampleRate: rate)
        }
        // Kept and paid for in one transaction: a crash leaves both or neither.
        do {
            let kept = try await pool.runIfActiveOrHere {
                try cache.adopt(temp, for: key, shape: shape, sampleRate: rate, characters: characters, alongWith: ledger.settlement(of: reservation, characters: charged))
            }
            counters.update {
                $0.misses += 1
                $0.billedCharacters += charged
            }
            await share(kept)
            return SpokenChunk(kept)
        } catch {
            counters.update {
                $0.storeFailures += 1
                if $0.firstStoreFailure == nil { $0.firstStoreFailure = "\(cache.fileURL(for: key).path): \(error)" }
            }
            try await Self.writingLedger(ledger) { try await pool.runIfActiveOrHere { try ledger.settle(reservation, characters: charged) } }
            counters.update {
                $0.misses += 1
                $0.billedCharacters += charged
            }
            // The temp is still whole (or already renamed): the join reads it
            // where it is; the orphan sweep removes it later.
            let url = FileManager.default.fileExists(atPath: temp.path) ? temp : cache.fileURL(for: key)
            return SpokenChunk(url: url, shape: shape, sampleRate: rate)
        }
    }

    /// The chunk from the fleet's bucket, kept in the local cache and paid
    /// for by nobody; nil on a miss, a damaged object, or a bucket that
    /// cannot be reached (counted, for the summary's warning).
    private func restore(_ request: SynthesisRequest, key: SynthesisKey) async throws -> SpokenChunk? {
        guard let shared, !counters.snapshot.bucketGivenUp else { return nil }
        do {
            guard let restored = try await shared.restore(key, characters: request.chunk.characters, sampleRate: request.sampleRateHz) else {
                counters.update { $0.failuresInARow = 0 }
                return nil
            }
            counters.update {
                $0.restored += 1
                $0.failuresInARow = 0
            }
            return SpokenChunk(restored)
        } catch {
            try Self.rethrowCancellation(error)
            counters.update { $0.noteSharedFailure("restoring \(SharedSynthesisCache.objectKey(key)): \(Self.describe(error))") }
            return nil
        }
    }

    /// Puts a chunk just kept into the fleet's bucket. A failure is counted
    /// for the summary's warning, never the item's: the chunk is here, and
    /// the worst outcome is that another worker pays for it too.
    private func share(_ kept: CachedChunk) async {
        guard let shared, !counters.snapshot.bucketGivenUp else { return }
        do {
            let outcome = try await shared.share(kept)
            counters.update {
                if outcome == .stored { $0.shared += 1 }
                $0.failuresInARow = 0
            }
        } catch {
            // Cancelled on the way: the build is stopping; the chunk stays local.
            if Task.isCancelled || (error as? TourpackError)?.kind == .cancelled || error is CancellationError { return }
            counters.update { $0.noteSharedFailure("sharing \(SharedSynthesisCache.objectKey(kept.key)): \(Self.describe(error))") }
        }
    }

    private static func rethrowCancellation(_ error: any Error) throws {
        if error is CancellationError { throw TourpackError.cancelled }
        if let error = error as? TourpackError, error.kind == .cancelled { throw error }
        if Task.isCancelled { throw TourpackError.cancelled }
    }

    private static func describe(_ error: any Error) -> String {
        (error as? TourpackError)?.description ?? "\(error)"
    }

    /// A ledger write that fails (a full disk, a lost server) is never
    /// swallowed: it stops the build with an error naming the state's
    /// backend, because every further request would be spent without being counted.
    static func writingLedger(_ ledger: QuotaLedger, _ write: () async throws -> Void) async throws {
        do {
            try await write()
        } catch is CancellationError {
            throw TourpackError.cancelled
        } catch let error as TourpackError where error.kind == .cancelled {
            throw error
        } catch {
            throw ledger.store.location.failure("the quota ledger cannot be written: \(error)", cause: error)
        }
    }
}

/// One chunk's audio as the join reads it: a FLAC file (nil when the chunk
/// came back empty) and its shape.
struct SpokenChunk: Sendable, Hashable {
    var url: URL?
    var shape: ChunkShape
    var sampleRate: Int

    init(url: URL?, shape: ChunkShape, sampleRate: Int) {
        self.url = url
        self.shape = shape
        self.sampleRate = sampleRate
    }

    init(_ cached: CachedChunk) {
        self.init(url: cached.url, shape: cached.shape, sampleRate: cached.sampleRate)
    }
}

/// The requests of one build in flight, by chunk, with who waits for each.
final class InFlightChunks: @unchecked Sendable {
    /// One caller's hold on a shared request.
    final class Ticket: @unchecked Sendable {
        let isFirst: Bool
        /// Set once the caller stopped waiting (done or cancelled).
        var left = false
        init(isFirst: Bool) { self.isFirst = isFirst }
    }

    private struct Entry {
        var task: Task<SpokenChunk, any Error>
        var waiters: Int
    }

    private let lock = NSLock()
    private var entries: [SynthesisKey: Entry] = [:]

    /// The request already fetching `key`, or a new one from `start`.
    /// `start` runs under the lock, so the task cannot `finish` before it is recorded.
    func join(_ key: SynthesisKey, start: () -> Task<SpokenChunk, any Error>) -> (Task<SpokenChunk, any Error>, Ticket) {
        lock.withLock {
            if var entry = entries[key] {
                entry.waiters += 1
                entries[key] = entry
                return (entry.task, Ticket(isFirst: false))
            }
            let task = start()
            entries[key] = Entry(task: task, waiters: 1)
            return (task, Ticket(isFirst: true))
        }
    }

    /// A caller stops waiting; the request is cancelled when a cancelled
    /// caller was the last one waiting for it.
    func leave(_ key: SynthesisKey, _ ticket: Ticket, cancelling: Bool) {
        lock.withLock {
            guard !ticket.left else { return }
            ticket.left = true
            guard var entry = entries[key] else { return }
            entry.waiters -= 1
            entries[key] = entry
            if cancelling, entry.waiters == 0 { entry.task.cancel() }
        }
    }

    /// The request is over; later callers look in the cache again.
    func finish(_ key: SynthesisKey) {
        lock.withLock { _ = entries.removeValue(forKey: key) }
    }
}

/// Hits and misses of one build's synthesis cache.
struct CacheCounts: Sendable, Hashable {
    var hits = 0
    var misses = 0
    /// Characters settled in the ledger.
    var billedCharacters = 0
    var storeFailures = 0
    /// The first cache file that could not be kept, and why: for the warning.
    var firstStoreFailure: String?
    /// Chunks restored from the fleet's bucket (`state.objects`): no request, no characters.
    var restored = 0
    /// Chunks this build put into the bucket (not those another worker had put first).
    var shared = 0
    /// Restores and shares that failed on the bucket's side, and the first one's message.
    var sharedFailures = 0
    var firstSharedFailure: String?
    /// Chunks another process held a claim on when this build wanted them.
    var claimWaits = 0
    /// Bucket failures since its last success; at `bucketFailuresToGiveUp` the build stops asking it.
    var failuresInARow = 0
    var bucketGivenUp: Bool { failuresInARow >= Self.bucketFailuresToGiveUp }

    /// Failures in a row after which a build stops using the bucket.
    static let bucketFailuresToGiveUp = 3

    mutating func noteSharedFailure(_ message: String) {
        sharedFailures += 1
        failuresInARow += 1
        if firstSharedFailure == nil { firstSharedFailure = message }
    }
}

typealias CacheCounters = LockedCounts<CacheCounts>

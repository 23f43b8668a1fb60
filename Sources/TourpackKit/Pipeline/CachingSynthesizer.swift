import Foundation
import NIOPosix
import TourpackAudio
import TourpackCore
import TourpackHTTP
import TourpackSpeech
import TourpackState

/// The synthesize stage as a build runs it: each chunk is paid for at most
/// once, however many items, jobs or workers want it. It only coordinates;
/// each concern has its own type:
///
/// - `ChunkLookup` finds a chunk that needs no request: in the synthesis
///   cache, or in the fleet's bucket behind its circuit breaker.
/// - `InFlightChunks`: the same chunk asked for twice at once in this build
///   (one sentence in two narrations) is requested once; later callers wait
///   for the first one's audio. The shared request is cancelled only when
///   every caller waiting for it is.
/// - `ClaimWait`: processes sharing the state take turns on a chunk that is
///   nowhere yet, so only the claim's winner pays for it.
/// - `PaidSynthesis` reserves, requests, keeps and settles under the quota
///   ledger; a chunk it kept then goes to the bucket (`ChunkLookup.share`).
///
/// What comes back is a file and its shape, never samples: the join reads
/// the file block by block.
struct CachingSynthesizer: Sendable {
    let inner: any SpeechSynthesizer
    /// Hits, misses, billed characters and the bucket's and claims' figures, for the summary.
    let counters: CacheCounters
    let lookup: ChunkLookup
    /// Who speaks a chunk that other processes want too; nil: this process only.
    let claimWait: ClaimWait?
    let payment: PaidSynthesis
    private let inFlight = InFlightChunks()

    init(
        inner: any SpeechSynthesizer, cache: SynthesisCache, ledger: QuotaLedger, billing: BillingRule, pool: NIOThreadPool,
        objects: ObjectStore? = nil, claims: ChunkClaims? = nil
    ) {
        let counters = CacheCounters(CacheCounts())
        let lookup = ChunkLookup(
            cache: cache, shared: objects.map { SharedSynthesisCache(local: cache, objects: $0, pool: pool) }, pool: pool,
            counters: counters)
        self.inner = inner
        self.counters = counters
        self.lookup = lookup
        claimWait = claims.map { ClaimWait(claims: $0, lookup: lookup, pool: pool, counters: counters) }
        payment = PaidSynthesis(inner: inner, cache: cache, ledger: ledger, billing: billing, pool: pool, counters: counters)
    }

    var stats: SynthesisStats { inner.stats }
    /// The local synthesis cache, for an item that finds one of its files damaged.
    var cache: SynthesisCache { lookup.cache }

    /// The chunk's audio, from the cache or the endpoint.
    func chunk(_ request: SynthesisRequest, key: SynthesisKey) async throws -> SpokenChunk {
        if let cached = try await lookup.local(request, key: key) { return cached }
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

    /// The chunk's shape, for captions when every file of its item was
    /// reused: from the local cache without counting a hit (no audio is
    /// read), or, when it is no longer there, as `chunk` gets it.
    func shape(_ request: SynthesisRequest, key: SynthesisKey) async throws -> ChunkShape {
        if let cached = try await lookup.local(request, key: key, counting: false) { return cached.shape }
        return try await chunk(request, key: key).shape
    }

    /// A miss: found after all (kept meanwhile by another item or process),
    /// or claimed, then paid for.
    private func fetch(_ request: SynthesisRequest, key: SynthesisKey) async throws -> SpokenChunk {
        // Another item may have fetched and kept it since this one looked.
        if let found = try await lookup.anywhere(request, key: key) { return found }
        guard let claimWait else { return try await payAndShare(request, key: key) }
        return try await claimWait.speakOnce(request, key: key) { try await payAndShare(request, key: key) }
    }

    /// Pays for the chunk, and puts what was kept into the fleet's bucket.
    private func payAndShare(_ request: SynthesisRequest, key: SynthesisKey) async throws -> SpokenChunk {
        let paid = try await payment.speak(request, key: key)
        if let kept = paid.kept { await lookup.share(kept) }
        return paid.chunk
    }
}

/// One chunk's audio as the join reads it: a FLAC file (nil when the chunk
/// came back empty) and its shape.
struct SpokenChunk: Sendable, Hashable {
    var url: URL?
    var shape: ChunkShape
    var sampleRate: Int
    /// What the file must be when read (a synthesis-cache file's size and SHA-256); nil for a temp not kept yet.
    var expectation: FLACFile.Expectation?

    init(url: URL?, shape: ChunkShape, sampleRate: Int, expectation: FLACFile.Expectation? = nil) {
        self.url = url
        self.shape = shape
        self.sampleRate = sampleRate
        self.expectation = expectation
    }

    init(_ cached: CachedChunk) {
        self.init(url: cached.url, shape: cached.shape, sampleRate: cached.sampleRate, expectation: cached.expectation)
    }
}

import Foundation
import NIOPosix

/// The synthesize stage as a build runs it: the synthesis cache first, and
/// on a miss the endpoint, paid for through the quota ledger.
///
/// A miss reserves the chunk's characters (refused with `budgetExceeded`
/// when the month cannot take them, even if another job took them a moment
/// ago) and asks the wrapped synthesizer. When audio came back, it is kept in
/// the cache and the reservation settled in one transaction; when none did,
/// the reservation is released. A cache that cannot be written costs the
/// next build a request, not this one its item: the reservation is then
/// settled on its own and the failure only counted.
///
/// The same chunk asked for twice at once (one sentence in two narrations)
/// is requested once: the second caller waits for the first one's audio.
///
/// SQLite and FLAC work run on the build's thread pool, never on the
/// cooperative pool.
struct CachingSynthesizer: SpeechSynthesizer {
    let inner: any SpeechSynthesizer
    let cache: SynthesisCache
    let ledger: QuotaLedger
    let tier: PricingTier
    let pool: NIOThreadPool
    let counters = CacheCounters()
    private let inFlight = InFlightChunks()

    init(inner: any SpeechSynthesizer, cache: SynthesisCache, ledger: QuotaLedger, tier: PricingTier, pool: NIOThreadPool) {
        self.inner = inner
        self.cache = cache
        self.ledger = ledger
        self.tier = tier
        self.pool = pool
    }

    var stats: SynthesisStats { inner.stats }

    func synthesize(_ request: SynthesisRequest) async throws -> PCMAudio {
        let key = SynthesisKey(chunk: request.chunk, voice: request.voice, sampleRateHz: request.sampleRateHz)
        let cache = cache
        if let cached = try await pool.runIfActive({ try cache.load(key) }) {
            counters.update { $0.hits += 1 }
            return cached
        }
        let (task, isFirst) = inFlight.join(key) { Task { try await fetch(request, key: key) } }
        if !isFirst { counters.update { $0.hits += 1 } }
        defer { if isFirst { inFlight.finish(key) } }
        return try await withTaskCancellationHandler {
            try await task.value
        } onCancel: {
            if isFirst { task.cancel() }
        }
    }

    /// A miss: reserve, request, settle (or release), keep.
    private func fetch(_ request: SynthesisRequest, key: SynthesisKey) async throws -> PCMAudio {
        let (cache, ledger, tier, characters) = (cache, ledger, tier, request.chunk.characters)
        // Another item may have fetched and kept it since this one looked.
        if let cached = try await pool.runIfActive({ try cache.load(key) }) {
            counters.update { $0.hits += 1 }
            return cached
        }
        let reservation = try await pool.runIfActive { try ledger.reserve(characters, tier: tier) }
        let pcm: PCMAudio
        do {
            pcm = try await inner.synthesize(request)
        } catch {
            try? ledger.release(reservation)
            throw error
        }
        // Kept and paid for in one transaction: a crash leaves both or neither.
        do {
            try await pool.runIfActive {
                try cache.store(pcm, for: key, characters: characters, alongWith: ledger.settlement(of: reservation))
            }
        } catch {
            counters.update { $0.storeFailures += 1 }
            try await pool.runIfActive { try ledger.settle(reservation) }
        }
        counters.update {
            $0.misses += 1
            $0.billedCharacters += characters
        }
        return pcm
    }
}

/// The requests of one build in flight, by chunk.
final class InFlightChunks: @unchecked Sendable {
    private let lock = NSLock()
    private var tasks: [SynthesisKey: Task<PCMAudio, any Error>] = [:]

    /// The task already fetching `key`, or a new one from `start`; true when new.
    func join(_ key: SynthesisKey, start: () -> Task<PCMAudio, any Error>) -> (Task<PCMAudio, any Error>, Bool) {
        lock.withLock {
            if let running = tasks[key] { return (running, false) }
            let task = start()
            tasks[key] = task
            return (task, true)
        }
    }

    func finish(_ key: SynthesisKey) {
        lock.withLock { _ = tasks.removeValue(forKey: key) }
    }
}

/// Hits and misses of one build's synthesis cache.
struct CacheCounts: Sendable, Hashable {
    var hits = 0
    var misses = 0
    /// Characters settled in the ledger.
    var billedCharacters = 0
    var storeFailures = 0
}

final class CacheCounters: @unchecked Sendable {
    private let lock = NSLock()
    private var counts = CacheCounts()

    var snapshot: CacheCounts { lock.withLock { counts } }

    func update(_ change: (inout CacheCounts) -> Void) {
        lock.withLock { change(&counts) }
    }
}

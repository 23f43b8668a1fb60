import Foundation
import NIOPosix

/// The synthesize stage as a build runs it: the synthesis cache first, and
/// on a miss the endpoint, paid for through the quota ledger.
///
/// A miss reserves the chunk's characters (refused with `budgetExceeded`
/// when the month cannot take them, even if another job took them a moment
/// ago), asks the wrapped synthesizer, settles the reservation when audio
/// came back and releases it when none did, then keeps the audio in the
/// cache. A cache that cannot be written costs the next build a request, not
/// this one its item, so that failure is only counted.
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

    var stats: SynthesisStats { inner.stats }

    func synthesize(_ request: SynthesisRequest) async throws -> PCMAudio {
        let key = SynthesisKey(chunk: request.chunk, voice: request.voice, sampleRateHz: request.sampleRateHz)
        let (cache, ledger, tier, characters) = (cache, ledger, tier, request.chunk.characters)
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
        try await pool.runIfActive { try ledger.settle(reservation) }
        counters.update {
            $0.misses += 1
            $0.billedCharacters += characters
        }
        do {
            try await pool.runIfActive { try cache.store(pcm, for: key, characters: characters) }
        } catch {
            counters.update { $0.storeFailures += 1 }
        }
        return pcm
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

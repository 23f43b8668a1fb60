import Foundation
import NIOPosix

/// The synthesize stage as a build runs it: the synthesis cache first, and
/// on a miss the endpoint, paid for through the quota ledger.
///
/// A miss reserves the chunk's characters (refused with `budgetExceeded`
/// when the month cannot take them, even if another job took them a moment
/// ago) and asks the wrapped synthesizer. When audio came back, it is kept in
/// the cache and the reservation settled in one transaction, for what the
/// endpoint billed: every 2xx answer, so a reply retried because its body was
/// cut short counts twice. When no answer came back, the reservation is
/// released; when answers came back but no usable audio, what they billed is
/// settled. A cache that cannot be written costs the next build a request,
/// not this one its item: the reservation is then settled on its own and the
/// failure only counted.
///
/// The same chunk asked for twice at once (one sentence in two narrations)
/// is requested once: later callers wait for the first one's audio. The
/// shared request is cancelled only when every caller waiting for it is.
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

    /// A miss: reserve, request, keep and settle (or release).
    private func fetch(_ request: SynthesisRequest, key: SynthesisKey) async throws -> PCMAudio {
        let (cache, ledger, tier, characters) = (cache, ledger, tier, request.chunk.characters)
        // Another item may have fetched and kept it since this one looked.
        if let cached = try await pool.runIfActive({ try cache.load(key) }) {
            counters.update { $0.hits += 1 }
            return cached
        }
        let reservation = try await pool.runIfActive { try ledger.reserve(characters, tier: tier) }
        let billed = BilledCharacters()
        let pcm: PCMAudio
        do {
            pcm = try await BilledCharacters.$current.withValue(billed) { try await inner.synthesize(request) }
        } catch {
            let answered = billed.value
            _ = try? await pool.runIfActive {
                if answered > 0 { try ledger.settle(reservation, characters: answered) } else { try ledger.release(reservation) }
            }
            if answered > 0 { counters.update { $0.billedCharacters += answered } }
            throw error
        }
        // A synthesizer that does not count answers (not HTTP) bills the chunk once.
        let charged = billed.value > 0 ? billed.value : characters
        // Kept and paid for in one transaction: a crash leaves both or neither.
        do {
            try await pool.runIfActive {
                try cache.store(pcm, for: key, characters: characters, alongWith: ledger.settlement(of: reservation, characters: charged))
            }
        } catch {
            counters.update { $0.storeFailures += 1 }
            try await pool.runIfActive { try ledger.settle(reservation, characters: charged) }
        }
        counters.update {
            $0.misses += 1
            $0.billedCharacters += charged
        }
        return pcm
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
        var task: Task<PCMAudio, any Error>
        var waiters: Int
    }

    private let lock = NSLock()
    private var entries: [SynthesisKey: Entry] = [:]

    /// The request already fetching `key`, or a new one from `start`.
    /// `start` runs under the lock, so the task cannot `finish` before it is recorded.
    func join(_ key: SynthesisKey, start: () -> Task<PCMAudio, any Error>) -> (Task<PCMAudio, any Error>, Ticket) {
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
}

final class CacheCounters: @unchecked Sendable {
    private let lock = NSLock()
    private var counts = CacheCounts()

    var snapshot: CacheCounts { lock.withLock { counts } }

    func update(_ change: (inout CacheCounts) -> Void) {
        lock.withLock { change(&counts) }
    }
}

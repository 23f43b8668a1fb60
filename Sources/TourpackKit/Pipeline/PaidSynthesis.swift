import Foundation
import NIOPosix
import TourpackAudio
import TourpackCore
import TourpackSpeech
import TourpackState

/// Pays for one chunk under the quota ledger: reserves its characters,
/// asks the endpoint, keeps the audio in the synthesis cache and settles
/// what the endpoint billed. The one place a build spends characters.
///
/// The reservation is refused with `budgetExceeded` when the month cannot
/// take the chunk, even if another job took the characters a moment ago.
/// The wrapped synthesizer speaks the chunk into a temp beside its cache
/// file, and counts every 2xx answer in a `BilledCharacters` (a reply
/// retried because its body was cut short counts twice): before the first
/// request the reservation is marked sent, and before a retry after billed
/// answers it is raised, so a crash at any point settles what was spent.
/// When audio came back, the temp is renamed into the cache and the
/// reservation settled in one transaction, for what the endpoint billed.
/// When no answer came back, the reservation is released; when answers
/// came back but no usable audio, what they billed is settled. A cache that
/// cannot be written costs the next build a request, not this one its
/// item: the temp is used as it is, the reservation settled on its own, and
/// the failure counted.
///
/// SQLite and file work run on the build's thread pool, never on the
/// cooperative pool.
struct PaidSynthesis: Sendable {
    let inner: any SpeechSynthesizer
    let cache: SynthesisCache
    let ledger: QuotaLedger
    /// The provider's unit and tier: what a chunk reserves and settles.
    let billing: BillingRule
    let pool: NIOThreadPool
    let counters: CacheCounters

    /// What a paid request brought: the chunk as the join reads it, and its
    /// cache entry when it was kept (for the fleet's bucket).
    struct Paid: Sendable {
        var chunk: SpokenChunk
        var kept: CachedChunk?
    }

    /// Reserve, request, keep and settle (or release).
    func speak(_ request: SynthesisRequest, key: SynthesisKey) async throws -> Paid {
        let (cache, ledger, tier, characters) = (cache, ledger, billing.tier, billing.units(for: request.chunk))
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
            try await Self.writingLedger(ledger) {
                try await pool.runIfActiveOrHere { try ledger.settle(reservation, characters: charged) }
            }
            counters.update {
                $0.misses += 1
                $0.billedCharacters += charged
            }
            return Paid(chunk: SpokenChunk(url: nil, shape: shape, sampleRate: rate))
        }
        // Kept and paid for in one transaction: a crash leaves both or neither.
        do {
            let kept = try await pool.runIfActiveOrHere {
                try cache.adopt(
                    temp, for: key, shape: shape, sampleRate: rate, characters: characters,
                    alongWith: ledger.settlement(of: reservation, characters: charged))
            }
            counters.update {
                $0.misses += 1
                $0.billedCharacters += charged
            }
            return Paid(chunk: SpokenChunk(kept), kept: kept)
        } catch {
            counters.update {
                $0.storeFailures += 1
                if $0.firstStoreFailure == nil { $0.firstStoreFailure = "\(cache.fileURL(for: key).path): \(error)" }
            }
            try await Self.writingLedger(ledger) {
                try await pool.runIfActiveOrHere { try ledger.settle(reservation, characters: charged) }
            }
            counters.update {
                $0.misses += 1
                $0.billedCharacters += charged
            }
            // The temp is still whole (or already renamed): the join reads it
            // where it is; the orphan sweep removes it later.
            let url = FileManager.default.fileExists(atPath: temp.path) ? temp : cache.fileURL(for: key)
            return Paid(chunk: SpokenChunk(url: url, shape: shape, sampleRate: rate))
        }
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
        } catch let error as TourpackError where error.isDiskFull {
            var context = error.context
            context.operation = "write the quota ledger"
            throw TourpackError(.storageFailed, error.message, context: context, cause: error)
        } catch {
            throw ledger.store.location.failure("the quota ledger cannot be written: \(error)", cause: error)
        }
    }
}

import Foundation
import NIOPosix
import TourpackCore
import TourpackHTTP
import TourpackSpeech
import TourpackState

/// Finds a chunk that costs no request: in the local synthesis cache, or in
/// the fleet's bucket (`state.objects`, a `SharedSynthesisCache`) behind it;
/// and puts a chunk just spoken and kept into that bucket for the other
/// workers. The one place a build asks either of them for audio.
///
/// The bucket can only save requests, never cost an item: a bucket that
/// cannot be reached is a miss on the way in and a warning on the way out,
/// and a damaged object is a miss. It sits behind a circuit breaker: after
/// `CacheCounts.bucketFailuresToGiveUp` failures in a row (each already
/// tried three times by `ObjectStore`), the build stops asking the bucket,
/// so a bucket that is down costs seconds, not a wait on every chunk.
///
/// SQLite and file work run on the build's thread pool, never on the
/// cooperative pool.
struct ChunkLookup: Sendable {
    let cache: SynthesisCache
    /// The fleet's bucket behind `cache`, when the pipeline names one.
    let shared: SharedSynthesisCache?
    let pool: NIOThreadPool
    let counters: CacheCounters

    /// The chunk from the local cache; nil on a miss. A chunk too short for
    /// `request`'s text (`SpeechLength`), kept by an older version, is a
    /// miss: it is asked again, and the new answer replaces it.
    /// - Parameter counting: whether a hit counts as one in the summary
    ///   (not when only the chunk's shape is wanted, for captions of files
    ///   that were all reused).
    func local(_ request: SynthesisRequest, key: SynthesisKey, counting: Bool = true) async throws -> SpokenChunk? {
        let cache = cache
        guard let cached = try await pool.runIfActive({ try cache.lookup(key) }), Self.fits(cached, request) else { return nil }
        if counting { counters.update { $0.hits += 1 } }
        return SpokenChunk(cached)
    }

    /// The chunk from the local cache or the bucket, without a request; nil
    /// on a miss in both.
    func anywhere(_ request: SynthesisRequest, key: SynthesisKey) async throws -> SpokenChunk? {
        if let found = try await local(request, key: key) { return found }
        return try await restore(request, key: key)
    }

    /// Whether a kept chunk is audio enough for the request's text; one of
    /// an empty chunk's kind (no spoken characters) always is.
    static func fits(_ cached: CachedChunk, _ request: SynthesisRequest) -> Bool {
        var asked = request
        asked.sampleRateHz = cached.sampleRate
        return asked.shortfall(of: cached.shape) == nil
    }

    /// The chunk from the fleet's bucket, kept in the local cache and paid
    /// for by nobody; nil on a miss, a damaged object, or a bucket that
    /// cannot be reached (counted, for the summary's warning).
    private func restore(_ request: SynthesisRequest, key: SynthesisKey) async throws -> SpokenChunk? {
        guard let shared, !counters.snapshot.bucketGivenUp else { return nil }
        do {
            guard let restored = try await shared.restore(key, characters: request.chunk.characters, sampleRate: request.sampleRateHz),
                Self.fits(restored, request)
            else {
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
    func share(_ kept: CachedChunk) async {
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
}

import Foundation
package import NIOPosix
import TourpackAudio
import TourpackCore
package import TourpackHTTP

/// The synthesis cache a fleet shares: this machine's `SynthesisCache` in
/// front, an S3-compatible bucket (`ObjectStore`) behind it, so a chunk is
/// spoken once across all workers (the contract's "Beyond one machine").
///
/// Objects are named `<prefix><key>.flac`, by the chunk's `SynthesisKey`.
/// - `restore` is for a local miss: the bucket's copy, verified by the
///   store's SHA-256 and then decoded here (a FLAC that does not decode, or
///   is at another sample rate, is a miss), is kept in the local cache like
///   a chunk just spoken, but paid for by nobody.
/// - `share` is for a chunk just kept locally: it goes to the bucket with
///   `If-None-Match: *`, so the first worker's copy stays.
///
/// The build's `ChunkLookup` calls `restore` after its second local
/// lookup misses (before reserving characters), and `share` after `adopt`;
/// a store that cannot be reached is a miss there, never a failed item.
package struct SharedSynthesisCache: Sendable {
    package let local: SynthesisCache
    package let objects: ObjectStore
    /// SQLite, file and decode work runs here, never on the cooperative pool.
    package let pool: NIOThreadPool

    package init(local: SynthesisCache, objects: ObjectStore, pool: NIOThreadPool) {
        self.local = local
        self.objects = objects
        self.pool = pool
    }

    /// The object's name under the store's prefix.
    package static func objectKey(_ key: SynthesisKey) -> String { "\(key.hex).flac" }

    /// The chunk from the bucket, kept in the local cache, or nil when the
    /// bucket has no usable copy. Throws only when the store cannot be
    /// reached or refuses us, or the local cache cannot be written.
    ///
    /// A damaged object (its SHA-256 does not match, or it does not decode
    /// at the chunk's rate) is removed, so that the next share, which never
    /// overwrites, can put a good copy in its place; otherwise every new
    /// worker would pay for that chunk again.
    package func restore(_ key: SynthesisKey, characters: Int, sampleRate: Int) async throws -> CachedChunk? {
        let bytes: [UInt8]
        switch try await objects.fetch(Self.objectKey(key)) {
        case .found(let found): bytes = found
        case .missing: return nil
        case .damaged:
            try? await objects.delete(Self.objectKey(key))
            return nil
        }
        let local = local
        let restored = try await pool.runIfActive { () -> CachedChunk? in
            let temp = try local.temporaryURL(for: key)
            do {
                try Data(bytes).write(to: temp)
                // One decode measures the shape and the loudness the join needs,
                // so `adopt` does not decode the file a second time.
                var meter = ChunkMeter(rate: sampleRate)
                guard let rate = try? FLACFile.stream(temp, { try meter.add($0) }), rate == sampleRate, meter.count > 0 else {
                    AtomicFile.discard(temp: temp)
                    return nil
                }
                // A shared index keeps the sentence times the worker who paid recorded.
                var shape = meter.finish()
                // (Times that do not fit the audio are dropped as `adopt` keeps the row.)
                shape.sentenceTimes = (try? local.index.entry(key.hex))??.sentenceTimes.flatMap(SentenceTimes.decode)
                return try local.adopt(temp, for: key, shape: shape, sampleRate: rate, characters: characters, alongWith: nil)
            } catch {
                AtomicFile.discard(temp: temp)
                throw error
            }
        }
        if restored == nil { try? await objects.delete(Self.objectKey(key)) }
        return restored
    }

    /// Puts a locally kept chunk in the bucket unless a copy is there already.
    @discardableResult
    package func share(_ chunk: CachedChunk) async throws -> ObjectStore.PutOutcome {
        let url = chunk.url
        let bytes = try await pool.runIfActive { Array(try Data(contentsOf: url)) }
        return try await objects.put(Self.objectKey(chunk.key), bytes: bytes)
    }
}

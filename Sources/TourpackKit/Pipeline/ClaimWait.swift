import Foundation
import NIOPosix
import TourpackCore
import TourpackSpeech
import TourpackState

/// Makes processes that share the state (jobs on one machine, workers on
/// many) pay for a chunk once: a miss everywhere is claimed (`ChunkClaims`)
/// before a character is reserved. The claim's winner speaks the chunk; the
/// others wait, looking in the cache and the bucket between tries
/// (`ChunkLookup`), and find the winner's audio there, or win the claim in
/// their turn when the winner let go without audio.
struct ClaimWait: Sendable {
    let claims: ChunkClaims
    let lookup: ChunkLookup
    let pool: NIOThreadPool
    let counters: CacheCounters

    /// The chunk `speak` makes while this process holds the claim, or the
    /// holder's audio once it is in the cache or the bucket. The claim is let
    /// go afterwards, whether `speak` succeeded or not.
    func speakOnce(_ request: SynthesisRequest, key: SynthesisKey, speak: () async throws -> SpokenChunk) async throws -> SpokenChunk {
        let claims = claims
        if let found = try await waitForClaim(request, key: key) { return found }
        do {
            let spoken = try await speak()
            await pool.runRegardless { try? claims.release(key) }
            return spoken
        } catch {
            // Let go, so that a waiting process tries in its turn (its stale-claim rules would free it anyway).
            await pool.runRegardless { try? claims.release(key) }
            throw error
        }
    }

    /// Claims the chunk, waiting while another process holds it. Returns
    /// nil once this process holds the claim (and must speak the chunk), or
    /// the holder's audio once it is in the cache or the bucket.
    private func waitForClaim(_ request: SynthesisRequest, key: SynthesisKey) async throws -> SpokenChunk? {
        let claims = claims
        var pause = 0.05
        var waited = false
        while true {
            if try await pool.runIfActive({ try claims.claim(key) }) {
                // A holder may have kept it and let go between the last look
                // and this claim: one more look before paying.
                guard let found = try await lookup.anywhere(request, key: key) else { return nil }
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
            if let found = try await lookup.anywhere(request, key: key) { return found }
        }
    }
}

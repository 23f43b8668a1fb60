import Foundation
import NIOPosix
import Testing
import TourpackCore
import TourpackTesting

@testable import TourpackAudio
@testable import TourpackHTTP
@testable import TourpackKit
@testable import TourpackState

/// Two machines, each with its own state folder, sharing one bucket on a
/// real moto server: what one speaks, the other restores without paying.
@Suite(.offThePool) struct SharedSynthesisCacheTests {
    static let key = SynthesisKey(hex: String(repeating: "c3", count: 32))

    static func machine(_ scratch: StateScratch, store: ObjectStore, pool: NIOThreadPool) throws -> SharedSynthesisCache {
        let cache = SynthesisCache(
            database: try StateDatabase(folder: scratch.state), folder: scratch.state.appendingPathComponent("synthesis"),
            maxAgeDays: 30, clock: { Date() })
        return SharedSynthesisCache(local: cache, objects: store, pool: pool)
    }

    @Test func aChunkOneMachineKeptIsRestoredOnAnother() async throws {
        let pool = NIOThreadPool(numberOfThreads: 1)
        pool.start()
        let (first, second) = (StateScratch(), StateScratch())
        defer { first.remove(); second.remove() }
        var failure: (any Error)?
        do { try await Self.share(first, second, pool: pool) } catch { failure = error }
        try? await pool.shutdownGracefully()
        if let failure { throw failure }
    }

    static func share(_ first: StateScratch, _ second: StateScratch, pool: NIOThreadPool) async throws {
        try await MotoTestServer.with { moto in
            let store = try await moto.store()
            let a = try Self.machine(first, store: store, pool: pool)
            let b = try Self.machine(second, store: store, pool: pool)
            let pcm = PCMAudio(samples: (0..<12_000).map { Int16(6000 * sin(Double($0) / 9)) }, sampleRate: 24_000)

            try a.local.store(pcm, for: Self.key, characters: 42)
            let kept = try #require(try a.local.lookup(Self.key))
            #expect(try await a.share(kept) == .stored)
            #expect(try await b.share(kept) == .alreadyStored, "a second worker's copy is not written")

            #expect(try b.local.lookup(Self.key) == nil)
            let restored = try #require(try await b.restore(Self.key, characters: 42, sampleRate: 24_000))
            #expect(restored.shape == kept.shape)
            #expect(try b.local.load(Self.key)?.samples == pcm.samples)
            #expect(try b.local.lookup(Self.key) != nil, "restored into the local cache")

            // Unknown, at another rate, or not FLAC at all: misses, and nothing is kept.
            let other = SynthesisKey(hex: String(repeating: "d4", count: 32))
            #expect(try await b.restore(other, characters: 1, sampleRate: 24_000) == nil)
            let fresh = StateScratch()
            defer { fresh.remove() }
            let c = try Self.machine(fresh, store: store, pool: pool)
            #expect(try await c.restore(Self.key, characters: 42, sampleRate: 16_000) == nil)
            try await store.put(SharedSynthesisCache.objectKey(other), bytes: Array("not a flac file".utf8))
            #expect(try await c.restore(other, characters: 1, sampleRate: 24_000) == nil)
            #expect(try c.local.totals().entries == 0)
        }
    }
}

import Foundation
import Testing
import TourpackTesting

@testable import TourpackCore
@testable import TourpackKit
@testable import TourpackState

/// Chunk claims on both backends: one process speaks a chunk that several
/// want, a dead or silent holder's claim is taken over, and of two
/// processes judging the same stale claim only one wins it.
@Suite(.offThePool) struct ChunkClaimTests {
    static let key = SynthesisKey(hex: String(repeating: "ab", count: 32))
    /// A process on another machine: it cannot be checked, only timed out.
    static let elsewhere = "worker-7/pid:[4026531836]/boot:0d5c4f3e-1111-2222-3333-444455556666:41:123456"

    static func claims(_ fixture: StateFixture, clock: ManualClock, owner: String = ProcessOwner.current.description) throws -> ChunkClaims
    {
        ChunkClaims(store: try fixture.open().synthesisClaims, owner: owner, clock: clock.date)
    }

    @Test(arguments: Backend.allCases) func theFirstClaimWinsAndTheNextWinsOnlyOnceItIsLetGo(backend: Backend) throws {
        let fixture = try StateFixture(backend)
        defer { fixture.remove() }
        let clock = ManualClock()
        let mine = try Self.claims(fixture, clock: clock)
        let theirs = try Self.claims(fixture, clock: clock, owner: Self.elsewhere)
        #expect(try theirs.claim(Self.key))
        #expect(try !mine.claim(Self.key), "a live holder keeps its claim")
        // Letting go of a claim one does not hold changes nothing.
        try mine.release(Self.key)
        #expect(try !mine.claim(Self.key))
        try theirs.release(Self.key)
        #expect(try mine.claim(Self.key))
        #expect(try !theirs.claim(Self.key))
        // A claim is per chunk.
        #expect(try theirs.claim(SynthesisKey(hex: String(repeating: "cd", count: 32))))
    }

    /// A holder that ran on this host and is gone (its PID now belongs to a
    /// process started at another time) frees its claims at once.
    @Test(arguments: Backend.allCases) func aDeadHolderOnThisHostIsTakenOverAtOnce(backend: Backend) throws {
        let fixture = try StateFixture(backend)
        defer { fixture.remove() }
        let clock = ManualClock()
        let me = ProcessOwner.current
        let dead = ProcessOwner(host: me.host, pid: me.pid, startTicks: me.startTicks + 1)
        #expect(try Self.claims(fixture, clock: clock, owner: dead.description).claim(Self.key))
        #expect(try Self.claims(fixture, clock: clock).claim(Self.key))
        #expect(try !Self.claims(fixture, clock: clock, owner: dead.description).claim(Self.key))
    }

    /// A holder on another machine is judged by its heartbeat: it keeps the
    /// claim while it beats, and loses it after `staleAfter` of silence.
    @Test(arguments: Backend.allCases) func aHolderElsewhereKeepsItsClaimWhileItBeatsAndLosesItAfterwards(backend: Backend) throws {
        let fixture = try StateFixture(backend)
        defer { fixture.remove() }
        let clock = ManualClock()
        let theirs = try Self.claims(fixture, clock: clock, owner: Self.elsewhere)
        let mine = try Self.claims(fixture, clock: clock)
        #expect(try theirs.claim(Self.key))
        for _ in 0..<4 {
            clock.advance(seconds: theirs.heartbeatSeconds)
            try theirs.heartbeat()
            #expect(try !mine.claim(Self.key), "a holder that beats keeps its claim")
        }
        clock.advance(seconds: mine.staleAfter - 1)
        #expect(try !mine.claim(Self.key))
        clock.advance(seconds: 2)
        #expect(try mine.claim(Self.key), "silent for longer than staleAfter")
        // The old holder's late release does not free the new holder's claim.
        try theirs.release(Self.key)
        #expect(try !theirs.claim(Self.key))
    }

    /// Four processes want one chunk at once, many times over: each time
    /// exactly one wins, including when what they find is a stale claim
    /// that each of them judges gone (the compare-and-swap).
    @Test(arguments: Backend.allCases) func manyClaimingOneChunkAtOnceLetExactlyOneWin(backend: Backend) throws {
        let fixture = try StateFixture(backend)
        defer { fixture.remove() }
        let clock = ManualClock()
        let contenders = try (0..<4).map { index in
            try Self.claims(fixture, clock: clock, owner: "worker-\(index)/pid:[1]/boot:b:\(100 + index):1")
        }
        let rounds = 25
        let barrier = Barrier(contenders.count)
        let wins = LockedCounts([Int](repeating: 0, count: rounds))
        let failures = LockedCounts([String]())
        onThreads(contenders.count) { index in
            for round in 0..<rounds {
                let key = SynthesisKey(hex: String(format: "%064x", round))
                barrier.wait()
                do {
                    if try contenders[index].claim(key) { wins.update { $0[round] += 1 } }
                } catch {
                    failures.update { $0.append("\(error)") }
                }
            }
        }
        #expect(failures.snapshot.isEmpty, "\(failures.snapshot.prefix(3))")
        #expect(wins.snapshot == [Int](repeating: 1, count: rounds), "fresh chunks: one winner each")

        // Every claim now held by a silent holder: all four judge it stale at once.
        clock.advance(seconds: contenders[0].staleAfter + 1)
        let takeovers = LockedCounts([Int](repeating: 0, count: rounds))
        onThreads(contenders.count) { index in
            for round in 0..<rounds {
                let key = SynthesisKey(hex: String(format: "%064x", round))
                barrier.wait()
                do {
                    if try contenders[(index + 1) % contenders.count].claim(key) { takeovers.update { $0[round] += 1 } }
                } catch {
                    failures.update { $0.append("\(error)") }
                }
            }
        }
        #expect(failures.snapshot.isEmpty, "\(failures.snapshot.prefix(3))")
        #expect(takeovers.snapshot == [Int](repeating: 1, count: rounds), "stale chunks: one winner each")
    }

    /// PostgreSQL's per-tour publishing lock: publishers of one tour take
    /// turns, publishers of other tours do not wait, and a publish that
    /// throws lets go. (SQLite serves one machine, where the root's flock
    /// keeps publishers apart, and runs the body as it is.)
    @Test func publishersOfOneTourTakeTurnsOnPostgres() throws {
        let fixture = try StateFixture(.postgres)
        defer { fixture.remove() }
        let backends = try (0..<4).map { _ in try fixture.open() }
        let inside = LockedCounts((now: 0, most: 0, total: 0))
        onThreads(backends.count) { index in
            for _ in 0..<10 {
                try? backends[index].publishing(tour: "alps", into: "/output/Documents") {
                    inside.update {
                        $0.now += 1
                        $0.most = max($0.most, $0.now)
                    }
                    Thread.sleep(forTimeInterval: 0.002)
                    inside.update {
                        $0.now -= 1
                        $0.total += 1
                    }
                }
            }
        }
        #expect(inside.snapshot.total == 40)
        #expect(inside.snapshot.most == 1, "two workers published one tour at once")

        // Another tour, or the same tour in another root, is another lock:
        // taken while "alps" in /output/Documents is held.
        let holder = backends[0]
        let other = backends[1]
        let reached = try holder.publishing(tour: "alps", into: "/output/Documents") {
            try other.publishing(tour: "lakes", into: "/output/Documents") {
                try other.publishing(tour: "alps", into: "/elsewhere/Documents") { true }
            }
        }
        #expect(reached)

        struct Refused: Error {}
        #expect(throws: Refused.self) { try holder.publishing(tour: "alps", into: "/output/Documents") { throw Refused() } }
        // Let go after the throw: another connection takes it without waiting forever.
        let taken = LockedCounts(false)
        onThreads(1) { _ in _ = try? other.publishing(tour: "alps", into: "/output/Documents") { taken.update { $0 = true } } }
        #expect(taken.snapshot)
    }
}

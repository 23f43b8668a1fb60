package import Foundation

/// One process's hold on a chunk it is speaking.
package struct ChunkClaim: Sendable, Hashable {
    /// `ProcessOwner.description`.
    package var owner: String
    /// When the holder last said it is still at work: when it claimed the
    /// chunk, or its latest heartbeat.
    package var heartbeatAt: Double

    package init(owner: String, heartbeatAt: Double) {
        self.owner = owner
        self.heartbeatAt = heartbeatAt
    }
}

/// What a claim came to.
package enum ClaimOutcome: Sendable, Hashable {
    case won
    /// Another process holds it (nil: it was let go between the two looks; try again).
    case held(ChunkClaim?)
}

/// The claims' rows. The policy (whose claim is stale) is `ChunkClaims`'.
package protocol SynthesisClaimStore: Sendable {
    var location: StateLocation { get }
    /// Claims `key` for `owner` when nobody holds it, or when `holder` still
    /// holds it exactly as given (owner and heartbeat): the compare-and-swap
    /// that takes over a stale claim, so that two processes judging the same
    /// stale claim cannot both win it.
    func claim(_ key: String, owner: String, at time: Double, replacing holder: ChunkClaim?) throws -> ClaimOutcome
    /// Every claim of `owner` is still at work.
    func heartbeat(owner: String, at time: Double) throws
    /// Lets go of `owner`'s claim on `key`, if it still holds it.
    func release(_ key: String, owner: String) throws
}

/// Which process speaks a chunk that several want at once, so that every
/// process sharing the state (jobs on one machine over SQLite, workers on
/// many over PostgreSQL) pays for each chunk once.
///
/// A process that misses a chunk everywhere (its cache, the fleet's bucket)
/// claims it before reserving a character. The winner speaks it, keeps it
/// (the index row, and the bucket when there is one) and lets go; the others
/// wait, looking in the cache and the bucket between tries, and find its
/// audio there. Whoever wins after a holder let go without audio (a refused
/// request, a full month) tries in its turn.
///
/// A holder may die. Its claim is taken over when it is provably gone (it
/// ran on this host and its PID is free, `ProcessOwner.mightBeAlive`), or
/// when it has not beaten for `staleAfter` seconds: each process holding
/// claims refreshes them every `heartbeatSeconds` from a thread of its own
/// (`ClaimHeartbeat`), so a live holder keeps a claim however long its
/// request waits in its queue, and a dead machine's claims free themselves
/// within two minutes.
///
/// Blocking (the backend); call it from a thread pool.
package struct ChunkClaims: Sendable {
    package let store: any SynthesisClaimStore
    package let owner: String
    package let clock: @Sendable () -> Date
    /// Silence after which a holder on another host counts as gone.
    package var staleAfter: TimeInterval = 120
    /// How often a process refreshes its claims: a quarter of `staleAfter`.
    package var heartbeatSeconds: TimeInterval { staleAfter / 4 }

    package init(store: any SynthesisClaimStore, owner: String = ProcessOwner.current.description, clock: @escaping @Sendable () -> Date) {
        self.store = store
        self.owner = owner
        self.clock = clock
    }

    /// Claims `key`; true when this process now holds it, false when a live
    /// holder does. A stale claim is taken over.
    package func claim(_ key: SynthesisKey) throws -> Bool {
        // Each turn either wins, finds a live holder, or lost a race that
        // changed the row: a few turns settle it.
        for _ in 0..<4 {
            let now = clock().timeIntervalSince1970
            switch try store.claim(key.hex, owner: owner, at: now, replacing: nil) {
            case .won:
                return true
            case .held(nil):
                continue
            case .held(let holder?):
                guard isGone(holder, now: now) else { return false }
                if try store.claim(key.hex, owner: owner, at: now, replacing: holder) == .won { return true }
            }
        }
        return false
    }

    /// Whether `holder` has stopped working on its chunk. Our own claim
    /// (left by a request of this process that is over) is ours to take.
    func isGone(_ holder: ChunkClaim, now: Double) -> Bool {
        if holder.owner == owner { return true }
        if let process = ProcessOwner(holder.owner), !process.mightBeAlive { return true }
        return now - holder.heartbeatAt > staleAfter
    }

    package func release(_ key: SynthesisKey) throws {
        try store.release(key.hex, owner: owner)
    }

    package func heartbeat() throws {
        try store.heartbeat(owner: owner, at: clock().timeIntervalSince1970)
    }
}

/// Refreshes a process's claims every `ChunkClaims.heartbeatSeconds` on a
/// thread of its own, so that a build whose thread pool is busy encoding
/// still beats. A beat that fails is tried at the next one: a holder that
/// cannot reach the backend for two minutes loses its claims, and the worst
/// outcome is that another worker pays for the same chunk.
package final class ClaimHeartbeat: @unchecked Sendable {
    private let claims: ChunkClaims
    private let condition = NSCondition()
    private var stopped = false
    private var thread: Thread?

    package init(_ claims: ChunkClaims) {
        self.claims = claims
    }

    package func start() {
        let thread = Thread { [self] in beat() }
        thread.name = "tourpack claim heartbeat"
        self.thread = thread
        thread.start()
    }

    private func beat() {
        condition.lock()
        defer { condition.unlock() }
        while !stopped {
            _ = condition.wait(until: Date().addingTimeInterval(claims.heartbeatSeconds))
            guard !stopped else { return }
            condition.unlock()
            try? claims.heartbeat()
            condition.lock()
        }
    }

    /// Stops beating; returns at once (a beat in progress finishes on its own).
    package func stop() {
        condition.lock()
        stopped = true
        condition.signal()
        condition.unlock()
    }

    deinit { stop() }
}

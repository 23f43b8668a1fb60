import Crypto
import Foundation
import TourpackCore

/// What `serve-tts` has served: `GET /debug/stats` returns it as JSON.
///
/// Tests read it to prove things the client cannot see for itself: how many
/// requests arrived (an incremental build must cause 0), the most that were
/// in flight at once (the client's concurrency cap), which faults fired,
/// and whether any text was asked for twice (a fleet of workers must speak
/// each chunk once).
package struct ServerStatsSnapshot: Sendable, Hashable, Codable {
    /// Every HTTP request, any path.
    package var totalRequests = 0
    /// Requests to `text:synthesize` and `audio/speech`.
    package var synthesizeRequests = 0
    /// Billed units in synthesize requests answered 200 (injected truncation
    /// and garbage included), in each provider's unit: characters, Polly's
    /// billed characters (no SSML tags), ElevenLabs' credits.
    package var characters = 0
    /// Synthesize requests being handled right now.
    package var inFlight = 0
    /// The most synthesize requests ever handled at once.
    package var maxInFlight = 0
    /// Faults injected, by kind (`failure`, `rateLimited`, `truncated`, `garbage`, `stalled`).
    package var faultsInjected: [String: Int] = [:]
    /// Answers by HTTP status, as strings ("200", "400").
    package var responsesByStatus: [String: Int] = [:]
    /// Different input texts (`input.text`, `input.ssml` or `input`) among
    /// the synthesize requests whose body named one, told apart by SHA-256.
    package var distinctTexts = 0
    /// Synthesize requests whose text an earlier request had already sent:
    /// a retry, or one chunk paid for twice. Counted whatever the answer.
    package var repeatedRequests = 0
    /// Synthesize requests whose text was new once `ServerStats.textMemory`
    /// texts were remembered: neither distinct nor repeated, since the
    /// server no longer remembers every text. 0 in any test-sized run.
    package var untrackedTexts = 0
    /// ElevenLabs requests that carried `previous_text` or `next_text`.
    package var requestsWithNeighbourText = 0

    package init() {}

    /// All faults injected, every kind together.
    package var totalFaults: Int { faultsInjected.values.reduce(0, +) }
}

/// The live counters; shared by the routes and the access-log middleware.
package final class ServerStats: Sendable {
    /// The counters, and the texts seen so far: under one lock, so a
    /// snapshot's `distinctTexts` and `repeatedRequests` agree with its
    /// `synthesizeRequests`.
    private struct State: Sendable {
        var snapshot = ServerStatsSnapshot()
        var texts: Set<TextDigest> = []
    }

    /// The first 16 bytes of a text's SHA-256: 16 bytes per text remembered
    /// (plus the set's overhead), with no collision in any run this server sees.
    private struct TextDigest: Hashable, Sendable {
        var high: UInt64
        var low: UInt64

        init(_ text: String) {
            let digest = Array(SHA256.hash(data: Array(text.utf8)))
            high = digest[0..<8].reduce(0) { $0 << 8 | UInt64($1) }
            low = digest[8..<16].reduce(0) { $0 << 8 | UInt64($1) }
        }
    }

    /// Texts remembered at most, so a long-running server (a bench, `make
    /// tour`) keeps its memory bounded: about 5 MB when full.
    package static let textMemory = 100_000

    private let counts = LockedCounts(State())

    package init() {}

    /// The counters now, consistent with each other.
    package var snapshot: ServerStatsSnapshot { counts.snapshot.snapshot }

    /// Zeroes every counter except the requests in flight now, and forgets every text.
    package func reset() {
        counts.update { state in
            let inFlight = state.snapshot.inFlight
            state = State()
            state.snapshot.inFlight = inFlight
            state.snapshot.maxInFlight = inFlight
        }
    }

    func update(_ change: (inout ServerStatsSnapshot) -> Void) {
        counts.update { change(&$0.snapshot) }
    }

    func synthesizeBegan() {
        update {
            $0.synthesizeRequests += 1
            $0.inFlight += 1
            $0.maxInFlight = max($0.maxInFlight, $0.inFlight)
        }
    }

    func synthesizeEnded() { update { $0.inFlight -= 1 } }

    /// A synthesize request named `text`: new, or a repeat of an earlier one.
    func textArrived(_ text: String) {
        let digest = TextDigest(text)
        counts.update { state in
            if state.texts.contains(digest) {
                state.snapshot.repeatedRequests += 1
            } else if state.texts.count < Self.textMemory {
                state.texts.insert(digest)
                state.snapshot.distinctTexts += 1
            } else {
                state.snapshot.untrackedTexts += 1
            }
        }
    }
}

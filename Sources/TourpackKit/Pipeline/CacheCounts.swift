import TourpackCore

/// Hits and misses of one build's synthesis cache, and what the fleet's
/// bucket and the claims did: the figures and warnings of the build's
/// summary, and the failures in a row that trip the bucket's circuit breaker.
struct CacheCounts: Sendable, Hashable {
    var hits = 0
    var misses = 0
    /// Characters settled in the ledger.
    var billedCharacters = 0
    var storeFailures = 0
    /// The first cache file that could not be kept, and why: for the warning.
    var firstStoreFailure: String?
    /// Chunks restored from the fleet's bucket (`state.objects`): no request, no characters.
    var restored = 0
    /// Chunks this build put into the bucket (not those another worker had put first).
    var shared = 0
    /// Restores and shares that failed on the bucket's side, and the first one's message.
    var sharedFailures = 0
    var firstSharedFailure: String?
    /// Chunks another process held a claim on when this build wanted them.
    var claimWaits = 0
    /// Bucket failures since its last success; at `bucketFailuresToGiveUp` the build stops asking it.
    var failuresInARow = 0
    var bucketGivenUp: Bool { failuresInARow >= Self.bucketFailuresToGiveUp }

    /// Failures in a row after which a build stops using the bucket.
    static let bucketFailuresToGiveUp = 3

    mutating func noteSharedFailure(_ message: String) {
        sharedFailures += 1
        failuresInARow += 1
        if firstSharedFailure == nil { firstSharedFailure = message }
    }
}

/// The live `CacheCounts` of one build, shared by the synthesizer's parts.
typealias CacheCounters = LockedCounts<CacheCounts>

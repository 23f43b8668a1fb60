import Crypto
package import Foundation
package import TourpackCore
import TourpackHTTP

/// A TTS account as the ledger knows it: the endpoint plus a fingerprint of
/// the API key. The key itself is never stored, logged or printed; the
/// fingerprint is the first 16 hex digits of a salted SHA-256, enough to
/// tell two keys apart and useless for recovering one.
package struct QuotaAccount: Sendable, Hashable, CustomStringConvertible {
    /// `endpoint#fingerprint`, or `endpoint#no-key`.
    package let id: String

    package init(endpoint: String, apiKey: String?) {
        let base = Secret.redacting(url: endpoint)
        guard let apiKey, !apiKey.isEmpty else {
            id = "\(base)#no-key"
            return
        }
        let digest = SHA256.hash(data: Data("tourpack quota account\n\(apiKey)".utf8))
        id = "\(base)#" + digest.prefix(8).lowercaseHex
    }

    /// The account of the endpoint and the key the pipeline's loader read.
    /// A provider that signs with a key pair (Polly) is its access key ID's.
    package init(settings: TTSSettings) {
        let key = settings.api.provider.credentials == .apiKey ? settings.apiKey : settings.accessKey
        self.init(endpoint: settings.endpoint, apiKey: key?.value)
    }

    package var description: String { id }
}

/// One tier's month, as `tourpack quota` and `plan` show it.
package struct TierUsage: Sendable, Hashable, Codable {
    package var tier: PricingTier
    /// Characters settled this month.
    package var used: Int
    /// Characters reserved by requests in flight (this job's or another's).
    package var reserved: Int
    /// nil: unlimited.
    package var limit: Int?

    package init(tier: PricingTier, used: Int, reserved: Int, limit: Int?) {
        self.tier = tier
        self.used = used
        self.reserved = reserved
        self.limit = limit
    }

    /// What is left for new reservations; nil when unlimited.
    package var left: Int? { limit.map { max(0, $0 - used - reserved) } }
}

/// The monthly character-quota ledger of one account, shared through the
/// state's backend by every job that uses the same state: one SQLite file
/// on one machine, or one PostgreSQL database for workers on many.
///
/// A request is paid for in two steps. `reserve` records the reservation in
/// one transaction only if the month's settled and reserved characters plus
/// these stay within the tier's limit; no other job can write in between,
/// so N jobs together never pass the limit (`LedgerStore.reserve` says how
/// each backend keeps that promise). When the audio arrives, `settle` moves
/// the reservation into the month's `used` in one transaction. A request
/// that ends without audio (refused, unreachable, cancelled) is `release`d:
/// the providers bill only what they synthesize.
///
/// A crash leaves its reservations behind; `reconcile` (run at the start of
/// every build and by `tourpack quota`) releases a reservation once it is
/// stale: its owner ran on this host (same host name, PID namespace and
/// boot) and is gone (`ProcessOwner`), or its owner cannot be checked
/// (another host) and it is older than `staleAfter` (an hour by default, far
/// past any request's time limit with all its retries). A live owner on
/// this host keeps its reservations. A reservation is marked sent just
/// before its request goes out, and raised before each retry by what the
/// answers so far were billed, so a crash settles at least what the
/// endpoint billed: it may over-count (a request that never arrived), never
/// under-count.
///
/// Months are calendar months in UTC (`2026-11`), taken from the injected
/// clock at reservation time. The `local` tier, and any tier without a
/// configured limit, is counted but never refused.
package struct QuotaLedger: Sendable {
    package struct Reservation: Sendable, Hashable {
        package let id: Int64
        package let characters: Int
        let month: String
        let tier: PricingTier
    }

    package let store: any LedgerStore
    package let account: QuotaAccount
    package let limits: [PricingTier: Int]
    package var staleAfter: TimeInterval = 3600
    package var owner: ProcessOwner = .current
    package var clock: @Sendable () -> Date

    package init(store: any LedgerStore, account: QuotaAccount, budgets: Budgets, clock: @escaping @Sendable () -> Date = { Date() }) {
        self.store = store
        self.account = account
        var limits: [PricingTier: Int] = [:]
        for tier in PricingTier.allCases { limits[tier] = budgets.monthlyQuota(for: tier) }
        self.limits = limits
        self.clock = clock
    }

    /// The ledger in a SQLite state database.
    package init(database: StateDatabase, account: QuotaAccount, budgets: Budgets, clock: @escaping @Sendable () -> Date = { Date() }) {
        self.init(store: database.ledger, account: account, budgets: budgets, clock: clock)
    }

    /// `yyyy-MM` in UTC. Through `gmtime_r`: a `Calendar` with a time zone
    /// and `String(format:)` cost more than the rest of a reservation.
    package static func month(of date: Date) -> String {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        guard gmtime_r(&seconds, &parts) != nil else { return "0000-00" }
        let (year, month) = (String(Int(parts.tm_year) + 1900), String(Int(parts.tm_mon) + 1))
        return String(repeating: "0", count: max(0, 4 - year.count)) + year + "-" + (month.count < 2 ? "0" : "") + month
    }

    package var currentMonth: String { Self.month(of: clock()) }

    private func slot(_ month: String, _ tier: PricingTier) -> QuotaSlot {
        QuotaSlot(account: account.id, month: month, tier: tier.rawValue)
    }

    /// Reserves `characters` in `tier` for one request, or refuses with
    /// `budgetExceeded` naming the numbers when the month cannot take them.
    package func reserve(_ characters: Int, tier: PricingTier) throws -> Reservation {
        let month = currentMonth
        let now = clock().timeIntervalSince1970
        let limit = limits[tier]
        switch try store.reserve(characters, in: slot(month, tier), limit: limit, owner: owner.description, at: now) {
        case .granted(let id):
            return Reservation(id: id, characters: characters, month: month, tier: tier)
        case .refused(let used, let reserved):
            throw TourpackError.budgetExceeded(
                "the \(tier.rawValue) tier's monthly quota (\(month)) cannot take \(characters.groupedText) more characters: "
                    + "\(used.groupedText) used + \(reserved.groupedText) reserved of \((limit ?? 0).groupedText)")
        }
    }

    /// The endpoint answered: the reservation becomes used characters.
    /// - Parameter characters: what was billed, when it differs from what was
    ///   reserved (an answer retried because its body was cut short is billed twice).
    package func settle(_ reservation: Reservation, characters: Int? = nil) throws {
        try store.settle(settlement(of: reservation, characters: characters))
    }

    /// What `settle` records, for the synthesis index to record inside its
    /// own transaction (the cache keeps the audio and the ledger counts it at once).
    package func settlement(of reservation: Reservation, characters: Int? = nil) -> LedgerSettlement {
        LedgerSettlement(
            id: reservation.id, slot: slot(reservation.month, reservation.tier), characters: characters ?? reservation.characters)
    }

    /// The request ended without audio: nothing was billed.
    package func release(_ reservation: Reservation) throws {
        try store.release(reservation.id)
    }

    /// Marks a reservation as sent: its request is going out, so from now
    /// on the endpoint may bill it. A crash after this point settles it (see
    /// `reconcile`), which can over-count a request that never arrived but
    /// never under-counts one that was billed.
    package func markSent(_ reservation: Reservation) throws {
        try store.markSent(reservation.id, at: clock().timeIntervalSince1970)
    }

    /// Raises a sent reservation to `characters`: its request is about to be
    /// tried again after answers that were billed (cut short, undecodable),
    /// so a crash from here on settles what those cost as well as the retry.
    /// Never lowers it; the month's limit does not apply to what is billed already.
    package func raise(_ reservation: Reservation, to characters: Int) throws {
        try store.raise(reservation.id, to: characters)
    }

    /// What `reconcile` did with the reservations of owners that are gone.
    package struct Reconciliation: Sendable, Hashable {
        /// Never sent: released, nothing was billed.
        package var released = 0
        package var releasedCharacters = 0
        /// Sent: settled in full, since the endpoint may have billed them.
        package var settled = 0
        package var settledCharacters = 0
    }

    /// Closes the reservations of every account whose owner is gone: a
    /// process of this host that no longer runs, or (unknowable from here) one
    /// older than `staleAfter`. A reservation whose request was never sent
    /// is released; one that was sent is settled for its characters, because
    /// the endpoint may have answered and billed it before the owner died.
    @discardableResult
    package func reconcile() throws -> Reconciliation {
        let cutoff = clock().timeIntervalSince1970 - staleAfter
        return try store.reconcile { reservation in
            // Gone for sure: close now. Cannot be checked (another host):
            // close once too old. Alive here: never, however old.
            let owner = ProcessOwner(reservation.owner)
            let gone = owner.map { !$0.mightBeAlive } ?? true
            let unknowable = owner.map { !$0.isCheckable } ?? false
            return gone || (unknowable && reservation.createdAt < cutoff)
        }
    }

    /// This month's usage of one tier.
    package func usage(of tier: PricingTier) throws -> TierUsage {
        let usage = try store.usage(in: slot(currentMonth, tier))
        return TierUsage(tier: tier, used: usage.used, reserved: usage.reserved, limit: limits[tier])
    }

    /// This month's usage of every tier: the limited ones, then any other with characters on record.
    package func usageByTier() throws -> [TierUsage] {
        try PricingTier.allCases.map { try usage(of: $0) }
            .filter { $0.limit != nil || $0.used > 0 || $0.reserved > 0 }
    }
}

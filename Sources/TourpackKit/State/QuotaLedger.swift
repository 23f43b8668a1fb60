import Crypto
public import Foundation
import GRDB

/// A TTS account as the ledger knows it: the endpoint plus a fingerprint of
/// the API key. The key itself is never stored, logged or printed; the
/// fingerprint is the first 16 hex digits of a salted SHA-256, enough to
/// tell two keys apart and useless for recovering one.
public struct QuotaAccount: Sendable, Hashable, CustomStringConvertible {
    /// `endpoint#fingerprint`, or `endpoint#no-key`.
    public let id: String

    public init(endpoint: String, apiKey: String?) {
        let base = HTTPRequestSpec.redactedURL(endpoint)
        guard let apiKey, !apiKey.isEmpty else {
            id = "\(base)#no-key"
            return
        }
        let digest = SHA256.hash(data: Data("tourpack quota account\n\(apiKey)".utf8))
        id = "\(base)#" + digest.prefix(8).map { String(format: "%02x", $0) }.joined()
    }

    /// The account of a pipeline's endpoint, with the key from the variable it names.
    /// The account of the endpoint and the key the pipeline's loader read.
    public init(settings: TTSSettings) {
        self.init(endpoint: settings.endpoint, apiKey: settings.apiKey?.value)
    }

    public var description: String { id }
}

/// One tier's month, as `tourpack quota` and `plan` show it.
public struct TierUsage: Sendable, Hashable, Codable {
    public var tier: PricingTier
    /// Characters settled this month.
    public var used: Int
    /// Characters reserved by requests in flight (this job's or another's).
    public var reserved: Int
    /// nil: unlimited.
    public var limit: Int?

    public init(tier: PricingTier, used: Int, reserved: Int, limit: Int?) {
        self.tier = tier
        self.used = used
        self.reserved = reserved
        self.limit = limit
    }

    /// What is left for new reservations; nil when unlimited.
    public var left: Int? { limit.map { max(0, $0 - used - reserved) } }
}

/// The monthly character-quota ledger of one account, shared through the
/// state database by every job that uses the same state folder.
///
/// A request is paid for in two steps. `reserve` runs one IMMEDIATE
/// transaction that reads the month's settled and reserved characters and
/// inserts the reservation only if the sum stays within the tier's limit; no
/// other job can write in between, so two jobs together never pass the limit.
/// When the audio arrives, `settle` moves the reservation into the month's
/// `used` in one transaction. A request that ends without audio (refused,
/// unreachable, cancelled) is `release`d: the providers bill only what they
/// synthesize.
///
/// A crash leaves its reservations behind; `reconcile` (run at the start of
/// every build and by `tourpack quota`) releases a reservation once it is
/// stale: its owner ran on this host and is gone (`ProcessOwner`), or its
/// owner cannot be checked (another host) and it is older than `staleAfter`
/// (an hour by default, far past any request's time limit with all its
/// retries). A live owner on this host keeps its reservations. A chunk
/// whose audio came back in the instant between the server answering and the
/// settle is therefore not counted; that is at most `tts.concurrency` chunks
/// per crash, and the README says so.
///
/// Months are calendar months in UTC (`2026-11`), taken from the injected
/// clock at reservation time. The `local` tier, and any tier without a
/// configured limit, is counted but never refused.
public struct QuotaLedger: Sendable {
    public struct Reservation: Sendable, Hashable {
        public let id: Int64
        public let characters: Int
        let month: String
        let tier: PricingTier
    }

    public let database: StateDatabase
    public let account: QuotaAccount
    public let limits: [PricingTier: Int]
    public var staleAfter: TimeInterval = 3600
    public var owner: ProcessOwner = .current
    public var clock: @Sendable () -> Date

    public init(database: StateDatabase, account: QuotaAccount, budgets: Budgets, clock: @escaping @Sendable () -> Date = { Date() }) {
        self.database = database
        self.account = account
        var limits: [PricingTier: Int] = [:]
        for tier in PricingTier.allCases { limits[tier] = budgets.monthlyQuota(for: tier) }
        self.limits = limits
        self.clock = clock
    }

    /// `yyyy-MM` in UTC.
    public static func month(of date: Date) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let parts = calendar.dateComponents([.year, .month], from: date)
        return String(format: "%04d-%02d", parts.year ?? 0, parts.month ?? 0)
    }

    public var currentMonth: String { Self.month(of: clock()) }

    /// Reserves `characters` in `tier` for one request, or refuses with
    /// `budgetExceeded` naming the numbers when the month cannot take them.
    public func reserve(_ characters: Int, tier: PricingTier) throws -> Reservation {
        let month = currentMonth
        let now = clock().timeIntervalSince1970
        return try database.write { db in
            let usage = try Self.usage(db, account: account.id, month: month, tier: tier, limit: limits[tier])
            if let limit = usage.limit, usage.used + usage.reserved + characters > limit {
                throw TourpackError.budgetExceeded(
                    "the \(tier.rawValue) tier's monthly quota (\(month)) cannot take \(characters.groupedText) more characters: "
                        + "\(usage.used.groupedText) used + \(usage.reserved.groupedText) reserved of \(limit.groupedText)")
            }
            try db.execute(
                sql: "INSERT INTO quotaReservation (account, month, tier, characters, owner, createdAt) VALUES (?, ?, ?, ?, ?, ?)",
                arguments: [account.id, month, tier.rawValue, characters, owner.description, now])
            return Reservation(id: db.lastInsertedRowID, characters: characters, month: month, tier: tier)
        }
    }

    /// The endpoint answered: the reservation becomes used characters.
    /// - Parameter characters: what was billed, when it differs from what was
    ///   reserved (an answer retried because its body was cut short is billed twice).
    public func settle(_ reservation: Reservation, characters: Int? = nil) throws {
        try database.write(settlement(of: reservation, characters: characters))
    }

    /// The statements of `settle`, to run inside another write transaction
    /// (the synthesis cache keeps the audio in the same one).
    func settlement(of reservation: Reservation, characters: Int? = nil) -> (Database) throws -> Void {
        let account = account
        let billed = characters ?? reservation.characters
        return { db in
            try db.execute(sql: "DELETE FROM quotaReservation WHERE id = ?", arguments: [reservation.id])
            // A reservation that reconcile already released (its owner looked
            // dead or it was too old) is still settled: the audio did come back.
            try db.execute(
                sql: """
                    INSERT INTO quotaUsage (account, month, tier, used) VALUES (?, ?, ?, ?)
                    ON CONFLICT (account, month, tier) DO UPDATE SET used = used + excluded.used
                    """,
                arguments: [account.id, reservation.month, reservation.tier.rawValue, billed])
        }
    }

    /// The request ended without audio: nothing was billed.
    public func release(_ reservation: Reservation) throws {
        try database.write { db in
            try db.execute(sql: "DELETE FROM quotaReservation WHERE id = ?", arguments: [reservation.id])
        }
    }

    /// Marks a reservation as sent: its request is going out, so from now
    /// on the endpoint may bill it. A crash after this point settles it (see
    /// `reconcile`), which can over-count a request that never arrived but
    /// never under-counts one that was billed.
    public func markSent(_ reservation: Reservation) throws {
        let now = clock().timeIntervalSince1970
        try database.write { db in
            try db.execute(sql: "UPDATE quotaReservation SET sentAt = ? WHERE id = ? AND sentAt IS NULL", arguments: [now, reservation.id])
        }
    }

    /// What `reconcile` did with the reservations of owners that are gone.
    public struct Reconciliation: Sendable, Hashable {
        /// Never sent: released, nothing was billed.
        public var released = 0
        public var releasedCharacters = 0
        /// Sent: settled in full, since the endpoint may have billed them.
        public var settled = 0
        public var settledCharacters = 0
    }

    /// Closes the reservations of every account whose owner is gone: a
    /// process of this host that no longer runs, or (unknowable from here) one
    /// older than `staleAfter`. A reservation whose request was never sent
    /// is released; one that was sent is settled for its characters, because
    /// the endpoint may have answered and billed it before the owner died.
    @discardableResult
    public func reconcile() throws -> Reconciliation {
        let cutoff = clock().timeIntervalSince1970 - staleAfter
        return try database.write { db in
            let rows = try Row.fetchAll(db, sql: "SELECT id, account, month, tier, characters, owner, createdAt, sentAt FROM quotaReservation")
            var result = Reconciliation()
            for row in rows {
                let createdAt: Double = row["createdAt"]
                let ownerText: String = row["owner"]
                // Gone for sure: close now. Cannot be checked (another host):
                // close once too old. Alive here: never, however old.
                let owner = ProcessOwner(ownerText)
                let gone = owner.map { !$0.mightBeAlive } ?? true
                let unknowable = owner.map { !$0.isCheckable } ?? false
                guard gone || (unknowable && createdAt < cutoff) else { continue }
                let id: Int64 = row["id"]
                let characters: Int = row["characters"]
                try db.execute(sql: "DELETE FROM quotaReservation WHERE id = ?", arguments: [id])
                if (row["sentAt"] as Double?) != nil {
                    try db.execute(
                        sql: """
                            INSERT INTO quotaUsage (account, month, tier, used) VALUES (?, ?, ?, ?)
                            ON CONFLICT (account, month, tier) DO UPDATE SET used = used + excluded.used
                            """,
                        arguments: [row["account"] as String, row["month"] as String, row["tier"] as String, characters])
                    result.settled += 1
                    result.settledCharacters += characters
                } else {
                    result.released += 1
                    result.releasedCharacters += characters
                }
            }
            return result
        }
    }


    /// This month's usage of one tier.
    public func usage(of tier: PricingTier) throws -> TierUsage {
        let month = currentMonth
        return try database.read { db in try Self.usage(db, account: account.id, month: month, tier: tier, limit: limits[tier]) }
    }

    /// This month's usage of every tier: the limited ones, then any other with characters on record.
    public func usageByTier() throws -> [TierUsage] {
        try PricingTier.allCases.map { try usage(of: $0) }
            .filter { $0.limit != nil || $0.used > 0 || $0.reserved > 0 }
    }

    static func usage(_ db: Database, account: String, month: String, tier: PricingTier, limit: Int?) throws -> TierUsage {
        let used = try Int.fetchOne(
            db, sql: "SELECT used FROM quotaUsage WHERE account = ? AND month = ? AND tier = ?",
            arguments: [account, month, tier.rawValue]) ?? 0
        let reserved = try Int.fetchOne(
            db, sql: "SELECT COALESCE(SUM(characters), 0) FROM quotaReservation WHERE account = ? AND month = ? AND tier = ?",
            arguments: [account, month, tier.rawValue]) ?? 0
        return TierUsage(tier: tier, used: used, reserved: reserved, limit: limit)
    }
}

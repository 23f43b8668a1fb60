import ArgumentParser
import Foundation
import TourpackCore
import TourpackKit
import TourpackState

struct Quota: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "quota",
        abstract: "Characters used, reserved and left this month, per pricing tier, for the pipeline's TTS account.",
        discussion: """
            The account is the pipeline's endpoint plus a fingerprint of its API key \
            (never the key). Months are calendar months in UTC. Reservations left by \
            a build that died are released first (see "Crash policy" in the State article of `make docs`). \
            The local tier, and any tier without a limit in budgets.monthlyCharacters, \
            is unlimited.
            """
    )

    @OptionGroup var options: PipelineOptions
    @Flag(help: "Print the quota as JSON.") var json = false

    struct Report: Encodable {
        var version = 1
        var account: String
        /// The pipeline's dialect and the unit its tiers are counted in (characters, or ElevenLabs' credits).
        var provider: String
        var unit: String
        var month: String
        var releasedStaleReservations: Int
        var tiers: [Tier]
        struct Tier: Encodable {
            var tier: String
            var used: Int
            var reserved: Int
            /// null: unlimited.
            var limit: Int?
            var left: Int?
        }
    }

    func run() async throws {
        let config = try options.load()
        let account = QuotaAccount(settings: config.tts)
        let month = QuotaLedger.month(of: CommandClock.now())
        var released = 0
        var settled = 0
        var usage: [TierUsage]
        if let state = try StateView.existing(config) {
            let closed = try state.ledger.reconcile()
            (released, settled) = (closed.released, closed.settled)
            usage = try state.ledger.usageByTier()
        } else {
            usage = PricingTier.allCases.compactMap { tier in
                config.budgets.monthlyQuota(for: tier).map { TierUsage(tier: tier, used: 0, reserved: 0, limit: $0) }
            }
        }
        // The pipeline's own tier is always shown, limited or not.
        if !usage.contains(where: { $0.tier == config.voice.tier }) {
            usage.append(
                TierUsage(tier: config.voice.tier, used: 0, reserved: 0, limit: config.budgets.monthlyQuota(for: config.voice.tier)))
        }
        let report = Report(
            account: account.id, provider: config.tts.api.rawValue, unit: config.billing.unit, month: month,
            releasedStaleReservations: released,
            tiers: usage.map { .init(tier: $0.tier.rawValue, used: $0.used, reserved: $0.reserved, limit: $0.limit, left: $0.left) })
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            print(String(decoding: try encoder.encode(report), as: UTF8.self))
            return
        }
        var rows = [["tier", "used", "reserved", "limit", "left"]]
        for tier in report.tiers {
            rows.append([
                tier.tier + (tier.tier == config.voice.tier.rawValue ? " *" : ""), PlanReport.grouped(tier.used),
                PlanReport.grouped(tier.reserved),
                tier.limit.map(PlanReport.grouped) ?? "unlimited", tier.left.map(PlanReport.grouped) ?? "–",
            ])
        }
        print(
            "quota of the \(report.provider) account \(report.account), \(report.month) (UTC), in \(report.unit); "
                + "* is this pipeline's voice tier")
        print(PlanReport.table(rows, footerFromRow: rows.count).joined(separator: "\n"))
        if released > 0 { print("released \(released) stale reservation(s) left by a build that died before sending them") }
        if settled > 0 { print("settled \(settled) reservation(s) a build that died had sent: the endpoint may have billed them") }
    }
}

import Foundation
package import TourpackCore
import TourpackMaps
import TourpackState

/// Renders a `BuildPlan` for a person (a table) or for a job (stable JSON).
package struct PlanReport: Sendable {
    package var plan: BuildPlan
    package var config: PipelineConfig

    package init(plan: BuildPlan, config: PipelineConfig) {
        self.plan = plan
        self.config = config
    }

    // MARK: Text

    package func text() -> String {
        var lines: [String] = []
        if let shard = plan.shard { lines.append(Self.shardLine(shard)) }
        let formatHeaders = plan.formats.map { "est. \($0.fileExtension)" }
        var rows: [[String]] = [
            ["tour", "POIs", "phases", "chunks", "requests", "characters", "cache hits", "audio"] + formatHeaders + [
                "map tiles", "map size",
            ]
        ]
        for tourPlan in plan.tours {
            rows.append(
                [
                    Self.truncate(tourPlan.tour.name, 34), "\(tourPlan.tour.pois.count)", "\(tourPlan.phases)", "\(tourPlan.chunks)",
                    "\(tourPlan.requests)", Self.grouped(tourPlan.characters), "\(tourPlan.cacheHits)",
                    Self.duration(tourPlan.estimatedDurationSeconds),
                ]
                    + plan.formats.map { Self.bytes(tourPlan.estimatedBytes[$0] ?? 0) }
                    + [Self.grouped(tourPlan.mapCoverage?.tileCount ?? 0), Self.bytes(tourPlan.mapCoverage?.estimatedBytes ?? 0)]
            )
        }
        rows.append(
            [
                "total (\(plan.tours.count) tour\(plan.tours.count == 1 ? "" : "s"))", "\(plan.pois)", "\(plan.phases)", "\(plan.chunks)",
                "\(plan.requests)", Self.grouped(plan.characters), "\(plan.cacheHits)", Self.duration(plan.estimatedDurationSeconds),
            ]
                + plan.formats.map { Self.bytes(plan.estimatedBytes($0)) }
                + [Self.grouped(plan.tileCount), Self.bytes(plan.mapBytes)]
        )
        lines.append(contentsOf: Self.table(rows, footerFromRow: rows.count - 1))
        if let source = config.maps.source, !plan.tours.isEmpty {
            lines.append("")
            lines.append(
                "map tiles from \(source.displayName) (\(source.format.rawValue)), zoom \(config.maps.minZoom)–\(config.maps.maxZoom), "
                    + "+\(config.maps.bufferMiles.compactText) mi; * is the pipeline's selection (maps.selection), maxTiles \(Self.grouped(config.maps.maxTiles)) per package"
            )
            var tileRows: [[String]] = [["tour", "selection", "tiles", "fresh in cache", "to fetch", "est. pack"]]
            for selection in TileSelection.allCases {
                for tourPlan in plan.tours {
                    guard let entry = tourPlan.tileSelections.first(where: { $0.selection == selection }) else { continue }
                    tileRows.append(
                        Self.tileRow(
                            Self.truncate(tourPlan.tour.name, 34), entry, chosen: selection == config.maps.selection,
                            limit: config.maps.maxTiles))
                }
            }
            var totals: [[String]] = []
            for selection in TileSelection.allCases {
                let entries = plan.tours.compactMap { $0.tileSelections.first { $0.selection == selection } }
                let total = TileSelectionPlan(
                    selection: selection, tiles: entries.reduce(0) { $0 + $1.tiles }, fresh: entries.reduce(0) { $0 + $1.fresh },
                    estimatedBytes: entries.reduce(0) { $0 + $1.estimatedBytes })
                totals.append(Self.tileRow("total", total, chosen: selection == config.maps.selection, limit: nil))
            }
            lines.append(contentsOf: Self.table(tileRows + totals, footerFromRow: tileRows.count))
            if let refusal = plan.tileRefusal(config.maps) { lines.append("maps: REFUSED: \(refusal)") }
        }
        lines.append("")
        lines.append(quotaLine())
        for tourPlan in plan.tours {
            guard let coverage = tourPlan.mapCoverage else { continue }
            let b = coverage.bounds
            lines.append(
                "map \(Self.truncate(tourPlan.tour.name, 34)): zoom \(coverage.minZoom)–\(coverage.maxZoom), "
                    + "bounds S \(Self.degrees(b.south)) W \(Self.degrees(b.west)) N \(Self.degrees(b.north)) E \(Self.degrees(b.east)) "
                    + "(+\(coverage.bufferMiles.compactText) mi)"
            )
        }
        if let refusal { lines.append("refused: \(refusal)") }
        return lines.joined(separator: "\n")
    }

    /// `shard 2 of 4: 3 of 11 tours …`: which tours a sharded plan or build covers.
    package static func shardLine(_ slice: ShardSlice) -> String {
        slice.tours == 0
            ? "\(slice): no tour of the pipeline hashes to this shard; nothing to build"
            : "\(slice) (the tours whose ID hashes to this shard; the other shards build the rest)"
    }

    /// Why a build of this plan would be refused with exit 3; nil when it would run.
    package var refusal: String? { plan.refusal(config) }

    static func tileRow(_ name: String, _ entry: TileSelectionPlan, chosen: Bool, limit: Int?) -> [String] {
        let over = limit.map { entry.tiles > $0 } ?? false
        return [
            name, entry.selection.rawValue + (chosen ? " *" : ""), grouped(entry.tiles) + (over && chosen ? " OVER" : ""),
            grouped(entry.fresh), grouped(entry.toFetch), bytes(entry.estimatedBytes),
        ]
    }

    func quotaLine() -> String {
        let tier = plan.voice.tier.rawValue
        let unit = config.billing.unit
        let account = " · \(config.tts.api.rawValue) account \(QuotaAccount(settings: config.tts).id)"
        let cost = estimatedCost.map { String(format: " · estimated cost %.2f", $0) } ?? ""
        guard let quota = plan.monthlyQuota, let left = plan.quotaLeftAfter else {
            return
                "quota: tier \(tier) has no monthly limit; this build sends \(Self.grouped(plan.billableCharacters)) \(unit)\(account)\(cost)"
        }
        let verdict =
            left < 0 ? "OVER by \(Self.grouped(-left)): the build would be refused" : "\(Self.grouped(left)) left after this build"
        return "quota: tier \(tier), \(Self.grouped(quota)) \(unit) a month; used \(Self.grouped(plan.quotaUsedBefore)), "
            + "this build \(Self.grouped(plan.billableCharacters)); \(verdict)\(account)\(cost)"
    }

    /// This build's billed units at the tier's `budgets.pricePerMillion`; nil without a price.
    var estimatedCost: Double? {
        config.budgets.pricePerMillion[plan.voice.tier].map { Double(plan.billableCharacters) * $0 / 1_000_000 }
    }

    // MARK: JSON

    /// - Parameter ladder: the pipeline's other qualities (`qualityRoots()`
    ///   after the first), each with its plan: the same chunks, encoded
    ///   again into a root of its own.
    package func json(ladder: [(config: PipelineConfig, plan: BuildPlan)] = []) throws -> String {
        let rungs = [(config: config, plan: plan)] + ladder
        let document = PlanDocument(
            version: 1,
            pipeline: config.sourceFile.path,
            voice: plan.voice,
            formats: plan.formats.map(\.rawValue),
            tours: plan.tours.map { tourPlan in
                PlanDocument.TourEntry(
                    id: tourPlan.tour.id.value, name: tourPlan.tour.name, file: tourPlan.tour.sourceFile,
                    pois: tourPlan.tour.pois.count, phases: tourPlan.phases, chunks: tourPlan.chunks, requests: tourPlan.requests,
                    characters: tourPlan.characters, billableCharacters: tourPlan.billableCharacters, cacheHits: tourPlan.cacheHits,
                    estimatedDurationSeconds: Self.rounded(tourPlan.estimatedDurationSeconds),
                    estimatedBytes: Dictionary(uniqueKeysWithValues: tourPlan.estimatedBytes.map { ($0.key.rawValue, $0.value) }),
                    mapTiles: tourPlan.mapCoverage, tileSelections: tourPlan.tileSelections.map(PlanDocument.TileEntry.init)
                )
            },
            totals: PlanDocument.Totals(
                tours: plan.tours.count, pois: plan.pois, phases: plan.phases, chunks: plan.chunks, requests: plan.requests,
                characters: plan.characters, billableCharacters: plan.billableCharacters, cacheHits: plan.cacheHits,
                estimatedDurationSeconds: Self.rounded(plan.estimatedDurationSeconds),
                estimatedBytes: Dictionary(uniqueKeysWithValues: plan.formats.map { ($0.rawValue, plan.estimatedBytes($0)) }),
                tileCount: plan.tileCount, mapEstimatedBytes: plan.mapBytes
            ),
            quota: PlanDocument.Quota(
                provider: config.tts.api.rawValue, account: QuotaAccount(settings: config.tts).id, unit: config.billing.unit,
                estimatedCost: estimatedCost.map { ($0 * 100).rounded() / 100 },
                tier: plan.voice.tier.rawValue, monthlyLimit: plan.monthlyQuota, usedBefore: plan.quotaUsedBefore,
                thisBuild: plan.billableCharacters, leftAfter: plan.quotaLeftAfter,
                fits: plan.quotaLeftAfter.map { $0 >= 0 } ?? true
            ),
            refused: refusal,
            shard: plan.shard,
            qualities: rungs.map { rung in
                PlanDocument.QualityEntry(
                    quality: rung.config.quality.rawValue, output: rung.config.output.path,
                    formats: Dictionary(
                        uniqueKeysWithValues: rung.config.formats.map {
                            (
                                $0.rawValue,
                                PlanDocument.QualityEntry.Format(
                                    bitrateKbps: rung.config.bitrate(for: $0), estimatedBytes: rung.plan.estimatedBytes($0))
                            )
                        }))
            }
        )
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(document), as: UTF8.self)
    }

    struct PlanDocument: Encodable {
        struct TourEntry: Encodable {
            var id, name, file: String
            var pois, phases, chunks, requests, characters, billableCharacters, cacheHits: Int
            var estimatedDurationSeconds: Double
            var estimatedBytes: [String: Int]
            var mapTiles: MapCoverage?
            var tileSelections: [TileEntry]
        }
        struct TileEntry: Encodable {
            var selection: String
            var tiles, fresh, toFetch, estimatedBytes: Int
            init(_ plan: TileSelectionPlan) {
                selection = plan.selection.rawValue
                tiles = plan.tiles
                fresh = plan.fresh
                toFetch = plan.toFetch
                estimatedBytes = plan.estimatedBytes
            }
        }
        struct Totals: Encodable {
            var tours, pois, phases, chunks, requests, characters, billableCharacters, cacheHits: Int
            var estimatedDurationSeconds: Double
            var estimatedBytes: [String: Int]
            var tileCount, mapEstimatedBytes: Int
        }
        struct Quota: Encodable {
            /// The dialect and the account (endpoint and key fingerprint) the ledger counts under.
            var provider, account, unit: String
            var estimatedCost: Double?
            var tier: String
            var monthlyLimit: Int?
            var usedBefore, thisBuild: Int
            var leftAfter: Int?
            var fits: Bool

            func encode(to encoder: any Encoder) throws {
                // Nulls are written out, so "unlimited" is explicit for a job reading the JSON.
                var c = encoder.container(keyedBy: CodingKeys.self)
                try c.encode(provider, forKey: .provider)
                try c.encode(account, forKey: .account)
                try c.encode(unit, forKey: .unit)
                try c.encode(estimatedCost, forKey: .estimatedCost)
                try c.encode(tier, forKey: .tier)
                try c.encode(monthlyLimit, forKey: .monthlyLimit)
                try c.encode(usedBefore, forKey: .usedBefore)
                try c.encode(thisBuild, forKey: .thisBuild)
                try c.encode(leftAfter, forKey: .leftAfter)
                try c.encode(fits, forKey: .fits)
            }
            enum CodingKeys: String, CodingKey {
                case provider, account, unit, estimatedCost, tier, monthlyLimit, usedBefore, thisBuild, leftAfter, fits
            }
        }
        var version: Int
        var pipeline: String
        var voice: VoicePreset
        var formats: [String]
        var tours: [TourEntry]
        var totals: Totals
        var quota: Quota
        /// Why the build would be refused (exit 3), or null: written out either way.
        var refused: String?
        /// With `--shards`: the shard and its share of the pipeline's tours; null otherwise.
        var shard: ShardSlice?
        /// Every quality the build makes, the first (`output`) first: its
        /// root and, per format, the rate and the estimated bytes. One entry
        /// without a ladder; the others need no request of their own.
        var qualities: [QualityEntry]

        struct QualityEntry: Encodable {
            struct Format: Encodable {
                var bitrateKbps, estimatedBytes: Int
            }
            var quality, output: String
            var formats: [String: Format]
        }

        enum CodingKeys: String, CodingKey { case version, pipeline, voice, formats, tours, totals, quota, refused, shard, qualities }

        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(version, forKey: .version)
            try c.encode(pipeline, forKey: .pipeline)
            try c.encode(voice, forKey: .voice)
            try c.encode(formats, forKey: .formats)
            try c.encode(tours, forKey: .tours)
            try c.encode(totals, forKey: .totals)
            try c.encode(quota, forKey: .quota)
            try c.encode(refused, forKey: .refused)
            try c.encode(shard, forKey: .shard)
            try c.encode(qualities, forKey: .qualities)
        }
    }

    // MARK: Formatting

    /// Rows in columns, the first left-aligned and the rest right-aligned, with
    /// a rule under the header and above row `footer` (none when out of range).
    package static func table(_ rows: [[String]], footerFromRow footer: Int) -> [String] {
        let widths = (0..<(rows.first?.count ?? 0)).map { column in rows.map { $0[column].count }.max() ?? 0 }
        var lines: [String] = []
        for (index, row) in rows.enumerated() {
            if index == footer || index == 1 {
                lines.append(widths.map { String(repeating: "─", count: $0) }.joined(separator: "  "))
            }
            let cells = row.enumerated().map { column, cell in
                let pad = String(repeating: " ", count: widths[column] - cell.count)
                return column == 0 ? cell + pad : pad + cell
            }
            lines.append(cells.joined(separator: "  "))
        }
        return lines
    }

    static func truncate(_ text: String, _ length: Int) -> String {
        text.count <= length ? text : String(text.prefix(length - 1)) + "…"
    }

    package static func grouped(_ value: Int) -> String { value.groupedText }

    package static func duration(_ seconds: Double) -> String {
        let total = Int(seconds.rounded())
        return total >= 3600
            ? String(format: "%d:%02d:%02d", total / 3600, total / 60 % 60, total % 60)
            : String(format: "%d:%02d", total / 60, total % 60)
    }

    package static func bytes(_ count: Int) -> String {
        let units = ["B", "KB", "MB", "GB", "TB"]
        var value = Double(count)
        var unit = 0
        while value >= 1024, unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return unit == 0 ? "\(count) B" : String(format: "%.1f %@", value, units[unit])
    }

    static func degrees(_ value: Double) -> String { String(format: "%.4f", value) }
    static func rounded(_ value: Double) -> Double { (value * 10).rounded() / 10 }
}

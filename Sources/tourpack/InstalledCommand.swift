import ArgumentParser
import Foundation
import TourpackClient
import TourpackCore
import TourpackInstall
import TourpackKit

/// A synchronous command: it only reads and removes files, so it runs on the
/// main thread from start to end, never on Swift's cooperative pool.
struct Installed: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "installed",
        abstract: "What the installed packages of a Documents root take, and removing one.",
        discussion: """
            Lists every package under DOCUMENTS/OfflineTours by tour, with its format, voice, \
            size on disk, expiry and any file missing or not at its size; the totals count a \
            file two packages share once. TOURPACK_NOW pins the clock expiry is judged by.

            --max-storage SIZE keeps what the packages take within SIZE (bytes, or with KB, MB or GB): \
            the least recently used tours go first (last used: when the app last played them; \
            else when they were built), never one named by --pin.

            --remove ID deletes the package with that id (or every package of the tour with that \
            id), under the install lock: package.json first, so the app stops seeing it at once, \
            then its tile pack and folder, then the audio files no other installed package lists.

            Exit codes: \(ExitStatus.ok) ok · \(ExitStatus.failure) a file could not be removed, or \
            an install holds DOCUMENTS (alreadyDownloading) · \(ExitStatus.badInput) bad usage, no \
            such folder or ID.
            """
    )

    @Argument(help: "The Documents root.", completion: .directory)
    var documents: String

    @Option(help: ArgumentHelp("Delete this package (its id), or every package of this tour, with its files.", valueName: "ID"))
    var remove: String?

    @Option(
        help: ArgumentHelp(
            "Remove the least recently used packages until the rest take at most SIZE (bytes; or 500MB, 2GB).", valueName: "SIZE"))
    var maxStorage: String?

    @Option(help: ArgumentHelp("With --max-storage: a tour whose packages never go (repeatable).", valueName: "TOUR_ID"))
    var pin: [String] = []

    @Flag(help: "Print one JSON document on stdout.")
    var json = false

    /// `500MB`, `2GB`, `1048576`: decimal units, as storage is sold.
    static func bytes(_ text: String) throws -> Int64 {
        let upper = text.uppercased().trimmingCharacters(in: .whitespaces)
        for (suffix, scale) in [("GB", 1_000_000_000.0), ("MB", 1_000_000.0), ("KB", 1_000.0), ("B", 1.0)] where upper.hasSuffix(suffix) {
            if let value = Double(upper.dropLast(suffix.count).trimmingCharacters(in: .whitespaces)), value >= 0, value.isFinite {
                return Int64(min(value * scale, Double(Int64.max / 2)))
            }
        }
        if let value = Int64(upper), value >= 0 { return value }
        throw ValidationError("--max-storage \(text): not a size; give bytes, or a number with KB, MB or GB")
    }

    func run() throws {
        let inventory = InstalledInventory(documents: URL(fileURLWithPath: documents))
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        if let remove {
            let removal = try inventory.remove(remove)
            if json {
                FileHandle.standardOutput.write(try encoder.encode(removal) + Data("\n".utf8))
            } else {
                print(
                    "removed \(removal.packages.joined(separator: ", ")): \(removal.files) file(s) and package.json, \(PlanReport.bytes(Int(removal.bytes)))"
                )
            }
            return
        }
        if let maxStorage {
            let budget = StorageBudget(maxBytes: try Self.bytes(maxStorage), protected: Set(pin.map { $0.lowercased() }))
            let removal = try inventory.enforce(budget)
            if !json {
                print(
                    removal.packages.isEmpty
                        ? "within \(PlanReport.bytes(Int(budget.maxBytes))): nothing removed"
                        : "removed \(removal.packages.joined(separator: ", ")) (least recently used) to keep within \(PlanReport.bytes(Int(budget.maxBytes))): \(removal.files) file(s), \(PlanReport.bytes(Int(removal.bytes)))"
                )
            }
        }
        let statistics = try inventory.statistics(now: CommandClock.now())
        if json {
            FileHandle.standardOutput.write(try encoder.encode(statistics) + Data("\n".utf8))
            return
        }
        var lines = [
            "\(statistics.documents): \(statistics.packages) package(s), \(PlanReport.bytes(Int(statistics.bytes))), \(statistics.expired) expired"
        ]
        if let catalog = statistics.catalog {
            let when = catalog.expiresAt.map(PackageManifest.timestamp) ?? "no expiry"
            lines.append(
                catalog.stale
                    ? "catalogue: generation \(catalog.generation ?? 0) expired at \(when): STALE; downloads and updates wait for a fresh one (installed packages play)"
                    : "catalogue: generation \(catalog.generation ?? 0), fresh until \(when)")
        }
        for tour in statistics.tours {
            let used = tour.lastAccessed.map { "last used \(PackageManifest.timestamp($0))" } ?? "never used"
            lines.append("  \(tour.tourName) (\(tour.tourId)): \(PlanReport.bytes(Int(tour.bytes))), \(used)")
            for package in tour.packages {
                var line =
                    "    \(package.packageId)  \(package.format) \(package.bitrateKbps) kbps (\(package.quality.rawValue))  \(package.voice)  \(PlanReport.bytes(Int(package.bytes)))  \(package.files) file(s)  "
                    + "expires \(PackageManifest.timestamp(package.expiresAt))"
                if package.expired { line += "  EXPIRED" }
                if package.damagedFiles > 0 { line += "  \(package.damagedFiles) file(s) missing or damaged" }
                lines.append(line)
            }
        }
        for path in statistics.unreadable { lines.append("warning: \(path) cannot be read as a package.json") }
        print(lines.joined(separator: "\n"))
    }
}

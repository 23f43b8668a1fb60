import ArgumentParser
import Foundation
import TourpackClient
import TourpackCore
import TourpackInstall
import TourpackKit

struct Installed: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "What the installed packages of a Documents root take, and removing one.",
        discussion: """
            Lists every package under DOCUMENTS/OfflineTours by tour, with its format, voice, \
            size on disk, expiry and any file missing or not at its size; the totals count a \
            file two packages share once. TOURPACK_NOW pins the clock expiry is judged by.

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

    @Flag(help: "Print one JSON document on stdout.")
    var json = false

    func run() async throws {
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
        let statistics = try inventory.statistics(now: CommandClock.now())
        if json {
            FileHandle.standardOutput.write(try encoder.encode(statistics) + Data("\n".utf8))
            return
        }
        var lines = [
            "\(statistics.documents): \(statistics.packages) package(s), \(PlanReport.bytes(Int(statistics.bytes))), \(statistics.expired) expired"
        ]
        for tour in statistics.tours {
            lines.append("  \(tour.tourName) (\(tour.tourId)): \(PlanReport.bytes(Int(tour.bytes)))")
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

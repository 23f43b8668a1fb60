import Foundation
package import TourpackCore
import TourpackHTTP
import TourpackKit
import TourpackMaps

extension Publisher {
    // MARK: Rollback

    /// Puts generation `number`'s packages back in force as a **new**
    /// generation, numbered above every one published, signed and with a
    /// fresh `expiresAt`: a device, which refuses any generation lower than
    /// one it verified, follows a deliberate rollback as it follows any
    /// publish, and still refuses a mirror's replay of the old file.
    /// Every object it names is checked to be there still; packages expired
    /// since are left out. Returns the new generation (for a dry run, the one it would be).
    @discardableResult
    package func rollback(to number: Int, dryRun: Bool = false) async throws -> Int {
        try await site.exclusively { [self] in
            let key = SiteLayout.generation(number)
            guard let generation = try await site.read(key) else {
                let kept = try await site.list(prefix: SiteLayout.generationsFolder).compactMap { SiteLayout.generationNumber($0.key) }
                    .sorted()
                throw TourpackError.invalidInput(
                    "publish --rollback \(number): \(site.locate(key)) does not exist; the site keeps generations "
                        + (kept.isEmpty ? "none" : kept.map(String.init).joined(separator: ", ")))
            }
            let catalog: Catalog
            do { catalog = try Catalog.decode(Data(generation.bytes)) } catch {
                throw TourpackError.invalidInput("\(site.locate(key)): not a catalogue tourpack can read: \(error)")
            }
            let missing = try await missingObjects(of: catalog)
            guard missing.isEmpty else {
                throw TourpackError.invalidInput(
                    "publish --rollback \(number): the site no longer has \(missing.count) object(s) that generation names "
                        + "(first: \(missing[0])); it cannot be put back in force")
            }
            let moment = now()
            let entries = catalog.entries.filter { entry in
                guard entry.package.expiresAt > moment else {
                    report(.warning("\(entry.package.packageId) expired at \(entry.package.expiresAt); left out of the catalogue"))
                    return false
                }
                return true
            }
            let current = try await readCatalog()
            var outcome = Outcome(generation: 0, published: false, packages: entries.count)
            if dryRun {
                let listed = try await site.list(prefix: SiteLayout.generationsFolder).compactMap { SiteLayout.generationNumber($0.key) }
                return max(current?.catalog.generation ?? 0, listed.max() ?? 0) + 1
            }
            guard let published = try await commit(CatalogTour.grouping(entries), replacing: current, at: moment, outcome: &outcome)
            else {
                throw TourpackError.invalidInput(
                    "publish --rollback \(number): another publisher changed the catalogue meanwhile; run it again")
            }
            report(.rolledBack(from: number, generation: published))
            return published
        }
    }

    /// The manifests and blobs `catalog` names that the site lacks.
    package func missingObjects(of catalog: Catalog) async throws -> [String] {
        var missing: [String] = []
        for entry in catalog.entries {
            guard let manifest = try await site.read(entry.package.manifest.path) else {
                missing.append(entry.package.manifest.path)
                continue
            }
            for blob in try Self.blobs(named: manifest.bytes, at: entry.package.manifest.path) where try await !site.contains(blob) {
                missing.append(blob)
            }
        }
        return missing
    }

    /// The blob keys a package.json names: its audio files, caption files and tile pack.
    static func blobs(named manifest: [UInt8], at key: String) throws -> [String] {
        let decoded: PackageManifest
        do { decoded = try PackageManifest.decode(manifest) } catch {
            throw TourpackError.invalidInput("\(key): not a package.json tourpack can read: \(error)")
        }
        return SiteLayout.files(of: decoded).map { SiteLayout.blob(sha256: $0.sha256) }
    }

    // MARK: Garbage collection

    /// What `--gc` removed (or, dry, would remove).
    package struct Collected: Sendable, Equatable {
        package var deleted: [String] = []
        package var deletedBytes: Int64 = 0
        /// Generations whose objects were kept.
        package var keptGenerations: [Int] = []
    }

    /// Deletes the blobs, manifests and generation files that no kept
    /// generation names, once they have been out of use for `graceDays`.
    ///
    /// Kept: the generation in force, the `keepGenerations` newest, and
    /// every generation replaced less than `graceDays` ago, since a device
    /// that read it may still be downloading what it names. An object newer
    /// than `graceDays` is kept too, whatever names it: a publish may be
    /// uploading it now.
    package func collectGarbage(dryRun: Bool = false) async throws -> Collected {
        try await site.exclusively { [self] in
            let moment = now()
            let grace = moment.addingTimeInterval(-Double(settings.graceDays) * 86_400)
            let generationFiles = try await site.list(prefix: SiteLayout.generationsFolder)
            // When each generation was published, and so when the one before it stopped being current.
            let published = generationFiles.compactMap { file in SiteLayout.generationNumber(file.key).map { ($0, file.lastModified) } }
                .sorted { $0.0 < $1.0 }
            var kept = Set(published.suffix(settings.keepGenerations).map(\.0))
            for (index, generation) in published.enumerated() {
                let replacedAt = index + 1 < published.count ? published[index + 1].1 : moment
                if replacedAt > grace { kept.insert(generation.0) }
            }
            if let current = try await readCatalog() { kept.insert(current.catalog.generation) }

            var named: Set<String> = []
            for number in kept {
                guard let read = try await site.read(SiteLayout.generation(number)) else { continue }
                named.insert(SiteLayout.generation(number))
                named.insert(SiteLayout.signature(of: SiteLayout.generation(number)))
                let catalog = try Catalog.decode(Data(read.bytes))
                for entry in catalog.entries where named.insert(entry.package.manifest.path).inserted {
                    guard let manifest = try await site.read(entry.package.manifest.path) else { continue }
                    named.formUnion(try Self.blobs(named: manifest.bytes, at: entry.package.manifest.path))
                }
            }

            var collected = Collected(keptGenerations: kept.sorted())
            let candidates =
                generationFiles + (try await site.list(prefix: SiteLayout.packagesFolder))
                + (try await site.list(prefix: SiteLayout.blobsFolder))
            for object in candidates where !named.contains(object.key) && object.lastModified < grace {
                if !dryRun {
                    try await site.delete(object.key)
                    report(.deleted(key: object.key))
                }
                collected.deleted.append(object.key)
                collected.deletedBytes += Int64(object.bytes)
            }
            return collected
        }
    }
}

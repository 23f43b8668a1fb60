package import Foundation
package import TourpackCore
import TourpackPlan

/// The packages already in an output root, read once when a build starts.
///
/// Audio paths name the tour, POI, phase and format but not the voice
/// (the contract's layout), so two voices of one tour in one format share their
/// files. When a build publishes a tour in a format, any package of that
/// tour and format under another voice has just had its audio replaced; the
/// index finds those so the commit removes them instead of leaving a
/// package.json that no longer matches its files.
package struct PackageIndex: Sendable {
    package struct Entry: Sendable, Hashable {
        package var packageID: String
        package var tourID: String
        package var format: AudioFormat?
        package var folder: URL
    }

    package private(set) var entries: [Entry] = []
    /// Each package.json read, by path, with its bytes: the publish takes
    /// the decoded manifest from here when the file still has those bytes.
    private var read: [String: (bytes: [UInt8], manifest: PackageManifest)] = [:]

    /// Reads every `OfflineTours/*/package.json`, on every core; unreadable
    /// ones are left for `validate` to report, and are never removed by a build.
    package static func scan(_ layout: Layout) -> PackageIndex {
        var index = PackageIndex()
        let parent = layout.root.appendingPathComponent(Layout.offlineToursFolder, isDirectory: true)
        let names = (try? PackageFolders.names(documents: layout.root)) ?? []
        let found = sideBySide(names.count) { slot -> (folder: URL, url: URL, bytes: [UInt8], manifest: PackageManifest)? in
            guard let read = try? PackageFolders.read(documents: layout.root, folder: names[slot]) else { return nil }
            let folder = parent.appendingPathComponent(names[slot], isDirectory: true)
            return (folder, folder.appendingPathComponent(Layout.manifestFileName), read.bytes, read.manifest)
        }
        for case let (folder, url, bytes, manifest)? in found {
            index.read[url.path] = (bytes, manifest)
            index.entries.append(
                Entry(packageID: manifest.packageId, tourID: manifest.tourId, format: manifest.audio.first?.format, folder: folder))
        }
        return index
    }

    /// The package.json at `url` as the scan read and decoded it.
    func scanned(at url: URL) -> (bytes: [UInt8], manifest: PackageManifest)? {
        read[url.path]
    }

    /// The package.json at `url` as the scan decoded it, when `bytes` are still its bytes.
    func manifest(at url: URL, bytes: [UInt8]) -> PackageManifest? {
        guard let known = read[url.path], known.bytes == bytes else { return nil }
        return known.manifest
    }

    /// Package folders of `tourID` in one of `formats` that are not among `keeping`.
    package func superseded(tourID: SafeID, formats: [AudioFormat], keeping: Set<String>) -> [URL] {
        entries.filter { entry in
            entry.tourID == tourID.value && entry.format.map(formats.contains) == true && !keeping.contains(entry.packageID)
        }.map(\.folder)
    }
}

public import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A file's place in the output root: the absolute URL to write, and the
/// path relative to the root that package.json records.
public struct StoredPath: Sendable, Hashable, CustomStringConvertible {
    public let url: URL
    /// Slash-separated, relative to the output root, e.g. `AudioCache/<tour>/<poi>_Detailed.m4a`.
    public let relativePath: String

    public var description: String { relativePath }
}

/// The app's `Documents` layout, exactly as the contract fixes it:
///
///     <output>/AudioCache/<tourId>/<poiId>_<Phase>.<ext>
///     <output>/OfflineTours/<packageId>/package.json
///
/// The app finds files by these names, so they are built in one place, and
/// only from `SafeID`s (lowercase UUIDs) and the closed `Phase` and
/// `AudioFormat` enums: no tour text can ever become part of a path.
public struct Layout: Sendable, Hashable {
    public static let audioCacheFolder = "AudioCache"
    public static let offlineToursFolder = "OfflineTours"
    public static let manifestFileName = "package.json"
    /// `tourpack install`'s own folder in a Documents root: its staging
    /// (downloads in progress, verified files waiting to be moved into
    /// place) and what it remembers of the site (the catalogue and its
    /// ETag). Hidden, so the app never lists it, and skipped by `validate`.
    public static let installFolder = ".tourpack-install"

    /// The output root (the app's Documents folder), absolute and standardized.
    public let root: URL

    public init(root: URL) {
        self.root = root.standardizedFileURL
    }

    /// `AudioCache/<tourId>`: every audio file of one tour, all voices and formats.
    public func audioFolder(tourID: SafeID) -> StoredPath {
        path("\(Layout.audioCacheFolder)/\(tourID.value)")
    }

    /// `AudioCache/<tourId>/<poiId>_<Phase>.<ext>`, with `Guided Tour` spelled with its space.
    public func audioFile(tourID: SafeID, poiID: SafeID, phase: Phase, format: AudioFormat) -> StoredPath {
        path(Layout.audioRelativePath(tourID: tourID, poiID: poiID, phase: phase, format: format))
    }

    /// The root-relative audio path on its own, as package.json records it.
    public static func audioRelativePath(tourID: SafeID, poiID: SafeID, phase: Phase, format: AudioFormat) -> String {
        "\(audioCacheFolder)/\(tourID.value)/\(audioFileName(poiID: poiID, phase: phase, format: format))"
    }

    /// `<poiId>_<Phase>.<ext>`: an audio file's name in its tour's folder.
    package static func audioFileName(poiID: SafeID, phase: Phase, format: AudioFormat) -> String {
        "\(poiID.value)_\(phase.fileLabel).\(format.fileExtension)"
    }

    /// `OfflineTours/<packageId>`.
    public func packageFolder(packageID: SafeID) -> StoredPath {
        path("\(Layout.offlineToursFolder)/\(packageID.value)")
    }

    /// `OfflineTours/<packageId>/package.json`.
    public func manifest(packageID: SafeID) -> StoredPath {
        path("\(Layout.offlineToursFolder)/\(packageID.value)/\(Layout.manifestFileName)")
    }

    public static let tilePackFileName = "tiles.mbtiles"

    /// In the name of a tour's next audio folder, `.<tourId>.next-<random>`;
    /// a build's preflight removes any that a killed run left. An install
    /// makes its tour folders the same way, under the same name.
    package static let nextFolderMarker = ".next-"
    /// The folder of a package's caption files, beside its package.json.
    public static let captionsFolderName = "captions"

    /// `OfflineTours/<packageId>/captions/<poiId>_<Phase label>.vtt`: one
    /// narration's WebVTT captions. They live in the package's folder, so
    /// the app's `AudioCache` layout stays exactly as it is.
    public static func captionsRelativePath(packageID: SafeID, poiID: SafeID, phase: Phase) -> String {
        "\(offlineToursFolder)/\(packageID.value)/\(captionsFolderName)/\(captionsFileName(poiID: poiID, phase: phase))"
    }

    /// `<poiId>_<Phase label>.vtt`: a caption file's name in its package's captions folder.
    package static func captionsFileName(poiID: SafeID, phase: Phase) -> String {
        "\(poiID.value)_\(phase.fileLabel).vtt"
    }

    /// `OfflineTours/<packageId>/captions`.
    public func captionsFolder(packageID: SafeID) -> StoredPath {
        path("\(Layout.offlineToursFolder)/\(packageID.value)/\(Layout.captionsFolderName)")
    }

    /// `OfflineTours/<packageId>/tiles.mbtiles`: the package's map tiles.
    public func tilePack(packageID: SafeID) -> StoredPath {
        path("\(Layout.offlineToursFolder)/\(packageID.value)/\(Layout.tilePackFileName)")
    }

    /// Deletes a package: its package.json (so nothing names what follows),
    /// its tile pack and its captions folder, then its folder when nothing
    /// else is in it, then fsyncs `OfflineTours`. A package already gone is fine.
    /// The folder is reached from the root through real folders only
    /// (`AtomicFile.remove(_:under:)`): a package folder that is a symlink is
    /// refused, never emptied.
    public static func removePackage(at folder: URL) throws {
        let manifest = folder.appendingPathComponent(manifestFileName)
        let captions = folder.appendingPathComponent(captionsFolderName, isDirectory: true)
        if let root = root(of: manifest) {
            try AtomicFile.remove(manifest, under: root)
            try AtomicFile.remove(folder.appendingPathComponent(tilePackFileName), under: root)
            try AtomicFile.removeFolder(captions, under: root)
        } else {
            try AtomicFile.remove(manifest)
            try AtomicFile.remove(folder.appendingPathComponent(tilePackFileName))
            for name in (try? FileManager.default.contentsOfDirectory(atPath: captions.path)) ?? [] {
                try AtomicFile.remove(captions.appendingPathComponent(name))
            }
            try AtomicFile.removeFolderIfEmpty(captions)
        }
        try AtomicFile.removeFolderIfEmpty(folder)
        try AtomicFile.syncFolder(folder.deletingLastPathComponent())
    }

    /// The output root of a file at `<root>/AudioCache/<tourId>/<name>`,
    /// `<root>/OfflineTours/<packageId>/<name>` or
    /// `<root>/OfflineTours/<packageId>/captions/<name>`, or nil for any other path.
    /// A commit journal records absolute paths; this recovers the root its
    /// renames must stay under.
    public static func root(of file: URL) -> URL? {
        let standard = file.standardizedFileURL
        let parts = standard.pathComponents
        if parts.count >= 5, [audioCacheFolder, offlineToursFolder].contains(parts[parts.count - 3]) {
            return standard.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        }
        if parts.count >= 6, parts[parts.count - 4] == offlineToursFolder, parts[parts.count - 2] == captionsFolderName {
            return standard.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent()
        }
        return nil
    }

    /// What an `AudioCache` path names, or nil when it is not one of ours.
    /// `validate` uses it to tell audio files from stray ones.
    public static func parseAudioPath(_ relativePath: String) -> (tourID: SafeID, poiID: SafeID, phase: Phase, format: AudioFormat)? {
        let parts = relativePath.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == audioCacheFolder, let tourID = SafeID(validating: String(parts[1])),
            tourID.value == parts[1]
        else { return nil }
        let name = parts[2]
        guard let dot = name.lastIndex(of: "."), let underscore = name.firstIndex(of: "_"), underscore < dot else { return nil }
        let ext = name[name.index(after: dot)...]
        let label = name[name.index(after: underscore)..<dot]
        guard let poiID = SafeID(validating: String(name[..<underscore])), poiID.value == name[..<underscore],
            let phase = Phase.allCases.first(where: { $0.fileLabel == label }),
            let format = AudioFormat.allCases.first(where: { $0.fileExtension == ext })
        else { return nil }
        return (tourID, poiID, phase, format)
    }

    /// Resolves a path read from a package.json against the root, refusing
    /// anything that could leave it: absolute paths, `.`/`..` or empty
    /// components, backslashes, NUL, and symlinks that point outside.
    public func resolve(relativePath: String) throws -> URL {
        func refuse(_ why: String) -> TourpackError {
            .invalidInput("\(relativePath): \(why)")
        }
        guard !relativePath.isEmpty else { throw refuse("empty path") }
        guard !relativePath.hasPrefix("/") else { throw refuse("absolute path, expected one relative to the output root") }
        guard !relativePath.contains("\\"), !relativePath.unicodeScalars.contains(where: { $0.value < 0x20 || $0 == "\u{7F}" }) else {
            throw refuse("backslash or control character in path")
        }
        for component in relativePath.split(separator: "/", omittingEmptySubsequences: false) {
            guard !component.isEmpty, component != ".", component != ".." else {
                throw refuse("'.', '..' or empty component in path")
            }
        }
        let url = root.appendingPathComponent(relativePath)
        guard contains(url) else { throw refuse("resolves outside the output root") }
        return url
    }

    /// Whether `url`, with symlinks resolved as far as the path exists
    /// (`OutputTree.realPath`), lies strictly inside the root.
    public func contains(_ url: URL) -> Bool {
        let rootComponents = OutputTree.realPath(root).pathComponents
        let components = OutputTree.realPath(url).pathComponents
        return components.count > rootComponents.count && Array(components.prefix(rootComponents.count)) == rootComponents
    }

    private func path(_ relative: String) -> StoredPath {
        StoredPath(url: root.appendingPathComponent(relative), relativePath: relative)
    }
}

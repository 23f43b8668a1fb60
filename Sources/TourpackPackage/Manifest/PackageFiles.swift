import Crypto
package import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// One file a package.json names: an audio file, a narration's captions or the tile pack.
package struct PackageFile: Sendable, Hashable {
    /// Relative to the Documents root, as package.json records it.
    package var path: String
    package var sha256: String
    package var sizeBytes: Int64
    package var kind: Kind

    /// Where a file lives decides how it is committed: audio in the tour's
    /// shared folder (swapped whole), captions and the tile pack in the
    /// package's own folder (renamed into place, each by the journal).
    package enum Kind: Sendable, Hashable {
        case audio
        case captions
        case tilePack
    }

    package var isTilePack: Bool { kind == .tilePack }

    /// The blob that holds it on a site.
    package var siteKey: String { SiteLayout.blob(sha256: sha256) }
}

/// The files a package.json names, checked so that nothing it says can
/// reach outside the package's own places: audio only at
/// `AudioCache/<its tourId>/<poiId>_<Phase>.<ext>`, a narration's captions
/// only at `OfflineTours/<its packageId>/captions/<that poiId>_<Phase>.vtt`,
/// a tile pack only at `OfflineTours/<its packageId>/tiles.mbtiles`, every SHA-256 64 lowercase
/// hex digits, no path twice. A catalogue published without a key is
/// trusted for nothing more than its bytes say, so this holds for every
/// manifest, signed or not.
package enum PackageFiles {
    /// The most one package may weigh, its files together: 1 TiB, more than
    /// any device holds. A size is data a document claims; bounded so, the
    /// sums a device makes over the packages it holds (its budget, an
    /// update's bytes, a download's progress) stay far from `Int64.max`,
    /// where a sum would trap.
    package static let maximumPackageBytes: Int64 = 1 << 40

    package static func of(_ manifest: PackageManifest, file: String) throws -> [PackageFile] {
        func refuse(_ why: String) -> TourpackError {
            .integrityFailed(package: "package \(manifest.packageId)", file: file, message: why)
        }
        guard let packageID = SafeID(validating: manifest.packageId), packageID.value == manifest.packageId,
            let tourID = SafeID(validating: manifest.tourId), tourID.value == manifest.tourId
        else { throw refuse("packageId and tourId must be lowercase UUIDs") }
        for entry in manifest.audio {
            guard let parsed = Layout.parseAudioPath(entry.path), parsed.tourID == tourID else {
                throw refuse("audio path \(entry.path) is not AudioCache/\(tourID.value)/<poiId>_<Phase>.<ext>")
            }
            if let captions = entry.captions {
                let expected = Layout.captionsRelativePath(packageID: packageID, poiID: parsed.poiID, phase: parsed.phase)
                guard captions.path == expected else { throw refuse("captions path \(captions.path) is not \(expected)") }
            }
        }
        if let path = manifest.mapTiles.file {
            let expected = "\(Layout.offlineToursFolder)/\(packageID.value)/\(Layout.tilePackFileName)"
            guard path == expected else { throw refuse("mapTiles.file \(path) is not \(expected)") }
            guard manifest.mapTiles.sha256 != nil, manifest.mapTiles.sizeBytes != nil else {
                throw refuse("mapTiles names a file without its sha256 and sizeBytes")
            }
        }
        let files = listed(in: manifest)
        var seen: Set<String> = []
        var total: Int64 = 0
        for file in files {
            try check(file, refuse)
            guard seen.insert(file.path).inserted else { throw refuse("\(file.path) is named twice") }
            guard file.sizeBytes <= maximumPackageBytes - total else {
                throw refuse("\(file.path): sizeBytes \(file.sizeBytes) takes the package's files past \(maximumPackageBytes) bytes")
            }
            total += file.sizeBytes
        }
        return files
    }

    /// Every file `manifest` names, as it names them, unchecked: each audio
    /// file, the captions of each narration that has them, then the tile
    /// pack. The one list of a package's files: the install (through `of`),
    /// the publisher (`SiteLayout.files(of:)`) and the review read it, so a
    /// new kind of file needs naming only here.
    package static func listed(in manifest: PackageManifest) -> [PackageFile] {
        var files = manifest.audio.map { PackageFile(path: $0.path, sha256: $0.sha256, sizeBytes: $0.sizeBytes, kind: .audio) }
        files += manifest.audio.compactMap(\.captions).map {
            PackageFile(path: $0.path, sha256: $0.sha256, sizeBytes: $0.sizeBytes, kind: .captions)
        }
        if let path = manifest.mapTiles.file, let sha256 = manifest.mapTiles.sha256, let size = manifest.mapTiles.sizeBytes {
            files.append(PackageFile(path: path, sha256: sha256, sizeBytes: size, kind: .tilePack))
        }
        return files
    }

    private static func check(_ file: PackageFile, _ refuse: (String) -> TourpackError) throws {
        guard file.sha256.isLowercaseHex(count: 64) else {
            throw refuse("\(file.path): sha256 is not 64 lowercase hex digits")
        }
        guard file.sizeBytes >= 0 else { throw refuse("\(file.path): negative sizeBytes") }
    }

    /// The lowercase hex SHA-256 of `bytes`.
    package static func sha256(_ bytes: some DataProtocol) -> String {
        SHA256.hash(data: bytes).lowercaseHex
    }
}

/// A package installed in a Documents root: its package.json as it is on
/// disk (the bytes, whose SHA-256 the catalogue's `manifest.sha256` names
/// when it is the published one) and the files it names.
package struct PackageOnDisk: Sendable {
    /// Its fields, held once however often the package is copied: a
    /// library's view of its packages is passed, filtered and searched at
    /// every download, and a decoded package.json has many fields to
    /// retain. Never changed in place: a setter puts a changed copy here.
    private final class Fields: Sendable {
        let manifest: PackageManifest
        let manifestBytes: [UInt8]
        let manifestSHA256: String
        let files: [PackageFile]
        let identity: [Int]
        let installedAt: Date?

        init(
            manifest: PackageManifest, manifestBytes: [UInt8], manifestSHA256: String, files: [PackageFile], identity: [Int],
            installedAt: Date?
        ) {
            self.manifest = manifest
            self.manifestBytes = manifestBytes
            self.manifestSHA256 = manifestSHA256
            self.files = files
            self.identity = identity
            self.installedAt = installedAt
        }
    }

    private var fields: Fields

    package var manifest: PackageManifest {
        get { fields.manifest }
        set { self = changed(manifest: newValue) }
    }
    package var manifestBytes: [UInt8] {
        get { fields.manifestBytes }
        set { self = changed(manifestBytes: newValue) }
    }
    package var manifestSHA256: String {
        get { fields.manifestSHA256 }
        set { self = changed(manifestSHA256: newValue) }
    }
    package var files: [PackageFile] {
        get { fields.files }
        set { self = changed(files: newValue) }
    }
    /// Its package.json file when it was read: inode, size and modification
    /// time (a package.json is replaced by a rename, so a new one is another
    /// inode). Empty for a package not read from disk.
    package var identity: [Int] {
        get { fields.identity }
        set { self = changed(identity: newValue) }
    }
    /// When its package.json was written (the commit that installed it);
    /// nil for a package not read from disk.
    package var installedAt: Date? {
        get { fields.installedAt }
        set { self = changed(installedAt: .some(newValue)) }
    }

    package init(
        manifest: PackageManifest, manifestBytes: [UInt8], manifestSHA256: String, files: [PackageFile], identity: [Int] = [],
        installedAt: Date? = nil
    ) {
        fields = Fields(
            manifest: manifest, manifestBytes: manifestBytes, manifestSHA256: manifestSHA256, files: files, identity: identity,
            installedAt: installedAt)
    }

    private func changed(
        manifest: PackageManifest? = nil, manifestBytes: [UInt8]? = nil, manifestSHA256: String? = nil, files: [PackageFile]? = nil,
        identity: [Int]? = nil, installedAt: Date?? = nil
    ) -> PackageOnDisk {
        PackageOnDisk(
            manifest: manifest ?? self.manifest, manifestBytes: manifestBytes ?? self.manifestBytes,
            manifestSHA256: manifestSHA256 ?? self.manifestSHA256, files: files ?? self.files, identity: identity ?? self.identity,
            installedAt: installedAt ?? self.installedAt)
    }

    package var packageId: String { manifest.packageId }

    /// Every package under `OfflineTours` whose package.json reads, by
    /// package ID; what does not read is listed in `unreadable` (the
    /// install leaves it alone).
    ///
    /// - Parameter earlier: packages read before; one whose package.json is
    ///   still the same file (`identity`) is taken as it is, not read and
    ///   decoded again, so a reader that holds the packages pays for the
    ///   ones that changed.
    package static func read(documents: URL, reusing earlier: [PackageOnDisk] = []) -> (packages: [PackageOnDisk], unreadable: [String]) {
        let names = (try? PackageFolders.names(documents: documents)) ?? []
        let held = Dictionary(earlier.map { ($0.packageId, $0) }, uniquingKeysWith: { first, _ in first })
        var packages: [PackageOnDisk] = []
        var unreadable: [String] = []
        for name in names {
            switch read(documents: documents, packageId: name, reusing: held[name]) {
            case .package(let package): packages.append(package)
            case .unreadable(let relative): unreadable.append(relative)
            case .absent: continue
            }
        }
        return (packages, unreadable)
    }

    /// What `OfflineTours/<packageId>/package.json` holds.
    package enum Read: Sendable {
        case package(PackageOnDisk)
        /// It is there but does not read as this package's package.json (its path, relative to the root).
        case unreadable(String)
        case absent
    }

    /// One package's package.json, as `read(documents:reusing:)` reads each:
    /// `earlier` is taken as it is while its package.json is the same file,
    /// or, when it was not read from disk (an install's own, with no
    /// identity yet), while the file holds its bytes.
    package static func read(documents: URL, packageId name: String, reusing earlier: PackageOnDisk? = nil) -> Read {
        // Paths as strings: one lstat per package, with no URL built for it.
        let relative = PackageFolders.manifestPath(name)
        let path = documents.path + "/" + relative
        guard let status = FileStatus(path: path), status.kind == .file else { return .absent }
        let identity = [Int(truncatingIfNeeded: status.inode), Int(status.size), status.modifiedSeconds, status.modifiedNanoseconds]
        if let earlier, earlier.identity == identity { return .package(earlier) }
        if let earlier, earlier.identity.isEmpty, Int64(earlier.manifestBytes.count) == status.size,
            let data = FileManager.default.contents(atPath: path), Array(data) == earlier.manifestBytes
        {
            // The package as its installer held it, its bytes the file's: not decoded again.
            var known = earlier
            known.identity = identity
            known.installedAt = Date(
                timeIntervalSince1970: Double(status.modifiedSeconds) + Double(status.modifiedNanoseconds) / 1e9)
            return .package(known)
        }
        let read: PackageFolders.Manifest?
        do { read = try PackageFolders.read(documents: documents, folder: name) } catch { return .unreadable(relative) }
        guard let read else { return .absent }
        guard read.manifest.packageId == name, let files = try? PackageFiles.of(read.manifest, file: relative) else {
            return .unreadable(relative)
        }
        return .package(
            PackageOnDisk(
                manifest: read.manifest, manifestBytes: read.bytes, manifestSHA256: PackageFiles.sha256(read.bytes), files: files,
                identity: identity,
                installedAt: Date(timeIntervalSince1970: Double(status.modifiedSeconds) + Double(status.modifiedNanoseconds) / 1e9)))
    }

    /// The files whose size on disk differs from what package.json says
    /// (missing ones too): what an update must fetch even if unchanged.
    /// A size, not a hash: reading every file on every run would cost more
    /// than the catalogue request it accompanies. `paths` narrows the look
    /// to those files.
    package func damagedPaths(in documents: URL, among paths: Set<String>? = nil) -> Set<String> {
        let root = documents.path
        return Set(
            files.filter { file in
                guard paths?.contains(file.path) ?? true else { return false }
                guard let status = FileStatus(path: root + "/" + file.path) else { return true }
                return status.kind != .file || status.size != file.sizeBytes
            }.map(\.path))
    }
}

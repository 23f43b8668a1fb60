package import Foundation
import TourpackPackage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// `install`'s own folder in a Documents root (`Layout.installFolder`):
///
/// ```
/// .tourpack-install/
///   site.json                 the site last read and its catalogue's ETag (or Last-Modified)
///   catalog.json, .sig        that catalogue's exact bytes (and signature), reused on a 304
///   downloads/<sha256>.part   a file on its way, resumed next time (+ .part.validator: its ETag)
///   downloads/<sha256>        a file downloaded whole and verified, waiting for its package's commit;
///                             or the package.json of a package on its way, which names its files
///   staging/                  package.json temps and links for a commit (`StagingArea`)
///   journal/<tourId>.json     a commit in progress (`CommitJournal`), finished by the next run
/// ```
///
/// It lives inside the root, so every rename from it into the layout is on
/// one file system and atomic. An install sweeps `downloads` of what
/// neither its plans nor a waiting package.json of a package the catalogue
/// still lists name (so a failed download of one tour resumes after
/// another tour's install), and refuses a symlink in the place of any of
/// these folders. The app never reads it (hidden), and `validate` passes over it.
package struct InstallFolder: Sendable {
    package let documents: URL

    package init(documents: URL) { self.documents = documents.standardizedFileURL }

    package var url: URL { documents.appendingPathComponent(Layout.installFolder, isDirectory: true) }
    var downloads: URL { url.appendingPathComponent("downloads", isDirectory: true) }
    var siteFile: URL { url.appendingPathComponent("site.json") }
    var catalogFile: URL { url.appendingPathComponent("catalog.json") }
    var signatureFile: URL { url.appendingPathComponent("catalog.json.sig") }
    /// The root's `OfflineTours`: a package folder added or removed changes its identity.
    var toursFolder: URL { documents.appendingPathComponent(Layout.offlineToursFolder, isDirectory: true) }

    /// Where the file with this SHA-256 downloads.
    func partial(_ sha256: String) -> URL { downloads.appendingPathComponent("\(sha256).part") }
    /// Where it waits once whole and verified.
    func verified(_ sha256: String) -> URL { downloads.appendingPathComponent(sha256) }

    /// Creates the folder and its downloads folder, refusing a symlink (or
    /// a file) in the place of it, `downloads`, `staging` or `journal`:
    /// what an install writes, renames and replays must stay inside the root.
    package func prepare(storage: DeviceStorage = .system) throws {
        try AtomicFile.createFolder(documents)
        let folders = [url, downloads, CommitFolders.staging(in: url), CommitFolders.journal(in: url)]
        for folder in folders {
            if let problem = OutputTree.folderProblem(folder) { throw TourpackError.invalidInput(problem) }
        }
        try storage.prepare(documents: documents)
        for folder in folders {
            try AtomicFile.createFolder(folder, under: documents)
            storage.protect(folder)
        }
    }

    /// Protects the files the folder keeps at its top (the catalogue, its
    /// signature, the site, the trust record and roots, the queue, the
    /// access log) after they were written.
    package func protectFiles(storage: DeviceStorage) {
        for name in (try? FileManager.default.contentsOfDirectory(atPath: url.path)) ?? [] {
            let file = url.appendingPathComponent(name)
            if OutputTree.kind(file) == .file { storage.protect(file) }
        }
    }

    // MARK: The remembered catalogue

    /// What `site.json` says.
    struct Remembered: Codable, Equatable {
        var site: String
        var version: CatalogVersion
    }

    /// The catalogue last read from `site`, its signature when there was
    /// one, and the version to ask about; nil when none is remembered for it.
    package func rememberedCatalog(site: String) -> (bytes: [UInt8], signature: [UInt8]?, version: CatalogVersion)? {
        guard let data = FileManager.default.contents(atPath: siteFile.path),
            let remembered = try? JSONDecoder().decode(Remembered.self, from: data), remembered.site == site,
            let bytes = FileManager.default.contents(atPath: catalogFile.path)
        else { return nil }
        return (Array(bytes), FileManager.default.contents(atPath: signatureFile.path).map(Array.init), remembered.version)
    }

    /// Keeps a catalogue that passed its checks, for the next conditional read.
    package func remember(site: String, bytes: [UInt8], signature: [UInt8]?, version: CatalogVersion) throws {
        try AtomicFile.write(bytes, to: catalogFile)
        if let signature { try AtomicFile.write(signature, to: signatureFile) } else { try AtomicFile.remove(signatureFile) }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let data: Data
        do { data = try encoder.encode(Remembered(site: site, version: version)) } catch {
            throw TourpackError.internalInvariant("site.json could not be encoded: \(error)")
        }
        try AtomicFile.write(data, to: siteFile)
    }

    // MARK: Downloads

    /// How many bytes `file` holds; 0 when there is none (a symlink is not followed).
    package static func size(of file: URL) -> Int64 {
        var info = stat()
        return lstat(file.path, &info) == 0 ? Int64(info.st_size) : 0
    }

    /// Deletes the downloads in progress and those waiting for a commit
    /// (a cancelled install leaves no partial data behind).
    package func discardDownloads() {
        for name in (try? FileManager.default.contentsOfDirectory(atPath: downloads.path)) ?? [] {
            _ = try? AtomicFile.remove(downloads.appendingPathComponent(name))
        }
    }

    /// Deletes everything in `downloads` that is not one of these files
    /// (whole, partial, or a partial one's validator): what earlier installs
    /// left for packages no plan names any more. Returns the names removed.
    @discardableResult
    func sweepDownloads(keeping sha256s: Set<String>) -> [String] {
        var removed: [String] = []
        for name in ((try? FileManager.default.contentsOfDirectory(atPath: downloads.path)) ?? []).sorted() {
            var stem = name
            for suffix in [".validator", ".part"] where stem.hasSuffix(suffix) { stem.removeLast(suffix.count) }
            let expected = [stem, "\(stem).part", "\(stem).part.validator"]
            if sha256s.contains(stem), expected.contains(name), OutputTree.kind(downloads.appendingPathComponent(name)) == .file {
                continue
            }
            let item = downloads.appendingPathComponent(name)
            if OutputTree.kind(item) == .folder {
                try? AtomicFile.removeFolder(item, under: documents)
            } else {
                _ = try? AtomicFile.remove(item)
            }
            removed.append(name)
        }
        return removed
    }

    /// Keeps the plan's package.json in `downloads` under its SHA-256 (as the
    /// catalogue names it) until the package is committed: while a catalogue
    /// lists the package, the files it names stay through other installs'
    /// sweeps. Not synced: a copy a crash damaged fails its SHA-256 and is swept.
    func keepWaiting(_ plan: PackagePlan) throws {
        let sha256 = plan.entry.package.manifest.sha256
        guard !plan.manifestBytes.isEmpty, OutputTree.kind(verified(sha256)) == .absent else { return }
        do { try AtomicFile.replace(plan.manifestBytes, at: verified(sha256)) } catch {
            throw TourpackError.storageFailed(path: verified(sha256).path, operation: "write package.json", reason: "\(error)")
        }
    }

    /// The SHA-256 of every package.json waiting in `downloads` for a
    /// package `catalog` lists (checked against the catalogue's SHA-256),
    /// and of every file each names; those of `planned` (package.json
    /// SHA-256s whose files the caller names already) are not read.
    func waitingFiles(of catalog: Catalog, besides planned: Set<String> = []) -> Set<String> {
        var named: Set<String> = []
        let present = Set((try? FileManager.default.contentsOfDirectory(atPath: downloads.path)) ?? [])
        for package in catalog.tours.flatMap(\.packages)
        where present.contains(package.manifest.sha256) && !planned.contains(package.manifest.sha256) {
            guard let (_, files) = waitingManifest(package) else { continue }
            named.insert(package.manifest.sha256)
            named.formUnion(files.map(\.sha256))
        }
        return named
    }

    /// The package.json of `package` waiting in `downloads` (`keepWaiting`),
    /// checked: the catalogue's SHA-256, a package.json, its files at their
    /// places; and those files. Nil when there is none, or it fails a check.
    func waitingManifest(_ package: CatalogPackage) -> (manifest: PackageManifest, files: [PackageFile])? {
        let sha256 = package.manifest.sha256
        guard OutputTree.kind(verified(sha256)) == .file, let data = FileManager.default.contents(atPath: verified(sha256).path),
            PackageFiles.sha256(data) == sha256, let manifest = try? PackageManifest.decode(Array(data)),
            let files = try? PackageFiles.of(manifest, file: package.manifest.path)
        else { return nil }
        return (manifest, files)
    }

    /// Deletes what is downloaded for these files: they are in place now.
    func discardDownloads(of sha256s: some Sequence<String>) {
        for sha256 in sha256s {
            for file in [verified(sha256), partial(sha256), partial(sha256).appendingPathExtension("validator")] {
                _ = try? AtomicFile.remove(file)
            }
        }
    }
}

/// One install per Documents root: an exclusive `flock` on the root folder
/// itself, as a build holds its output root, so an install, a removal and
/// a build of one folder never run together. The kernel drops it when the
/// process ends, however it ends.
package final class InstallLock: @unchecked Sendable {
    private let lock = NSLock()
    private var descriptor: Int32?

    private init(descriptor: Int32) { self.descriptor = descriptor }

    deinit { release() }

    /// Takes the lock, waiting up to `seconds` for another holder to let it
    /// go (the app's library holds it per operation: a commit, a removal, a
    /// few system calls), then throws `alreadyDownloading` naming the root.
    /// Blocking: run it on a thread pool.
    package static func acquire(documents: URL, waitingUpTo seconds: Double) throws -> InstallLock {
        let deadline = ContinuousClock.now.advanced(by: .seconds(max(0, seconds)))
        while true {
            do { return try acquire(documents: documents) } catch let error as TourpackError where error.kind == .alreadyDownloading {
                if ContinuousClock.now >= deadline { throw error }
                usleep(20_000)
            }
        }
    }

    /// Takes the lock at once, or throws `alreadyDownloading` naming the root.
    package static func acquire(documents: URL) throws -> InstallLock {
        try AtomicFile.createFolder(documents)
        let fd = open(documents.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw TourpackError.storageFailed(path: documents.path, errno: errno, operation: "open Documents folder") }
        return try lock(fd, path: documents.path)
    }

    /// The downloads' lock: `.tourpack-install/download.lock`, held by an
    /// install from its first download to its last commit, so that two
    /// processes (an app and its background task, the app and `tourpack
    /// install`) never write the same partial file. The app's library
    /// releases the root's lock while it downloads; this one it keeps.
    /// Taken at once, or `alreadyDownloading`.
    package static func acquireDownloads(_ folder: InstallFolder) throws -> InstallLock {
        let path = folder.url.appendingPathComponent("download.lock").path
        let fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw TourpackError.storageFailed(path: path, errno: errno, operation: "open the downloads' lock") }
        return try lock(fd, path: folder.documents.path)
    }

    private static func lock(_ fd: Int32, path: String) throws -> InstallLock {
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let code = errno
            if code == EINTR { continue }
            _ = close(fd)
            if code == EWOULDBLOCK { throw TourpackError.alreadyDownloading(lockPath: path) }
            throw TourpackError.storageFailed(path: path, errno: code, operation: "flock")
        }
        return InstallLock(descriptor: fd)
    }

    package func release() {
        lock.withLock {
            guard let fd = descriptor else { return }
            descriptor = nil
            _ = flock(fd, LOCK_UN)
            _ = close(fd)
        }
    }
}

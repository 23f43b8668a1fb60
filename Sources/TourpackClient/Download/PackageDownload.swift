import Foundation
import TourpackPackage

/// The download phase: every file the plans need, `concurrency` at a time
/// in route order (`DownloadOrder`: a large first narration alone, the POIs the
/// app prefers first), each SHA-256 once however many packages name it.
///
/// A file downloads to `downloads/<sha256>.part` (resumed if a part is
/// there), is synced and hashed on NIO's thread pool, and only when its
/// size and SHA-256 are the ones its package.json names is it renamed to
/// `downloads/<sha256>`, where the commit takes it from. A mismatch after a
/// resume may be stale bytes from an older try: the file is fetched once
/// more from byte 0, and a fresh mismatch is an integrity failure.
extension Installer {
    /// - Parameter found: what `downloads` held of each file as the
    ///   install readied it (`ready`), under the downloads' lock it still holds.
    func download(_ plans: [PackagePlan], found: [String: Found], board: JobBoard) async throws {
        let order = DownloadOrder(plans, priorities: priorities, tilePack: tilePackPlacement)
        // The first narration goes alone (`DownloadOrder.startsAlone`).
        var slots = order.startsAlone ? 1 : max(1, concurrency)
        try await withThrowingTaskGroup(of: Void.self) { group in
            var running = 0
            while let item = order.next() {
                if running >= slots {
                    try await group.next()
                    running -= 1
                    slots = max(1, concurrency)
                }
                group.addTask { try await fetch(item.file, of: item.plan, found: found[item.file.sha256], board: board) }
                running += 1
            }
            try await group.waitForAll()
        }
    }

    private func fetch(_ file: PackageFile, of plan: PackagePlan, found: Found?, board: JobBoard) async throws {
        let verified = folder.verified(file.sha256)
        let partial = folder.partial(file.sha256)
        let validator = partial.appendingPathExtension("validator")
        // File work runs on `Blocking`'s queue, never on the cooperative pool.
        let (held, partialBytes) =
            if let found { (found.verified, found.partialBytes) } else {
                try await Blocking.run { (OutputTree.kind(verified) == .file, InstallFolder.size(of: partial)) }
            }
        if held {
            // Downloaded whole by an install that stopped before its commit.
            if try await Self.digest(verified) == (file.sizeBytes, file.sha256) {
                board.received(plan.packageId, file: file, bytes: file.sizeBytes)
                board.verified(file.sha256)
                return
            }
            try await Blocking.run { _ = try AtomicFile.remove(verified) }
        }
        var fromScratch = partialBytes == 0
        let report = self.report
        while true {
            do {
                try await source.download(file.siteKey, into: partial, size: file.sizeBytes) { observation in
                    switch observation {
                    case .bytes(let bytes):
                        board.received(plan.packageId, file: file, bytes: bytes)
                    case .retrying(let seconds, let reason):
                        board.move(
                            plan.packageId, to: .downloading, message: "\(file.path): \(reason); retrying in \(Self.seconds(seconds))")
                        report(.retrying(packageId: plan.packageId, file: file.path, seconds: seconds, reason: reason))
                    }
                }
            } catch let failure as SiteSourceFailure {
                let error = failure.installError(package: plan.name, file: file.path, tilePack: file.isTilePack)
                board.move(plan.packageId, to: .failed, message: error.description)
                throw error
            }
            // Synced and hashed, then kept as verified or dropped, in one trip.
            let (size, sha256) = try await Blocking.run { [storage] in
                let (size, sha256) = try Self.digestNow(partial)
                if size == file.sizeBytes, sha256 == file.sha256 {
                    try AtomicFile.move(partial, to: verified)
                    storage.protect(verified)
                } else {
                    try AtomicFile.remove(partial)
                }
                try AtomicFile.remove(validator)
                return (size, sha256)
            }
            if size == file.sizeBytes, sha256 == file.sha256 {
                board.received(plan.packageId, file: file, bytes: size)
                board.verified(file.sha256)
                return
            }
            board.received(plan.packageId, file: file, bytes: 0)
            if fromScratch {
                let error = TourpackError.integrityFailed(
                    package: plan.name, file: file.path,
                    message:
                        "the site's \(file.siteKey) is \(size) bytes with SHA-256 \(sha256); package.json names \(file.sizeBytes) bytes with SHA-256 \(file.sha256)"
                )
                board.move(plan.packageId, to: .failed, message: error.description)
                throw error
            }
            fromScratch = true
        }
    }

    /// A file that another installed package already holds (the same
    /// sentence in two tours) is hard-linked into `downloads/<sha256>` rather
    /// than downloaded again; the digest check before the commit still reads
    /// it whole, so a copy damaged on the device is fetched after all.
    static func reuseInstalledCopies(of plans: [PackagePlan], installed: [PackageOnDisk], folder: InstallFolder) {
        let wanted = Set(plans.flatMap(\.downloads).map(\.sha256))
        guard !wanted.isEmpty else { return }
        var held: [String: URL] = [:]
        for package in installed {
            for file in package.files where wanted.contains(file.sha256) && held[file.sha256] == nil {
                let url = folder.documents.appendingPathComponent(file.path)
                if OutputTree.kind(url) == .file, InstallFolder.size(of: url) == file.sizeBytes { held[file.sha256] = url }
            }
        }
        for (sha256, url) in held.sorted(by: { $0.key < $1.key }) where OutputTree.kind(folder.verified(sha256)) == .absent {
            try? AtomicFile.hardLink(url, to: folder.verified(sha256), under: folder.documents)
        }
    }

    /// The file's size and SHA-256, after an fsync: read off the cooperative pool.
    static func digest(_ url: URL) async throws -> (Int64, String) {
        try await Blocking.run { try digestNow(url) }
    }

    /// `digest`, on the calling thread. Blocking.
    static func digestNow(_ url: URL) throws -> (Int64, String) {
        try AtomicFile.syncFile(url)
        do {
            let digest = try FileDigest.sha256(of: url)
            return (digest.size, digest.hex)
        } catch {
            throw TourpackError.storageFailed(path: url.path, operation: "read", reason: "\(error)")
        }
    }

    static func seconds(_ value: Double) -> String {
        value < 10 ? String(format: "%.1f s", value) : String(format: "%.0f s", value)
    }
}

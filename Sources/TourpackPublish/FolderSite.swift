package import Foundation
import NIOPosix
import TourpackCore
package import TourpackHTTP

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A site in a folder on this machine: a web server's root, a share a CDN
/// pulls from, or `build/site` for `make tour`.
///
/// Every file lands whole: bytes go to a temp beside it (`AtomicFile`), and
/// - `create` copies into the temp, then makes the final name a hard link
///   of the temp, which fails if the name exists, so an existing file is
///   never replaced, not even by identical bytes;
/// - `replace` and `overwrite` rename the temp over the final name.
/// A version tag is the SHA-256 of the file's bytes. Publishers of one folder
/// take turns (`exclusively`: a `flock` on the folder itself, which a killed
/// publisher's kernel drops). Content types and cache lifetimes are the web
/// server's business here; they are not stored. Every file operation (a
/// copy, a write and its fsync, a read, a listing) runs on NIO's thread
/// pool, as the builder's do, never on the cooperative pool.
package struct FolderSite: Site {
    package let root: URL

    package init(root: URL) { self.root = root.standardizedFileURL }

    package var location: String { root.path }

    func url(_ key: String) -> URL { root.appendingPathComponent(key) }

    package func contains(_ key: String) async throws -> Bool {
        let file = url(key)
        return try await Self.offPool { FileManager.default.fileExists(atPath: file.path) }
    }

    /// Runs blocking file work on NIO's thread pool and returns its result.
    private static func offPool<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await NIOThreadPool.singleton.runIfActive(work)
    }

    package func create(_ key: String, from file: URL, contentType: String, cacheControl: String) async throws -> Bool {
        let final = url(key)
        // A blob may be hundreds of megabytes: its copy and fsync block.
        return try await Self.offPool { try Self.copy(file, to: final) }
    }

    private static func copy(_ file: URL, to final: URL) throws -> Bool {
        if FileManager.default.fileExists(atPath: final.path) { return false }
        let temp = try AtomicFile.temporaryURL(for: final)
        do {
            // A copy, not a link: a published blob must not change if its
            // source in the Documents root is ever written in place.
            _ = unlink(temp.path)
            try FileManager.default.copyItem(at: file, to: temp)
            try AtomicFile.syncFile(temp)
        } catch let error as TourpackError {
            AtomicFile.discard(temp: temp)
            throw error
        } catch {
            AtomicFile.discard(temp: temp)
            // The call's own errno (ENOSPC on a full site), never a made-up one.
            let code = underlyingErrno(of: error) ?? (fileSystemIsFull(at: temp.deletingLastPathComponent().path) ? ENOSPC : nil)
            guard let code else {
                throw TourpackError.storageFailed(path: temp.path, operation: "copy \(file.lastPathComponent)", reason: "\(error)")
            }
            throw TourpackError.storageFailed(path: temp.path, errno: code, operation: "copy \(file.lastPathComponent)")
        }
        return try Self.claim(temp, as: final)
    }

    package func create(_ key: String, bytes: [UInt8], contentType: String, cacheControl: String) async throws -> Bool {
        let final = url(key)
        return try await Self.offPool {
            if FileManager.default.fileExists(atPath: final.path) { return false }
            let temp = try AtomicFile.temporaryURL(for: final)
            do { try AtomicFile.fill(temp, with: bytes) } catch {
                AtomicFile.discard(temp: temp)
                throw error
            }
            return try Self.claim(temp, as: final)
        }
    }

    /// Gives the finished temp its final name unless the name is taken; the temp goes either way.
    private static func claim(_ temp: URL, as final: URL) throws -> Bool {
        defer { AtomicFile.discard(temp: temp) }
        guard link(temp.path, final.path) == 0 else {
            if errno == EEXIST { return false }
            throw TourpackError.storageFailed(path: final.path, errno: errno, operation: "link")
        }
        try AtomicFile.syncFolder(final.deletingLastPathComponent())
        return true
    }

    package func read(_ key: String) async throws -> ObjectStore.Versioned? {
        let file = url(key)
        return try await Self.offPool {
            guard let data = FileManager.default.contents(atPath: file.path) else {
                if FileManager.default.fileExists(atPath: file.path) {
                    throw TourpackError.storageFailed(path: file.path, errno: EACCES, operation: "read")
                }
                return nil
            }
            return ObjectStore.Versioned(bytes: Array(data), etag: SiteLayout.folderTag(of: data))
        }
    }

    package func replace(_ key: String, bytes: [UInt8], contentType: String, cacheControl: String, expecting: String?) async throws -> Bool
    {
        // Under `exclusively`, nobody else writes between this read and the rename.
        guard try await read(key)?.etag == expecting else { return false }
        let file = url(key)
        try await Self.offPool { try AtomicFile.write(bytes, to: file) }
        return true
    }

    package func overwrite(_ key: String, bytes: [UInt8], contentType: String, cacheControl: String) async throws {
        let file = url(key)
        try await Self.offPool { try AtomicFile.write(bytes, to: file) }
    }

    package func list(prefix: String) async throws -> [ObjectStore.Listed] {
        // The prefixes the publisher lists are folders: `blobs/`, `packages/`, `generations/`.
        let base = url(prefix)
        let rootPath = root.path.hasSuffix("/") ? root.path : root.path + "/"
        return try await Self.offPool { try Self.list(base, under: rootPath) }
    }

    private static func list(_ base: URL, under rootPath: String) throws -> [ObjectStore.Listed] {
        guard
            let walker = FileManager.default.enumerator(
                at: base, includingPropertiesForKeys: [.isRegularFileKey, .fileSizeKey, .contentModificationDateKey])
        else { return [] }
        var listed: [ObjectStore.Listed] = []
        for case let file as URL in walker {
            let values = try file.resourceValues(forKeys: [.isRegularFileKey, .fileSizeKey, .contentModificationDateKey])
            guard values.isRegularFile == true, !AtomicFile.isTemporaryName(file.lastPathComponent) else { continue }
            let path = file.standardizedFileURL.path
            guard path.hasPrefix(rootPath) else { continue }
            listed.append(
                ObjectStore.Listed(
                    key: String(path.dropFirst(rootPath.count)), bytes: values.fileSize ?? 0,
                    lastModified: values.contentModificationDate ?? .distantPast))
        }
        return listed.sorted { $0.key < $1.key }
    }

    package func delete(_ key: String) async throws {
        let file = url(key)
        _ = try await Self.offPool { try AtomicFile.remove(file) }
    }

    package func exclusively<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        let root = self.root
        let folder = try await Self.offPool {
            try AtomicFile.createFolder(root)
            let folder = open(root.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            guard folder >= 0 else { throw TourpackError.storageFailed(path: root.path, errno: errno, operation: "open site folder") }
            return folder
        }
        // `hold` closes the descriptor when it throws.
        try await BuildLock.hold(folder, path: root.path, mode: LOCK_EX, wait: true)
        defer {
            _ = flock(folder, LOCK_UN)
            _ = close(folder)
        }
        return try await body()
    }
}

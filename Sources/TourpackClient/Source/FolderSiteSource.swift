package import Foundation
import TourpackPackage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A site in a folder on this machine (`tourpack publish --site FOLDER`, a
/// mounted share): the same keys as over HTTP, read as files.
///
/// The catalogue's version tag is the SHA-256 of its bytes, as
/// `FolderSite` tags it, so a catalogue that did not change is
/// `notModified` here too. Files are copied in 1 MiB blocks on NIO's
/// thread pool, continuing a partial copy where it stopped.
package struct FolderSiteSource: SiteSource {
    package let root: URL

    package init(root: URL) { self.root = root.standardizedFileURL }

    package var location: String { root.path }

    private func url(_ key: String) -> URL { root.appendingPathComponent(key) }

    package func catalog(unlessStill version: CatalogVersion?) async throws -> CatalogRead {
        guard let bytes = try await object("catalog.json") else {
            throw SiteSourceFailure(.missing, url: url("catalog.json").path, reason: "no such file")
        }
        let tag = SiteLayout.folderTag(of: bytes)
        return tag == version?.etag ? .notModified : .fetched(bytes: bytes, version: CatalogVersion(etag: tag))
    }

    package func object(_ key: String) async throws -> [UInt8]? {
        let file = url(key)
        return try await Blocking.run {
            guard FileManager.default.fileExists(atPath: file.path) else { return nil }
            guard let data = FileManager.default.contents(atPath: file.path) else {
                throw SiteSourceFailure(.refused, url: file.path, reason: "cannot be read")
            }
            return Array(data)
        }
    }

    package func download(
        _ key: String, into file: URL, size: Int64, observe: @escaping @Sendable (DownloadObservation) -> Void
    ) async throws {
        let source = url(key)
        try await Blocking.run {
            let input = open(source.path, O_RDONLY | O_CLOEXEC)
            guard input >= 0 else {
                let code = errno
                throw SiteSourceFailure(code == ENOENT ? .missing : .refused, url: source.path, reason: errnoDescription(code))
            }
            defer { close(input) }
            let output = open(file.path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0o644)
            guard output >= 0 else {
                let reason = errnoDescription(errno)
                throw SiteSourceFailure(.storage(path: file.path, reason: reason), url: source.path, reason: reason)
            }
            defer { close(output) }
            var have = Int64(lseek(output, 0, SEEK_END))
            if have > size {
                guard ftruncate(output, 0) == 0 else {
                    let reason = errnoDescription(errno)
                    throw SiteSourceFailure(.storage(path: file.path, reason: reason), url: source.path, reason: reason)
                }
                have = 0
            }
            guard lseek(input, off_t(have), SEEK_SET) >= 0 else {
                throw SiteSourceFailure(.refused, url: source.path, reason: errnoDescription(errno))
            }
            var buffer = [UInt8](repeating: 0, count: 1 << 20)
            while have < size {
                let count = buffer.withUnsafeMutableBytes { read(input, $0.baseAddress, $0.count) }
                if count < 0, errno == EINTR { continue }
                guard count > 0 else { break }  // the source is shorter: the installer's size check says so
                var offset = 0
                while offset < count {
                    let written = buffer.withUnsafeBytes { write(output, $0.baseAddress! + offset, count - offset) }
                    if written < 0, errno == EINTR { continue }
                    guard written > 0 else {
                        let reason = errnoDescription(errno)
                        throw SiteSourceFailure(.storage(path: file.path, reason: reason), url: source.path, reason: reason)
                    }
                    offset += written
                }
                have += Int64(count)
                observe(.bytes(have))
            }
        }
    }
}

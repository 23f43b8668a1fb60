package import Foundation
import NIOPosix
import TourpackCore
package import TourpackHTTP

/// A site in an S3-compatible bucket, through the project's libcurl client
/// and SigV4 (`ObjectStore`), as the shared synthesis cache is reached.
///
/// `create` is a PUT with `If-None-Match: *` and `replace` one with
/// `If-Match` on the ETag read (or `If-None-Match: *` when there was none):
/// the bucket itself arbitrates between racing publishers, so nothing here
/// locks. Every object carries its `Content-Type` and `Cache-Control`, which
/// a CDN in front of the bucket passes on.
///
/// Uploads travel in memory, one object at a time per task: an audio file or
/// a tile pack, megabytes, not a whole package.
package struct BucketSite: Site {
    let store: ObjectStore

    package init(store: ObjectStore) { self.store = store }

    package var location: String {
        let settings = store.settings
        return Secret.redacting(url: settings.endpoint) + "/" + settings.bucket + "/" + settings.prefix
    }

    package func contains(_ key: String) async throws -> Bool {
        try await store.head(key) != nil
    }

    package func create(_ key: String, from file: URL, contentType: String, cacheControl: String) async throws -> Bool {
        let bytes: [UInt8]
        // A blob may be hundreds of megabytes: read on NIO's thread pool, never the cooperative pool.
        do { bytes = try await NIOThreadPool.singleton.runIfActive { Array(try Data(contentsOf: file)) } } catch {
            throw TourpackError.storageFailed(path: file.path, errno: EIO, operation: "read")
        }
        return try await create(key, bytes: bytes, contentType: contentType, cacheControl: cacheControl)
    }

    package func create(_ key: String, bytes: [UInt8], contentType: String, cacheControl: String) async throws -> Bool {
        try await store.write(key, bytes: bytes, contentType: contentType, cacheControl: cacheControl, condition: .absent)
    }

    package func read(_ key: String) async throws -> ObjectStore.Versioned? {
        try await store.read(key)
    }

    package func replace(_ key: String, bytes: [UInt8], contentType: String, cacheControl: String, expecting: String?) async throws -> Bool
    {
        try await store.write(
            key, bytes: bytes, contentType: contentType, cacheControl: cacheControl,
            condition: expecting.map { .unchanged(etag: $0) } ?? .absent)
    }

    package func overwrite(_ key: String, bytes: [UInt8], contentType: String, cacheControl: String) async throws {
        try await store.write(key, bytes: bytes, contentType: contentType, cacheControl: cacheControl, condition: .always)
    }

    package func list(prefix: String) async throws -> [ObjectStore.Listed] {
        try await store.list(prefix: prefix)
    }

    package func delete(_ key: String) async throws {
        try await store.delete(key)
    }

    package func exclusively<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        try await body()
    }
}

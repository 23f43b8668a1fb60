package import Foundation
package import TourpackHTTP

/// Where a published site lives, as the publisher needs it: a folder on this
/// machine (`FolderSite`) or an S3-compatible bucket behind a CDN
/// (`BucketSite`). Keys are the site's own paths (`blobs/sha256/…`,
/// `catalog.json`).
///
/// Two kinds of write keep the site safe at every instant:
/// - `create` never replaces an object: every blob, manifest and generation
///   is immutable, so a CDN may cache it forever and a device mid-download
///   never sees it change;
/// - `replace` changes an object only if it is still the version the caller
///   read (`expecting` its tag; nil: only if there is none): the catalogue,
///   whose racing publishers must not lose each other's entries.
package protocol Site: Sendable {
    /// For messages: the folder's path, or the bucket's URL with its prefix.
    var location: String { get }

    /// Whether the object is there.
    func contains(_ key: String) async throws -> Bool

    /// Stores the file's bytes as `key` unless an object is there; false
    /// when one was (and nothing was written).
    func create(_ key: String, from file: URL, contentType: String, cacheControl: String) async throws -> Bool

    /// Stores `bytes` as `key` unless an object is there; false when one was.
    func create(_ key: String, bytes: [UInt8], contentType: String, cacheControl: String) async throws -> Bool

    /// The object and its version tag, or nil when there is none.
    func read(_ key: String) async throws -> ObjectStore.Versioned?

    /// Replaces `key` when it is still at version `expecting` (nil: when
    /// there is no object); false when another writer changed it first.
    func replace(_ key: String, bytes: [UInt8], contentType: String, cacheControl: String, expecting: String?) async throws -> Bool

    /// Writes `key` whatever is there: a signature beside its catalogue.
    func overwrite(_ key: String, bytes: [UInt8], contentType: String, cacheControl: String) async throws

    /// Every object whose key starts with `prefix`, with its size and age.
    func list(prefix: String) async throws -> [ObjectStore.Listed]

    /// Removes the object; a missing one is already removed.
    func delete(_ key: String) async throws

    /// Runs `body` as the site's only publisher where the site needs that
    /// (a folder, under a lock); a bucket relies on its conditional writes.
    func exclusively<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T
}

extension Site {
    /// Where `key` is, for messages: `location` and `key` joined as a path,
    /// with exactly one `/` between them (`…/site/generations/1.json`,
    /// never `…/sitegenerations/1.json`).
    package func locate(_ key: String) -> String {
        let base = location.hasSuffix("/") ? String(location.dropLast()) : location
        let rest = key.hasPrefix("/") ? String(key.dropFirst()) : key
        guard !base.isEmpty else { return rest }
        return base + "/" + rest
    }
}

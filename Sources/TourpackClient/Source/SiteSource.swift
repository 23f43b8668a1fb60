package import Foundation

/// Where `install` reads a published site from: the site's own keys
/// (`catalog.json`, `packages/…`, `blobs/sha256/…`, see `SiteLayout`),
/// over HTTP(S) (`HTTPSiteSource`) or from a folder (`FolderSiteSource`).
///
/// A source moves bytes and says what went wrong on the way
/// (`SiteSourceFailure`); it checks nothing it reads. The installer checks
/// every byte against what names it: the catalogue against its signature,
/// each manifest against the catalogue, each file against its manifest.
package protocol SiteSource: Sendable {
    /// For messages: the base URL or the folder.
    var location: String { get }

    /// `catalog.json`, unless it is still `version` (`If-None-Match` on its
    /// ETag, else `If-Modified-Since`: a 304 downloads nothing).
    func catalog(unlessStill version: CatalogVersion?) async throws -> CatalogRead

    /// A small object (a signature, a package.json) whole; nil when the site has none (404).
    func object(_ key: String) async throws -> [UInt8]?

    /// Downloads `key` into `file`, continuing the bytes already there
    /// when it can (`Range` with `If-Range`), until the file holds `size`
    /// bytes. `observe` hears of bytes arriving and of waits before a retry.
    func download(_ key: String, into file: URL, size: Int64, observe: @escaping @Sendable (DownloadObservation) -> Void) async throws
}

/// What a conditional catalogue read found.
package enum CatalogRead: Sendable, Equatable {
    /// 304: the catalogue is still the version asked about.
    case notModified
    /// The catalogue's bytes and the validators naming this version.
    case fetched(bytes: [UInt8], version: CatalogVersion)
}

/// The validators of one version of the catalogue, as the server sent them:
/// an ETag, else a Last-Modified (a server without ETags, such as Python's
/// `http.server`, still answers 304 to `If-Modified-Since`).
package struct CatalogVersion: Sendable, Hashable, Codable {
    package var etag: String?
    package var lastModified: String?

    package init(etag: String?, lastModified: String? = nil) {
        self.etag = etag
        self.lastModified = lastModified
    }

    /// Whether there is anything to ask a conditional request with.
    package var isUsable: Bool { etag != nil || lastModified != nil }
}

/// What a download reports while it runs.
package enum DownloadObservation: Sendable, Equatable {
    /// The file now holds this many bytes.
    case bytes(Int64)
    /// A try failed for `reason`; the next one starts after `seconds`.
    case retrying(afterSeconds: Double, reason: String)
}

/// Why a source could not deliver a key. The installer turns each into the
/// app's error for the package and file concerned.
package struct SiteSourceFailure: Error, Sendable, Equatable, CustomStringConvertible {
    package enum Kind: Sendable, Equatable {
        /// No answer after every try (refused, reset, timeouts, 5xx, 429).
        case unreachable
        /// The site has no such key (404, 410): it is not the site the catalogue describes.
        case missing
        /// An answer the installer cannot use (another 4xx, a body longer than the file).
        case refused
        /// The bytes arrived but could not be written here (a full disk).
        case storage(path: String, reason: String)
    }

    package var kind: Kind
    /// The key's URL (without query or user info) or path.
    package var url: String
    package var status: Int?
    package var reason: String

    package init(_ kind: Kind, url: String, status: Int? = nil, reason: String) {
        self.kind = kind
        self.url = url
        self.status = status
        self.reason = reason
    }

    package var description: String {
        let answer = status.map { "HTTP \($0): " } ?? ""
        return "\(url): \(answer)\(reason)"
    }
}

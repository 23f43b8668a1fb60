package import Foundation

/// Where a pipeline's map tiles come from (`maps.source`).
///
/// The key is never held here, only the name of the variable that holds it.
package struct TileSource: Sendable, Hashable {
    package enum Location: Sendable, Hashable {
        /// An XYZ template with `{z}`, `{x}` and `{y}`, http or https.
        case url(String)
        /// A local MBTiles extract, read instead of the network (TMS rows).
        case mbtiles(URL)
    }

    package var location: Location
    /// From the template's extension or `format:`; for an extract, its metadata.
    package var format: TileFormat
    package var apiKeyEnv: String?
    /// The key `apiKeyEnv` named, read once when the pipeline is loaded; nil when unset.
    package var apiKey: Secret?
    /// The query parameter the key goes in, unless `apiKeyHeader` is set.
    package var apiKeyParam: String
    /// Send the key in this header instead of the query.
    package var apiKeyHeader: String?
    /// Written into the pack's metadata and package.json; tile licences require it.
    package var attribution: String
    /// Tile servers' usage policies ask for an identifying User-Agent with a contact.
    package var userAgent: String
    /// Tile requests in flight at most.
    package var concurrency: Int
    /// Tile requests started per second at most; 0 is no limit.
    package var requestsPerSecond: Double
    /// How long a tile stays fresh when the server says nothing (no max-age, no Expires).
    package var maxAgeDays: Int
    /// What the tile cache files this source's tiles under (`maps.source.name`);
    /// nil: the template itself. Naming it keeps the cache when the server
    /// moves (a mirror, a new port) but serves the same tiles.
    package var name: String?

    package static let defaultUserAgent = "tourpack (offline tour packages)"

    package init(
        location: Location, format: TileFormat, apiKeyEnv: String? = nil, apiKeyParam: String = "key",
        apiKeyHeader: String? = nil, attribution: String = "", userAgent: String = TileSource.defaultUserAgent,
        concurrency: Int = 4, requestsPerSecond: Double = 20, maxAgeDays: Int = 30
    ) {
        self.location = location
        self.format = format
        self.apiKeyEnv = apiKeyEnv
        self.apiKeyParam = apiKeyParam
        self.apiKeyHeader = apiKeyHeader
        self.attribution = attribution
        self.userAgent = userAgent
        self.concurrency = concurrency
        self.requestsPerSecond = requestsPerSecond
        self.maxAgeDays = maxAgeDays
    }

    /// What identifies the source's tiles in the tile cache: the template
    /// (or the extract's path) and the format; never the key, which changes
    /// who pays, not what a tile holds.
    package var cacheName: String {
        if let name { return "name \(format.rawValue) \(name)" }
        switch location {
        case .url(let template): return "url \(format.rawValue) \(template)"
        case .mbtiles(let file): return "mbtiles \(format.rawValue) \(file.standardizedFileURL.path)"
        }
    }

    /// The source as a person reads it: the template or the file, never a key.
    package var displayName: String {
        switch location {
        case .url(let template): return template
        case .mbtiles(let file): return file.path
        }
    }
}

/// One slippy-map tile in XYZ numbering (y grows southward).
package struct TileID: Sendable, Hashable, Comparable, CustomStringConvertible {
    package var z: Int
    package var x: Int
    package var y: Int

    package init(z: Int, x: Int, y: Int) {
        self.z = z
        self.x = x
        self.y = y
    }

    /// MBTiles and TMS count rows from the south: row = 2^z − 1 − y.
    package var tmsRow: Int { (1 << z) - 1 - y }

    package var description: String { "\(z)/\(x)/\(y)" }

    package static func < (lhs: TileID, rhs: TileID) -> Bool {
        (lhs.z, lhs.x, lhs.y) < (rhs.z, rhs.x, rhs.y)
    }
}

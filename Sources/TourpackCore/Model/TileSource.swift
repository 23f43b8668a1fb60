public import Foundation

/// Where a pipeline's map tiles come from (`maps.source`).
///
/// The key is never held here, only the name of the variable that holds it.
public struct TileSource: Sendable, Hashable {
    public enum Location: Sendable, Hashable {
        /// An XYZ template with `{z}`, `{x}` and `{y}`, http or https.
        case url(String)
        /// A local MBTiles extract, read instead of the network (TMS rows).
        case mbtiles(URL)
    }

    public var location: Location
    /// From the template's extension or `format:`; for an extract, its metadata.
    public var format: TileFormat
    public var apiKeyEnv: String?
    /// The key `apiKeyEnv` named, read once when the pipeline is loaded; nil when unset.
    public var apiKey: Secret?
    /// The query parameter the key goes in, unless `apiKeyHeader` is set.
    public var apiKeyParam: String
    /// Send the key in this header instead of the query.
    public var apiKeyHeader: String?
    /// Written into the pack's metadata and package.json; tile licences require it.
    public var attribution: String
    /// Tile servers' usage policies ask for an identifying User-Agent with a contact.
    public var userAgent: String
    /// Tile requests in flight at most.
    public var concurrency: Int
    /// Tile requests started per second at most; 0 is no limit.
    public var requestsPerSecond: Double
    /// How long a tile stays fresh when the server says nothing (no max-age, no Expires).
    public var maxAgeDays: Int
    /// What the tile cache files this source's tiles under (`maps.source.name`);
    /// nil: the template itself. Naming it keeps the cache when the server
    /// moves (a mirror, a new port) but serves the same tiles.
    public var name: String?

    public static let defaultUserAgent = "tourpack (offline tour packages)"

    public init(
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
    public var cacheName: String {
        if let name { return "name \(format.rawValue) \(name)" }
        switch location {
        case .url(let template): return "url \(format.rawValue) \(template)"
        case .mbtiles(let file): return "mbtiles \(format.rawValue) \(file.standardizedFileURL.path)"
        }
    }

    /// The source as a person reads it: the template or the file, never a key.
    public var displayName: String {
        switch location {
        case .url(let template): return template
        case .mbtiles(let file): return file.path
        }
    }
}

/// One slippy-map tile in XYZ numbering (y grows southward).
public struct TileID: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var z: Int
    public var x: Int
    public var y: Int

    public init(z: Int, x: Int, y: Int) {
        self.z = z
        self.x = x
        self.y = y
    }

    /// MBTiles and TMS count rows from the south: row = 2^z − 1 − y.
    public var tmsRow: Int { (1 << z) - 1 - y }

    public var description: String { "\(z)/\(x)/\(y)" }

    public static func < (lhs: TileID, rhs: TileID) -> Bool {
        (lhs.z, lhs.x, lhs.y) < (rhs.z, rhs.x, rhs.y)
    }
}

public import Foundation

/// Which tiles of the route's area a package carries (`maps.selection`).
public enum TileSelection: String, Sendable, Hashable, Codable, CaseIterable {
    /// The bounding box of the route and POIs grown by `bufferMiles`: the app's own rule.
    case bbox
    /// Only tiles within `bufferMiles` of the route's line (its waypoints
    /// joined in order) or of a POI. A diagonal route needs far fewer.
    case corridor
}

/// A tile's encoding, as MBTiles' `format` metadata names it.
public enum TileFormat: String, Sendable, Hashable, Codable, CaseIterable {
    case png
    case jpg
    case webp
    case pbf

    /// The format a URL template's extension names (`.png`, `.jpg`/`.jpeg`, `.webp`, `.pbf`/`.mvt`).
    public init?(pathExtension: String) {
        switch pathExtension.lowercased() {
        case "png": self = .png
        case "jpg", "jpeg": self = .jpg
        case "webp": self = .webp
        case "pbf", "mvt": self = .pbf
        default: return nil
        }
    }

    /// Whether `bytes` begin as a tile of this format does. An HTML error
    /// page served with a 200 starts with `<` and never passes.
    /// - png: the 8-byte PNG signature;
    /// - jpg: SOI then a marker (`FF D8 FF`);
    /// - webp: a RIFF container of type `WEBP`;
    /// - pbf: a gzip member (`1F 8B`, how vector tiles usually travel), or a
    ///   protobuf whose first field is a Tile's `layers` (field 3, length-delimited: `1A`).
    public func matches(_ bytes: some Collection<UInt8>) -> Bool {
        let head = Array(bytes.prefix(12))
        switch self {
        case .png: return head.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
        case .jpg: return head.starts(with: [0xFF, 0xD8, 0xFF])
        case .webp: return head.count == 12 && head.starts(with: Array("RIFF".utf8)) && Array(head[8..<12]) == Array("WEBP".utf8)
        case .pbf: return head.starts(with: [0x1F, 0x8B]) || head.first == 0x1A
        }
    }
}

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

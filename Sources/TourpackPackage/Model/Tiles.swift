import Foundation

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

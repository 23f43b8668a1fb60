import Foundation

/// Codable values as canonical JSON bytes, the same way package.json is written.
///
/// Foundation's encoder turns the value into JSON; its text is then read
/// back and written again by `JSONValue.canonicalBytes(pretty:)`, so the
/// bytes never depend on Foundation's number formatting or key order:
/// keys sorted by UTF-8 bytes, numbers in one form, `/` unescaped, two-space
/// indent and a final newline. Timestamps are `YYYY-MM-DDTHH:MM:SSZ`, as in package.json.
enum CanonicalCoding {
    static func encode(_ value: some Encodable) throws -> Data {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(PackageManifest.timestamp(date))
        }
        let text = try encoder.encode(value)
        do {
            return Data(try StrictJSONReader().read(Array(text)).canonicalBytes(pretty: true))
        } catch {
            throw TourpackError.internalInvariant("JSONEncoder wrote JSON its reader refuses: \(error)")
        }
    }

    static func decode<Value: Decodable>(_ type: Value.Type, from bytes: Data) throws -> Value {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            guard let date = PackageManifest.parseTimestamp(text) else {
                throw DecodingError.dataCorruptedError(in: container, debugDescription: "expected YYYY-MM-DDTHH:MM:SSZ, found \(text)")
            }
            return date
        }
        return try decoder.decode(type, from: bytes)
    }
}

package import Foundation
package import TourpackPackage

/// What a device trusts to sign a site's catalogue: one key, or a pinned
/// root of trust it walks forward (`RootOfTrust`).
package enum CatalogTrust: Sendable, Hashable {
    /// One Ed25519 key (`--public-key`, `TrustAnchor.publicKey(base64:)`): it never changes.
    case key(VerifyingKey)
    /// A root the app ships (`--root`, `TrustAnchor(rootJSON:)`), with its exact bytes.
    case root(RootOfTrust, bytes: [UInt8])

    /// A root from `root.json`'s bytes, checked as a device reads it.
    package static func root(bytes: [UInt8]) throws -> CatalogTrust {
        .root(try RootOfTrust.decode(Data(bytes)), bytes: bytes)
    }

    /// For messages and the catalogue summary.
    package var description: String {
        switch self {
        case .key(let key): return "\(key)"
        case .root(let root, _): return "root of trust version \(root.version)"
        }
    }
}

/// What a Documents folder remembers of the trust it verified with, in
/// `.tourpack-install/trust.json` (with `anchor-root.json`, the pinned
/// root it was first installed with, and `root.json`, the newest root it
/// walked to):
///
/// - the anchor it was first installed with, so that a later install with
///   no `--public-key` or `--root` still verifies;
/// - the highest catalogue generation it verified from its site, with that
///   catalogue's `expiresAt` and signing key: a lower generation (or the
///   same one with an earlier expiry) is a replay, refused as `rollbackRefused`.
package struct TrustRecord: Sendable, Hashable, Codable {
    package enum AnchorKind: String, Sendable, Hashable, Codable {
        case publicKey
        case root
    }

    package var schemaVersion = 1
    package var anchor: AnchorKind
    /// The key's base64, for a `publicKey` anchor.
    package var publicKey: String?
    /// The site the generation below was verified from.
    package var site: String?
    /// The highest catalogue generation verified from `site`.
    package var generation: Int?
    /// That catalogue's `expiresAt`.
    package var catalogExpiresAt: Date?
    /// The key that signed it: when a root rotation revokes that key, the
    /// generation is forgotten (a leaked key may have signed a generation far ahead).
    package var signedBy: String?
    /// The version of the newest root walked to (root anchors).
    package var rootVersion: Int?
}

extension InstallFolder {
    var trustFile: URL { url.appendingPathComponent("trust.json") }
    var anchorRootFile: URL { url.appendingPathComponent("anchor-root.json") }
    var heldRootFile: URL { url.appendingPathComponent("root.json") }

    /// What `trust.json` says; nil when the folder never verified a catalogue.
    package func trustRecord() -> TrustRecord? {
        guard let data = FileManager.default.contents(atPath: trustFile.path) else { return nil }
        return try? CanonicalJSON.decode(TrustRecord.self, from: data)
    }

    /// The anchor the folder was first installed with, when it remembers one.
    package func rememberedAnchor() -> CatalogTrust? {
        guard let record = trustRecord() else { return nil }
        switch record.anchor {
        case .publicKey:
            return record.publicKey.flatMap { try? VerifyingKey(base64: $0) }.map(CatalogTrust.key)
        case .root:
            guard let bytes = FileManager.default.contents(atPath: anchorRootFile.path) else { return nil }
            return try? CatalogTrust.root(bytes: Array(bytes))
        }
    }

    /// The newest root this folder walked to; nil without one.
    func heldRoot() -> RootOfTrust? {
        FileManager.default.contents(atPath: heldRootFile.path).flatMap { try? RootOfTrust.decode($0) }
    }

    /// Keeps what a verified catalogue taught: the record, the anchor's
    /// root the first time, and the newest root.
    func remember(_ record: TrustRecord, anchor: CatalogTrust, root: (RootOfTrust, [UInt8])?) throws {
        if trustRecord() == nil, case .root(_, let bytes) = anchor { try AtomicFile.write(bytes, to: anchorRootFile) }
        if let (root, bytes) = root, root.version > (heldRoot()?.version ?? 0) { try AtomicFile.write(bytes, to: heldRootFile) }
        let data: Data
        do { data = try CanonicalJSON.encode(record) } catch {
            throw TourpackError.internalInvariant("trust.json could not be encoded: \(error)")
        }
        try AtomicFile.write(Array(data), to: trustFile)
    }
}

/// Sorted-key JSON with whole-second ISO-8601 UTC dates, for the device's own small files.
enum CanonicalJSON {
    static func encode(_ value: some Encodable) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes, .prettyPrinted]
        encoder.dateEncodingStrategy = .iso8601
        return try encoder.encode(value)
    }

    static func decode<T: Decodable>(_ type: T.Type, from data: Data) throws -> T {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return try decoder.decode(type, from: data)
    }
}

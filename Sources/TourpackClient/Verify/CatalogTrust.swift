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
///   catalogue's `expiresAt`: a lower generation (or the same one with an
///   earlier expiry) is a replay, refused as `rollbackRefused`;
/// - the keys whose signatures verified that catalogue (`verifiedBy`), as
///   the signature check found them: once the newest root authorises none
///   of them, a rotation revoked them, and the generation is forgotten.
///
/// Rollback protection rests on this file, so one that cannot be read or
/// makes no sense is an error (`InstallFolder.damagedTrust`), never "no
/// record"; only a person's deliberate reset forgets it
/// (`InstallFolder.resetTrust()`).
package struct TrustRecord: Sendable, Hashable, Codable {
    package enum AnchorKind: String, Sendable, Hashable, Codable {
        case publicKey
        case root
    }

    /// 2 since the record keeps `verifiedBy`. Version 1 kept the catalogue's
    /// own `signedBy` instead: a claim whoever held the key wrote, which a
    /// version-1 record is read without (`decode(_:roots:)` migrates it).
    package static let currentSchemaVersion = 2

    package var schemaVersion = TrustRecord.currentSchemaVersion
    package var anchor: AnchorKind
    /// The key's base64, for a `publicKey` anchor.
    package var publicKey: String?
    /// The site the generation below was verified from.
    package var site: String?
    /// The highest catalogue generation verified from `site`.
    package var generation: Int?
    /// That catalogue's `expiresAt`.
    package var catalogExpiresAt: Date?
    /// The ids of the keys whose signatures verified that catalogue, sorted:
    /// what `RootOfTrust.verifyCatalog` (or the one key) found valid, never
    /// what the catalogue's `signedBy` claims. When the newest root
    /// authorises none of them, the generation is forgotten: a leaked key
    /// rotated out loses what it signed, however far ahead. Nil only for a
    /// version-1 record whose keys cannot be known (`decode(_:roots:)`): its
    /// generation is then kept whatever the roots say.
    package var verifiedBy: [String]?
    /// The version of the newest root walked to (root anchors).
    package var rootVersion: Int?

    package init(anchor: AnchorKind) { self.anchor = anchor }

    /// Why trust.json's bytes are not a record a device can rely on.
    package struct Damage: Error, Sendable, CustomStringConvertible {
        package var description: String
    }

    /// Reads trust.json's bytes, checked: a schema this tourpack knows, a
    /// `publicKey` anchor's key, generations and root versions of 1 or
    /// more, key ids of 16 lowercase hex digits. A version-1 record is
    /// migrated: its `signedBy` is dropped unread (the catalogue's own
    /// claim proves nothing), and `verifiedBy` becomes the keys that could
    /// have verified it, every catalogue key of the root it was verified
    /// with (`rootVersion`, among `roots`: the folder's `root.json` and
    /// `anchor-root.json`), or the anchor's one key. So a rotation that
    /// leaves none of them forgets the generation, and one that keeps any
    /// keeps it. Without that root, `verifiedBy` stays nil and the
    /// generation is kept (a reset, `InstallFolder.resetTrust()`, is the way out).
    package static func decode(_ bytes: [UInt8], roots: [RootOfTrust] = []) throws(Damage) -> TrustRecord {
        var record: TrustRecord
        do { record = try CanonicalJSON.decode(TrustRecord.self, from: Data(bytes)) } catch {
            throw Damage(description: "not a trust record: \(Self.brief(error))")
        }
        guard (1...currentSchemaVersion).contains(record.schemaVersion) else {
            throw Damage(description: "schemaVersion \(record.schemaVersion); this tourpack reads 1 to \(currentSchemaVersion)")
        }
        var anchorKey: VerifyingKey?
        if record.anchor == .publicKey {
            guard let key = record.publicKey.flatMap({ try? VerifyingKey(base64: $0) }) else {
                throw Damage(description: "publicKey is not the base64 of an Ed25519 public key")
            }
            anchorKey = key
        }
        if let generation = record.generation, generation < 1 {
            throw Damage(description: "generation \(generation); generations start at 1")
        }
        if let version = record.rootVersion, version < 1 {
            throw Damage(description: "rootVersion \(version); root versions start at 1")
        }
        if record.schemaVersion == 1 {
            record.verifiedBy = nil
            if record.generation != nil {
                if let anchorKey {
                    record.verifiedBy = [anchorKey.keyId]
                } else if let version = record.rootVersion, let root = roots.first(where: { $0.version == version }) {
                    record.verifiedBy = root.roles.catalog.keyIds.sorted()
                }
            }
            record.schemaVersion = currentSchemaVersion
        } else if record.generation != nil, record.verifiedBy == nil {
            throw Damage(description: "generation \(record.generation ?? 0) without verifiedBy, the keys that verified it")
        }
        if let keys = record.verifiedBy {
            guard !keys.isEmpty else { throw Damage(description: "verifiedBy names no key") }
            for key in keys where !key.isLowercaseHex(count: 16) {
                throw Damage(description: "verifiedBy: \(key.debugDescription.prefix(40)) is not a key id (16 lowercase hex digits)")
            }
        }
        return record
    }

    /// A decoding error in a line, without Foundation's coding path noise.
    private static func brief(_ error: any Error) -> String {
        if case DecodingError.dataCorrupted(let context) = error { return context.debugDescription }
        if case DecodingError.keyNotFound(let key, _) = error { return "no \(key.stringValue)" }
        if case DecodingError.typeMismatch(_, let context) = error {
            return "\(context.codingPath.map(\.stringValue).joined(separator: ".")): \(context.debugDescription)"
        }
        if case DecodingError.valueNotFound(_, let context) = error {
            return "\(context.codingPath.map(\.stringValue).joined(separator: ".")): \(context.debugDescription)"
        }
        return "\(error)"
    }
}

extension InstallFolder {
    var trustFile: URL { url.appendingPathComponent("trust.json") }
    var anchorRootFile: URL { url.appendingPathComponent("anchor-root.json") }
    var heldRootFile: URL { url.appendingPathComponent("root.json") }

    /// How messages name the trust record: relative to Documents.
    package static let trustPath = "\(Layout.installFolder)/trust.json"

    /// `integrityFailed` for a trust file (`trust.json`, `anchor-root.json`)
    /// that cannot be relied on, saying how to start over deliberately.
    package static func damagedTrust(_ reason: String, file name: String = "trust.json") -> TourpackError {
        let path = "\(Layout.installFolder)/\(name)"
        return TourpackError.integrityFailed(
            package: nil, file: path,
            message: "\(path) is damaged (\(reason)): without it this device cannot tell a replayed old catalogue from the "
                + "site's, so nothing was installed or changed. To start over as a new device would, trusting the site's "
                + "catalogue as it is now: `tourpack install --reset-trust` with --public-key or --root, or, in an app, "
                + "`OfflineLibrary.resetTrust()` once the user has confirmed it")
    }

    /// What `trust.json` says, checked (`TrustRecord.decode`); nil when
    /// there is none (the folder never verified a catalogue). One that
    /// cannot be read, or is not a record, is `damagedTrust`: rollback
    /// protection rests on it, so it is never taken for "no record".
    package func readTrustRecord() throws -> TrustRecord? {
        guard let data = FileManager.default.contents(atPath: trustFile.path) else {
            if OutputTree.kind(trustFile) == .absent { return nil }
            throw Self.damagedTrust("it cannot be read")
        }
        let roots = [heldRoot(), anchorRoot()].compactMap { $0 }
        do { return try TrustRecord.decode(Array(data), roots: roots) } catch {
            throw Self.damagedTrust(error.description)
        }
    }

    /// What `trust.json` says, for what only shows it (`installed`, a
    /// catalogue already verified this run): nil when there is none or it
    /// is damaged. What decides on trust reads `readTrustRecord()`.
    package func trustRecord() -> TrustRecord? { try? readTrustRecord() }

    /// The anchor the folder was first installed with, when it remembers
    /// one; `damagedTrust` when its record (or its pinned root) cannot be read.
    package func rememberedAnchor() throws -> CatalogTrust? {
        guard let record = try readTrustRecord() else { return nil }
        switch record.anchor {
        case .publicKey:
            guard let key = record.publicKey.flatMap({ try? VerifyingKey(base64: $0) }) else {
                throw Self.damagedTrust("publicKey is not a key")
            }
            return .key(key)
        case .root:
            guard let bytes = FileManager.default.contents(atPath: anchorRootFile.path) else {
                throw Self.damagedTrust("the root it was first installed with cannot be read", file: "anchor-root.json")
            }
            do { return try CatalogTrust.root(bytes: Array(bytes)) } catch {
                throw Self.damagedTrust("\(error)", file: "anchor-root.json")
            }
        }
    }

    /// The newest root this folder walked to; nil without one.
    func heldRoot() -> RootOfTrust? {
        FileManager.default.contents(atPath: heldRootFile.path).flatMap { try? RootOfTrust.decode($0) }
    }

    /// The root the folder was first installed with; nil without one.
    func anchorRoot() -> RootOfTrust? {
        FileManager.default.contents(atPath: anchorRootFile.path).flatMap { try? RootOfTrust.decode($0) }
    }

    /// Keeps what a verified catalogue taught: the record, the anchor's
    /// root the first time, and the newest root.
    func remember(_ record: TrustRecord, anchor: CatalogTrust, root: (RootOfTrust, [UInt8])?) throws {
        if OutputTree.kind(trustFile) == .absent, case .root(_, let bytes) = anchor { try AtomicFile.write(bytes, to: anchorRootFile) }
        if let (root, bytes) = root, root.version > (heldRoot()?.version ?? 0) { try AtomicFile.write(bytes, to: heldRootFile) }
        let data: Data
        do { data = try CanonicalJSON.encode(record) } catch {
            throw TourpackError.internalInvariant("trust.json could not be encoded: \(error)")
        }
        try AtomicFile.write(Array(data), to: trustFile)
    }

    /// Forgets what the folder learned of its site's trust: `trust.json`
    /// (the generation verified, and the anchor first installed with),
    /// `anchor-root.json` and the newest root walked to, under the install
    /// lock (`alreadyDownloading` while an install runs). The next
    /// catalogue verified is taken as a new device takes it, so until then
    /// rollback protection is off: only ever on a person's deliberate word
    /// (`tourpack install --reset-trust`, `OfflineLibrary.resetTrust()`),
    /// never to get past an error. The remembered catalogue stays; it is
    /// checked against the anchor again before any use.
    package func resetTrust() throws {
        let lock = try InstallLock.acquire(documents: documents)
        defer { lock.release() }
        for file in [trustFile, anchorRootFile, heldRootFile] { try AtomicFile.remove(file) }
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

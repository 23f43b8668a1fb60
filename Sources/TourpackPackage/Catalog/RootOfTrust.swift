package import Foundation

/// `root.json`: which keys may sign the catalogue, and which may sign the
/// next root, after The Update Framework's root role.
///
/// ```
/// roots/1.json, 1.json.sig      the root the app ships (pinned), signed by its own root keys
/// roots/2.json, 2.json.sig      signed by a threshold of root 1's root keys and of its own
/// …
/// ```
///
/// A device holds one root (the app ships version 1). Before it reads the
/// catalogue it fetches `roots/<n+1>.json` until the site has none, and
/// takes each only when a threshold of the root keys of the version it
/// holds and a threshold of the new version's own root keys signed those
/// exact bytes (`verifyNext`). A catalogue is then accepted only when a
/// threshold of the keys the root names for the `catalog` role signed it
/// (`verifyCatalog`). Revoking a leaked catalogue key is one
/// `tourpack keys rotate` (a root without it) and one publish (signed by
/// the new key): no app update.
///
/// Roots do not expire: a device offline for a year still walks its chain.
/// Like the catalogue, the bytes are canonical (`encoded()`) and the
/// signatures are detached (`<n>.json.sig`, a `SignatureSet`), so any
/// Ed25519 library checks them against the file's exact bytes.
/// `schemas/root.schema.json` describes the file.
package struct RootOfTrust: Sendable, Hashable, Codable {
    package static let currentSchemaVersion = 1
    /// The most a root (or its signature document) may weigh: a device reads no more.
    package static let maximumBytes = 64 * 1024

    package var schemaVersion: Int
    /// 1 for the root the app ships, then one more per rotation.
    package var version: Int
    /// When this version was written, UTC, whole seconds.
    package var publishedAt: Date
    /// Every key a role names, by `VerifyingKey.keyId`.
    package var keys: [String: Key]
    package var roles: Roles

    /// An Ed25519 public key, as the base64 of its 32 raw bytes.
    package struct Key: Sendable, Hashable, Codable {
        package var algorithm: String
        package var publicKey: String

        package init(_ key: VerifyingKey) {
            algorithm = CatalogSignature.ed25519
            publicKey = key.base64
        }
    }

    /// The keys allowed to sign something, and how many of them must.
    package struct Role: Sendable, Hashable, Codable {
        /// Sorted, each a key of `keys`.
        package var keyIds: [String]
        /// At least 1, at most `keyIds.count`.
        package var threshold: Int

        package init(keyIds: [String], threshold: Int) {
            self.keyIds = Array(Set(keyIds)).sorted()
            self.threshold = threshold
        }
    }

    package struct Roles: Sendable, Hashable, Codable {
        /// Signs the next root.
        package var root: Role
        /// Signs `catalog.json`.
        package var catalog: Role
    }

    /// A root of these keys; `keys` is filled from the roles' keys.
    package init(
        version: Int, publishedAt: Date, rootKeys: [VerifyingKey], rootThreshold: Int, catalogKeys: [VerifyingKey], catalogThreshold: Int
    ) {
        schemaVersion = Self.currentSchemaVersion
        self.version = version
        self.publishedAt = Date(timeIntervalSince1970: publishedAt.timeIntervalSince1970.rounded(.down))
        var keys: [String: Key] = [:]
        for key in rootKeys + catalogKeys { keys[key.keyId] = Key(key) }
        self.keys = keys
        roles = Roles(
            root: Role(keyIds: rootKeys.map(\.keyId), threshold: rootThreshold),
            catalog: Role(keyIds: catalogKeys.map(\.keyId), threshold: catalogThreshold))
    }

    /// The canonical bytes: what `roots/<n>.json` holds and its signatures cover.
    package func encoded() throws -> Data {
        try CanonicalCoding.encode(self)
    }

    /// Reads a root and checks it hangs together: the schema version, a
    /// version of 1 or more, every key an Ed25519 key named by its own id,
    /// every role's keys among them, each threshold between 1 and its key count.
    package static func decode(_ bytes: Data) throws -> RootOfTrust {
        guard bytes.count <= maximumBytes else {
            throw TourpackError.invalidInput("root.json: \(bytes.count) bytes; a root is at most \(maximumBytes)")
        }
        let root: RootOfTrust
        do { root = try CanonicalCoding.decode(RootOfTrust.self, from: bytes) } catch {
            throw TourpackError.invalidInput("root.json: not a root of trust: \(error)")
        }
        guard root.schemaVersion == currentSchemaVersion else {
            throw TourpackError.invalidInput(
                "root.json: schemaVersion \(root.schemaVersion); this tourpack reads version \(currentSchemaVersion) only")
        }
        guard root.version >= 1 else { throw TourpackError.invalidInput("root.json: version \(root.version); versions start at 1") }
        for (id, key) in root.keys {
            guard key.algorithm == CatalogSignature.ed25519 else {
                throw TourpackError.invalidInput("root.json: keys.\(id).algorithm \"\(key.algorithm)\"; only ed25519 is known")
            }
            let verifying = try VerifyingKey(base64: key.publicKey)
            guard verifying.keyId == id else {
                throw TourpackError.invalidInput("root.json: keys.\(id) is the key \(verifying.keyId), not the one its id names")
            }
        }
        for (name, role) in [("root", root.roles.root), ("catalog", root.roles.catalog)] {
            for id in role.keyIds where root.keys[id] == nil {
                throw TourpackError.invalidInput("root.json: roles.\(name).keyIds names \(id), which keys does not list")
            }
            guard Set(role.keyIds).count == role.keyIds.count, (1...max(1, role.keyIds.count)).contains(role.threshold),
                !role.keyIds.isEmpty
            else {
                throw TourpackError.invalidInput(
                    "root.json: roles.\(name): threshold \(role.threshold) of \(role.keyIds.count) distinct key(s); it must be 1 to the key count"
                )
            }
        }
        return root
    }

    /// The role's keys.
    package func verifyingKeys(_ role: Role) -> [VerifyingKey] {
        role.keyIds.compactMap { id in keys[id].flatMap { try? VerifyingKey(base64: $0.publicKey) } }
    }

    /// The ids of `role`'s keys whose signature in `document` matches `bytes`.
    package func signers(of bytes: Data, document: Data, role: Role) throws(CatalogSignatureError) -> Set<String> {
        let signatures = try SignatureSet.decode(document)
        var valid: Set<String> = []
        for key in verifyingKeys(role) {
            for signature in signatures.signatures where signature.keyId == key.keyId {
                if (try? CatalogSignature.verify(bytes: bytes, signature: signature, publicKey: key)) != nil { valid.insert(key.keyId) }
            }
        }
        return valid
    }

    /// Checks that a threshold of the catalogue role's keys signed `bytes`,
    /// and returns the ids of those whose signatures verified: what the
    /// device records as having vouched for the catalogue, never the
    /// catalogue's own `signedBy`, which whoever signs it writes.
    @discardableResult
    package func verifyCatalog(_ bytes: Data, signatureDocument: Data) throws -> Set<String> {
        let valid: Set<String>
        do { valid = try signers(of: bytes, document: signatureDocument, role: roles.catalog) } catch {
            throw TourpackError.integrityFailed(package: nil, file: SiteLayout.catalog, message: "\(error)", url: nil)
        }
        guard valid.count >= roles.catalog.threshold else {
            let named = (try? SignatureSet.decode(signatureDocument).signatures.map(\.keyId)) ?? []
            throw TourpackError.integrityFailed(
                package: nil, file: SiteLayout.catalog,
                message: "signed by \(named.isEmpty ? "no key" : "key(s) " + named.joined(separator: ", ")); root version \(version) "
                    + "needs \(roles.catalog.threshold) valid signature(s) by \(roles.catalog.keyIds.joined(separator: ", ")), found \(valid.count)",
                url: nil)
        }
        return valid
    }

    /// The version after this one; nil for a root at `Int.max`, which no
    /// root can follow (its version is data: `version + 1` would trap).
    package var nextVersion: Int? {
        let (next, overflow) = version.addingReportingOverflow(1)
        return overflow ? nil : next
    }

    /// Root `version + 1`, checked: the bytes are a root of the next version,
    /// signed by a threshold of this root's root keys and of its own.
    package func verifyNext(_ bytes: Data, signatureDocument: Data) throws -> RootOfTrust {
        guard let expected = nextVersion else {
            throw TourpackError.integrityFailed(
                package: nil, file: SiteLayout.root(version),
                message: "root version \(version) is the last there can be; no root follows it",
                url: nil)
        }
        let file = SiteLayout.root(expected)
        let next: RootOfTrust
        do { next = try RootOfTrust.decode(bytes) } catch {
            throw TourpackError.integrityFailed(package: nil, file: file, message: "\(error)", url: nil)
        }
        guard next.version == expected else {
            throw TourpackError.integrityFailed(
                package: nil, file: file, message: "holds root version \(next.version), not \(expected)", url: nil)
        }
        for (signer, role, name) in [(self, roles.root, "version \(version)"), (next, next.roles.root, "version \(next.version)")] {
            let valid: Set<String>
            do { valid = try signer.signers(of: bytes, document: signatureDocument, role: role) } catch {
                throw TourpackError.integrityFailed(package: nil, file: file, message: "\(error)", url: nil)
            }
            guard valid.count >= role.threshold else {
                throw TourpackError.integrityFailed(
                    package: nil, file: file,
                    message: "needs \(role.threshold) signature(s) by root \(name)'s root keys (\(role.keyIds.joined(separator: ", "))), "
                        + "found \(valid.count)",
                    url: nil)
            }
        }
        return next
    }
}

/// A detached signature document with one or more signatures:
/// `{"signatures": [{"algorithm", "keyId", "signature"}, …]}`, sorted by
/// key id. A single `CatalogSignature` document (what `catalog.json.sig`
/// holds) reads as a set of one.
package struct SignatureSet: Sendable, Hashable, Codable {
    package var signatures: [CatalogSignature]

    package init(_ signatures: [CatalogSignature]) {
        self.signatures = signatures.sorted { $0.keyId < $1.keyId }
    }

    /// Every key's signature of exactly `bytes`, as one document.
    package static func sign(_ bytes: Data, with keys: [SigningKey]) throws -> Data {
        var seen: Set<String> = []
        let signatures = try keys.filter { seen.insert($0.keyId).inserted }.map { key in
            CatalogSignature(keyId: key.keyId, signature: try key.rawSignature(bytes))
        }
        return try CanonicalCoding.encode(SignatureSet(signatures))
    }

    /// Reads either form strictly, at most `RootOfTrust.maximumBytes` and 16 signatures.
    package static func decode(_ document: Data) throws(CatalogSignatureError) -> SignatureSet {
        guard document.count <= RootOfTrust.maximumBytes else {
            throw .malformedDocument("\(document.count) bytes; a signature document is at most \(RootOfTrust.maximumBytes)")
        }
        let value: JSONValue
        do { value = try StrictJSONReader(maxDepth: 6).read(Array(document)) } catch {
            throw .malformedDocument("not JSON: \(error)")
        }
        guard case .object(let members) = value else { throw .malformedDocument("expected an object, found \(value.kindName)") }
        guard members.contains(where: { $0.key == "signatures" }) else { return SignatureSet([try CatalogSignature.decode(document)]) }
        guard members.count == 1, case .array(let items) = members[0].value else {
            throw .malformedDocument("expected exactly {\"signatures\": [...]}")
        }
        guard (1...16).contains(items.count) else { throw .malformedDocument("\(items.count) signatures; 1 to 16 are read") }
        var signatures: [CatalogSignature] = []
        for item in items {
            signatures.append(try CatalogSignature.decode(Data(item.canonicalBytes(pretty: false))))
        }
        return SignatureSet(signatures)
    }
}

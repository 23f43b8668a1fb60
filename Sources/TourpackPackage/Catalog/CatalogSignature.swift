package import Foundation

/// `catalog.json.sig`: the Ed25519 signature of the exact catalogue bytes.
///
/// A small JSON document, written like the catalogue (sorted keys, a final
/// newline):
///
///     {"algorithm": "ed25519", "keyId": "<16 hex digits>", "signature": "<base64>"}
///
/// `keyId` is `VerifyingKey.keyId` of the key that signed, so a device that
/// holds more than one trusted key (while keys rotate) picks the right one;
/// the signature is over the catalogue's bytes as served, never a re-encoding.
package struct CatalogSignature: Sendable, Hashable, Codable {
    /// The only algorithm there is so far.
    package static let ed25519 = "ed25519"

    package var algorithm: String
    /// The signing key's `VerifyingKey.keyId`.
    package var keyId: String
    /// The 64-byte Ed25519 signature, base64.
    package var signature: String

    package init(keyId: String, signature: Data) {
        self.init(keyId: keyId, base64Signature: signature.base64EncodedString())
    }

    private init(keyId: String, base64Signature: String) {
        self.algorithm = CatalogSignature.ed25519
        self.keyId = keyId
        self.signature = base64Signature
    }

    /// The document's canonical bytes.
    package func encoded() throws -> Data {
        try CanonicalCoding.encode(self)
    }

    /// Checks that `signatureDocument` is `publicKey`'s signature of exactly
    /// `bytes`, and says why not: a document that is not one
    /// (`malformedDocument`), another algorithm (`unknownAlgorithm`), another
    /// key (`keyIdMismatch`), or a signature that does not match the bytes (`badSignature`).
    package static func verify(bytes: Data, signatureDocument: Data, publicKey: VerifyingKey) throws(CatalogSignatureError) {
        try verify(bytes: bytes, signature: try decode(signatureDocument), publicKey: publicKey)
    }

    /// The same for one signature already read (one of a `SignatureSet`).
    package static func verify(bytes: Data, signature document: CatalogSignature, publicKey: VerifyingKey) throws(CatalogSignatureError) {
        guard let signature = Data(base64Encoded: document.signature), signature.count == 64 else {
            throw .malformedDocument("signature is not the base64 of a 64-byte Ed25519 signature")
        }
        guard document.keyId == publicKey.keyId else {
            throw .keyIdMismatch(signedWith: document.keyId, expected: publicKey.keyId)
        }
        guard publicKey.isValidSignature(signature, for: bytes) else { throw .badSignature(keyId: document.keyId) }
    }

    /// Reads a signature document strictly: an object with exactly
    /// `algorithm`, `keyId` and `signature`, all strings, the algorithm
    /// `ed25519` and the key id 16 lowercase hex digits.
    package static func decode(_ document: Data) throws(CatalogSignatureError) -> CatalogSignature {
        let value: JSONValue
        do { value = try StrictJSONReader(maxDepth: 4).read(Array(document)) } catch {
            throw .malformedDocument("not JSON: \(error)")
        }
        guard case .object(let members) = value else { throw .malformedDocument("expected an object, found \(value.kindName)") }
        var fields: [String: String] = [:]
        for (key, member) in members {
            guard ["algorithm", "keyId", "signature"].contains(key) else { throw .malformedDocument("unknown key \(quoted(key))") }
            guard fields[key] == nil else { throw .malformedDocument("duplicate key \(key)") }
            guard case .string(let text) = member else { throw .malformedDocument("\(key): expected a string, found \(member.kindName)") }
            fields[key] = text
        }
        guard let algorithm = fields["algorithm"], let keyId = fields["keyId"], let signature = fields["signature"] else {
            let missing = ["algorithm", "keyId", "signature"].filter { fields[$0] == nil }
            throw .malformedDocument("missing \(missing.joined(separator: ", "))")
        }
        guard algorithm == ed25519 else { throw .unknownAlgorithm(quoted(algorithm)) }
        guard keyId.isLowercaseHex(count: 16) else {
            throw .malformedDocument("keyId \(quoted(keyId)) is not 16 lowercase hex digits")
        }
        return CatalogSignature(keyId: keyId, base64Signature: signature)
    }

    /// Text from a document that may be hostile, quoted and cut short for a message.
    private static func quoted(_ text: String) -> String {
        let cut = text.count > 40 ? String(text.prefix(40)) + "…" : text
        return "\"\(cut)\""
    }
}

/// Why a catalogue's signature does not verify.
package enum CatalogSignatureError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Not a signature document: not JSON, a missing or unknown field, a bad key id or signature encoding.
    case malformedDocument(String)
    /// A document for an algorithm other than `ed25519` (quoted, as found).
    case unknownAlgorithm(String)
    /// Signed by another key than the one checked against.
    case keyIdMismatch(signedWith: String, expected: String)
    /// The signature does not match the bytes: they changed, or were never signed by this key.
    case badSignature(keyId: String)

    package var description: String {
        switch self {
        case .malformedDocument(let reason): return "catalogue signature: not a signature document: \(reason)"
        case .unknownAlgorithm(let name): return "catalogue signature: unknown algorithm \(name); only ed25519 is known"
        case .keyIdMismatch(let signedWith, let expected):
            return "catalogue signature: signed by key \(signedWith), not by the expected key \(expected)"
        case .badSignature(let keyId):
            return "catalogue signature: the signature by key \(keyId) does not match the catalogue's bytes"
        }
    }
}

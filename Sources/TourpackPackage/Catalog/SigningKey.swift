import Crypto
package import Foundation

/// The Ed25519 private key the catalogue is signed with.
///
/// It comes from the environment, as the base64 of its 32 raw bytes, in the
/// variable the pipeline names (`TOURPACK_SIGNING_KEY`, say), and, like
/// `Secret`, never prints, dumps or reflects itself; its errors name the
/// variable and what is wrong, never any of the value. The app holds the
/// matching `VerifyingKey` and trusts a catalogue only with a valid
/// signature by it. `tourpack keys generate` makes a pair, and is the one
/// place a private key is ever printed (`exportBase64()`).
package struct SigningKey: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    private let key: Curve25519.Signing.PrivateKey

    private init(key: Curve25519.Signing.PrivateKey) {
        self.key = key
    }

    /// A new random key.
    package static func generate() -> SigningKey {
        SigningKey(key: Curve25519.Signing.PrivateKey())
    }

    /// The key in the variable `name` of `environment`: the base64 of the
    /// private key's 32 raw bytes, surrounding whitespace ignored.
    package static func load(
        variable name: String, from environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(SigningKeyError) -> SigningKey {
        guard let secret = Secret(environment[name]) else { throw SigningKeyError(variable: name, problem: .missing) }
        let text = secret.value.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !text.isEmpty else { throw SigningKeyError(variable: name, problem: .missing) }
        guard let raw = Data(base64Encoded: text) else { throw SigningKeyError(variable: name, problem: .notBase64) }
        guard raw.count == 32, let key = try? Curve25519.Signing.PrivateKey(rawRepresentation: raw) else {
            throw SigningKeyError(variable: name, problem: .wrongLength(raw.count))
        }
        return SigningKey(key: key)
    }

    /// The public half, for the app and for `CatalogSignature.verify`.
    package var verifyingKey: VerifyingKey {
        VerifyingKey(key.publicKey)
    }

    /// The public key's id (`VerifyingKey.keyId`).
    package var keyId: String { verifyingKey.keyId }

    /// The signature document (`CatalogSignature`) of exactly `bytes`: the
    /// catalogue's `.sig`.
    package func sign(_ bytes: Data) throws -> Data {
        let signature = try key.signature(for: bytes)
        return try CatalogSignature(keyId: keyId, signature: signature).encoded()
    }

    /// The raw 64-byte Ed25519 signature of `bytes`, for a `SignatureSet`.
    package func rawSignature(_ bytes: Data) throws -> Data {
        try key.signature(for: bytes)
    }

    /// The private key as the base64 of its 32 raw bytes, the form `load`
    /// reads. Only `tourpack keys generate` calls this, to hand a new key to
    /// its owner once.
    package func exportBase64() -> String {
        key.rawRepresentation.base64EncodedString()
    }

    package var description: String { "<redacted signing key \(keyId)>" }
    package var debugDescription: String { description }
    package var customMirror: Mirror { Mirror(self, children: []) }
}

/// Why the signing key could not be read. The message names the variable
/// and the problem, never the value.
package struct SigningKeyError: Error, Sendable, Hashable, CustomStringConvertible {
    package enum Problem: Sendable, Hashable {
        /// Not set, or empty.
        case missing
        /// Not valid base64 (standard alphabet, with padding).
        case notBase64
        /// Valid base64 of this many bytes, not 32.
        case wrongLength(Int)
    }

    /// The environment variable the key was to come from.
    package var variable: String
    package var problem: Problem

    package init(variable: String, problem: Problem) {
        self.variable = variable
        self.problem = problem
    }

    package var description: String {
        let expected = "the base64 of an Ed25519 private key's 32 raw bytes (`tourpack keys generate` makes one)"
        switch problem {
        case .missing: return "signing key: \(variable) is not set or empty; it must hold \(expected)"
        case .notBase64: return "signing key: \(variable) is not base64; it must hold \(expected)"
        case .wrongLength(let count): return "signing key: \(variable) decodes to \(count) bytes, not 32; it must hold \(expected)"
        }
    }
}

/// An Ed25519 public key: what the app holds to check the catalogue's
/// signature, written as the base64 of its 32 raw bytes.
package struct VerifyingKey: Sendable, Hashable, CustomStringConvertible {
    /// The key's 32 raw bytes.
    package let rawRepresentation: Data

    init(_ key: Curve25519.Signing.PublicKey) {
        self.rawRepresentation = key.rawRepresentation
    }

    /// Reads the base64 of the 32 raw bytes; surrounding whitespace is ignored.
    package init(base64: String) throws {
        let text = base64.trimmingCharacters(in: .whitespacesAndNewlines)
        guard let raw = Data(base64Encoded: text) else {
            throw TourpackError.invalidInput("public key: not base64; expected the base64 of an Ed25519 public key's 32 raw bytes")
        }
        try self.init(rawRepresentation: raw)
    }

    package init(rawRepresentation raw: Data) throws {
        guard raw.count == 32, let key = try? Curve25519.Signing.PublicKey(rawRepresentation: raw) else {
            throw TourpackError.invalidInput("public key: \(raw.count) bytes; an Ed25519 public key has 32")
        }
        self.init(key)
    }

    /// The base64 of the 32 raw bytes.
    package var base64: String { rawRepresentation.base64EncodedString() }

    /// The first 16 hex digits (8 bytes) of the SHA-256 of the raw key:
    /// short enough to read, and what a signature document names its key by,
    /// so a device holding several keys (during a rotation) knows which to use.
    package var keyId: String {
        SHA256.hash(data: rawRepresentation).prefix(8).lowercaseHex
    }

    package var description: String { "ed25519 public key \(keyId)" }

    /// Whether `signature` is this key's Ed25519 signature of `bytes`.
    func isValidSignature(_ signature: Data, for bytes: Data) -> Bool {
        guard let key = try? Curve25519.Signing.PublicKey(rawRepresentation: rawRepresentation) else { return false }
        return key.isValidSignature(signature, for: bytes)
    }
}

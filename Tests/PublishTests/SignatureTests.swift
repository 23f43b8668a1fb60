import Crypto
import Foundation
import Testing
import TourpackCore
import TourpackPublish
import TourpackTesting

/// The catalogue's Ed25519 signature, checked by an independent
/// implementation (Python's `cryptography`) as well as by `verify`.
@Suite struct SignatureTests {
    /// Verifies `signatureDocument` over the bytes of `catalog` with the
    /// base64 raw public key, in Python; prints `ok <keyId>` or `invalid <keyId>`,
    /// where keyId is the first 16 hex digits of sha256(raw public key).
    static let pythonVerify = """
        import base64, hashlib, json, sys
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
        catalog = open(sys.argv[1], "rb").read()
        document = json.load(open(sys.argv[2]))
        raw = base64.b64decode(sys.argv[3], validate=True)
        key_id = hashlib.sha256(raw).hexdigest()[:16]
        assert document["algorithm"] == "ed25519", document
        assert document["keyId"] == key_id, (document["keyId"], key_id)
        try:
            Ed25519PublicKey.from_public_bytes(raw).verify(base64.b64decode(document["signature"], validate=True), catalog)
            print("ok " + key_id)
        except InvalidSignature:
            print("invalid " + key_id)
        """

    static func pythonVerdict(catalog: Data, signature: Data, publicKey: String) async throws -> String {
        let folder = try TemporaryFolder.make("tourpack-publish")
        defer { TemporaryFolder.remove(folder) }
        let (catalogFile, signatureFile) = (
            folder.appendingPathComponent("catalog.json"), folder.appendingPathComponent("catalog.json.sig")
        )
        try catalog.write(to: catalogFile)
        try signature.write(to: signatureFile)
        let result = try await PublishFixture.python(pythonVerify, [catalogFile.path, signatureFile.path, publicKey])
        try #require(result.status == 0, "python3 failed: \(result.stderr)")
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test("Python's cryptography verifies the signature, and a flipped byte fails in Python and in verify")
    func independentVerification() async throws {
        let key = SigningKey.generate()
        let catalog = try PublishFixture.catalog().encoded()
        let signature = try key.sign(catalog)
        let publicKey = key.verifyingKey.base64

        #expect(try await Self.pythonVerdict(catalog: catalog, signature: signature, publicKey: publicKey) == "ok \(key.keyId)")
        try CatalogSignature.verify(bytes: catalog, signatureDocument: signature, publicKey: key.verifyingKey)

        for offset in [0, catalog.count / 2, catalog.count - 1] {
            var flipped = catalog
            flipped[offset] ^= 0x01
            #expect(try await Self.pythonVerdict(catalog: flipped, signature: signature, publicKey: publicKey) == "invalid \(key.keyId)")
            #expect(throws: CatalogSignatureError.badSignature(keyId: key.keyId)) {
                try CatalogSignature.verify(bytes: flipped, signatureDocument: signature, publicKey: key.verifyingKey)
            }
        }
    }

    @Test("A signature Python makes with the same private key verifies in Swift")
    func pythonSignsSwiftVerifies() async throws {
        let key = SigningKey.generate()
        let catalog = try PublishFixture.catalog().encoded()
        let folder = try TemporaryFolder.make("tourpack-publish")
        defer { TemporaryFolder.remove(folder) }
        let file = folder.appendingPathComponent("catalog.json")
        try catalog.write(to: file)
        let script = """
            import base64, hashlib, json, sys
            from cryptography.hazmat.primitives import serialization
            from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
            key = Ed25519PrivateKey.from_private_bytes(base64.b64decode(sys.argv[2], validate=True))
            raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
            signature = base64.b64encode(key.sign(open(sys.argv[1], "rb").read())).decode()
            print(json.dumps({"algorithm": "ed25519", "keyId": hashlib.sha256(raw).hexdigest()[:16], "signature": signature}))
            print(base64.b64encode(raw).decode())
            """
        let result = try await PublishFixture.python(script, [file.path, key.exportBase64()])
        try #require(result.status == 0, "python3 failed: \(result.stderr)")
        let lines = result.stdout.split(separator: "\n").map(String.init)
        try #require(lines.count == 2)
        #expect(lines[1] == key.verifyingKey.base64)
        try CatalogSignature.verify(bytes: catalog, signatureDocument: Data(lines[0].utf8), publicKey: key.verifyingKey)
    }

    @Test("keyId is the first 16 hex digits of the SHA-256 of the raw public key")
    func keyId() throws {
        let key = SigningKey.generate()
        let raw = key.verifyingKey.rawRepresentation
        #expect(raw.count == 32)
        #expect(key.keyId == String(SHA256.hash(data: raw).lowercaseHex.prefix(16)))
        #expect(key.keyId.count == 16)
        #expect(try VerifyingKey(base64: key.verifyingKey.base64) == key.verifyingKey)
    }

    @Test("The signature document is sorted JSON with a final newline and exactly three fields")
    func documentShape() throws {
        let key = SigningKey.generate()
        let document = String(decoding: try key.sign(Data("catalogue".utf8)), as: UTF8.self)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(document.utf8)) as? [String: String])
        #expect(Set(object.keys) == ["algorithm", "keyId", "signature"])
        #expect(object["algorithm"] == "ed25519" && object["keyId"] == key.keyId)
        #expect(Data(base64Encoded: object["signature"] ?? "")?.count == 64)
        #expect(document.hasSuffix("}\n"))
        let offsets = ["\"algorithm\"", "\"keyId\"", "\"signature\""].map { document.range(of: $0)!.lowerBound }
        #expect(offsets == offsets.sorted())
    }

    @Test("verify tells a malformed document, an unknown algorithm, another key and a bad signature apart")
    func distinctFailures() throws {
        let key = SigningKey.generate()
        let other = SigningKey.generate()
        let bytes = try PublishFixture.catalog().encoded()
        let good = String(decoding: try key.sign(bytes), as: UTF8.self)
        func verify(_ document: String, with publicKey: VerifyingKey = key.verifyingKey) throws(CatalogSignatureError) {
            try CatalogSignature.verify(bytes: bytes, signatureDocument: Data(document.utf8), publicKey: publicKey)
        }
        func isMalformed(_ document: String) -> Bool {
            do { try verify(document) } catch {
                if case .malformedDocument = error { return true }
            }
            return false
        }

        try verify(good)
        #expect(isMalformed("not json"))
        #expect(isMalformed("[]"))
        #expect(isMalformed(good.replacingOccurrences(of: "\"keyId\"", with: "\"keyID\"")))
        #expect(isMalformed(good.replacingOccurrences(of: "\"algorithm\": \"ed25519\",", with: "")))
        #expect(isMalformed(good.replacingOccurrences(of: "\"algorithm\"", with: "\"extra\": \"x\", \"algorithm\"")))
        #expect(isMalformed(good.replacingOccurrences(of: "\"signature\": \"", with: "\"signature\": \"!!")))
        #expect(isMalformed(good.replacingOccurrences(of: "\"keyId\": \"", with: "\"keyId\": \"X")))
        #expect(throws: CatalogSignatureError.unknownAlgorithm("\"rsa\"")) {
            try verify(good.replacingOccurrences(of: "\"ed25519\"", with: "\"rsa\""))
        }
        #expect(throws: CatalogSignatureError.keyIdMismatch(signedWith: key.keyId, expected: other.keyId)) {
            try verify(good, with: other.verifyingKey)
        }
        // Another key's signature, relabelled with this key's id, is still refused.
        let forged = String(decoding: try other.sign(bytes), as: UTF8.self).replacingOccurrences(of: other.keyId, with: key.keyId)
        #expect(throws: CatalogSignatureError.badSignature(keyId: key.keyId)) { try verify(forged) }
    }
}

import Foundation
import Testing
import TourpackCore
import TourpackPublish
import TourpackTesting

/// `tourpack keys generate`, run as a user would.
@Suite struct KeysCommandTests {
    @Test("keys generate --json prints a key pair whose private key signs what its public key verifies")
    func json() async throws {
        let result = try await TourpackBinary.run(["keys", "generate", "--json"])
        try #require(result.status == 0, "\(result.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        #expect(Set(object.keys) == ["version", "algorithm", "keyId", "publicKey", "privateKey"])
        #expect(object["algorithm"] as? String == "ed25519")
        let (privateKey, publicKey) = (try #require(object["privateKey"] as? String), try #require(object["publicKey"] as? String))
        try Self.checkPair(privateKey: privateKey, publicKey: publicKey, keyId: try #require(object["keyId"] as? String))

        let again = try await TourpackBinary.run(["keys", "generate", "--json"])
        #expect(!again.stdout.contains(privateKey), "two runs made the same key")
    }

    @Test("keys generate prints the pair and the key id for a person to read")
    func human() async throws {
        let result = try await TourpackBinary.run(["keys", "generate"])
        try #require(result.status == 0, "\(result.stderr)")
        let lines = result.stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let keyId = try #require(lines.first?.split(separator: " ").last.map(String.init))
        func value(after heading: String) throws -> String {
            let index = try #require(lines.firstIndex { $0.hasPrefix(heading) }, "no \(heading) in \(result.stdout)")
            return lines[index + 1].trimmingCharacters(in: .whitespaces)
        }
        #expect(lines.first?.hasPrefix("new ed25519 signing key, key id ") == true)
        try Self.checkPair(privateKey: try value(after: "private key"), publicKey: try value(after: "public key"), keyId: keyId)

        let help = try await TourpackBinary.run(["keys", "generate", "--help"])
        let words = help.stdout.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        #expect(help.status == 0 && words.contains("this is the only time tourpack ever prints it"))
    }

    static func checkPair(privateKey: String, publicKey: String, keyId: String) throws {
        let key = try SigningKey.load(variable: "KEY", from: ["KEY": privateKey])
        let verifying = try VerifyingKey(base64: publicKey)
        #expect(key.verifyingKey == verifying)
        #expect(verifying.keyId == keyId)
        let bytes = Data("signed by tourpack keys generate\n".utf8)
        try CatalogSignature.verify(bytes: bytes, signatureDocument: try key.sign(bytes), publicKey: verifying)
    }
}

/// The built `tourpack`, run to its end on a thread of its own.
enum TourpackBinary {
    static func run(_ arguments: [String]) async throws -> Executable.Result {
        try await OffThePool.run { try Executable.run(arguments) }
    }
}

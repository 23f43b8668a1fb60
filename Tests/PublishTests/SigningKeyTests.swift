import Foundation
import Testing
import TourpackCore
import TourpackPublish
import TourpackTesting

/// The signing key comes from the environment and never shows itself: not
/// in its errors, its description, a dump or a mirror. `tourpack keys
/// generate` is the one place it is printed.
@Suite struct SigningKeyTests {
    static let variable = "TOURPACK_SIGNING_KEY"

    /// Every way a value could leak into text.
    static func renderings(of value: Any) -> [String] {
        var dumped = ""
        dump(value, to: &dumped)
        var renderings = ["\(value)", String(reflecting: value), dumped, "\(Mirror(reflecting: value).children.map { "\($0)" })"]
        if let error = value as? any Error { renderings.append(error.localizedDescription) }
        return renderings
    }

    /// The value, its halves and, when it is base64, what it decodes to in hex.
    static func fragments(of value: String) -> [String] {
        var fragments = [value, String(value.prefix(value.count / 2)), String(value.suffix(value.count / 2))]
        if let raw = Data(base64Encoded: value) { fragments.append(raw.map { String(format: "%02x", $0) }.joined()) }
        return fragments.filter { $0.count >= 6 }
    }

    @Test(
        "A missing, non-base64 or wrong-length key is refused naming the variable and the problem, never the value",
        arguments: [
            (nil, SigningKeyError.Problem.missing),
            ("", .missing),
            ("   \n", .missing),
            ("correct horse battery staple, not base64 at all", .notBase64),
            ("c2VjcmV0LXNpZ25pbmcta2V5LXdpdGgtYS1sb25nLXRhaWw=!", .notBase64),
            (Data(repeating: 0xA7, count: 31).base64EncodedString(), .wrongLength(31)),
            (Data((0..<64).map { UInt8($0 * 3 & 0xFF) }).base64EncodedString(), .wrongLength(64)),
            ("c2VjcmV0LXZhbHVl", .wrongLength(12)),
        ] as [(String?, SigningKeyError.Problem)])
    func refusals(value: String?, problem: SigningKeyError.Problem) throws {
        let environment = value.map { [Self.variable: $0] } ?? [:]
        do {
            _ = try SigningKey.load(variable: Self.variable, from: environment)
            Issue.record("loaded a key from \(problem)")
        } catch {
            #expect(error.problem == problem)
            #expect(error.variable == Self.variable)
            #expect(error.description.contains(Self.variable))
            for text in Self.renderings(of: error) {
                for fragment in Self.fragments(of: value ?? "") {
                    #expect(!text.contains(fragment), "the error shows part of the value: \(text)")
                }
            }
        }
    }

    @Test("The key's description, debug description, dump and mirror never show it")
    func neverPrinted() throws {
        let secret = SigningKey.generate().exportBase64()
        let key = try SigningKey.load(variable: Self.variable, from: [Self.variable: secret])
        #expect(key.exportBase64() == secret)
        #expect(Mirror(reflecting: key).children.isEmpty)
        for text in Self.renderings(of: key) + Self.renderings(of: [key]) {
            for fragment in Self.fragments(of: secret) {
                #expect(!text.contains(fragment), "the key shows itself: \(text)")
            }
        }
        #expect(key.description.contains("redacted") && key.description.contains(key.keyId))
    }

    @Test("A key read from the environment, whitespace around it, signs what its public key verifies")
    func loadedKeySigns() throws {
        let made = SigningKey.generate()
        let key = try SigningKey.load(variable: "OTHER_NAME", from: ["OTHER_NAME": " \(made.exportBase64())\n"])
        #expect(key.keyId == made.keyId)
        let bytes = Data("{\"generation\": 1}\n".utf8)
        try CatalogSignature.verify(bytes: bytes, signatureDocument: try key.sign(bytes), publicKey: made.verifyingKey)
        #expect(throws: (any Error).self) { try VerifyingKey(base64: "not base64") }
        #expect(throws: (any Error).self) { try VerifyingKey(base64: Data(count: 31).base64EncodedString()) }
    }
}

import ArgumentParser
import Foundation
import TourpackCore
import TourpackPublish

struct Keys: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "The Ed25519 keys the published catalogue is signed and verified with.",
        subcommands: [Generate.self]
    )

    struct Generate: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Make a new signing key pair and print both halves, once.",
            discussion: """
                Prints the private key, the public key (each the base64 of its 32 raw \
                bytes) and the key id (the first 16 hex digits of the SHA-256 of the raw \
                public key). Store the private key as a secret in the environment \
                variable the publisher reads (for example TOURPACK_SIGNING_KEY); this is \
                the only time tourpack ever prints it. Build the public key into the \
                app, which verifies catalog.json.sig with it. Nothing is written to disk.
                """
        )

        @Flag(help: "Print the key pair as JSON.") var json = false

        struct Report: Encodable {
            var version = 1
            var algorithm = "ed25519"
            var keyId: String
            var publicKey: String
            var privateKey: String
        }

        func run() throws {
            let key = SigningKey.generate()
            let report = Report(keyId: key.keyId, publicKey: key.verifyingKey.base64, privateKey: key.exportBase64())
            if json {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
                print(String(decoding: try encoder.encode(report), as: UTF8.self))
                return
            }
            print(
                """
                new ed25519 signing key, key id \(report.keyId)

                private key (secret: keep it in the publisher's environment variable, e.g. TOURPACK_SIGNING_KEY; it is not shown again)
                  \(report.privateKey)

                public key (for the app, which verifies catalog.json.sig with it)
                  \(report.publicKey)
                """)
        }
    }
}

import ArgumentParser
import Foundation
import TourpackCore
import TourpackKit
import TourpackPublish

struct Keys: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keys",
        abstract: "The Ed25519 keys the published catalogue is signed and verified with, and the site's roots of trust.",
        subcommands: [Generate.self, Root.self, Rotate.self]
    )

    struct Generate: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "generate",
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

    /// Where `keys root` and `keys rotate` write: a pipeline's publish.target, or a folder.
    struct SiteOptions: ParsableArguments {
        @Argument(
            help: "The pipeline file (pipelines/*.yaml) whose publish.target is the site.", completion: .file(extensions: ["yaml", "yml"]))
        var pipeline: String?

        @Option(help: "The site folder, instead of the pipeline's publish.target.", completion: .directory)
        var site: String?

        func validate() throws {
            if (pipeline == nil) == (site == nil) { throw ValidationError("give the pipeline or --site FOLDER (one)") }
        }

        func resolve() throws -> any Site {
            if let site { return FolderSite(root: URL(fileURLWithPath: site).standardizedFileURL) }
            let config = try PipelineLoader.load(URL(fileURLWithPath: pipeline!), overrides: PipelineOverrides())
            guard let settings = config.publish else {
                throw TourpackError.invalidInput("\(pipeline!): publish: the pipeline has no publish section; pass --site FOLDER")
            }
            return try Publish.site(for: settings.target)
        }
    }

    /// Private keys from the environment, by variable name.
    static func signingKeys(_ names: [String], option: String) throws -> [SigningKey] {
        try names.map { name in
            do { return try SigningKey.load(variable: name) } catch { throw TourpackError.invalidInput("\(option): \(error)") }
        }
    }

    /// Public keys: each the base64 of its 32 raw bytes, or a file holding it.
    static func verifyingKeys(_ values: [String]) throws -> [VerifyingKey] {
        try values.map { value in
            var text = value
            if FileManager.default.fileExists(atPath: value), let contents = FileManager.default.contents(atPath: value) {
                text = String(decoding: contents, as: UTF8.self)
            }
            do { return try VerifyingKey(base64: text) } catch { throw TourpackError.invalidInput("--catalog-key: \(error)") }
        }
    }

    static func describe(_ root: RootOfTrust) -> String {
        "root of trust version \(root.version): root keys \(root.roles.root.keyIds.joined(separator: ", ")) "
            + "(threshold \(root.roles.root.threshold)), catalogue keys \(root.roles.catalog.keyIds.joined(separator: ", ")) "
            + "(threshold \(root.roles.catalog.threshold))"
    }

    struct Root: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "root",
            abstract: "Write the site's first root of trust, roots/1.json: the root.json the app ships.",
            discussion: """
                Root version 1 names the root keys (which sign the next root; give their private keys \
                in environment variables, each signs) and the catalogue keys (public: the key in \
                publish.signingKeyEnv, by its public half), each role with a threshold. It is written \
                to the site as roots/1.json with roots/1.json.sig, and with --out to a file for the \
                app, which pins it (TrustAnchor(rootJSON:), install --root). Keep root keys offline: \
                they are needed only to rotate. Refused when the site has a root already.
                """
        )

        @OptionGroup var siteOptions: SiteOptions

        @Option(name: .customLong("root-key-env"), help: "A variable holding a root private key (repeatable).")
        var rootKeyEnv: [String] = []

        @Option(help: "How many root keys must sign the next root.")
        var rootThreshold = 1

        @Option(name: .customLong("catalog-key"), help: "A public key allowed to sign the catalogue: base64 or a file (repeatable).")
        var catalogKey: [String] = []

        @Option(help: "How many catalogue keys must sign the catalogue.")
        var catalogThreshold = 1

        @Option(help: "Also write root.json here, for the app.", completion: .file(extensions: ["json"]))
        var out: String?

        func validate() throws {
            if rootKeyEnv.isEmpty { throw ValidationError("give at least one --root-key-env VAR") }
            if catalogKey.isEmpty { throw ValidationError("give at least one --catalog-key KEY") }
        }

        func run() async throws {
            let site = try siteOptions.resolve()
            var publisher = RootPublisher(site: site)
            publisher.now = CommandClock.now
            let root = try await publisher.create(
                rootKeys: try Keys.signingKeys(rootKeyEnv, option: "--root-key-env"), rootThreshold: rootThreshold,
                catalogKeys: try Keys.verifyingKeys(catalogKey), catalogThreshold: catalogThreshold)
            if let out { try AtomicFile.write(Array(try root.encoded()), to: URL(fileURLWithPath: out)) }
            print("wrote \(Keys.describe(root)) to \(site.locate(SiteLayout.root(root.version)))\(out.map { " and \($0)" } ?? "")")
        }
    }

    struct Rotate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rotate",
            abstract: "Write the site's next root of trust, roots/<n+1>.json, with new catalogue (or root) keys.",
            discussion: """
                The new root names --catalog-key as the only keys allowed to sign the catalogue \
                (leave a leaked key out to revoke it), and keeps root version n's root keys unless \
                --root-key-env names new ones. It must be signed by a threshold of version n's root \
                keys and of its own: give their private keys with --sign-with-env (and the new root \
                keys' with --root-key-env, which sign too). Devices holding any older root walk to it \
                before their next catalogue read. Then publish with the new catalogue key: a \
                catalogue signed by a key the newest root does not name is refused.
                """
        )

        @OptionGroup var siteOptions: SiteOptions

        @Option(name: .customLong("sign-with-env"), help: "A variable holding a current root private key, to sign with (repeatable).")
        var signWithEnv: [String] = []

        @Option(
            name: .customLong("root-key-env"), help: "A variable holding a new root private key (repeatable); default: keep the root keys.")
        var rootKeyEnv: [String] = []

        @Option(help: "How many root keys must sign the next root (default: as now).")
        var rootThreshold: Int?

        @Option(name: .customLong("catalog-key"), help: "A public key allowed to sign the catalogue: base64 or a file (repeatable).")
        var catalogKey: [String] = []

        @Option(help: "How many catalogue keys must sign the catalogue.")
        var catalogThreshold = 1

        @Option(help: "Also write the new root.json here.", completion: .file(extensions: ["json"]))
        var out: String?

        func validate() throws {
            if signWithEnv.isEmpty { throw ValidationError("give at least one --sign-with-env VAR (a current root key)") }
            if catalogKey.isEmpty { throw ValidationError("give at least one --catalog-key KEY") }
        }

        func run() async throws {
            let site = try siteOptions.resolve()
            var publisher = RootPublisher(site: site)
            publisher.now = CommandClock.now
            let newRoot = rootKeyEnv.isEmpty ? nil : try Keys.signingKeys(rootKeyEnv, option: "--root-key-env")
            let signers = try Keys.signingKeys(signWithEnv, option: "--sign-with-env") + (newRoot ?? [])
            let root = try await publisher.rotate(
                signers: signers, rootKeys: newRoot?.map(\.verifyingKey), rootThreshold: rootThreshold,
                catalogKeys: try Keys.verifyingKeys(catalogKey), catalogThreshold: catalogThreshold)
            if let out { try AtomicFile.write(Array(try root.encoded()), to: URL(fileURLWithPath: out)) }
            print("wrote \(Keys.describe(root)) to \(site.locate(SiteLayout.root(root.version)))\(out.map { " and \($0)" } ?? "")")
        }
    }
}

import Foundation
import Testing
import TourpackCore
import TourpackTesting

/// An Ed25519 pair from the real `tourpack keys generate --json`, and the
/// variable the publish sections below name for its private half.
struct SigningPair {
    static let variable = "TP_SIGNING_KEY"

    var privateKey: String
    var publicKey: String
    var keyId: String

    var environment: [String: String] { [Self.variable: privateKey] }

    static func generate() throws -> SigningPair {
        let result = try Executable.run(["keys", "generate", "--json"])
        guard result.status == 0,
            let object = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any],
            let privateKey = object["privateKey"] as? String, let publicKey = object["publicKey"] as? String,
            let keyId = object["keyId"] as? String
        else { throw SetupFailure("keys generate --json failed: \(result.stderr)") }
        return SigningPair(privateKey: privateKey, publicKey: publicKey, keyId: keyId)
    }
}

/// `publish:` sections for a `BuildWorkspace`'s pipeline.
enum PublishSection {
    /// Obviously fake S3 keys, searched for in every output and object.
    static let accessKey = "FAKEPUBLISHACCESSKEY4TESTS"
    static let secretKey = "sentinel-publish-secret-0123456789-never-print-me"
    static let bucketKeys = ["TP_PUBLISH_ACCESS": accessKey, "TP_PUBLISH_SECRET": secretKey]

    /// A folder target, relative to the pipeline.
    static func folder(_ path: String = "site", keepGenerations: Int = 10, graceDays: Int = 7, signed: Bool = true) -> String {
        let key = signed ? ["  signingKeyEnv: \(SigningPair.variable)"] : []
        let lines =
            ["publish:", "  target: {folder: \(path)}"] + key + ["  keepGenerations: \(keepGenerations)", "  graceDays: \(graceDays)"]
        return lines.joined(separator: "\n") + "\n"
    }

    /// An S3 target on a moto server, its keys in `bucketKeys`' variables.
    static func bucket(endpoint: String, bucket: String, prefix: String = "v1/") -> String {
        """
        publish:
          target:
            s3:
              endpoint: \(endpoint)
              bucket: \(bucket)
              prefix: \(prefix)
              region: us-east-1
              accessKeyEnv: TP_PUBLISH_ACCESS
              secretKeyEnv: TP_PUBLISH_SECRET
          signingKeyEnv: \(SigningPair.variable)
          keepGenerations: 10
          graceDays: 7

        """
    }
}

extension BuildWorkspace {
    /// Where `PublishSection.folder()` puts the site.
    var site: URL { root.appendingPathComponent("site") }

    /// Replaces the pipeline's `publish:` section (kept last) with `section`; nil removes it.
    func setPublish(_ section: String?) throws {
        var text = try String(contentsOf: pipeline, encoding: .utf8)
        if let start = text.range(of: "\npublish:\n") { text = String(text[..<start.lowerBound]) }
        if !text.hasSuffix("\n") { text += "\n" }
        try (text + (section ?? "")).write(to: pipeline, atomically: true, encoding: .utf8)
    }

    /// `tourpack publish` on this workspace's pipeline.
    func publish(_ extra: [String] = [], environment: [String: String] = [:]) throws -> Executable.Result {
        try Executable.run(["publish", pipeline.path] + extra, in: root, environment: environment)
    }

    /// Starts `tourpack publish --json` in the background, to be killed or raced.
    func startPublish(environment: [String: String]) throws -> RunningBuild {
        try RunningBuild(arguments: ["publish", pipeline.path, "--json"], in: root, environment: environment)
    }

    /// Each package under the root: its package.json's bytes and parsed
    /// object, by package ID, as publish reads them.
    func localPackages() throws -> [String: (bytes: Data, manifest: [String: Any])] {
        let folder = output.appendingPathComponent(Layout.offlineToursFolder)
        var packages: [String: (bytes: Data, manifest: [String: Any])] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: folder.path) where !name.hasPrefix(".") {
            let bytes = try Data(contentsOf: folder.appendingPathComponent(name).appendingPathComponent(Layout.manifestFileName))
            packages[name] = (bytes, try JSONSerialization.jsonObject(with: bytes) as? [String: Any] ?? [:])
        }
        return packages
    }

    /// Replaces `old` with `new` in one tour file: one narration, not every one `writeTours` touches.
    func editTour(_ file: String, replacing old: String, with new: String) throws {
        let url = root.appendingPathComponent("tours").appendingPathComponent(file)
        let text = try String(contentsOf: url, encoding: .utf8)
        guard text.contains(old) else { throw SetupFailure("\(file) does not say \(old)") }
        try text.replacingOccurrences(of: old, with: new).write(to: url, atomically: true, encoding: .utf8)
    }
}

/// The NDJSON events of a `publish --json` run.
struct PublishLog {
    var events: [[String: Any]]

    init(events: [[String: Any]]) { self.events = events }

    init(_ result: Executable.Result) {
        events = result.stdout.split(separator: "\n").compactMap { line in
            try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
        }
    }

    func named(_ name: String) -> [[String: Any]] { events.filter { $0["event"] as? String == name } }

    /// The `uploaded` events, by key.
    var uploaded: [String: [String: Any]] {
        Dictionary(named("uploaded").map { ($0["key"] as? String ?? "", $0) }) { first, _ in first }
    }

    /// The generation a `published` event put in force.
    var published: Int? { named("published").first?["generation"] as? Int }
    var unchanged: Int? { named("unchanged").first?["generation"] as? Int }
    /// `would upload KEY` lines of a dry run.
    var planned: Set<String> {
        Set(named("planned").compactMap { ($0["message"] as? String)?.replacingOccurrences(of: "would upload ", with: "") })
    }
}

/// What a site looks like from outside: every check a device or an auditor
/// could make on a folder holding the site's objects (the folder target
/// itself, or a bucket downloaded by `MotoTestServer.objects`), with
/// independent tools: Python's jsonschema and cryptography, and SHA-256 of
/// the bytes on disk.
struct SiteAudit {
    /// The catalogue in force; nil when the site has none.
    var catalog: [String: Any]?
    var catalogBytes: Data?
    /// Everything wrong apart from `catalog.json.sig`, which has a verdict of its own.
    var problems: [String] = []
    /// Python's verdict on catalog.json.sig: `ok`, `invalid`, `missing`, or a reason.
    var signature = "missing"
    /// The same for generations/<n>.json.sig of the generation in force.
    var generationSignature = "missing"
    /// The manifest and blob keys the catalogue names.
    var named: Set<String> = []
    /// The catalogue's packages by package ID.
    var packages: [String: [String: Any]] = [:]

    var generation: Int? { catalog?["generation"] as? Int }

    /// Audits the site in `folder`. With `allGenerations`, every
    /// generations/*.json is checked against the schema and its signature
    /// too, not only the one in force.
    static func check(_ folder: URL, key: SigningPair?, allGenerations: Bool = false) throws -> SiteAudit {
        var audit = SiteAudit()
        let catalogURL = folder.appendingPathComponent("catalog.json")
        guard let bytes = FileManager.default.contents(atPath: catalogURL.path) else { return audit }
        audit.catalogBytes = bytes
        let schema = "catalog.schema.json"
        audit.problems += try SchemaVerdicts.errors(in: catalogURL, schema: schema).map { "catalog.json: \($0)" }
        guard let catalog = try JSONSerialization.jsonObject(with: bytes) as? [String: Any], let generation = catalog["generation"] as? Int
        else {
            audit.problems.append("catalog.json: not a catalogue")
            return audit
        }
        audit.catalog = catalog
        let inForce = "generations/\(generation).json"
        if FileManager.default.contents(atPath: folder.appendingPathComponent(inForce).path) != bytes {
            audit.problems.append("catalog.json is not \(inForce) byte for byte")
        }
        if let key {
            if catalog["signedBy"] as? String != key.keyId || catalog["unsigned"] != nil {
                audit.problems.append(
                    "catalog.json says signedBy \(catalog["signedBy"] ?? "nothing"), unsigned \(catalog["unsigned"] ?? "absent"); signed by \(key.keyId)"
                )
            }
            var pairs = [("catalog.json", "catalog.json.sig"), (inForce, inForce + ".sig")]
            if allGenerations {
                for file in try generationFiles(folder) where file != inForce { pairs.append((file, file + ".sig")) }
            }
            let verdicts = try SignatureCheck.verdicts(folder, pairs, publicKey: key.publicKey)
            audit.signature = verdicts[0]
            audit.generationSignature = verdicts[1]
            for (pair, verdict) in zip(pairs, verdicts).dropFirst(2) where verdict != "ok" {
                audit.problems.append("\(pair.1): \(verdict)")
            }
        }
        if allGenerations {
            for file in try generationFiles(folder) {
                audit.problems += try SchemaVerdicts.errors(in: folder.appendingPathComponent(file), schema: schema).map {
                    "\(file): \($0)"
                }
            }
        }
        for tour in catalog["tours"] as? [[String: Any]] ?? [] {
            for package in tour["packages"] as? [[String: Any]] ?? [] {
                let id = package["packageId"] as? String ?? "?"
                audit.packages[id] = package
                audit.problems += try checkPackage(package, in: folder, naming: &audit.named).map { "\(id): \($0)" }
            }
        }
        return audit
    }

    /// One catalogue entry: its manifest and every blob it names are there with the bytes the hashes say.
    private static func checkPackage(_ package: [String: Any], in folder: URL, naming named: inout Set<String>) throws -> [String] {
        var problems: [String] = []
        let reference = package["manifest"] as? [String: Any] ?? [:]
        let path = reference["path"] as? String ?? ""
        named.insert(path)
        let file = folder.appendingPathComponent(path)
        guard let bytes = FileManager.default.contents(atPath: file.path) else { return ["\(path) is missing"] }
        let digest = try FileDigest.sha256(of: file)
        if digest.hex != reference["sha256"] as? String {
            problems.append("\(path) has sha256 \(digest.hex), the catalogue says \(reference["sha256"] ?? "nothing")")
        }
        problems += try SchemaVerdicts.errors(in: file, schema: "package.schema.json").map { "\(path): \($0)" }
        let manifest = try JSONSerialization.jsonObject(with: bytes) as? [String: Any] ?? [:]
        for field in ["packageId", "contentHash", "createdAt", "expiresAt"] where manifest[field] as? String != package[field] as? String {
            problems.append("\(field) is \(package[field] ?? "nothing") in the catalogue, \(manifest[field] ?? "nothing") in \(path)")
        }
        var files: [(sha256: String, size: Int64)] = (manifest["audio"] as? [[String: Any]] ?? []).map {
            ($0["sha256"] as? String ?? "", ($0["sizeBytes"] as? NSNumber)?.int64Value ?? -1)
        }
        let audioBytes = files.reduce(0) { $0 + $1.size }
        let map = manifest["mapTiles"] as? [String: Any] ?? [:]
        let mapBytes = (map["sizeBytes"] as? NSNumber)?.int64Value ?? 0
        if let sha256 = map["sha256"] as? String { files.append((sha256, mapBytes)) }
        // Each narration's captions are a blob of the package too (not counted in audioBytes).
        for captions in (manifest["audio"] as? [[String: Any]] ?? []).compactMap({ $0["captions"] as? [String: Any] }) {
            files.append((captions["sha256"] as? String ?? "", (captions["sizeBytes"] as? NSNumber)?.int64Value ?? -1))
        }
        let sizes = ["audioBytes", "mapBytes", "sizeBytes"].map { (package[$0] as? NSNumber)?.int64Value }
        if sizes != [audioBytes, mapBytes, audioBytes + mapBytes] {
            problems.append("audioBytes, mapBytes, sizeBytes are \(sizes), the manifest's files add up to \(audioBytes) + \(mapBytes)")
        }
        for (sha256, size) in files {
            let key = "blobs/sha256/\(sha256.prefix(2))/\(sha256)"
            named.insert(key)
            let blob = folder.appendingPathComponent(key)
            guard FileManager.default.fileExists(atPath: blob.path) else {
                problems.append("\(key) is missing")
                continue
            }
            let digest = try FileDigest.sha256(of: blob)
            if digest.hex != sha256 || digest.size != size {
                problems.append("\(key) holds \(digest.size) bytes with sha256 \(digest.hex); the manifest says \(size) bytes")
            }
        }
        return problems
    }

    /// `generations/<n>.json` files in the folder, without their signatures.
    static func generationFiles(_ folder: URL) throws -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.appendingPathComponent("generations").path)) ?? []
        return names.filter { $0.hasSuffix(".json") }.sorted().map { "generations/\($0)" }
    }

    /// Records an issue for each problem and for a signature that does not verify.
    func expectSound(_ context: String = "", sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(catalog != nil, "no catalogue in force \(context)", sourceLocation: sourceLocation)
        #expect(problems.isEmpty, "\(context)\n\(problems.joined(separator: "\n"))", sourceLocation: sourceLocation)
        #expect(signature == "ok", "catalog.json.sig: \(signature) \(context)", sourceLocation: sourceLocation)
        #expect(generationSignature == "ok", "generation's .sig: \(generationSignature) \(context)", sourceLocation: sourceLocation)
    }
}

/// `JSONSchemaCheck` once per schema and document: each check starts Python
/// and jsonschema (most of a second), and the audits of one site see the same
/// manifests again and again.
final class SchemaVerdicts: @unchecked Sendable {
    private static let shared = SchemaVerdicts()
    private let lock = NSLock()
    private var errors: [String: [String]] = [:]

    /// The findings for the document in `file` against `schemas/<schema>`.
    static func errors(in file: URL, schema: String) throws -> [String] {
        let key = "\(schema) \(try FileDigest.sha256(of: file).hex)"
        if let known = shared.lock.withLock({ shared.errors[key] }) { return known }
        let found = try JSONSchemaCheck.errors(in: file, schema: JSONSchemaCheck.schema(schema))
        shared.lock.withLock { shared.errors[key] = found }
        return found
    }
}

/// Ed25519 verification by Python's `cryptography`, sharing no code with tourpack.
enum SignatureCheck {
    /// For each (document, signature) pair of files under `folder`: `ok`,
    /// `invalid`, `missing`, or why the signature document is unusable.
    static func verdicts(_ folder: URL, _ pairs: [(String, String)], publicKey: String) throws -> [String] {
        let script = """
            import base64, hashlib, json, os, sys
            from cryptography.exceptions import InvalidSignature
            from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
            raw = base64.b64decode(sys.argv[1], validate=True)
            key, key_id = Ed25519PublicKey.from_public_bytes(raw), hashlib.sha256(raw).hexdigest()[:16]
            folder, names = sys.argv[2], sys.argv[3:]
            for document, signature in zip(names[::2], names[1::2]):
                document, signature = os.path.join(folder, document), os.path.join(folder, signature)
                if not os.path.exists(document) or not os.path.exists(signature):
                    print("missing"); continue
                sig = json.load(open(signature))
                if sig.get("algorithm") != "ed25519" or sig.get("keyId") != key_id:
                    print("wrong key or algorithm: " + json.dumps(sig)); continue
                try:
                    key.verify(base64.b64decode(sig["signature"], validate=True), open(document, "rb").read())
                    print("ok")
                except InvalidSignature:
                    print("invalid")
            """
        let result = try Tool.run("python3", ["-c", script, publicKey, folder.path] + pairs.flatMap { [$0.0, $0.1] })
        let lines = result.stdout.split(separator: "\n").map(String.init)
        guard result.status == 0, lines.count == pairs.count else { throw SetupFailure("signature check failed: \(result.stderr)") }
        return lines
    }
}

/// One object in a bucket, as a listing shows it.
struct BucketObject: Equatable, CustomStringConvertible {
    var etag: String
    var lastModified: String
    var size: Int

    var description: String { "\(etag) \(lastModified) \(size)" }
}

extension MotoTestServer {
    /// Every object under `prefix` with its ETag, LastModified and size, by
    /// key without the prefix; with `folder`, each is downloaded there too
    /// (one boto run), so `SiteAudit` can read the bucket as a folder.
    func objects(_ bucket: String, prefix: String, downloadingInto folder: URL? = nil) throws -> [String: BucketObject] {
        let output = try boto(
            """
            import json, os
            bucket, prefix, folder, found = sys.argv[1], sys.argv[2], sys.argv[3], {}
            for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
                for item in page.get("Contents", []):
                    key = item["Key"][len(prefix):]
                    found[key] = {"etag": item["ETag"], "lastModified": item["LastModified"].isoformat(), "size": item["Size"]}
                    if folder:
                        os.makedirs(os.path.dirname(os.path.join(folder, key)), exist_ok=True)
                        s3.download_file(bucket, item["Key"], os.path.join(folder, key))
            print(json.dumps(found))
            """, [bucket, prefix, folder?.path ?? ""])
        let found = try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: [String: Any]] ?? [:]
        return found.mapValues {
            BucketObject(
                etag: $0["etag"] as? String ?? "", lastModified: $0["lastModified"] as? String ?? "", size: $0["size"] as? Int ?? -1)
        }
    }

    /// Downloads the site under `prefix` into a new folder and audits it.
    func audit(_ bucket: String, prefix: String, key: SigningPair?) throws -> SiteAudit {
        let folder = TemporaryFolder.path("tourpack-site")
        defer { TemporaryFolder.remove(folder) }
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        _ = try objects(bucket, prefix: prefix, downloadingInto: folder)
        return try SiteAudit.check(folder, key: key)
    }
}

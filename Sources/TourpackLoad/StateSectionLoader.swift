import Foundation
import TourpackCore
import TourpackState
import Yams

/// `state:` in a pipeline: a plain path, as it always was, or a mapping that
/// also names what several machines share (the contract's "Beyond one machine"):
///
/// ```yaml
/// state:
///   path: ../build/state          # the local folder (SQLite, files); optional
///   objects: {endpoint: …, bucket: …, prefix: synthesis/, region: …,
///             accessKeyEnv: AWS_ACCESS_KEY_ID, secretKeyEnv: AWS_SECRET_ACCESS_KEY}
///   postgres: postgresql://tourpack@db.internal:5432/tourpack
///   passwordEnv: PGPASSWORD
///   scratch: /var/tmp/tourpack
/// ```
///
/// Keys are never in the file: only the names of the variables that hold
/// them, checked as `tts.apiKeyEnv` is and never quoted back when wrong.
extension PipelineLoader {
    static let stateKeys = ["path", "objects", "postgres", "passwordEnv", "scratch"]
    static let objectKeys = ["endpoint", "bucket", "prefix", "region", "accessKeyEnv", "secretKeyEnv"]

    /// The local folder the section names (nil: the default), and the rest.
    static func readState(_ node: Node?, base: URL, reader: inout YAMLReader) -> (path: URL?, shared: SharedStateSettings) {
        guard let node else { return (nil, SharedStateSettings()) }
        if case .scalar = node {
            return (reader.string(node, at: "state").map { resolve($0, against: base) }, SharedStateSettings())
        }
        guard let map = reader.mapping(node, at: "state", allowed: stateKeys) else { return (nil, SharedStateSettings()) }
        var shared = SharedStateSettings()
        let path = reader.string(map["path"], at: "state.path").map { resolve($0, against: base) }
        shared.scratch = reader.string(map["scratch"], at: "state.scratch").map { resolve($0, against: base) }
        if let url = reader.string(map["postgres"], at: "state.postgres") {
            if let problem = postgresProblem(url) { reader.error("state.postgres", problem) } else { shared.postgres = url }
        }
        if let name = reader.string(map["passwordEnv"], at: "state.passwordEnv") {
            if isEnvironmentName(name) {
                shared.postgresPasswordEnv = name
            } else {
                reader.error("state.passwordEnv", notAnEnvironmentName)
            }
        }
        if let node = map["objects"], let objects = reader.mapping(node, at: "state.objects", allowed: objectKeys) {
            shared.objects = readObjects(objects, at: "state.objects", reader: &reader)
        }
        // A worker's local state (the SQLite database, with the tile cache
        // even when PostgreSQL holds the rest; staging; journals) is `path`,
        // else `scratch`.
        return (path ?? shared.scratch, shared)
    }

    /// An S3-compatible bucket's settings at `path` (`state.objects`, `publish.target.s3`).
    static func readObjects(_ map: [String: Node], at path: String = "state.objects", reader: inout YAMLReader) -> ObjectStoreSettings? {
        var valid = true
        let endpoint = reader.string(map["endpoint"], at: "\(path).endpoint")
        if let endpoint {
            // Neither message quotes the value: a key pasted into it
            // (`https://ACCESS:SECRET@host`, a secret with a `/` in it) may
            // not even parse as a URL.
            if endpoint.contains("@") {
                reader.error(
                    "\(path).endpoint",
                    "credentials in the endpoint URL are not allowed; put the keys in the variables accessKeyEnv and secretKeyEnv name")
                valid = false
            } else if endpointProblem(endpoint) != nil {
                reader.error(
                    "\(path).endpoint",
                    "not an http(s) base URL (no query, no credentials) like https://s3.eu-central-1.amazonaws.com")
                valid = false
            }
        } else if map["endpoint"] == nil {
            reader.error(
                "\(path).endpoint", "missing required field (the S3-compatible base URL, like https://s3.eu-central-1.amazonaws.com)")
        }
        let bucket = reader.string(map["bucket"], at: "\(path).bucket")
        if let bucket, !isBucketName(bucket) {
            reader.error(
                "\(path).bucket",
                "'\(bucket.prefix(70))' is not a bucket name (3 to 63 of a-z, 0-9, '.' and '-', starting and ending with a letter or digit)"
            )
            valid = false
        } else if bucket == nil, map["bucket"] == nil {
            reader.error("\(path).bucket", "missing required field")
        }
        // Every field is checked, so one run lists every problem.
        var settings = ObjectStoreSettings(endpoint: endpoint ?? "", bucket: bucket ?? "")
        if let prefix = reader.string(map["prefix"], at: "\(path).prefix") {
            if isObjectPrefix(prefix) {
                settings.prefix = prefix
            } else {
                reader.error(
                    "\(path).prefix",
                    "a prefix takes A-Z, a-z, 0-9, '-', '.', '_', '~' and '/', does not start with '/', and is at most 512 characters")
            }
        }
        if let region = reader.string(map["region"], at: "\(path).region") {
            if region.count <= 64, region.unicodeScalars.allSatisfy({ ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "-" }) {
                settings.region = region
            } else {
                reader.error("\(path).region", "a signing region is lowercase letters, digits and '-', like eu-central-1")
            }
        }
        if let name = reader.string(map["accessKeyEnv"], at: "\(path).accessKeyEnv") {
            if isEnvironmentName(name) {
                settings.accessKeyEnv = name
            } else {
                reader.error("\(path).accessKeyEnv", notAnEnvironmentName)
            }
        }
        if let name = reader.string(map["secretKeyEnv"], at: "\(path).secretKeyEnv") {
            if isEnvironmentName(name) {
                settings.secretKeyEnv = name
            } else {
                reader.error("\(path).secretKeyEnv", notAnEnvironmentName)
            }
        }
        return endpoint != nil && bucket != nil && valid ? settings : nil
    }

    /// S3's bucket naming rules, the part that matters for a path-style URL.
    static func isBucketName(_ name: String) -> Bool {
        let scalars = Array(name.unicodeScalars)
        func alphanumeric(_ s: Unicode.Scalar) -> Bool { ("a"..."z").contains(s) || ("0"..."9").contains(s) }
        guard (3...63).contains(scalars.count), let first = scalars.first, let last = scalars.last,
            alphanumeric(first), alphanumeric(last)
        else { return false }
        return scalars.allSatisfy { alphanumeric($0) || $0 == "." || $0 == "-" }
    }

    /// Unreserved characters and `/` only: the object's URL needs no
    /// escaping, so what SigV4 signs is what the file says.
    static func isObjectPrefix(_ prefix: String) -> Bool {
        prefix.count <= 512 && !prefix.hasPrefix("/")
            && prefix.unicodeScalars.allSatisfy {
                $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || "-._~/".unicodeScalars.contains($0))
            }
    }

    /// Why a PostgreSQL URL is unusable, or nil. A password in it is refused
    /// (and not quoted back): it belongs in the variable `passwordEnv` names.
    static func postgresProblem(_ url: String) -> String? {
        // Checked on the text first: a password with a `/` in it does not
        // even parse as one. Any `:` before the last `@` is a password.
        if let at = url.lastIndex(of: "@"), let scheme = url.range(of: "://"), scheme.upperBound < at,
            url[scheme.upperBound..<at].contains(":")
        {
            return "a password in the URL is not allowed; put it in the variable passwordEnv names (default PGPASSWORD)"
        }
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
            scheme == "postgres" || scheme == "postgresql", let host = components.host, !host.isEmpty
        else {
            return "not a PostgreSQL URL like postgresql://tourpack@db.internal:5432/tourpack"
        }
        if components.password != nil {
            return "a password in the URL is not allowed; put it in the variable passwordEnv names (default PGPASSWORD)"
        }
        if let mode = components.queryItems?.first(where: { $0.name == "sslmode" })?.value, PostgresURL.tlsMode(mode) == nil {
            return PostgresURL.sslmodeProblem(mode)
        }
        return nil
    }
}

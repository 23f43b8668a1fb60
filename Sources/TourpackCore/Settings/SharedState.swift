package import Foundation

/// The parts of `state:` that reach beyond one machine (the contract's "Beyond one
/// machine"). All nil by default: state is then one local folder, as it
/// always was, and nothing here changes a build.
package struct SharedStateSettings: Sendable, Hashable {
    /// The synthesis cache in S3-compatible storage, shared by every worker.
    package var objects: ObjectStoreSettings?
    /// The PostgreSQL URL (no password) of the shared state: the quota
    /// ledger, the synthesis- and output-cache indexes and the build records
    /// (`PostgresState`). Nil: they stay in the local SQLite database.
    package var postgres: String?
    /// The variable holding PostgreSQL's password (default `PGPASSWORD`).
    package var postgresPasswordEnv: String
    /// The password, read once from `postgresPasswordEnv` when the pipeline
    /// is loaded (only when `postgres` is set); it never prints.
    package var postgresPassword: Secret?
    /// A worker's local disk: each output root's lock, staged temps and
    /// commit journals live under it (`StateLayout`); when `state.path` is
    /// absent it is the local state folder too.
    package var scratch: URL?

    package static let defaultPostgresPasswordEnv = "PGPASSWORD"

    package init(
        objects: ObjectStoreSettings? = nil, postgres: String? = nil, postgresPasswordEnv: String = defaultPostgresPasswordEnv,
        postgresPassword: Secret? = nil, scratch: URL? = nil
    ) {
        self.objects = objects
        self.postgres = postgres
        self.postgresPasswordEnv = postgresPasswordEnv
        self.postgresPassword = postgresPassword
        self.scratch = scratch
    }
}

/// Where the shared synthesis cache lives: an S3-compatible bucket, reached
/// with path-style URLs (`endpoint/bucket/prefix+key`) so that AWS, MinIO
/// and moto all serve it. The keys themselves are never here, only the
/// names of the environment variables that hold them.
package struct ObjectStoreSettings: Sendable, Hashable {
    /// Base URL, e.g. `https://s3.eu-central-1.amazonaws.com`.
    package var endpoint: String
    package var bucket: String
    /// Put before every object name; `synthesis/` keeps the cache apart from other users of the bucket.
    package var prefix: String
    /// The SigV4 signing region.
    package var region: String
    package var accessKeyEnv: String
    package var secretKeyEnv: String

    package static let defaultAccessKeyEnv = "AWS_ACCESS_KEY_ID"
    package static let defaultSecretKeyEnv = "AWS_SECRET_ACCESS_KEY"

    package init(
        endpoint: String, bucket: String, prefix: String = "", region: String = "us-east-1",
        accessKeyEnv: String = defaultAccessKeyEnv, secretKeyEnv: String = defaultSecretKeyEnv
    ) {
        self.endpoint = endpoint
        self.bucket = bucket
        self.prefix = prefix
        self.region = region
        self.accessKeyEnv = accessKeyEnv
        self.secretKeyEnv = secretKeyEnv
    }
}

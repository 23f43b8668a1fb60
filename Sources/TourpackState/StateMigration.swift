import Foundation
package import TourpackCore

/// `tourpack state migrate`: brings the schema of the backend a pipeline
/// names up to date (PostgreSQL when `state.postgres` is set, else the
/// local SQLite database) and says what it did. Opening the state does the
/// same on every build; this is for doing it on purpose, before a fleet of
/// workers starts, with an account allowed to change the schema.
package enum StateMigration {
    package struct Outcome: Sendable, Hashable {
        package var location: StateLocation
        /// Applied by this run, oldest first.
        package var applied: [String]
        /// Every migration the schema now has, oldest first.
        package var schema: [String]
    }

    package static func run(_ config: PipelineConfig) throws -> Outcome {
        if let url = config.shared.postgres {
            let state = try PostgresState(url: url, password: config.shared.postgresPassword)
            return Outcome(location: state.location, applied: state.appliedNow, schema: try state.appliedMigrations())
        }
        let database = try StateDatabase(folder: config.state)
        return Outcome(location: database.location, applied: database.appliedNow, schema: try database.appliedMigrations())
    }
}

/// The schema's changes by name, one name per change on both backends:
/// SQLite's migrator and PostgreSQL's `schema_migrations` record these, so
/// `state migrate` says the same thing for the same change wherever it ran.
/// PostgreSQL came later: its first migration is SQLite's first with the
/// build records' indexes, the chunk shapes and the sent reservations
/// folded in, and it has no map tiles or package signatures (they stay on
/// each machine).
///
/// Until both used these, each backend numbered its own ("v6 loudness" in
/// SQLite was "v2 loudness" in PostgreSQL); a state from then records the
/// numbered names, and opening it renames them in place
/// (`StateDatabase.formerNames`, `PostgresState.Migration.formerName`).
enum MigrationName {
    static let cachesLedgerAndBuildRecords = "caches, ledger and build records"
    static let buildRecordIndexes = "indexes for build records"
    static let mapTiles = "map tile cache and tile packs"
    static let chunkShapes = "chunk shapes"
    static let sentReservations = "sent reservations"
    static let loudness = "loudness"
    static let synthesisClaims = "synthesis claims"
    static let chunkDigests = "chunk digests"
    static let sentenceTimes = "sentence times"
    static let fileSignatures = "file signatures"
    static let outputCaptions = "output captions"
    static let packageSignatures = "package signatures"
    static let outputRoots = "output paths under their root"
    static let packageRoots = "package paths under their root"
}

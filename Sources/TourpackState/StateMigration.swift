public import Foundation
public import TourpackCore

/// `tourpack state migrate`: brings the schema of the backend a pipeline
/// names up to date (PostgreSQL when `state.postgres` is set, else the
/// local SQLite database) and says what it did. Opening the state does the
/// same on every build; this is for doing it on purpose, before a fleet of
/// workers starts, with an account allowed to change the schema.
public enum StateMigration {
    public struct Outcome: Sendable, Hashable {
        public var location: StateLocation
        /// Applied by this run, oldest first.
        public var applied: [String]
        /// Every migration the schema now has, oldest first.
        public var schema: [String]
    }

    public static func run(_ config: PipelineConfig) throws -> Outcome {
        if let url = config.shared.postgres {
            let state = try PostgresState(url: url, password: config.shared.postgresPassword)
            return Outcome(location: state.location, applied: state.appliedNow, schema: try state.appliedMigrations())
        }
        let database = try StateDatabase(folder: config.state)
        return Outcome(location: database.location, applied: database.appliedNow, schema: try database.appliedMigrations())
    }
}

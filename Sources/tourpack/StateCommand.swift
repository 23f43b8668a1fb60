import ArgumentParser
import Foundation
import TourpackKit
import TourpackState

struct StateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "state",
        abstract: "The schema of a pipeline's state: the local SQLite database, or PostgreSQL when state.postgres is set.",
        subcommands: [Migrate.self]
    )

    struct Migrate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "migrate",
            abstract: "Apply the state schema's missing migrations and print what was applied.",
            discussion: """
                Applies them to PostgreSQL when the pipeline's state.postgres is set (the \
                password from the variable state.passwordEnv names, PGPASSWORD by default), \
                else to the local state folder's SQLite database. Builds do the same when \
                they open the state; run this first to migrate once, on purpose, before \
                workers start. Migrations are applied in order, in one transaction; two \
                runs at once take turns. A schema newer than this tourpack knows is \
                refused (exit 1).
                """
        )

        @OptionGroup var options: PipelineOptions

        func run() async throws {
            let config = try options.load()
            let outcome = try StateMigration.run(config)
            let backend =
                switch outcome.location {
                case .sqlite: "SQLite"
                case .postgres: "PostgreSQL"
                }
            print("state: \(outcome.location) (\(backend))")
            for name in outcome.applied { print("  applied \(name)") }
            let newest = outcome.schema.last.map { ", newest \"\($0)\"" } ?? ""
            let count = "\(outcome.schema.count) migration\(outcome.schema.count == 1 ? "" : "s")"
            print(
                outcome.applied.isEmpty
                    ? "nothing to apply: the schema is current (\(count)\(newest))" : "the schema is current (\(count)\(newest))")
        }
    }
}

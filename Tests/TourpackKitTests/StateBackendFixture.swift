import Foundation
import GRDB
import Testing
import TourpackTesting

@testable import TourpackCore
@testable import TourpackKit
@testable import TourpackState

/// The two places state can live. Every behavioural test of the ledger, the
/// cache indexes and the build records runs once for each
/// (`@Test(arguments: Backend.allCases)`), so the two cannot drift apart.
enum Backend: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite
    case postgres

    var testDescription: String { rawValue }
}

/// A fresh, empty state on one backend: a new state folder, and for
/// PostgreSQL a new database on the process's test server.
struct StateFixture {
    let backend: Backend
    let scratch = StateScratch()
    /// The database's URL (no password), for PostgreSQL.
    let postgresURL: String?

    init(_ backend: Backend) throws {
        self.backend = backend
        postgresURL = backend == .postgres ? try PostgresTestServer.shared().createDatabase() : nil
    }

    /// Opens the state, as another process would: for SQLite a new pool on
    /// the same file, for PostgreSQL new connections to the same database.
    func open() throws -> any StateBackend {
        switch backend {
        case .sqlite: try StateDatabase(folder: scratch.state)
        case .postgres: try PostgresState(url: postgresURL!, password: Secret(PostgresTestServer.password))
        }
    }

    /// The migrations `state`'s open applied, whichever backend it is.
    static func appliedNow(_ state: any StateBackend) -> [String]? {
        (state as? StateDatabase)?.appliedNow ?? (state as? PostgresState)?.appliedNow
    }

    func ledger(clock: ManualClock, standard: Int = 1000, key: String? = "k-123") throws -> QuotaLedger {
        let budgets = Budgets(monthlyCharacters: [.standard: standard, .wavenet: 50])
        return QuotaLedger(
            store: try open().ledger, account: QuotaAccount(endpoint: "http://tts.test", apiKey: key), budgets: budgets, clock: clock.date)
    }

    func synthesisCache(clock: ManualClock) throws -> SynthesisCache {
        SynthesisCache(
            index: try open().synthesisIndex, folder: scratch.state.appendingPathComponent("synthesis"), maxAgeDays: 30, clock: clock.date)
    }

    func outputCache(clock: ManualClock) throws -> OutputCache {
        OutputCache(index: try open().outputIndex, maxAgeDays: 30, clock: clock.date)
    }

    func records(clock: ManualClock = ManualClock()) throws -> BuildRecords {
        BuildRecords(store: try open().buildRecords, clock: clock.date)
    }

    /// Runs SQL on the backend's own database, outside tourpack: for tests
    /// that must write what only another version or a broken peer would.
    func execute(_ sql: String) throws {
        switch backend {
        case .sqlite:
            let database = try StateDatabase(folder: scratch.state)
            try database.write { db in try db.execute(sql: sql) }
        case .postgres:
            try PostgresTestServer.shared().psql(databaseName!, sql)
        }
    }

    /// The database's name on the test server.
    var databaseName: String? {
        postgresURL.map { String($0.split(separator: "/").last!.split(separator: "?").first!) }
    }

    func remove() { scratch.remove() }
}

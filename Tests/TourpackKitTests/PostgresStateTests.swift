import Foundation
import GRDB
import Testing
import TourpackTesting

@testable import TourpackCore
@testable import TourpackKit
@testable import TourpackState

/// What only the PostgreSQL backend has: a server to reach, a password to
/// send, a URL to read, and the choice of backend itself. Its behaviour as
/// a ledger, cache index and build records is tested beside SQLite's, in
/// StateTests (`Backend.allCases`).
@Suite(.offThePool) struct PostgresStateTests {
    static let password = Secret(PostgresTestServer.password)

    @Test func aServerThatIsNotThereIsNamedWithWhatFailed() throws {
        let port = try PostgresTestServer.freePort()
        #expect {
            _ = try PostgresState(url: "postgresql://tourpack@127.0.0.1:\(port)/tourpack?sslmode=disable", password: Self.password)
        } throws: { error in
            guard let error = error as? TourpackError else { return false }
            return error.kind == .stateFailed && error.exitCode == 1
                && error.description == "state: postgresql://tourpack@127.0.0.1:\(port)/tourpack: connection refused"
        }
    }

    /// A wrong password is refused by the server, and the error says so
    /// without the password, in any rendering of it.
    @Test func aWrongOrMissingPasswordIsRefusedAndNeverQuoted() throws {
        let url = try PostgresTestServer.shared().createDatabase()
        let wrong = "wrong-\(PostgresTestServer.password)"
        do {
            _ = try PostgresState(url: url, password: Secret(wrong))
            Issue.record("a wrong password was accepted")
        } catch {
            let texts = ["\(error)", String(reflecting: error), (error as? TourpackError)?.cause.map { String(reflecting: $0) } ?? ""]
            #expect(texts[0].contains("password authentication failed for user \"tourpack\""), "\(texts[0])")
            #expect(texts[0].hasPrefix("state: postgresql://tourpack@127.0.0.1:"))
            for text in texts { #expect(!text.contains(wrong) && !text.contains(PostgresTestServer.password)) }
        }
        #expect {
            _ = try PostgresState(url: url, password: nil)
        } throws: { error in
            "\(error)".contains("asks for a password and none is set") && "\(error)".contains("PGPASSWORD")
        }
    }

    /// libpq's default, `sslmode=prefer`: TLS when the server offers it,
    /// plain text when it does not (the test server has none); `require`
    /// refuses a server without TLS.
    @Test func preferFallsBackToPlainTextAndRequireRefusesIt() throws {
        let url = try PostgresTestServer.shared().createDatabase().replacingOccurrences(of: "?sslmode=disable", with: "")
        let state = try PostgresState(url: url, password: Self.password)
        #expect(try state.appliedMigrations().count == PostgresState.migrations.count)
        #expect {
            _ = try PostgresState(url: url + "?sslmode=require", password: Self.password)
        } throws: { error in
            "\(error)".contains("does not offer TLS")
        }
    }

    @Test func theURLTakesLibpqsDefaultsAndPrintsWithoutItsQuery() throws {
        let full = try PostgresURL("postgresql://tp@db.internal:6543/state?sslmode=require")
        #expect(full.host == "db.internal" && full.port == 6543 && full.user == "tp" && full.database == "state" && full.tls == .require)
        #expect(full.description == "postgresql://tp@db.internal:6543/state")
        let bare = try PostgresURL("postgres://tourpack@db.internal")
        #expect(bare.port == 5432 && bare.database == "tourpack" && bare.tls == .prefer)
        #expect(throws: TourpackError.self) { _ = try PostgresURL("postgresql://tp@db/x?sslmode=sometimes") }
        #expect(throws: TourpackError.self) { _ = try PostgresURL("postgresql://tp:secret@db/x") }
    }

    /// `state.postgres` picks the backend: the ledger, the indexes and the
    /// records go to PostgreSQL, where a second worker with a state folder
    /// of its own sees them; the local SQLite database keeps only the tiles.
    @Test func aPipelineWithStatePostgresSharesItsLedgerAcrossStateFolders() throws {
        let url = try PostgresTestServer.shared().createDatabase()
        let fixture = try ConfigFixture()
        defer { fixture.remove() }
        func worker(_ name: String) throws -> PipelineConfig {
            try fixture.load(
                "version: 1\ntours: [../tours/*.json]\nstate:\n  path: ../\(name)\n  postgres: '\(url)'\n  passwordEnv: TP_PG_PASSWORD\n",
                environment: ["TP_PG_PASSWORD": PostgresTestServer.password])
        }
        let (one, two) = (try worker("one"), try worker("two"))
        #expect(one.shared.postgresPassword?.value == PostgresTestServer.password, "read once, at load")
        #expect(!one.settledDescription(environment: [:]).contains(PostgresTestServer.password))
        let account = QuotaAccount(endpoint: "http://tts.test", apiKey: nil)
        #expect(try BuildState.existing(config: one, account: account) == nil, "no worker has migrated the database yet")
        let first = try BuildState(config: one, account: account)
        #expect(first.backend.location == .postgres(url: try PostgresURL(url).description))
        let reservation = try first.ledger.reserve(250, tier: .local)
        let build = try first.records.queue(pipeline: one.sourceFile, output: one.output)

        let second = try #require(try BuildState.existing(config: two, account: account))
        #expect(try second.ledger.usage(of: .local).reserved == 250)
        #expect(try second.records.recent().map(\.id) == [build])
        try second.ledger.settle(reservation)
        #expect(try first.ledger.usage(of: .local) == TierUsage(tier: .local, used: 250, reserved: 0, limit: nil))
        // Nothing of it in either worker's SQLite file.
        for state in [first, second] {
            #expect(try state.database.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM quotaUsage") } == 0)
            #expect(try state.database.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM build") } == 0)
        }
        #expect(
            FileManager.default.fileExists(atPath: one.state.appendingPathComponent(StateDatabase.fileName).path),
            "the tile cache's database")
    }
}

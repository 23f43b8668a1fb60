import Dispatch
import Foundation
import GRDB
import Testing
import TourpackTesting

@testable import TourpackAudio
@testable import TourpackCore
@testable import TourpackKit
@testable import TourpackSpeech
@testable import TourpackState

/// A state folder that is removed afterwards.
struct StateScratch {
    let root = TemporaryFolder.path("tourpack-state")
    var state: URL { root.appendingPathComponent("state") }
    var output: URL { root.appendingPathComponent("Documents") }
    func remove() { TemporaryFolder.remove(root) }
}

@Suite(.offThePool) struct StateDatabaseTests {
    @Test func theSQLiteDatabaseOpensInWALMode() throws {
        let scratch = StateScratch()
        defer { scratch.remove() }
        let database = try StateDatabase(folder: scratch.state)
        #expect(try database.read { db in try String.fetchOne(db, sql: "PRAGMA journal_mode") } == "wal")
    }

    /// A root's folder an older tourpack named by the output's absolute
    /// path is taken over, with what it holds (a journal a killed publish
    /// left), by the folder named by the output's place beside the state.
    @Test func aRootFolderNamedByAbsolutePathIsTakenOver() throws {
        let scratch = StateScratch()
        defer { scratch.remove() }
        let layout = StateLayout(state: scratch.state, output: scratch.output)
        #expect(layout.formerRootFolder != layout.rootFolder)
        let journal = layout.formerRootFolder.appendingPathComponent("journal")
        try FileManager.default.createDirectory(at: journal, withIntermediateDirectories: true)
        try Data("left by a kill".utf8).write(to: journal.appendingPathComponent("tour.journal"))
        layout.adoptFormerRootFolder()
        #expect(!FileManager.default.fileExists(atPath: layout.formerRootFolder.path))
        #expect(try Data(contentsOf: layout.journalFolder.appendingPathComponent("tour.journal")) == Data("left by a kill".utf8))
        // Once taken over, or when both exist, nothing moves.
        try FileManager.default.createDirectory(at: layout.formerRootFolder, withIntermediateDirectories: true)
        layout.adoptFormerRootFolder()
        #expect(FileManager.default.fileExists(atPath: layout.formerRootFolder.path))
        #expect(FileManager.default.fileExists(atPath: layout.journalFolder.appendingPathComponent("tour.journal").path))
    }
}

/// The schema on both backends: applied once, in order, under the same
/// names; shared by jobs that open it together; refused when a newer
/// tourpack wrote it; and opened as it is when an older one did.
@Suite(.offThePool) struct StateSchemaTests {
    static func migrations(_ backend: Backend) -> [String] {
        switch backend {
        case .sqlite:
            [
                "caches, ledger and build records", "indexes for build records", "map tile cache and tile packs", "chunk shapes",
                "sent reservations", "loudness", "synthesis claims", "chunk digests", "sentence times", "file signatures",
                "output captions", "package signatures", "output paths under their root", "package paths under their root",
            ]
        case .postgres:
            [
                "caches, ledger and build records", "loudness", "synthesis claims", "chunk digests", "sentence times", "file signatures",
                "output captions", "output paths under their root",
            ]
        }
    }

    /// The names a state recorded before both backends named their
    /// migrations alike, as the tourpack of then wrote them.
    static func formerMigrations(_ backend: Backend) -> [String] {
        switch backend {
        case .sqlite:
            [
                "v1 caches, ledger and build records", "v2 indexes for build records", "v3 map tile cache and tile packs",
                "v4 chunk shapes",
                "v5 sent reservations", "v6 loudness", "v7 synthesis claims",
            ]
        case .postgres: ["v1 caches, ledger and build records", "v2 loudness", "v3 synthesis claims"]
        }
    }

    @Test func theSameChangeHasTheSameNameOnBothBackends() {
        #expect(Self.migrations(.postgres).allSatisfy(Self.migrations(.sqlite).contains))
        #expect(StateDatabase.migrator.migrations == Self.migrations(.sqlite))
        #expect(PostgresState.migrations.map(\.name) == Self.migrations(.postgres))
    }

    @Test(arguments: Backend.allCases) func opensWithTheMigrationsAppliedOnce(backend: Backend) throws {
        let fixture = try StateFixture(backend)
        defer { fixture.remove() }
        let first = try fixture.open()
        #expect(try first.appliedMigrations() == Self.migrations(backend))
        #expect(Self.migrations(backend).first == "caches, ledger and build records")
        // Opening again migrates nothing and keeps the data.
        let ledger = try fixture.ledger(clock: ManualClock())
        try ledger.settle(try ledger.reserve(5, tier: .standard))
        let again = try fixture.open()
        switch again {
        case let database as StateDatabase: #expect(database.appliedNow.isEmpty)
        case let postgres as PostgresState: #expect(postgres.appliedNow.isEmpty)
        default: Issue.record("an unknown backend: \(type(of: again))")
        }
        #expect(try fixture.ledger(clock: ManualClock()).usage(of: .standard).used == 5)
    }

    /// Jobs that start together on a new state: one migrates, the others
    /// wait their turn (a file lock, an advisory lock), none fails.
    @Test(arguments: Backend.allCases) func manyOpeningANewStateAtOnceAllSucceed(backend: Backend) throws {
        let fixture = try StateFixture(backend)
        defer { fixture.remove() }
        let failures = NSLock()
        nonisolated(unsafe) var errors: [String] = []
        nonisolated(unsafe) var applied: [String] = []
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            do {
                let state = try fixture.open()
                let now = StateFixture.appliedNow(state) ?? []
                failures.withLock { applied += now }
            } catch {
                failures.withLock { errors.append("\(error)") }
            }
        }
        #expect(errors.isEmpty, "\(errors)")
        #expect(applied == Self.migrations(backend), "each migration applied exactly once, in order")
        #expect(try fixture.open().appliedMigrations() == Self.migrations(backend))
    }

    /// A state from before records the former names ("v6 loudness" in
    /// SQLite, "v2 loudness" in PostgreSQL): it opens as current, applies
    /// nothing, keeps its data and lists today's names, and opening it again
    /// renames nothing more.
    @Test(arguments: Backend.allCases) func aStateRecordingTheFormerMigrationNamesOpensWithoutMigrating(backend: Backend) throws {
        let fixture = try StateFixture(backend)
        defer { fixture.remove() }
        _ = try fixture.open()
        let ledger = try fixture.ledger(clock: ManualClock())
        try ledger.settle(try ledger.reserve(5, tier: .standard))
        // Back to what the tourpack of then recorded, in one `execute`: it
        // opens the state first, which would rename an earlier call's work.
        let renames = zip(Self.formerMigrations(backend), Self.migrations(backend)).map { former, name in
            switch backend {
            case .sqlite: "UPDATE grdb_migrations SET identifier = '\(former)' WHERE identifier = '\(name)';"
            case .postgres: "UPDATE schema_migrations SET name = '\(former)' WHERE name = '\(name)';"
            }
        }
        try fixture.execute(renames.joined(separator: "\n"))
        // Read outside tourpack: opening the state would rename them.
        let recorded: [String] =
            switch backend {
            case .sqlite:
                try DatabaseQueue(path: fixture.scratch.state.appendingPathComponent(StateDatabase.fileName).path).read { db in
                    try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations")
                }
            case .postgres:
                try PostgresTestServer.shared().psql(fixture.databaseName!, "SELECT name FROM schema_migrations").split(separator: "\n")
                    .map(String.init)
            }
        // Migrations that came after the renaming never had a former name.
        let later = Self.migrations(backend).dropFirst(Self.formerMigrations(backend).count)
        #expect(Set(recorded) == Set(Self.formerMigrations(backend) + later))

        for _ in 0..<2 {
            let state = try fixture.open()
            switch state {
            case let database as StateDatabase: #expect(database.appliedNow.isEmpty, "migrated again: \(database.appliedNow)")
            case let postgres as PostgresState: #expect(postgres.appliedNow.isEmpty, "migrated again: \(postgres.appliedNow)")
            default: Issue.record("an unknown backend: \(type(of: state))")
            }
            #expect(try state.appliedMigrations() == Self.migrations(backend))
        }
        #expect(try fixture.ledger(clock: ManualClock()).usage(of: .standard).used == 5)
    }

    /// A state an older tourpack left lacks the latest migration: opening it
    /// applies that one (a current schema is opened with one query and no
    /// migrator, which must not take this one for current), keeps the data,
    /// and the next open applies nothing.
    @Test(arguments: Backend.allCases) func aStateFromAnOlderTourpackGetsTheMigrationItLacks(backend: Backend) throws {
        let fixture = try StateFixture(backend)
        defer { fixture.remove() }
        _ = try fixture.open()
        let ledger = try fixture.ledger(clock: ManualClock())
        try ledger.settle(try ledger.reserve(5, tier: .standard))
        let latest = LegacyOutputIndex.migration
        #expect(Self.migrations(backend).contains(latest))
        try fixture.execute(backend == .sqlite ? LegacyOutputIndex.sqlite : LegacyOutputIndex.postgres)

        let state = try fixture.open()
        #expect(StateFixture.appliedNow(state) == [latest])
        #expect(try state.appliedMigrations() == Self.migrations(backend))
        // What the migration adds is back.
        switch backend {
        case .sqlite:
            let database = try #require(state as? StateDatabase)
            #expect(try database.read { db in try db.columns(in: "outputFile").map(\.name) }.contains("root"))
        case .postgres:
            let columns = try PostgresTestServer.shared().psql(
                fixture.databaseName!, "SELECT column_name FROM information_schema.columns WHERE table_name = 'output_file'")
            #expect(columns.split(separator: "\n").contains("root"))
        }
        let again = try fixture.open()
        #expect(StateFixture.appliedNow(again)?.isEmpty == true)
        #expect(try fixture.ledger(clock: ManualClock()).usage(of: .standard).used == 5)
    }

    /// The package.json signatures an older tourpack kept by absolute path
    /// are split at their OfflineTours folder into root and path when the
    /// state is opened; a row of another shape is dropped.
    @Test func packageSignaturesKeyedByAbsolutePathsAreMigrated() throws {
        let fixture = try StateFixture(.sqlite)
        defer { fixture.remove() }
        let database = try #require(try fixture.open() as? StateDatabase)
        try database.write { db in
            try db.execute(
                sql: """
                    INSERT INTO packageFile (root, path, signature) VALUES
                        ('/srv/a/Documents', 'OfflineTours/0123/package.json', 'one'), ('', '/odd.json', 'two')
                    """)
        }
        try fixture.execute(LegacyOutputIndex.packageSignaturesSQLite)
        let state = try #require(try fixture.open() as? StateDatabase)
        #expect(StateFixture.appliedNow(state) == [LegacyOutputIndex.packageMigration])
        let rows = try state.read { db in
            try Row.fetchAll(db, sql: "SELECT root, path, signature FROM packageFile").map {
                "\($0["root"] as String)|\($0["path"] as String)|\($0["signature"] as String)"
            }
        }
        #expect(rows == ["/srv/a/Documents|OfflineTours/0123/package.json|one"])
    }

    @Test(arguments: Backend.allCases) func aSchemaFromANewerTourpackIsRefusedNotGuessedAt(backend: Backend) throws {
        let fixture = try StateFixture(backend)
        defer { fixture.remove() }
        _ = try fixture.open()
        switch backend {
        case .sqlite: try fixture.execute("INSERT INTO grdb_migrations (identifier) VALUES ('v9 from the future')")
        case .postgres: try fixture.execute("INSERT INTO schema_migrations (version, name) VALUES (99, 'v99 from the future')")
        }
        #expect {
            _ = try fixture.open()
        } throws: { error in
            guard let error = error as? TourpackError, error.kind == .stateFailed, error.message.contains("newer") else { return false }
            switch backend {
            case .sqlite: return error.context.path?.hasSuffix("state.sqlite") == true
            case .postgres:
                return error.description.hasPrefix("state: postgresql://tourpack@127.0.0.1:") && error.message.contains("version 99")
                    && !error.description.contains(PostgresTestServer.password)
            }
        }
    }
}

@Suite(.offThePool) struct QuotaLedgerTests {
    /// The ledger's month is UTC's, to the second either side of each
    /// month's start, in leap years and before 1970 too: as a Gregorian
    /// calendar in UTC gives it.
    @Test func theMonthIsTheUTCMonth() {
        #expect(QuotaLedger.month(of: Date(timeIntervalSince1970: 0)) == "1970-01")
        #expect(QuotaLedger.month(of: Date(timeIntervalSince1970: -0.5)) == "1969-12")
        #expect(QuotaLedger.month(of: Date(timeIntervalSince1970: 1_709_251_199.999)) == "2024-02")
        #expect(QuotaLedger.month(of: Date(timeIntervalSince1970: 1_709_251_200)) == "2024-03")
        #expect(QuotaLedger.month(of: Date(timeIntervalSince1970: 253_402_300_799)) == "9999-12")
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        for year in [1901, 1969, 1970, 2000, 2024, 2026, 2100, 2400] {
            for month in 1...12 {
                let start = calendar.date(from: DateComponents(year: year, month: month, day: 1))!
                for date in [start.addingTimeInterval(-1), start, start.addingTimeInterval(86_400 * 15)] {
                    let parts = calendar.dateComponents([.year, .month], from: date)
                    let expected = String(format: "%04d-%02d", parts.year!, parts.month!)
                    #expect(QuotaLedger.month(of: date) == expected, "\(date)")
                }
            }
        }
    }

    @Test(arguments: Backend.allCases) func reserveSettleAndReleaseMoveTheNumbers(backend: Backend) throws {
        let fixture = try StateFixture(backend)
        defer { fixture.remove() }
        let ledger = try fixture.ledger(clock: ManualClock())
        let first = try ledger.reserve(300, tier: .standard)
        let second = try ledger.reserve(200, tier: .standard)
        #expect(try ledger.usage(of: .standard) == TierUsage(tier: .standard, used: 0, reserved: 500, limit: 1000))
        try ledger.settle(first)
        try ledger.release(second)
        let usage = try ledger.usage(of: .standard)
        #expect(usage.used == 300 && usage.reserved == 0 && usage.left == 700)
        // Closing again changes nothing: the reservation is gone.
        try ledger.release(second)
        #expect(try ledger.usage(of: .standard) == usage)
    }

    @Test(arguments: Backend.allCases) func aReservationPastTheLimitIsRefusedWithTheNumbersAndLeavesNothing(backend: Backend) throws {
        let fixture = try StateFixture(backend)
        defer { fixture.remove() }
        let ledger = try fixture.ledger(clock: ManualClock())
        try ledger.settle(try ledger.reserve(900, tier: .standard))
        let pending = try ledger.reserve(60, tier: .standard)
        #expect {
            _ = try ledger.reserve(41, tier: .standard)
        } throws: { error in
            guard let error = error as? TourpackError, error.kind == .budgetExceeded else { return false }
            let message = error.message
            return error.exitCode == 3 && message.contains("standard") && message.contains("2026-11")
                && message.contains("41") && message.contains("900 used") && message.contains("60 reserved") && message.contains("1,000")
        }
        #expect(try ledger.usage(of: .standard).reserved == 60)
        _ = try ledger.reserve(40, tier: .standard)  // exactly to the limit is fine
        try ledger.release(pending)
        #expect(try ledger.usage(of: .standard).reserved == 40)
    }

    /// The very first reservation of a month, past the limit on its own: refused with zeros, nothing recorded.
    @Test(arguments: Backend.allCases) func aNewMonthsFirstReservationIsCheckedToo(backend: Backend) throws {
        let fixture = try StateFixture(backend)
        defer { fixture.remove() }
        let ledger = try fixture.ledger(clock: ManualClock())
        #expect {
            _ = try ledger.reserve(51, tier: .wavenet)
        } throws: { error in
            (error as? TourpackError)?.message.contains("0 used + 0 reserved of 50") == true
        }
        #expect(try ledger.usage(of: .wavenet) == TierUsage(tier: .wavenet, used: 0, reserved: 0, limit: 50))
        _ = try ledger.reserve(50, tier: .wavenet)
        #expect(try ledger.usage(of: .wavenet).reserved == 50)
    }

    @Test(arguments: Backend.allCases) func theLocalTierIsCountedButNeverRefused(backend: Backend) throws {
        let fixture = try StateFixture(backend)
        defer { fixture.remove() }
        let ledger = try fixture.ledger(clock: ManualClock())
        try ledger.settle(try ledger.reserve(50_000_000, tier: .local))
        let usage = try ledger.usage(of: .local)
        #expect(usage.used == 50_000_000 && usage.limit == nil && usage.left == nil)
    }

    @Test(arguments: Backend.allCases) func monthsAreCalendarMonthsInUTC(backend: Backend) throws {
        let fixture = try StateFixture(backend)
        defer { fixture.remove() }
        let clock = ManualClock("2026-11-30T23:59:00Z")
        let ledger = try fixture.ledger(clock: clock)
        try ledger.settle(try ledger.reserve(1000, tier: .standard))
        #expect(throws: TourpackError.self) { _ = try ledger.reserve(1, tier: .standard) }
        clock.advance(seconds: 60)
        #expect(ledger.currentMonth == "2026-12")
        #expect(try ledger.usage(of: .standard).used == 0)
        _ = try ledger.reserve(1000, tier: .standard)
    }

    /// Two keys on one endpoint are two accounts, each with its own month.
    @Test(arguments: Backend.allCases) func accountsDoNotShareAMonth(backend: Backend) throws {
        let fixture = try StateFixture(backend)
        defer { fixture.remove() }
        let clock = ManualClock()
        let one = try fixture.ledger(clock: clock, key: "k-1")
        let two = try fixture.ledger(clock: clock, key: "k-2")
        try one.settle(try one.reserve(1000, tier: .standard))
        _ = try two.reserve(1000, tier: .standard)
        #expect(try one.usage(of: .standard) == TierUsage(tier: .standard, used: 1000, reserved: 0, limit: 1000))
        #expect(try two.usage(of: .standard) == TierUsage(tier: .standard, used: 0, reserved: 1000, limit: 1000))
    }

    @Test func theAccountIsTheEndpointAndAFingerprintNeverTheKey() {
        let key = "test-secret-key-0123456789"
        let account = QuotaAccount(endpoint: "https://user:pw@texttospeech.googleapis.com/?key=\(key)", apiKey: key)
        #expect(!account.id.contains(key) && !account.id.contains("secret") && !account.id.contains("pw"))
        #expect(account.id.hasPrefix("https://texttospeech.googleapis.com/#"))
        #expect(account == QuotaAccount(endpoint: "https://texttospeech.googleapis.com/", apiKey: key))
        #expect(account != QuotaAccount(endpoint: "https://texttospeech.googleapis.com/", apiKey: key + "x"))
        #expect(QuotaAccount(endpoint: "http://127.0.0.1:8787", apiKey: nil).id == "http://127.0.0.1:8787#no-key")
    }

    /// Four clients (as four workers on four machines have: separate
    /// connections, separate pools) hammer one month at once; together they
    /// never pass the limit, and every grant is counted.
    @Test(arguments: Backend.allCases) func fourClientsReservingAtOnceNeverPassTheLimit(backend: Backend) throws {
        let fixture = try StateFixture(backend)
        defer { fixture.remove() }
        let clock = ManualClock()
        // Hundreds of grants, so that the clients' requests overlap many times.
        let ledgers = try (0..<4).map { _ in try fixture.ledger(clock: clock, standard: 2803) }
        let granted = NSLock()
        nonisolated(unsafe) var total = 0
        nonisolated(unsafe) var errors: [String] = []
        // Each worker reserves until refused; half of each one's grants are
        // settled, the other half released and tried again.
        onThreads(4) { worker in
            var attempt = 0
            while true {
                attempt += 1
                let reservation: QuotaLedger.Reservation
                do { reservation = try ledgers[worker].reserve(7, tier: .standard) } catch let error as TourpackError
                    where error.kind == .budgetExceeded
                {
                    return
                } catch {
                    granted.withLock { errors.append("\(error)") }
                    return
                }
                do {
                    if attempt.isMultiple(of: 2) {
                        try ledgers[worker].release(reservation)
                    } else {
                        try ledgers[worker].settle(reservation)
                        granted.withLock { total += 7 }
                    }
                } catch {
                    granted.withLock { errors.append("\(error)") }
                    return
                }
            }
        }
        #expect(errors.isEmpty, "\(errors)")
        #expect(total == 2800, "400 reservations of 7 fit in 2,803")
        #expect(try ledgers[0].usage(of: .standard) == TierUsage(tier: .standard, used: 2800, reserved: 0, limit: 2803))
        if let store = ledgers[0].store as? PostgresLedgerStore { #expect(try store.mismatchedSlots() == 0) }
    }

    /// Four clients ask at the same instant, round after round, for more
    /// than the month can take at once (4 × at least 7 against 25): in
    /// every round some are refused, and what the others were granted
    /// together never passes the limit. Then all release and ask again.
    @Test(arguments: Backend.allCases) func clientsAskingAtTheSameInstantNeverPassTheLimit(backend: Backend) throws {
        let fixture = try StateFixture(backend)
        defer { fixture.remove() }
        let clock = ManualClock()
        let ledgers = try (0..<4).map { _ in try fixture.ledger(clock: clock, standard: 25) }
        let (rounds, barrier, lock) = (100, Barrier(4), NSLock())
        nonisolated(unsafe) var held = Array(repeating: 0, count: rounds)
        nonisolated(unsafe) var refused = Array(repeating: 0, count: rounds)
        nonisolated(unsafe) var errors: [String] = []
        onThreads(4) { worker in
            for round in 0..<rounds {
                barrier.wait()
                let characters = 7 + (round + worker) % 5
                var reservation: QuotaLedger.Reservation?
                do { reservation = try ledgers[worker].reserve(characters, tier: .standard) } catch let error as TourpackError
                    where error.kind == .budgetExceeded
                {
                    lock.withLock { refused[round] += 1 }
                } catch {
                    lock.withLock { errors.append("\(error)") }
                }
                if reservation != nil { lock.withLock { held[round] += characters } }
                // Everyone has asked; only then is anything given back.
                barrier.wait()
                if let reservation {
                    do { try ledgers[worker].release(reservation) } catch { lock.withLock { errors.append("\(error)") } }
                }
            }
        }
        #expect(errors.isEmpty, "\(errors)")
        let over = held.enumerated().filter { $0.element > 25 }
        #expect(over.count == 0, "the clients together held more than 25 in these rounds (round, characters): \(over.prefix(5))")
        #expect(refused.allSatisfy { $0 >= 1 }, "every round refused someone")
        #expect(try ledgers[1].usage(of: .standard) == TierUsage(tier: .standard, used: 0, reserved: 0, limit: 25))
        if let store = ledgers[0].store as? PostgresLedgerStore { #expect(try store.mismatchedSlots() == 0) }
    }

    @Test(arguments: Backend.allCases) func staleReservationsAreReleasedDeadOwnersAtOnceOthersAfterTheTimeout(backend: Backend) throws {
        let fixture = try StateFixture(backend)
        defer { fixture.remove() }
        let clock = ManualClock()
        var ledger = try fixture.ledger(clock: clock)
        let live = try ledger.reserve(100, tier: .standard)
        // A process of this host that is gone: no such PID.
        ledger.owner = ProcessOwner(host: ProcessOwner.current.host, pid: 999_999_999, startTicks: 1)
        _ = try ledger.reserve(200, tier: .standard)
        // A process on another host: cannot be checked, so only its age counts.
        ledger.owner = ProcessOwner(host: "elsewhere.example", pid: 42, startTicks: 7)
        _ = try ledger.reserve(300, tier: .standard)

        #expect(try ledger.reconcile() == QuotaLedger.Reconciliation(released: 1, releasedCharacters: 200))
        #expect(try ledger.usage(of: .standard).reserved == 400)
        clock.advance(seconds: ledger.staleAfter + 1)
        // The other host's is too old now; this process's own is as old, but it is alive here, so it stays.
        #expect(try ledger.reconcile() == QuotaLedger.Reconciliation(released: 1, releasedCharacters: 300))
        #expect(try ledger.usage(of: .standard) == TierUsage(tier: .standard, used: 0, reserved: 100, limit: 1000))
        try ledger.settle(live, characters: 150)
        #expect(
            try ledger.usage(of: .standard) == TierUsage(tier: .standard, used: 150, reserved: 0, limit: 1000),
            "settled for what was billed")
    }

    /// "Same host" is the host name, the PID namespace and the boot: a
    /// process of this machine before a reboot (another boot ID) cannot be
    /// checked by its PID, which may now be another process's, so only its age counts.
    @Test(arguments: Backend.allCases) func anOwnerFromAnotherBootIsJudgedByAge(backend: Backend) throws {
        let fixture = try StateFixture(backend)
        defer { fixture.remove() }
        let clock = ManualClock()
        var ledger = try fixture.ledger(clock: clock)
        let me = ProcessOwner.current
        let otherBoot = me.host.replacingOccurrences(of: "/boot:", with: "/boot:0-")
        #expect(otherBoot != me.host, "this machine has a boot ID")
        // Before the reboot, the PID of this very process, started at the same tick: it looks alive, but is not checkable.
        ledger.owner = ProcessOwner(host: otherBoot, pid: me.pid, startTicks: me.startTicks)
        #expect(!ledger.owner.isCheckable && ledger.owner.mightBeAlive)
        _ = try ledger.reserve(70, tier: .standard)
        // The same host name and boot, a dead PID: gone at once.
        ledger.owner = ProcessOwner(host: me.host, pid: 999_999_999, startTicks: 5)
        _ = try ledger.reserve(30, tier: .standard)
        #expect(try ledger.reconcile() == QuotaLedger.Reconciliation(released: 1, releasedCharacters: 30))
        clock.advance(seconds: ledger.staleAfter + 1)
        #expect(try ledger.reconcile() == QuotaLedger.Reconciliation(released: 1, releasedCharacters: 70))
        #expect(try ledger.usage(of: .standard).reserved == 0)
    }

    /// reserved → sent → settled: a dead owner's reservation that was never
    /// sent cost nothing and is released; one that was sent may have been
    /// billed, so it is settled in full. A crash may over-count, never under.
    @Test(arguments: Backend.allCases) func aDeadOwnersSentReservationsAreSettledAndItsUnsentOnesReleased(backend: Backend) throws {
        let fixture = try StateFixture(backend)
        defer { fixture.remove() }
        let clock = ManualClock()
        var ledger = try fixture.ledger(clock: clock)
        ledger.owner = ProcessOwner(host: ProcessOwner.current.host, pid: 999_999_999, startTicks: 1)
        let sent = try ledger.reserve(120, tier: .standard)
        try ledger.markSent(sent)
        try ledger.markSent(sent)  // once is enough; again changes nothing
        _ = try ledger.reserve(80, tier: .standard)
        ledger.owner = ProcessOwner(host: "elsewhere.example", pid: 42, startTicks: 7)
        let remote = try ledger.reserve(30, tier: .standard)
        try ledger.markSent(remote)

        #expect(
            try ledger.reconcile() == QuotaLedger.Reconciliation(released: 1, releasedCharacters: 80, settled: 1, settledCharacters: 120))
        #expect(try ledger.usage(of: .standard) == TierUsage(tier: .standard, used: 120, reserved: 30, limit: 1000))
        clock.advance(seconds: ledger.staleAfter + 1)
        #expect(try ledger.reconcile() == QuotaLedger.Reconciliation(settled: 1, settledCharacters: 30))
        #expect(try ledger.usage(of: .standard) == TierUsage(tier: .standard, used: 150, reserved: 0, limit: 1000))
    }

    /// A request retried after answers that were billed (cut short,
    /// undecodable) raises its reservation first: a crash during the retry
    /// settles what the endpoint billed, never only the first answer.
    @Test(arguments: Backend.allCases) func aRaisedReservationIsSettledInFullWhenItsOwnerDies(backend: Backend) throws {
        let fixture = try StateFixture(backend)
        defer { fixture.remove() }
        let clock = ManualClock()
        var ledger = try fixture.ledger(clock: clock)
        ledger.owner = ProcessOwner(host: ProcessOwner.current.host, pid: 999_999_999, startTicks: 1)
        let retried = try ledger.reserve(100, tier: .standard)
        try ledger.markSent(retried)
        try ledger.raise(retried, to: 200)
        try ledger.raise(retried, to: 150)  // never lowered
        #expect(try ledger.usage(of: .standard) == TierUsage(tier: .standard, used: 0, reserved: 200, limit: 1000))
        // Past the month's limit: billed already, so recorded all the same.
        let other = try ledger.reserve(50, tier: .standard)
        try ledger.markSent(other)
        try ledger.raise(other, to: 900)
        #expect(try ledger.usage(of: .standard) == TierUsage(tier: .standard, used: 0, reserved: 1100, limit: 1000))
        if let store = ledger.store as? PostgresLedgerStore { #expect(try store.mismatchedSlots() == 0) }
        #expect(try ledger.reconcile() == QuotaLedger.Reconciliation(settled: 2, settledCharacters: 1100))
        #expect(try ledger.usage(of: .standard) == TierUsage(tier: .standard, used: 1100, reserved: 0, limit: 1000))
        // A closed reservation is not raised again, and a settle after reconcile still counts what was billed.
        try ledger.raise(retried, to: 400)
        #expect(try ledger.usage(of: .standard) == TierUsage(tier: .standard, used: 1100, reserved: 0, limit: 1000))
    }

    /// What the ledger hears from a request's tries: sent before the first,
    /// then, before a retry, what the answers so far were billed (and
    /// nothing when no answer was billed since it last heard).
    @Test func aRequestTellsTheLedgerBeforeTheFirstTryAndBeforeEachRetryAfterABilledAnswer() async throws {
        let heard = LockedCounts([String]())
        let billed = BilledCharacters(onSend: { first, billedSoFar in
            heard.update { $0.append("\(first ? "sent" : "retry") \(billedSoFar)") }
        })
        try await billed.willSend()
        try await billed.willSend()  // a retry after a refusal: nothing billed
        billed.add(100)  // an answer cut short
        try await billed.willSend()
        billed.add(100)  // undecodable
        try await billed.willSend()
        #expect(heard.snapshot == ["sent 0", "retry 100", "retry 200"])
        #expect(billed.value == 200)
    }

    /// Every worker reconciles as it starts, and several start at once: a
    /// dead owner's sent reservation is settled once, never once per worker.
    @Test(arguments: Backend.allCases) func workersReconcilingAtOnceCloseEachReservationOnce(backend: Backend) throws {
        let fixture = try StateFixture(backend)
        defer { fixture.remove() }
        let clock = ManualClock()
        var dead = try fixture.ledger(clock: clock, standard: 100_000)
        dead.owner = ProcessOwner(host: ProcessOwner.current.host, pid: 999_999_999, startTicks: 1)
        for index in 0..<40 {
            let reservation = try dead.reserve(10, tier: .standard)
            if index.isMultiple(of: 2) { try dead.markSent(reservation) }
        }
        let workers = try (0..<4).map { _ in try fixture.ledger(clock: clock, standard: 100_000) }
        let lock = NSLock()
        nonisolated(unsafe) var total = QuotaLedger.Reconciliation()
        nonisolated(unsafe) var errors: [String] = []
        onThreads(4) { index in
            do {
                let closed = try workers[index].reconcile()
                lock.withLock {
                    total.released += closed.released
                    total.releasedCharacters += closed.releasedCharacters
                    total.settled += closed.settled
                    total.settledCharacters += closed.settledCharacters
                }
            } catch {
                lock.withLock { errors.append("\(error)") }
            }
        }
        #expect(errors.isEmpty, "\(errors)")
        #expect(total == QuotaLedger.Reconciliation(released: 20, releasedCharacters: 200, settled: 20, settledCharacters: 200))
        #expect(try workers[0].usage(of: .standard) == TierUsage(tier: .standard, used: 200, reserved: 0, limit: 100_000))
    }

    /// A reservation that reconcile closed (its owner looked gone) is still
    /// settled when the audio does come back: the endpoint billed it.
    @Test(arguments: Backend.allCases) func aReservationClosedByReconcileIsStillSettled(backend: Backend) throws {
        let fixture = try StateFixture(backend)
        defer { fixture.remove() }
        var ledger = try fixture.ledger(clock: ManualClock())
        ledger.owner = ProcessOwner(host: ProcessOwner.current.host, pid: 999_999_999, startTicks: 1)
        let reservation = try ledger.reserve(90, tier: .standard)
        #expect(try ledger.reconcile().released == 1)
        try ledger.settle(reservation)
        #expect(try ledger.usage(of: .standard) == TierUsage(tier: .standard, used: 90, reserved: 0, limit: 1000))
    }

    @Test func aProcessOwnerRoundTripsAndKnowsThisProcessIsAlive() {
        let me = ProcessOwner.current
        #expect(ProcessOwner(me.description) == me)
        #expect(me.mightBeAlive)
        #expect(ProcessOwner(host: "h:with:colons", pid: 5, startTicks: 9).description == "h:with:colons:5:9")
        #expect(ProcessOwner("h:with:colons:5:9")?.host == "h:with:colons")
        #expect(!ProcessOwner(host: me.host, pid: me.pid, startTicks: me.startTicks + 1).mightBeAlive, "a reused PID is not the owner")
    }

    @Test func thisHostIsItsNameItsPIDNamespaceAndItsBoot() throws {
        let boot = try String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8).trimmingCharacters(
            in: .whitespacesAndNewlines)
        let namespace = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/ns/pid")
        #expect(ProcessOwner.current.host == "\(ProcessInfo.processInfo.hostName)/\(namespace)/boot:\(boot)")
        // Written before the boot ID was part of it: another host, judged by age alone.
        let older = ProcessOwner(host: "\(ProcessInfo.processInfo.hostName)/\(namespace)", pid: 999_999_999, startTicks: 1)
        #expect(!older.isCheckable && older.mightBeAlive)
        #expect(ProcessOwner(ProcessOwner.current.description) == ProcessOwner.current)
    }
}

@Suite(.offThePool) struct SynthesisCacheTests {

    static func key(_ text: String) -> SynthesisKey {
        SynthesisKey(chunk: Chunk(text: text, isSSML: false), voice: StoreManifestFixture.voice, sampleRateHz: 24_000)
    }

    static func pcm(_ seed: Int, count: Int = 24_000) -> PCMAudio {
        PCMAudio(samples: (0..<count).map { Int16(truncatingIfNeeded: ($0 * (seed + 3)) % 20_000 - 10_000) }, sampleRate: 24_000)
    }

    @Test func theKeyCoversTheTextAndEveryVoiceSettingThatChangesTheSound() {
        let voice = StoreManifestFixture.voice
        let base = SynthesisKey(chunk: Chunk(text: "Hello.", isSSML: false), voice: voice, sampleRateHz: 24_000)
        var variants: [SynthesisKey] = [
            SynthesisKey(chunk: Chunk(text: "Hello!", isSSML: false), voice: voice, sampleRateHz: 24_000),
            SynthesisKey(chunk: Chunk(text: "Hello.", isSSML: true), voice: voice, sampleRateHz: 24_000),
            SynthesisKey(chunk: Chunk(text: "Hello.", isSSML: false), voice: voice, sampleRateHz: 22_050),
        ]
        for change in [\VoicePreset.provider, \.name, \.languageCode] as [WritableKeyPath<VoicePreset, String>] {
            var other = voice
            other[keyPath: change] += "x"
            variants.append(SynthesisKey(chunk: Chunk(text: "Hello.", isSSML: false), voice: other, sampleRateHz: 24_000))
        }
        for change in [\VoicePreset.speakingRate, \.pitch] as [WritableKeyPath<VoicePreset, Double>] {
            var other = voice
            other[keyPath: change] += 0.5
            variants.append(SynthesisKey(chunk: Chunk(text: "Hello.", isSSML: false), voice: other, sampleRateHz: 24_000))
        }
        #expect(Set(variants + [base]).count == variants.count + 1)
        var pricier = voice
        pricier.tier = .wavenet
        #expect(
            SynthesisKey(chunk: Chunk(text: "Hello.", isSSML: false), voice: pricier, sampleRateHz: 24_000) == base,
            "the tier is only the price")
    }

    @Test(arguments: Backend.allCases) func aStoredChunkComesBackBitExactUntilItIsTooOld(backend: Backend) throws {
        let fixture = try StateFixture(backend)
        defer { fixture.remove() }
        let clock = ManualClock()
        let cache = try fixture.synthesisCache(clock: clock)
        let key = Self.key("Hello there.")
        try cache.store(Self.pcm(1), for: key, characters: 12)
        #expect(try cache.load(key) == Self.pcm(1))
        #expect(try cache.freshKeys(among: [key, Self.key("other")]) == [key])
        #expect(try cache.totals().entries == 1)
        clock.advance(days: 30, seconds: 1)
        #expect(try cache.load(key) == nil, "audio older than audioMaxAgeDays is not reused")
        #expect(try cache.freshKeys(among: [key]).isEmpty)
    }

    @Test(arguments: Backend.allCases)
    func rowsReadAtOnceAnswerLikeTheIndexAndAKeyWithoutOneIsAskedAgain(backend: Backend) throws {
        let fixture = try StateFixture(backend)
        defer { fixture.remove() }
        let clock = ManualClock()
        let cache = try fixture.synthesisCache(clock: clock)
        // More rows than one query's batch of 500.
        let rows = (0..<620).map { index in
            SynthesisEntry(
                key: Self.key("Row \(index).").hex, characters: index, sampleRate: 24_000, samples: 100 + index, fileBytes: 1_000,
                createdAt: 1, lastUsedAt: 2, audibleStart: index % 3 == 0 ? nil : 5, audibleEnd: 90, loudness: Data([3, UInt8(index % 7)]),
                fileSHA256: String(repeating: "a", count: 64), sentenceTimes: index % 2 == 0 ? nil : "0.5")
        }
        for row in rows { try cache.index.keep(row, settling: nil) }
        let asked = rows.map(\.key) + [Self.key("No row.").hex]
        let together = try cache.index.entries(asked)
        #expect(together.count == rows.count)
        for key in asked { #expect(together[key] == (try cache.index.entry(key)), "\(key)") }

        let (kept, forgotten, later) = (Self.key("Kept."), Self.key("Forgotten."), Self.key("Later."))
        try cache.store(Self.pcm(1, count: 4_800), for: kept, characters: 5)
        try cache.store(Self.pcm(2, count: 4_800), for: forgotten, characters: 10)
        let preloaded = try cache.preloading([kept, forgotten, later])
        #expect(try preloaded.lookup(kept)?.shape == (try cache.lookup(kept))?.shape)
        // Another build forgets one and keeps one after the rows were read: both are seen.
        try cache.forget(forgotten)
        try cache.store(Self.pcm(3, count: 4_800), for: later, characters: 6)
        #expect(try preloaded.lookup(forgotten) == nil)
        #expect(try preloaded.load(later) == Self.pcm(3, count: 4_800), "a key without a row when read is asked again")
        // Kept again through the preloaded cache: its new row is read, not the old one.
        try preloaded.store(Self.pcm(4, count: 9_600), for: kept, characters: 5)
        #expect(try preloaded.load(kept) == Self.pcm(4, count: 9_600))
    }

    @Test(arguments: Backend.allCases) func aDamagedFileIsAMissAndItsEntryIsDropped(backend: Backend) throws {
        let fixture = try StateFixture(backend)
        defer { fixture.remove() }
        let cache = try fixture.synthesisCache(clock: ManualClock())
        let key = Self.key("Damaged.")
        try cache.store(Self.pcm(2), for: key, characters: 8)
        let url = cache.fileURL(for: key)
        let bytes = try Data(contentsOf: url)
        try bytes.prefix(bytes.count / 2).write(to: url)
        #expect(try cache.load(key) == nil)
        #expect(try cache.totals().entries == 0)
        #expect(!FileManager.default.fileExists(atPath: url.path))
    }

    /// A build's hits record their last use together (`deferredTouches`),
    /// written by `flushTouches` before the build evicts.
    @Test(arguments: Backend.allCases) func hitsDeferredByABuildAreWrittenTogetherWhenFlushed(backend: Backend) throws {
        let fixture = try StateFixture(backend)
        defer { fixture.remove() }
        let clock = ManualClock()
        var cache = try fixture.synthesisCache(clock: clock)
        let keys = ["one.", "two.", "three."].map(Self.key)
        for (index, key) in keys.enumerated() { try cache.store(Self.pcm(index), for: key, characters: 4) }
        for key in keys {
            clock.advance(seconds: 60)
            #expect(try cache.lookup(key) != nil)  // each row now holds its shape and loudness
        }
        clock.advance(seconds: 60)
        cache.deferredTouches = DeferredTouches()
        #expect(try cache.lookup(keys[0]) != nil)
        // A later hit at a later time: one flush writes both, each at its own time.
        clock.advance(seconds: 60)
        #expect(try cache.lookup(keys[1]) != nil)
        #expect(try cache.index.byLastUse().map(\.key) == keys.map(\.hex), "not written before the flush")
        try cache.flushTouches()
        #expect(try cache.index.byLastUse().map(\.key) == [keys[2], keys[0], keys[1]].map(\.hex))
        try cache.flushTouches()
        #expect(try cache.index.byLastUse().map(\.key) == [keys[2], keys[0], keys[1]].map(\.hex), "a second flush writes nothing")
    }

    @Test(arguments: Backend.allCases) func evictionDropsTheLeastRecentlyUsedUntilTheFilesFit(backend: Backend) throws {
        let fixture = try StateFixture(backend)
        defer { fixture.remove() }
        let clock = ManualClock()
        let cache = try fixture.synthesisCache(clock: clock)
        let keys = ["one.", "two.", "three."].map(Self.key)
        for (index, key) in keys.enumerated() {
            try cache.store(Self.pcm(index, count: 48_000), for: key, characters: 4)
            clock.advance(seconds: 60)
        }
        _ = try cache.load(keys[0])  // "one." is now the most recently used
        let sizes = keys.map { SynthesisCache.regularFileSize(cache.fileURL(for: $0)) ?? 0 }
        let removed = try cache.evict(toFit: sizes[0] + sizes[2])
        #expect(removed.files == 1 && removed.bytes == sizes[1])
        #expect(try cache.freshKeys(among: keys) == [keys[0], keys[2]])
        #expect(!FileManager.default.fileExists(atPath: cache.fileURL(for: keys[1]).path))

        // A file with no entry (a crash between rename and insert) goes once it is an hour old.
        let stray = cache.folder.appendingPathComponent("ab/\(String(repeating: "ab", count: 32)).flac")
        let fresh = cache.folder.appendingPathComponent("cd/\(String(repeating: "cd", count: 32)).flac")
        try AtomicFile.write(Data(count: 100), to: stray)
        try AtomicFile.write(Data(count: 100), to: fresh)
        try FileManager.default.setAttributes([.modificationDate: Date().addingTimeInterval(-7200)], ofItemAtPath: stray.path)
        #expect(try cache.evict(toFit: .max) == (files: 1, bytes: 100))
        #expect(!FileManager.default.fileExists(atPath: stray.path) && FileManager.default.fileExists(atPath: fresh.path))
        #expect(try cache.freshKeys(among: keys) == [keys[0], keys[2]])
    }
}

@Suite(.offThePool) struct OutputCacheAndEvictionTests {
    /// The bytes of each test's AudioCache file.
    static let bytes = Data((0..<4096).map { UInt8($0 % 251) })

    /// `bytes` written at AudioCache/t/<poi>_Detailed.m4a under the fixture's output.
    static func writeFile(_ poi: String, in fixture: StateFixture) throws -> URL {
        let url = fixture.scratch.output.appendingPathComponent("AudioCache/t/\(poi)_Detailed.m4a")
        try AtomicFile.write(bytes, to: url)
        return url
    }

    /// The measurements of a file `writeFile` wrote, as a build records them (size and SHA-256 right).
    static func audio(of url: URL) throws -> EncodedAudio {
        var audio = StoreManifestFixture.encoded(1, duration: 3)
        audio.sizeBytes = Int64(bytes.count)
        audio.sha256 = try FileDigest.sha256(of: url).hex
        return audio
    }

    /// A file's key, made by `encoder`.
    static func key(encoder: String = "e1") -> OutputKey {
        OutputKey(
            chunks: [SynthesisCacheTests.key("a")], format: .aac, encoder: encoder, sampleRateHz: 24_000, pauseMilliseconds: 350,
            loudness: nil, metadata: AudioMetadata(title: "P – Detailed", album: "T", language: "en-US"))
    }

    @Test(arguments: Backend.allCases) func aFileIsReusedOnlyWhenItsKeyAgeSizeAndHashAllHold(backend: Backend) throws {
        let fixture = try StateFixture(backend)
        defer { fixture.remove() }
        let clock = ManualClock()
        let outputs = try fixture.outputCache(clock: clock)
        let url = try Self.writeFile("p", in: fixture)
        let (bytes, audio, key) = (Self.bytes, try Self.audio(of: url), Self.key())
        try outputs.record([(url: url, key: key, audio: audio, captions: nil)])

        #expect(try outputs.reusable(url, key: key, check: .sizeAndHash) == audio)
        #expect(try outputs.reusable(url, key: Self.key(encoder: "e2"), check: .sizeAndHash) == nil)

        var flipped = bytes
        flipped[2000] ^= 0x40
        try flipped.write(to: url)
        #expect(try outputs.reusable(url, key: key, check: .size) != nil, "a plan looks at the size only")
        #expect(try outputs.reusable(url, key: key, check: .sizeAndHash) == nil, "a tampered file is made again")
        try bytes.prefix(1000).write(to: url)
        #expect(try outputs.reusable(url, key: key, check: .size) == nil, "a truncated file is made again")
        try bytes.write(to: url)
        clock.advance(days: 31)
        #expect(try outputs.reusable(url, key: key, check: .sizeAndHash) == nil, "audio older than audioMaxAgeDays is not reused")
    }

    /// A file whose SHA-256 a build found right is trusted without reading
    /// it while `lstat` says what it said then, and only once its change
    /// time is settled; a write to it since, or a new encode, means hashing again.
    @Test(arguments: Backend.allCases) func aFileFoundRightIsNotHashedAgainUntilItIsWritten(backend: Backend) throws {
        let fixture = try StateFixture(backend)
        defer { fixture.remove() }
        let outputs = try fixture.outputCache(clock: ManualClock())
        let url = try Self.writeFile("p", in: fixture)
        let (bytes, audio, key) = (Self.bytes, try Self.audio(of: url), Self.key())
        try outputs.record([(url: url, key: key, audio: audio, captions: nil)])
        func signature() throws -> String? { try outputs.entry(url)?.fileSignature }

        // Just written: its change time is not settled, so nothing is kept.
        #expect(try outputs.reusable(url, key: key, check: .sizeAndHash) == audio)
        try outputs.touch([url])
        #expect(try signature() == nil, "a file changed within the last \(FileSignature.settleSeconds) s is hashed every time")

        Thread.sleep(forTimeInterval: FileSignature.settleSeconds + 0.2)
        #expect(try outputs.reusable(url, key: key, check: .sizeAndHash) == audio)
        #expect(try signature() == nil, "kept with the file's last use, not before")
        try outputs.touch([url])
        let kept = try #require(try signature())
        #expect(kept == FileSignature(path: url.path)?.text)

        // The row's SHA-256 made wrong: a signed file is not read, so it still passes.
        let (table, column) = backend == .sqlite ? ("outputFile", "sha256") : ("output_file", "sha256")
        try fixture.execute(
            "UPDATE \(table) SET \(column) = '\(String(repeating: "0", count: 64))' WHERE path = '\(OutputCache.place(of: url.path).path)'")
        #expect(try outputs.reusable(url, key: key, check: .sizeAndHash)?.sha256 == String(repeating: "0", count: 64))
        #expect(try outputs.reusable(url, key: key, check: .size) != nil)

        // The same size written in place: a new change time, so it is hashed, and fails.
        var flipped = bytes
        flipped[2000] ^= 0x40
        let handle = try FileHandle(forWritingTo: url)
        try handle.write(contentsOf: flipped)
        try handle.close()
        #expect(FileSignature(path: url.path)?.text != kept)
        #expect(try outputs.reusable(url, key: key, check: .sizeAndHash) == nil, "a file written since is hashed again")

        // A new encode's row has no signature.
        try bytes.write(to: url)
        try outputs.record([(url: url, key: key, audio: audio, captions: nil)])
        #expect(try signature() == nil)
        #expect(try outputs.reusable(url, key: key, check: .sizeAndHash) == audio)
    }

    /// A file's captions are kept in its row, made under a key: asked under
    /// that key they are the bytes and facts kept, under another none. A
    /// reused file is given captions made again; a new encode's row holds
    /// what was made with it, and a row from before captions none.
    @Test(arguments: Backend.allCases) func captionsAreKeptWithTheirFileUnderTheirKey(backend: Backend) throws {
        let fixture = try StateFixture(backend)
        defer { fixture.remove() }
        let outputs = try fixture.outputCache(clock: ManualClock())
        let url = try Self.writeFile("p", in: fixture)
        let (audio, key) = (try Self.audio(of: url), Self.key())
        let narration = Narration(text: "One. Two.")
        let captionKey = CaptionKey(narration: narration, chunks: [SynthesisCacheTests.key("a")], joiner: PCMJoiner())
        let bytes = Array("WEBVTT\n\n00:00.000 --> 00:01.000\nOne.\n".utf8) + [0, 255]
        let made = StoredCaptions(key: captionKey.hex, bytes: bytes, sha256: String(repeating: "a", count: 64), cues: 1, timing: "provider")

        try outputs.record([(url: url, key: key, audio: audio, captions: nil)])
        #expect(try outputs.captions(url, key: captionKey) == nil, "a row from before captions has none")
        try outputs.touch([url], captions: [url: made])
        #expect(try outputs.captions(url, key: captionKey) == made, "a reused file is given the captions made again")
        for other in [
            CaptionKey(narration: Narration(text: "One! Two."), chunks: [SynthesisCacheTests.key("a")], joiner: PCMJoiner()),
            CaptionKey(narration: narration, chunks: [SynthesisCacheTests.key("b")], joiner: PCMJoiner()),
            CaptionKey(narration: narration, chunks: [SynthesisCacheTests.key("a")], joiner: PCMJoiner(pauseMilliseconds: 500)),
        ] {
            #expect(try outputs.captions(url, key: other) == nil, "made from another narration, chunks or join")
        }

        var remade = made
        remade.bytes = Array("WEBVTT\n".utf8)
        remade.timing = "estimated"
        try outputs.record([(url: url, key: key, audio: audio, captions: remade)])
        #expect(try outputs.captions(url, key: captionKey) == remade, "a new encode's row holds its own captions")
        try outputs.touch([url])
        #expect(try outputs.captions(url, key: captionKey) == remade, "a touch without captions leaves them")
        try outputs.record([(url: url, key: key, audio: audio, captions: nil)])
        #expect(try outputs.captions(url, key: captionKey) == nil, "an encode with captions off keeps none")
    }

    /// A package's caption file is read to see that it holds its captions'
    /// bytes until a build has found them there with its change time
    /// settled; then, while `lstat` says the same, it is trusted unread. A
    /// write to it since, or captions made again, means reading it again.
    /// The signature text is kept in the state, so it must read as it
    /// always has (`device:inode:size:mtime:ctime`), or an upgrade would
    /// hash every file once more; a folder listing gives the same as `lstat`.
    @Test func aFileSignatureReadsAsItAlwaysHas() throws {
        let scratch = StateScratch()
        defer { scratch.remove() }
        let url = scratch.root.appendingPathComponent("folder/a file")
        try AtomicFile.write(Array("some bytes".utf8), to: url)
        var info = stat()
        #expect(lstat(url.path, &info) == 0)
        #if canImport(Darwin)
        let (modified, changed) = (info.st_mtimespec, info.st_ctimespec)
        #else
        let (modified, changed) = (info.st_mtim, info.st_ctim)
        #endif
        let expected =
            "\(info.st_dev):\(info.st_ino):\(info.st_size):\(modified.tv_sec).\(modified.tv_nsec):\(changed.tv_sec).\(changed.tv_nsec)"
        #expect(FileSignature(path: url.path)?.text == expected)
        let listed = try FileStatus.entries(of: url.deletingLastPathComponent().path)
        #expect(listed.map(\.name) == ["a file"])
        #expect(listed.first.flatMap { FileSignature($0.status) }?.text == expected)
        #expect(FileSignature(path: url.deletingLastPathComponent().path) == nil, "a folder has none")
        #expect(FileSignature(path: url.path + "-missing") == nil)

        // Links are not followed; a name that is not UTF-8 is still listed.
        let folder = url.deletingLastPathComponent()
        try FileManager.default.createSymbolicLink(atPath: folder.appendingPathComponent("link").path, withDestinationPath: url.path)
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("inner"), withIntermediateDirectories: false)
        let odd = Array((folder.path + "/odd-").utf8CString.dropLast()) + [CChar(bitPattern: 0xFF), 0]
        let descriptor = open(odd, O_CREAT | O_WRONLY | O_CLOEXEC, 0o644)
        #expect(descriptor >= 0)
        close(descriptor)
        let kinds = Dictionary(uniqueKeysWithValues: try FileStatus.entries(of: folder.path).map { ($0.name, $0.status.kind) })
        #expect(kinds["link"] == .symlink && kinds["inner"] == .folder && kinds["a file"] == .file)
        #expect(kinds["odd-\u{FFFD}"] == .file, "\(kinds)")
        #expect(FileSignature(path: folder.appendingPathComponent("link").path) == nil)
    }

    @Test(arguments: Backend.allCases) func aCaptionFileFoundRightIsNotReadAgainUntilItIsWritten(backend: Backend) throws {
        let fixture = try StateFixture(backend)
        defer { fixture.remove() }
        let outputs = try fixture.outputCache(clock: ManualClock())
        let audio = try Self.writeFile("p", in: fixture)
        let bytes = Array("WEBVTT\n\n00:00.000 --> 00:01.000\nOne.\n".utf8)
        let sha256 = PackageCaptions(bytes: bytes, cues: 1, timing: .provider).sha256
        let made = StoredCaptions(key: String(repeating: "c", count: 64), bytes: bytes, sha256: sha256, cues: 1, timing: "provider")
        let file = fixture.scratch.output.appendingPathComponent("p.vtt")
        try Data(bytes).write(to: file)
        try outputs.record([(url: audio, key: Self.key(), audio: try Self.audio(of: audio), captions: made)])
        func signature() throws -> String? { try outputs.entry(audio)?.captionsFileSignature }

        #expect(outputs.captionFile(atPath: file.path, holds: made, keptWith: audio))
        try outputs.touch([audio])
        #expect(try signature() == nil, "a file changed within the last \(FileSignature.settleSeconds) s is read every time")
        Thread.sleep(forTimeInterval: FileSignature.settleSeconds + 0.2)
        #expect(outputs.captionFile(atPath: file.path, holds: made, keptWith: audio))
        #expect(
            !outputs.captionFile(
                atPath: file.path,
                holds: StoredCaptions(key: made.key, bytes: bytes + [0x0A], sha256: made.sha256, cues: 1, timing: "provider"),
                keptWith: audio), "another size")
        try outputs.touch([audio])
        #expect(try signature()?.hasPrefix(made.sha256) == true)

        // Other bytes of the same size and digest in the row: a signed file is not read, so it still passes.
        var other = made
        other.bytes = Array(repeating: 0x41, count: bytes.count)
        #expect(outputs.captionFile(atPath: file.path, holds: other, keptWith: audio))
        #expect(!outputs.captionFile(atPath: file.path, holds: other, keptWith: nil), "captions not kept in a row are always read")

        // The same size written in place: a new change time, so it is read, and fails.
        let handle = try FileHandle(forWritingTo: file)
        try handle.write(contentsOf: Data(other.bytes))
        try handle.close()
        #expect(!outputs.captionFile(atPath: file.path, holds: made, keptWith: audio), "a file written since is read again")

        // Captions made again clear the signature.
        try Data(bytes).write(to: file)
        Thread.sleep(forTimeInterval: FileSignature.settleSeconds + 0.2)
        #expect(outputs.captionFile(atPath: file.path, holds: made, keptWith: audio))
        try outputs.touch([audio])
        #expect(try signature() != nil)
        try outputs.touch([audio], captions: [audio: made])
        #expect(try signature() == nil)
    }

    /// A build reads every row of its plan in one query (`preloading`): the
    /// answers are the index's, and a path written or forgotten afterwards is
    /// read from the index again.
    @Test(arguments: Backend.allCases) func preloadedRowsAnswerAsTheIndexDoesUntilAPathChanges(backend: Backend) throws {
        let fixture = try StateFixture(backend)
        defer { fixture.remove() }
        let outputs = try fixture.outputCache(clock: ManualClock())
        let (url, other) = (try Self.writeFile("p", in: fixture), try Self.writeFile("q", in: fixture))
        let (audio, key) = (try Self.audio(of: url), Self.key())
        try outputs.record([(url: url, key: key, audio: audio, captions: nil)])

        let preloaded = try outputs.preloading([url, other])
        let (relative, otherRelative) = (OutputCache.place(of: url.path).path, OutputCache.place(of: other.path).path)
        #expect(try preloaded.index.entries(paths: [relative, otherRelative]).keys.sorted() == [relative])
        #expect(try preloaded.reusable(url, key: key, check: .sizeAndHash) == audio)
        #expect(try preloaded.reusable(other, key: key, check: .sizeAndHash) == nil, "no row when preloaded")
        try preloaded.record([(url: other, key: key, audio: audio, captions: nil)])
        #expect(try preloaded.reusable(other, key: key, check: .sizeAndHash) == audio, "recorded after the preload")
        try preloaded.forget([url])
        #expect(try preloaded.reusable(url, key: key, check: .size) == nil, "forgotten after the preload")
        #expect(try outputs.reusable(url, key: key, check: .size) == nil && outputs.reusable(other, key: key, check: .size) == audio)
    }

    /// One live package pins its four files; three unlisted files compete
    /// for the rest of a 1 MB budget by when a build last used them, not by
    /// their modification times.
    @Test(arguments: Backend.allCases) func evictionAfterABuildTakesTheLeastRecentlyUsedAndNeverAPinnedFile(backend: Backend) throws {
        let fixture = try StateFixture(backend)
        defer { fixture.remove() }
        let scratch = fixture.scratch
        let clock = ManualClock()
        let layout = Layout(root: scratch.output)
        let outputs = try fixture.outputCache(clock: clock)
        let manifest = try StoreManifestFixture.manifest(createdAt: clock.date())
        _ = try manifest.write(into: layout)
        for entry in manifest.audio {
            try AtomicFile.write(Data(count: 200_000), to: layout.root.appendingPathComponent(entry.path))
        }
        // Unlisted: old.m4a was used longest ago but written last.
        let unlisted = ["old", "middle", "recent"].map {
            layout.root.appendingPathComponent("AudioCache/\(StoreManifestFixture.tourID)/\($0).m4a")
        }
        for (index, url) in unlisted.enumerated() {
            try AtomicFile.write(Data(count: 150_000), to: url)
            try outputs.record([
                (
                    url: url,
                    key: OutputKey(
                        chunks: [], format: .aac, encoder: "e", sampleRateHz: 24_000, pauseMilliseconds: 0, loudness: nil,
                        metadata: AudioMetadata(title: "\(index)", album: "", language: "")),
                    audio: StoreManifestFixture.encoded(index, duration: 1), captions: nil
                )
            ])
            clock.advance(seconds: 60)
        }
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSince1970: 0)], ofItemAtPath: unlisted[2].path)
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSince1970: 0)], ofItemAtPath: unlisted[1].path)

        // 4 × 200,000 pinned + 3 × 150,000 = 1,250,000 bytes; the budget is 1,048,576.
        let evicted = try CacheMaintenance.run(
            layout: layout, budgets: Budgets(cacheMaxMB: 1), outputs: outputs, now: clock.date(), overBudgetOnly: true)
        #expect(evicted.removals.count == 2 && evicted.freedBytes == 300_000)
        #expect(!FileManager.default.fileExists(atPath: unlisted[0].path))
        #expect(!FileManager.default.fileExists(atPath: unlisted[1].path))
        #expect(FileManager.default.fileExists(atPath: unlisted[2].path))
        for entry in manifest.audio {
            #expect(FileManager.default.fileExists(atPath: layout.root.appendingPathComponent(entry.path).path), "pinned: \(entry.path)")
        }
        #expect(try outputs.lastUsed(relativeTo: layout.root).count == 1, "evicted files are forgotten")

        // Now under the budget (950,000 bytes): nothing goes, and the sizes are still counted.
        let under = try CacheMaintenance.run(
            layout: layout, budgets: Budgets(cacheMaxMB: 1), outputs: outputs, now: clock.date(), overBudgetOnly: true)
        #expect(under.removals.isEmpty && under.bytesBefore == 950_000 && under.budgetBytes == 1_048_576)
        #expect(FileManager.default.fileExists(atPath: unlisted[2].path))

        // A budget below the live packages alone: nothing pinned goes, and that is not an error.
        let again = try CacheMaintenance.run(
            layout: layout, budgets: Budgets(cacheMaxMB: 0), outputs: outputs, now: clock.date(), overBudgetOnly: true)
        #expect(again.removals.count == 1)
        for entry in manifest.audio {
            #expect(FileManager.default.fileExists(atPath: layout.root.appendingPathComponent(entry.path).path))
        }
    }
}

@Suite(.offThePool) struct BuildRecordsTests {
    @Test(arguments: Backend.allCases) func aBuildGoesQueuedRunningCompletedWithItsTimes(backend: Backend) throws {
        let fixture = try StateFixture(backend)
        defer { fixture.remove() }
        let scratch = fixture.scratch
        let clock = ManualClock()
        let records = try fixture.records(clock: clock)
        let id = try records.queue(pipeline: URL(fileURLWithPath: "/p/demo.yaml"), output: scratch.output)
        #expect(try records.recent(output: scratch.output).first?.status == .queued)
        clock.advance(seconds: 5)
        try records.start(id)
        #expect(try records.recent().first?.status == .running)
        try records.recordTour(id, tourId: "t1", outcome: "packaged")
        try records.recordTour(id, tourId: "t2", outcome: "failed", message: "t2: HTTP 400: refused")
        clock.advance(seconds: 10)
        var summary = BuildSummary()
        summary.toursBuilt = 1
        summary.toursFailed = 1
        summary.requests = 9
        try records.finish(id, status: .failed, summary: summary, error: "1 tour failed")
        let record = try #require(try records.recent(output: scratch.output).first)
        #expect(record.status == .failed && record.requests == 9 && record.toursBuilt == 1 && record.error == "1 tour failed")
        #expect(record.finishedAt!.timeIntervalSince(record.startedAt!) == 10)
        #expect(record.startedAt!.timeIntervalSince(record.queuedAt) == 5)
        #expect(try records.failedTours(output: scratch.output).map(\.tourId) == ["t2"])

        // The next build packages t2: it is no longer failed.
        let next = try records.queue(pipeline: URL(fileURLWithPath: "/p/demo.yaml"), output: scratch.output)
        try records.recordTour(next, tourId: "t2", outcome: "packaged")
        try records.finish(next, status: .completed, summary: nil, error: nil)
        #expect(try records.failedTours(output: scratch.output).isEmpty)
        #expect(try records.counts(output: scratch.output) == [.failed: 1, .completed: 1])
    }

    @Test(arguments: Backend.allCases) func aBuildWhoseProcessIsGoneIsMarkedInterrupted(backend: Backend) throws {
        let fixture = try StateFixture(backend)
        defer { fixture.remove() }
        let scratch = fixture.scratch
        var records = try fixture.records()
        let mine = try records.queue(pipeline: URL(fileURLWithPath: "/p.yaml"), output: scratch.output)
        records.owner = ProcessOwner(host: ProcessOwner.current.host, pid: 999_999_999, startTicks: 3)
        let dead = try records.queue(pipeline: URL(fileURLWithPath: "/p.yaml"), output: scratch.output)
        try records.start(dead)
        #expect(try records.reconcile() == 1)
        let byID = Dictionary(uniqueKeysWithValues: try records.recent().map { ($0.id, $0) })
        #expect(byID[dead]?.status == .failed)
        #expect(byID[dead]?.error?.contains("interrupted") == true)
        #expect(byID[mine]?.status == .queued, "a live build is left alone")
    }
}

/// More of the records and the synthesis index, on both backends: what
/// `cache clear` forgets and keeps, a tour's outcome recorded twice, and a
/// chunk kept and paid for in one transaction.
@Suite(.offThePool) struct StateRowsTests {
    @Test(arguments: Backend.allCases) func clearingAnOutputsRecordsKeepsRunningBuildsAndOtherOutputs(backend: Backend) throws {
        let fixture = try StateFixture(backend)
        defer { fixture.remove() }
        let records = try fixture.records()
        let output = fixture.scratch.output
        let elsewhere = fixture.scratch.root.appendingPathComponent("Other")
        let done = try records.queue(pipeline: URL(fileURLWithPath: "/p.yaml"), output: output)
        try records.recordTour(done, tourId: "t1", outcome: "failed", message: "first try")
        try records.recordTour(done, tourId: "t1", outcome: "failed", message: "second try")
        try records.finish(done, status: .failed, summary: nil, error: "1 tour failed")
        #expect(try records.failedTours(output: output).map(\.message) == ["second try"], "recorded again: replaced")
        let running = try records.queue(pipeline: URL(fileURLWithPath: "/p.yaml"), output: output)
        try records.start(running)
        let other = try records.queue(pipeline: URL(fileURLWithPath: "/q.yaml"), output: elsewhere)
        try records.recordTour(other, tourId: "t9", outcome: "failed")
        try records.finish(other, status: .failed, summary: nil, error: nil)

        try records.forgetAll(output: output)
        #expect(try records.recent(output: output).map(\.id) == [running], "a running build keeps its record")
        #expect(try records.failedTours(output: output).isEmpty)
        #expect(try records.failedTours(output: elsewhere).map(\.tourId) == ["t9"])
        #expect(try records.counts(output: elsewhere) == [.failed: 1])
        #expect(try records.recent(limit: 1).map(\.id) == [other], "newest first, across outputs")
    }

    /// `failedTours` is in tour ID order, byte by byte, on both backends
    /// (PostgreSQL's collation would otherwise put 'b' before 'C').
    @Test(arguments: Backend.allCases) func failedToursComeInTourIDOrder(backend: Backend) throws {
        let fixture = try StateFixture(backend)
        defer { fixture.remove() }
        let records = try fixture.records()
        let id = try records.queue(pipeline: URL(fileURLWithPath: "/p.yaml"), output: fixture.scratch.output)
        for tour in ["b-tour", "C-tour", "a-tour", "_tour"] { try records.recordTour(id, tourId: tour, outcome: "failed") }
        #expect(try records.failedTours(output: fixture.scratch.output).map(\.tourId) == ["C-tour", "_tour", "a-tour", "b-tour"])
    }

    /// The synthesizer keeps a chunk and settles its reservation in one
    /// transaction: afterwards both are there, the reservation gone.
    @Test(arguments: Backend.allCases) func aKeptChunkIsPaidForInTheSameTransaction(backend: Backend) throws {
        let fixture = try StateFixture(backend)
        defer { fixture.remove() }
        let clock = ManualClock()
        let cache = try fixture.synthesisCache(clock: clock)
        let ledger = try fixture.ledger(clock: clock)
        let key = SynthesisCacheTests.key("Paid for once.")
        let reservation = try ledger.reserve(14, tier: .standard)
        let temp = try cache.temporaryURL(for: key)
        try FLACFile.write(SynthesisCacheTests.pcm(4), to: temp)
        let kept = try cache.adopt(
            temp, for: key, shape: ShapeMeter.shape(of: SynthesisCacheTests.pcm(4).samples), sampleRate: 24_000, characters: 14,
            alongWith: ledger.settlement(of: reservation, characters: 28))
        #expect(kept.url == cache.fileURL(for: key))
        #expect(
            try ledger.usage(of: .standard) == TierUsage(tier: .standard, used: 28, reserved: 0, limit: 1000), "settled for what was billed"
        )
        #expect(try cache.load(key) == SynthesisCacheTests.pcm(4))
        #expect(try cache.totals().entries == 1)
    }

    /// An entry from before chunk shapes and loudness is measured on its
    /// first hit, and what was measured is kept, so the next hit reads no audio.
    @Test(arguments: Backend.allCases) func anEntryFromBeforeChunkShapesIsMeasuredOnceAndRemembered(backend: Backend) throws {
        let fixture = try StateFixture(backend)
        defer { fixture.remove() }
        let clock = ManualClock()
        let cache = try fixture.synthesisCache(clock: clock)
        let key = SynthesisCacheTests.key("Old entry.")
        try cache.store(SynthesisCacheTests.pcm(5), for: key, characters: 10)
        let table =
            backend == .sqlite
            ? "synthesisChunk SET audibleStart = NULL, audibleEnd = NULL, loudness = NULL"
            : "synthesis_chunk SET audible_start = NULL, audible_end = NULL, loudness = NULL"
        try fixture.execute("UPDATE \(table)")
        let old = try #require(try cache.index.entry(key.hex))
        #expect(old.audibleStart == nil && old.loudness == nil)
        let hit = try #require(try cache.lookup(key))
        #expect(hit.shape.samples == 24_000 && hit.shape.audible == ShapeMeter.shape(of: SynthesisCacheTests.pcm(5).samples).audible)
        let loudness = try #require(hit.shape.loudness, "measured on the hit")
        let entry = try #require(try cache.index.entry(key.hex))
        #expect(entry.audibleStart == hit.shape.audible?.lowerBound && entry.audibleEnd == hit.shape.audible?.upperBound)
        #expect(entry.loudness == loudness.encoded, "kept, byte for byte")
        #expect(entry.lastUsedAt == clock.date().timeIntervalSince1970)
    }
}

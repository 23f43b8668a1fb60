import Foundation
import GRDB
import TestServers
import Testing

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

    func ledger(clock: ManualClock, standard: Int = 1000, key: String? = "k-123") throws -> QuotaLedger {
        let budgets = Budgets(monthlyCharacters: [.standard: standard, .wavenet: 50])
        return QuotaLedger(
            store: try open().ledger, account: QuotaAccount(endpoint: "http://tts.test", apiKey: key), budgets: budgets, clock: clock.now)
    }

    func synthesisCache(clock: ManualClock) throws -> SynthesisCache {
        SynthesisCache(
            index: try open().synthesisIndex, folder: scratch.state.appendingPathComponent("synthesis"), maxAgeDays: 30, clock: clock.now)
    }

    func outputCache(clock: ManualClock) throws -> OutputCache {
        OutputCache(index: try open().outputIndex, maxAgeDays: 30, clock: clock.now)
    }

    func records(clock: ManualClock = ManualClock()) throws -> BuildRecords {
        BuildRecords(store: try open().buildRecords, clock: clock.now)
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

/// Runs `body(0)` … `body(count - 1)` on that many threads at once and
/// waits for them all: as many clients as asked, where Dispatch's
/// `concurrentPerform` would run only as many as there are cores.
func onThreads(_ count: Int, _ body: @escaping (Int) -> Void) {
    nonisolated(unsafe) let body = body
    let group = DispatchGroup()
    for index in 0..<count {
        group.enter()
        Thread {
            body(index)
            group.leave()
        }.start()
    }
    group.wait()
}

/// Threads that wait for one another: `wait()` returns once all `parties` called it.
final class Barrier: @unchecked Sendable {
    private let condition = NSCondition()
    private let parties: Int
    private var waiting = 0
    private var generation = 0

    init(_ parties: Int) { self.parties = parties }

    func wait() {
        condition.lock()
        defer { condition.unlock() }
        let mine = generation
        waiting += 1
        if waiting == parties {
            waiting = 0
            generation += 1
            condition.broadcast()
            return
        }
        while generation == mine { condition.wait() }
    }
}

/// Runs a suite's tests on threads of their own, not on Swift's cooperative
/// pool. The state tests block: SQLite's lock, PostgreSQL's round trips,
/// threads joined, the test server starting. On a 2-core CI machine the
/// pool has two threads, and other suites' in-process servers, with
/// timeouts of tens of milliseconds, need them. The test still runs in its
/// own task, so `#expect` knows which test it belongs to.
struct OffThePool: SuiteTrait, TestTrait, TestScoping {
    var isRecursive: Bool { true }

    func provideScope(for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void) async throws {
        try await withTaskExecutorPreference(BlockingTestExecutor.shared) {
            // The preference is taken up when the task is next enqueued: now.
            await Task.yield()
            try await function()
        }
    }
}

extension Trait where Self == OffThePool {
    static var offThePool: Self { OffThePool() }
}

/// A task executor of four threads of its own. A state test's body is one
/// job (it is synchronous) and holds its thread while it blocks; four at a
/// time keep the state suites busy without crowding out the rest of the run.
/// No job waits for another job, so a fifth simply waits its turn.
final class BlockingTestExecutor: TaskExecutor, @unchecked Sendable {
    static let shared = BlockingTestExecutor(threads: 4)

    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []

    init(threads: Int) {
        for _ in 0..<threads {
            Thread { [unowned self] in
                while true { self.next().runSynchronously(on: self.asUnownedTaskExecutor()) }
            }.start()
        }
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.withLock {
            jobs.append(job)
            condition.signal()
        }
    }

    private func next() -> UnownedJob {
        condition.withLock {
            while jobs.isEmpty { condition.wait() }
            return jobs.removeFirst()
        }
    }
}

import Foundation
import TourpackCore
import TourpackKit
import TourpackState
import TourpackTesting

#if canImport(Glibc)
import Glibc
#endif

/// `tourpack-bench ledger [--workers 4] [--cycles 1000] [--runs 3]`
///
/// Reservations per second of the quota ledger shared by concurrent
/// workers: `--workers` separate processes (this executable again, in the
/// hidden `ledger-worker` mode), each with its own connection or file
/// handle, as workers on separate machines have, each doing `--cycles`
/// reserve → markSent → settle cycles through the real `QuotaLedger` over
/// the real stores, against:
/// - SQLite on local disk (`StateDatabase`: one machine, WAL, synchronous=NORMAL);
/// - PostgreSQL (`PostgresState`) on a throwaway local server that waits
///   for the disk on every commit, as a production server does;
/// - the same PostgreSQL with `synchronous_commit = off` for the database:
///   the durability SQLite's NORMAL gives (a power cut may lose the last
///   commits, never corrupts), for a like-for-like reading.
///
/// One account, one tier, and a limit of exactly the characters all the
/// reservations ask for, so every reservation takes the conditional path
/// (`used + reserved + n <= limit`) and the last one lands on the limit.
/// The workers start together (each opens its state, says `ready`, and
/// waits for `go`), and the time is from `go` to the last worker's report.
///
/// Each run checks its own result: the month's `used` equals the
/// characters the workers settled (and the limit), nothing is reserved, and
/// one more character is refused. Median of `--runs`; exit 1 when a worker
/// fails or a check does not hold.
enum LedgerBench {
    /// The variable the workers read the PostgreSQL password from.
    static let passwordVariable = "TOURPACK_BENCH_PG_PASSWORD"
    static let account = QuotaAccount(endpoint: "https://texttospeech.googleapis.com", apiKey: "tourpack-bench-ledger")
    static let tier = PricingTier.standard

    enum Backend: String, CaseIterable {
        case sqlite
        case postgres
        /// PostgreSQL with `synchronous_commit = off` for the database.
        case postgresAsync = "postgres-async-commit"
    }

    static func run(_ arguments: [String]) -> Int32 {
        func option(_ name: String, _ fallback: Int) -> Int {
            guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count, let value = Int(arguments[index + 1]) else {
                return fallback
            }
            return value
        }
        let workers = max(1, option("--workers", 4)), cycles = max(1, option("--cycles", 1000)), runs = max(1, option("--runs", 3))
        let scratch = TemporaryFolder.path("tourpack-bench-ledger")
        defer { TemporaryFolder.remove(scratch) }
        setenv(passwordVariable, PostgresTestServer.password, 1)
        let total = (0..<workers).reduce(0) { sum, worker in sum + (0..<cycles).reduce(0) { $0 + characters(worker: worker, cycle: $1) } }
        // Pinned, so a run across midnight at the end of a month stays in one month.
        let time = Date().timeIntervalSince1970
        print(
            "ledger: \(workers) worker process\(workers == 1 ? "" : "es") × \(cycles) reserve → markSent → settle cycles, one account's \(tier.rawValue) tier, "
                + "limit = exactly the \(workers * cycles) reservations' \(PlanReport.grouped(total)) characters; median of \(runs) runs; load average \(BenchLoad.text)"
        )
        var failed = false
        var medians: [Backend: Double] = [:]
        do {
            let server = try PostgresTestServer.start(durable: true)
            defer { server.stop() }
            for backend in Backend.allCases {
                var rates: [Double] = []
                for run in 1...runs {
                    let target: String
                    switch backend {
                    case .sqlite:
                        let folder = scratch.appendingPathComponent("sqlite-\(run)")
                        _ = try StateDatabase(folder: folder)  // migrated before the clock starts
                        target = folder.path
                    case .postgres, .postgresAsync:
                        target = try server.createDatabase()
                        if backend == .postgresAsync {
                            try server.psql(databaseName(target), "ALTER DATABASE \(databaseName(target)) SET synchronous_commit = off")
                        }
                        _ = try PostgresState(url: target, password: Secret(PostgresTestServer.password))
                    }
                    if run == 1 {
                        print("ledger \(backend.rawValue) durability: \(try durability(backend, target: target, server: server))")
                    }
                    let result = try measure(backend, target: target, workers: workers, cycles: cycles, limit: total, time: time)
                    let check = try verify(backend, target: target, limit: total, settled: result.settled, time: time)
                    failed = failed || !check.passed
                    rates.append(Double(workers * cycles) / result.seconds)
                    print(
                        String(
                            format: "ledger %@ run %d: %d cycles in %.2f s = %.0f cycles/s (per worker: %@ s); %@; load %@",
                            backend.rawValue, run, workers * cycles, result.seconds, rates.last!,
                            result.workerSeconds.map { String(format: "%.2f", $0) }.joined(separator: ", "), check.text, BenchLoad.text))
                }
                medians[backend] = EncodeBench.median(rates)
            }
        } catch {
            print("ledger bench failed: \(error)")
            return 1
        }
        for backend in Backend.allCases {
            print(
                String(
                    format: "ledger %@: median %.0f reservations/s (full reserve → markSent → settle cycles/s, %d worker process%@)",
                    backend.rawValue, medians[backend] ?? 0, workers, workers == 1 ? "" : "es"))
        }
        if let postgres = medians[.postgres], let sqlite = medians[.sqlite], let async = medians[.postgresAsync] {
            print(
                String(
                    format:
                        "ledger PostgreSQL (durable commits) / SQLite (one machine): %.2f×; PostgreSQL with synchronous_commit=off / SQLite: %.2f×",
                    postgres / sqlite, async / sqlite))
        }
        return failed ? 1 : 0
    }

    /// The characters of one worker's cycle: 100 to 499, varied, the same in the worker and here.
    static func characters(worker: Int, cycle: Int) -> Int {
        100 + (worker * 7_919 + cycle * 104_729) % 400
    }

    static func databaseName(_ url: String) -> String {
        String(url.split(separator: "/").last?.split(separator: "?").first ?? "")
    }

    static func openLedger(_ backend: Backend, target: String, limit: Int, time: Double) throws -> QuotaLedger {
        let budgets = Budgets(monthlyCharacters: [tier: limit])
        let clock: @Sendable () -> Date = { Date(timeIntervalSince1970: time) }
        switch backend {
        case .sqlite:
            return QuotaLedger(
                database: try StateDatabase(folder: URL(fileURLWithPath: target)), account: account, budgets: budgets, clock: clock)
        case .postgres, .postgresAsync:
            let password = Secret(ProcessInfo.processInfo.environment[passwordVariable])
            return QuotaLedger(
                store: try PostgresState(url: target, password: password).ledger, account: account, budgets: budgets, clock: clock)
        }
    }

    /// What each backend's commits wait for, as read from it.
    static func durability(_ backend: Backend, target: String, server: PostgresTestServer) throws -> String {
        switch backend {
        case .sqlite:
            // Bytes 18 and 19 of the header are 2 in WAL mode. `synchronous`
            // is per connection and not in the file: StateDatabase sets it.
            let header = try FileHandle(forReadingFrom: URL(fileURLWithPath: target).appendingPathComponent(StateDatabase.fileName))
                .readData(ofLength: 20)
            let wal = header.count == 20 && header[18] == 2 && header[19] == 2
            return
                "SQLite \(target)/\(StateDatabase.fileName) on local disk (\(BenchLoad.filesystem(target))): journal_mode=\(wal ? "WAL" : "not WAL") "
                + "(file header), synchronous=NORMAL (StateDatabase sets it on every connection): a commit appends to the WAL without fsync, "
                + "the WAL is fsynced at checkpoints; survives kill -9, a power cut may lose the last commits"
        case .postgres, .postgresAsync:
            let settings = try server.psql(
                databaseName(target),
                """
                SELECT string_agg(name || '=' || setting, ', ' ORDER BY name) FROM pg_settings
                WHERE name IN ('fsync', 'synchronous_commit', 'full_page_writes', 'wal_sync_method')
                """)
            let version = try server.psql(databaseName(target), "SHOW server_version")
            return
                "PostgreSQL \(version) on loopback, data on local disk (\(BenchLoad.filesystem("/tmp"))): \(settings) (pg_settings, as a worker's session sees them)"
                + (backend == .postgres
                    ? ": every commit waits for its WAL flush"
                    : ": a commit does not wait for the flush; a power cut may lose the last commits, as SQLite's NORMAL")
        }
    }

    struct Measurement {
        var seconds: Double
        var workerSeconds: [Double]
        var settled: Int
    }

    /// Starts the workers, lets them go together, and waits for their reports.
    static func measure(_ backend: Backend, target: String, workers: Int, cycles: Int, limit: Int, time: Double) throws -> Measurement {
        let executable = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        var children: [(process: Process, input: FileHandle, output: LineReader)] = []
        defer { for child in children where child.process.isRunning { kill(child.process.processIdentifier, SIGKILL) } }
        for worker in 0..<workers {
            let process = Process()
            process.executableURL = executable
            process.arguments = ["ledger-worker", backend.rawValue, target, String(worker), String(cycles), String(limit), String(time)]
            let input = Pipe(), output = Pipe()
            process.standardInput = input
            process.standardOutput = output
            try process.run()
            children.append((process, input.fileHandleForWriting, LineReader(output.fileHandleForReading)))
        }
        for (worker, child) in children.enumerated() {
            let line = child.output.next()
            guard line == "ready" else { throw BenchFailure("ledger worker \(worker) did not start: \(line ?? "no output")") }
        }
        let started = ContinuousClock.now
        for child in children { child.input.write(Data("go\n".utf8)) }
        var workerSeconds: [Double] = [], settled = 0
        for (worker, child) in children.enumerated() {
            let line = child.output.next() ?? "no output"
            guard let report = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                let seconds = report["seconds"] as? Double, let characters = report["characters"] as? Int
            else { throw BenchFailure("ledger worker \(worker): \(line)") }
            workerSeconds.append(seconds)
            settled += characters
        }
        let seconds = started.duration(to: .now).seconds
        for (worker, child) in children.enumerated() {
            child.process.waitUntilExit()
            guard child.process.terminationStatus == 0 else {
                throw BenchFailure("ledger worker \(worker) exited \(child.process.terminationStatus)")
            }
        }
        return Measurement(seconds: seconds, workerSeconds: workerSeconds, settled: settled)
    }

    /// The run's own check: used = settled = the limit, nothing reserved, and the month full.
    static func verify(_ backend: Backend, target: String, limit: Int, settled: Int, time: Double) throws -> (passed: Bool, text: String) {
        let ledger = try openLedger(backend, target: target, limit: limit, time: time)
        let usage = try ledger.usage(of: tier)
        var refused = false
        do {
            let reservation = try ledger.reserve(1, tier: tier)
            try ledger.release(reservation)
        } catch let error as TourpackError where error.kind == .budgetExceeded {
            refused = true
        }
        let passed = usage.used == settled && settled == limit && usage.reserved == 0 && refused
        return (
            passed,
            "used \(PlanReport.grouped(usage.used)) = settled \(PlanReport.grouped(settled)) = limit, reserved \(usage.reserved), "
                + "one more character \(refused ? "refused" : "GRANTED"): \(passed ? "PASS" : "FAIL")"
        )
    }

    /// `ledger-worker BACKEND TARGET WORKER CYCLES LIMIT TIME`: one worker
    /// process. Opens its state, prints `ready`, waits for `go` on stdin,
    /// runs its cycles, and prints `{"seconds", "characters"}`.
    static func worker(_ arguments: [String]) -> Int32 {
        guard arguments.count == 6, let backend = Backend(rawValue: arguments[0]), let worker = Int(arguments[2]),
            let cycles = Int(arguments[3]),
            let limit = Int(arguments[4]), let time = Double(arguments[5])
        else {
            print("usage: tourpack-bench ledger-worker sqlite|postgres|postgres-async-commit TARGET WORKER CYCLES LIMIT TIME")
            return 2
        }
        // Unbuffered: the parent waits for each line.
        func say(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }
        do {
            let ledger = try openLedger(backend, target: arguments[1], limit: limit, time: time)
            say("ready")
            guard readLine() == "go" else { return 1 }
            let started = ContinuousClock.now
            var settled = 0
            for cycle in 0..<cycles {
                let reservation = try ledger.reserve(characters(worker: worker, cycle: cycle), tier: tier)
                try ledger.markSent(reservation)
                try ledger.settle(reservation)
                settled += reservation.characters
            }
            let seconds = started.duration(to: .now).seconds
            say("{\"seconds\": \(seconds), \"characters\": \(settled)}")
            return 0
        } catch {
            say("error: \(error)")
            return 1
        }
    }
}

/// Lines from a child's stdout, read as they come.
final class LineReader {
    private let handle: FileHandle
    private var buffer = Data()

    init(_ handle: FileHandle) { self.handle = handle }

    /// The next line without its newline; nil at the end of the output.
    func next() -> String? {
        while true {
            if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self)
                buffer.removeSubrange(buffer.startIndex...newline)
                return line
            }
            let chunk = handle.availableData
            guard !chunk.isEmpty else {
                defer { buffer.removeAll() }
                return buffer.isEmpty ? nil : String(decoding: buffer, as: UTF8.self)
            }
            buffer.append(chunk)
        }
    }
}

/// What the machine is doing besides the bench, printed beside its figures:
/// the host is shared, and a figure means little without its load.
enum BenchLoad {
    /// The 1-, 5- and 15-minute load averages, from /proc/loadavg.
    static var text: String {
        let fields = ((try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)) ?? "").split(separator: " ")
        return fields.count >= 3 ? fields.prefix(3).joined(separator: " ") : "unknown"
    }

    /// The file system type holding `path` (ext4, tmpfs, overlay): the
    /// longest mount point of /proc/mounts that contains it. tmpfs would
    /// make an fsync free, and a durability figure meaningless.
    static func filesystem(_ path: String) -> String {
        let resolved = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
        let mounts = ((try? String(contentsOfFile: "/proc/mounts", encoding: .utf8)) ?? "").split(separator: "\n").map {
            $0.split(separator: " ")
        }
        let best = mounts.filter { $0.count >= 3 }.filter { fields in
            let point = String(fields[1])
            return resolved == point || resolved.hasPrefix(point == "/" ? "/" : point + "/")
        }.max { $0[1].count < $1[1].count }
        guard let best else { return "unknown file system" }
        return best[2] == "tmpfs" ? "tmpfs: fsync costs nothing there" : String(best[2])
    }
}

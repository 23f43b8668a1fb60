import Foundation
import Testing
import TourpackCore
import TourpackKit
import TourpackTesting

/// `tourpack state migrate`, and builds whose state is in PostgreSQL, run
/// as a user or a Kubernetes job would run them: the real executable
/// against the test process's throwaway server.
@Suite(.offThePool) struct StateCommandTests {
    /// The workspace's pipeline with `state:` as a mapping: a local folder
    /// of its own (`path`) and, when given, the shared PostgreSQL database.
    static func useState(_ workspace: BuildWorkspace, path: String = "state", postgres: String?) throws {
        let text = try String(contentsOf: workspace.pipeline, encoding: .utf8)
        let mapping = "state:\n  path: \(path)\n" + (postgres.map { "  postgres: '\($0)'\n  passwordEnv: TP_TEST_PG_PASSWORD\n" } ?? "")
        try text.replacingOccurrences(of: "state: state\n", with: mapping).write(to: workspace.pipeline, atomically: true, encoding: .utf8)
    }

    static let environment = ["TP_TEST_PG_PASSWORD": PostgresTestServer.password]

    static func migrate(_ workspace: BuildWorkspace) throws -> Executable.Result {
        try Executable.run(["state", "migrate", workspace.pipeline.path], in: workspace.root, environment: environment)
    }

    @Test(arguments: ["sqlite", "postgres"]) func migrateAppliesTheSchemaOnceAndSaysWhat(backend: String) throws {
        let workspace = try BuildWorkspace()
        let url = backend == "postgres" ? try PostgresTestServer.shared().createDatabase() : nil
        try Self.useState(workspace, postgres: url)

        let first = try Self.migrate(workspace)
        #expect(first.status == 0, "\(first.stderr)")
        let lines = first.stdout.split(separator: "\n").map(String.init)
        if let url {
            #expect(lines.first == "state: \(url.replacingOccurrences(of: "?sslmode=disable", with: "")) (PostgreSQL)")
            #expect(lines.dropFirst().first == "  applied caches, ledger and build records")
            #expect(!FileManager.default.fileExists(atPath: workspace.state.path), "the local folder is not PostgreSQL's business")
        } else {
            #expect(lines.first == "state: \(workspace.state.appendingPathComponent("state.sqlite").path) (SQLite)")
            #expect(lines.contains("  applied caches, ledger and build records") && lines.contains("  applied sent reservations"))
        }
        #expect(lines.last?.hasPrefix("the schema is current (") == true, "\(first.stdout)")

        let again = try Self.migrate(workspace)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(!again.stdout.contains("applied "), "\(again.stdout)")
        #expect(again.stdout.contains("nothing to apply: the schema is current ("))
        for text in [first.stdout, first.stderr, again.stdout, again.stderr] { #expect(!text.contains(PostgresTestServer.password)) }
    }

    /// A worker must not write into a schema it does not understand.
    @Test func aSchemaNewerThanThisTourpackIsRefused() throws {
        let workspace = try BuildWorkspace()
        let url = try PostgresTestServer.shared().createDatabase()
        try Self.useState(workspace, postgres: url)
        #expect(try Self.migrate(workspace).status == 0)
        let database = String(url.split(separator: "/").last!.split(separator: "?").first!)
        try PostgresTestServer.shared().psql(database, "INSERT INTO schema_migrations (version, name) VALUES (42, 'v42 from the future')")
        let refused = try Self.migrate(workspace)
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("state: postgresql://tourpack@127.0.0.1:"), "\(refused.stderr)")
        #expect(refused.stderr.contains("the schema is at version 42, newer than this tourpack knows"), "\(refused.stderr)")
    }

    /// The errors a worker can meet before its first request, each naming
    /// the server and what failed, none holding the password.
    @Test func anUnreachableServerOrAWrongPasswordIsNamedAndTheExitIsOne() throws {
        let workspace = try BuildWorkspace()
        let port = try PostgresTestServer.freePort()
        try Self.useState(workspace, postgres: "postgresql://tourpack@127.0.0.1:\(port)/tourpack?sslmode=disable")
        let down = try Self.migrate(workspace)
        #expect(down.status == 1)
        #expect(
            down.stderr.contains("error: state: postgresql://tourpack@127.0.0.1:\(port)/tourpack: connection refused"), "\(down.stderr)")

        let url = try PostgresTestServer.shared().createDatabase()
        let other = try BuildWorkspace()
        try Self.useState(other, postgres: url)
        let wrong = try Executable.run(
            ["state", "migrate", other.pipeline.path], in: other.root,
            environment: ["TP_TEST_PG_PASSWORD": "not-\(PostgresTestServer.password)"])
        #expect(wrong.status == 1)
        #expect(wrong.stderr.contains("password authentication failed for user \"tourpack\""), "\(wrong.stderr)")
        #expect(!wrong.stderr.contains(PostgresTestServer.password) && !wrong.stdout.contains(PostgresTestServer.password))
    }

    /// A whole build with its state in PostgreSQL: the ledger holds what
    /// the voice billed, a second worker (another local state folder, the
    /// same database) sees the same quota, and a rebuild on the first
    /// worker sends nothing: its cache index and output index are there.
    @Test func aBuildOnPostgreSQLKeepsItsLedgerAndIndexesThere() throws {
        let server = try LocalVoiceServer()
        let workspace = try BuildWorkspace()
        let url = try PostgresTestServer.shared().createDatabase()
        try Self.useState(workspace, postgres: url)
        let voice = try IncrementalBuildTests.writeStandardVoice(in: workspace)

        let first = try Executable.run(
            ["build", workspace.pipeline.path, "--endpoint", server.endpoint, "--voice", voice, "--json"], in: workspace.root,
            environment: Self.environment)
        #expect(first.status == 0, "\(first.stderr)")
        let billed = try IncrementalBuildTests.characters(server)
        let summary = try IncrementalBuildTests.summary(first)
        #expect(billed > 0 && summary["charactersBilled"] as? Int == billed, "\(summary)")

        // Another worker: its own local folder, the same database.
        let quota = try Executable.run(
            [
                "quota", workspace.pipeline.path, "--json", "--state", workspace.root.appendingPathComponent("worker-2").path, "--voice",
                voice,
                "--endpoint", server.endpoint,
            ],
            in: workspace.root, environment: Self.environment)
        #expect(quota.status == 0, "\(quota.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(quota.stdout.utf8)) as? [String: Any])
        let standard = try #require((object["tiers"] as? [[String: Any]])?.first { $0["tier"] as? String == "standard" })
        #expect(standard["used"] as? Int == billed && standard["reserved"] as? Int == 0, "\(standard)")

        let warm = try Executable.run(
            ["build", workspace.pipeline.path, "--endpoint", server.endpoint, "--voice", voice, "--json"], in: workspace.root,
            environment: Self.environment)
        #expect(warm.status == 0, "\(warm.stderr)")
        #expect(try IncrementalBuildTests.summary(warm)["requests"] as? Int == 0)
        #expect(try IncrementalBuildTests.characters(server) == billed, "nothing spoken twice")
        let stats = try Executable.run(
            ["cache", "stats", workspace.pipeline.path, "--json"], in: workspace.root, environment: Self.environment)
        #expect(stats.status == 0, "\(stats.stderr)")
        let cache = try #require(try JSONSerialization.jsonObject(with: Data(stats.stdout.utf8)) as? [String: Any])
        #expect((cache["builds"] as? [String: Int])?["completed"] == 2, "\(stats.stdout)")
        for text in [first.stdout, first.stderr, warm.stdout, quota.stdout, stats.stdout] {
            #expect(!text.contains(PostgresTestServer.password))
        }
    }

    /// A build on PostgreSQL publishes each tour under that tour's advisory
    /// lock: while another session holds the lock of one tour, the build
    /// publishes the other and waits, on the server, for the lock of the
    /// first; once it is let go, that tour is published too.
    @Test func aTourIsPublishedOnlyUnderItsAdvisoryLock() throws {
        let server = try LocalVoiceServer()
        let workspace = try BuildWorkspace()
        let postgres = try PostgresTestServer.shared()
        let url = try postgres.createDatabase()
        let database = String(url.split(separator: "/").last!.split(separator: "?").first!)
        try Self.useState(workspace, postgres: url)
        // The lock's key as the build names it: the first 8 bytes of a SHA-256
        // of the output root's real path and the tour ID, read big-endian.
        let output = workspace.root.resolvingSymlinksInPath().appendingPathComponent("Documents").path
        let key = try MotoTestServer.python([
            "-c",
            """
            import hashlib, sys
            digest = hashlib.sha256(f"tourpack publish\\n{sys.argv[1]}\\n{sys.argv[2]}".encode()).digest()
            print(int.from_bytes(digest[:8], "big", signed=True))
            """, output, BuildWorkspace.alpsID,
        ]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let holder = try postgres.session(database)
        defer {
            try? holder.input.close()
            holder.process.waitUntilExit()
        }
        holder.input.write(Data("SELECT pg_advisory_lock(\(key));\n".utf8))
        func advisoryLocks(granted: Bool) throws -> Int {
            Int(
                try postgres.psql(database, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted = \(granted)")
                    .trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
        }
        try Self.poll("the test's session holds the lock") { try advisoryLocks(granted: true) == 1 }

        let build = try RunningBuild(
            arguments: ["build", workspace.pipeline.path, "--endpoint", server.endpoint, "--json"], in: workspace.root,
            environment: Self.environment)
        // The build's own connection comes to wait for the held lock, on the server.
        try Self.poll("the build waits for the tour's lock") { try advisoryLocks(granted: false) == 1 }
        // Whatever it published meanwhile (the other tour, when its items were
        // done first: tours publish in the order they complete), never the held one.
        _ = build.waitForEvent("tourPackaged", timeout: 1)
        #expect(build.process.isRunning)
        func packaged(_ tour: String) -> Bool {
            build.events.contains { $0["event"] as? String == "tourPackaged" && $0["tourId"] as? String == tour }
        }
        #expect(!packaged(BuildWorkspace.alpsID), "the tour whose lock is held waits")

        holder.input.write(Data("SELECT pg_advisory_unlock_all();\n".utf8))
        #expect(build.finish() == 0)
        #expect(packaged(BuildWorkspace.alpsID) && packaged(BuildWorkspace.lakesID), "\(build.transcript)")
        // A server process ends a moment after its client's connection closes: its locks go with it.
        try Self.poll("the build let go of its locks") { try advisoryLocks(granted: true) == 0 && advisoryLocks(granted: false) == 0 }
    }

    /// Checks `condition` every 50 ms for up to 30 s.
    static func poll(_ what: String, _ condition: () throws -> Bool) throws {
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            if try condition() { return }
            Thread.sleep(forTimeInterval: 0.05)
        }
        throw SetupFailure("timed out: \(what)")
    }
}

package import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A real, throwaway PostgreSQL server on loopback for the tests: Debian's
/// `postgresql` (installed by `make setup`), found as
/// `/usr/lib/postgresql/<version>/bin`, since Debian keeps initdb and pg_ctl
/// off the PATH.
///
/// One server serves every test of a process (`shared()`), each test on a
/// database of its own (`createDatabase()`): initdb and a start cost a few
/// seconds, a database a few milliseconds. It is always stopped: at exit,
/// and, should the test process die first (a crash, SIGKILL), by a watchdog
/// that outlives it, notices within a second, kills the postmaster by its
/// `postmaster.pid` and removes the folder.
///
/// initdb and pg_ctl refuse to run as root, and CI runs the tests as root in
/// a fresh container: there they run as the `postgres` user that Debian's
/// package creates (or `nobody` without it), through util-linux's setpriv.
///
/// TCP connections need a password (scram-sha-256), so the tests exercise
/// the password the pipeline reads from its variable; the Unix socket, in
/// the server's own folder, trusts its clients, for creating databases.
package final class PostgresTestServer: @unchecked Sendable {
    /// The superuser, who owns the test databases.
    package static let user = "tourpack"
    /// A sentinel: no output, error or file may ever contain it.
    package static let password = "sentinel-pg-password-4711-never-print-me"

    package let port: Int
    let folder: URL
    let bin: URL
    let account: (uid: uid_t, gid: gid_t)?
    private let stopped = NSLock()
    private var isStopped = false

    var data: URL { folder.appendingPathComponent("data") }

    private init(port: Int, folder: URL, bin: URL, account: (uid: uid_t, gid: gid_t)?) {
        self.port = port
        self.folder = folder
        self.bin = bin
        self.account = account
    }

    // MARK: One per process

    private static let sharedServer = Result { try PostgresTestServer.start() }
    nonisolated(unsafe) private static var running: PostgresTestServer?

    /// The process's server, started on first use.
    package static func shared() throws -> PostgresTestServer {
        try sharedServer.get()
    }

    /// `postgresql://tourpack@127.0.0.1:<port>/<name>`, without TLS (the
    /// test server has none) and without the password.
    package func url(database: String) -> String {
        "postgresql://\(Self.user)@127.0.0.1:\(port)/\(database)?sslmode=disable"
    }

    /// A new, empty database; its URL.
    package func createDatabase() throws -> String {
        let name = "t_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(20).lowercased()
        try Self.check(
            run(bin.appendingPathComponent("createdb"), ["-h", folder.path, "-p", String(port), "-U", Self.user, name], asServer: false),
            "createdb \(name)")
        return url(database: name)
    }

    /// Runs SQL as the superuser over the trusted socket; the output of `psql -At`.
    @discardableResult
    package func psql(_ database: String, _ sql: String) throws -> String {
        let result = try run(
            bin.appendingPathComponent("psql"),
            ["-h", folder.path, "-p", String(port), "-U", Self.user, "-d", database, "-v", "ON_ERROR_STOP=1", "-At", "-c", sql],
            asServer: false)
        try Self.check(result, "psql")
        return result.output
    }

    /// A psql session as the superuser that stays open: each line written
    /// to it runs as it arrives, on one connection, so a test can hold a
    /// lock while a build runs. Ends when `input` is closed.
    package func session(_ database: String) throws -> (process: Process, input: FileHandle) {
        let process = Process()
        process.executableURL = bin.appendingPathComponent("psql")
        process.arguments = ["-h", folder.path, "-p", String(port), "-U", Self.user, "-d", database, "-v", "ON_ERROR_STOP=1", "-Atq"]
        let input = Pipe()
        process.standardInput = input
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        return (process, input.fileHandleForWriting)
    }

    // MARK: Start and stop

    /// A server of the caller's own, apart from `shared()`: the caller stops
    /// it (or exit, or the watchdog, does).
    ///
    /// - Parameter durable: commits wait for the disk (`fsync`,
    ///   `synchronous_commit` and `full_page_writes` on: PostgreSQL's own
    ///   defaults), as on a production server. `tourpack-bench` measures
    ///   with it, since a figure from a server that skips the disk says
    ///   nothing about a real one. The tests keep the default, off: their
    ///   data is thrown away, and waiting for the disk would only slow them.
    package static func start(durable: Bool = false) throws -> PostgresTestServer {
        let bin = try binFolder()
        // /tmp, not $TMPDIR: the server's Unix socket lives in this folder and
        // its path must stay short (107 bytes at most), and as root the
        // server's account must be able to reach it (a TMPDIR under /root is not).
        let folder = URL(fileURLWithPath: "/tmp").appendingPathComponent("tourpack-pg-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let account = try serverAccount()
        let passwordFile = folder.appendingPathComponent("password")
        try Data(password.utf8).write(to: passwordFile)
        if let account {
            for url in [folder, passwordFile] {
                guard chown(url.path, account.uid, account.gid) == 0 else { throw failure("chown \(url.path): errno \(errno)") }
            }
        }
        var server = PostgresTestServer(port: 0, folder: folder, bin: bin, account: account)
        do {
            try check(
                server.run(
                    bin.appendingPathComponent("initdb"),
                    [
                        "-D", server.data.path, "-U", user, "--pwfile", passwordFile.path, "--auth-local=trust",
                        "--auth-host=scram-sha-256",
                        "-E", "UTF8", "--locale=C", "--no-sync",
                    ], asServer: true), "initdb")
            try? FileManager.default.removeItem(at: passwordFile)
            // A port the kernel just handed out may be taken again before the
            // server binds it; another is tried then.
            var lastFailure: (any Error)?
            for _ in 0..<3 {
                server = PostgresTestServer(port: try freePort(), folder: folder, bin: bin, account: account)
                let started = try server.run(
                    bin.appendingPathComponent("pg_ctl"),
                    [
                        "-D", server.data.path, "-l", folder.appendingPathComponent("server.log").path, "-w", "-t", "60",
                        // Throwaway data: no fsync, nothing that waits for the disk (unless `durable`).
                        "-o",
                        "-k \(folder.path) -p \(server.port) -c listen_addresses=127.0.0.1 "
                            + (durable
                                ? "-c fsync=on -c synchronous_commit=on -c full_page_writes=on"
                                : "-c fsync=off -c synchronous_commit=off -c full_page_writes=off")
                            + " -c max_connections=300",
                        "start",
                    ], asServer: true, daemon: true)
                if started.status == 0 {
                    lastFailure = nil
                    break
                }
                lastFailure = failure("pg_ctl start: \(started.output)\n\(server.log)")
            }
            if let lastFailure { throw lastFailure }
        } catch {
            server.stop()
            throw error
        }
        running = server
        server.startWatchdog()
        atexit { PostgresTestServer.running?.stop() }
        return server
    }

    /// Stops the server (immediately: the data is thrown away) and removes its folder. Safe to call twice.
    package func stop() {
        let first = stopped.withLock {
            defer { isStopped = true }
            return !isStopped
        }
        guard first else { return }
        if port != 0 {
            _ = try? run(
                bin.appendingPathComponent("pg_ctl"), ["-D", data.path, "stop", "-m", "immediate", "-w", "-t", "30"], asServer: true)
        }
        // pg_ctl could not stop it (or never ran): the postmaster's own PID file says whom to kill.
        if let text = try? String(contentsOf: data.appendingPathComponent("postmaster.pid"), encoding: .utf8),
            let pid = text.split(separator: "\n").first.flatMap({ pid_t($0) }), pid > 0
        {
            kill(pid, SIGKILL)
        }
        try? FileManager.default.removeItem(at: folder)
    }

    /// A shell in its own session, so a signal to the test's process group
    /// spares it: once this process is gone, it kills the postmaster and removes the folder.
    private func startWatchdog() {
        let watchdog = Process()
        watchdog.executableURL = URL(fileURLWithPath: "/usr/bin/setsid")
        watchdog.arguments = [
            "/bin/sh", "-c",
            #"while kill -0 "$1" 2>/dev/null; do sleep 1; done; pid=$(head -n 1 "$2/data/postmaster.pid" 2>/dev/null); [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; sleep 1; rm -rf "$2""#,
            "postgres-watchdog", String(getpid()), folder.path,
        ]
        watchdog.standardInput = FileHandle.nullDevice
        watchdog.standardOutput = FileHandle.nullDevice
        watchdog.standardError = FileHandle.nullDevice
        try? watchdog.run()
    }

    var log: String {
        (try? String(contentsOf: folder.appendingPathComponent("server.log"), encoding: .utf8)) ?? "(no server log)"
    }

    // MARK: Parts

    /// The newest `/usr/lib/postgresql/<version>/bin` that holds initdb.
    static func binFolder() throws -> URL {
        let root = URL(fileURLWithPath: "/usr/lib/postgresql")
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: root.path)) ?? []).compactMap(Int.init).sorted(by: >)
        for version in versions {
            let bin = root.appendingPathComponent("\(version)/bin")
            if FileManager.default.isExecutableFile(atPath: bin.appendingPathComponent("initdb").path) { return bin }
        }
        throw failure("no PostgreSQL server: initdb is not in /usr/lib/postgresql/*/bin; `make setup` installs Debian's postgresql")
    }

    /// Whom initdb and pg_ctl run as: nil (this process's user) unless this is root.
    static func serverAccount() throws -> (uid: uid_t, gid: gid_t)? {
        guard geteuid() == 0 else { return nil }
        for name in ["postgres", "nobody"] {
            if let entry = getpwnam(name) { return (entry.pointee.pw_uid, entry.pointee.pw_gid) }
        }
        throw failure("running as root, and neither a 'postgres' nor a 'nobody' user exists to run initdb as")
    }

    struct Outcome {
        var status: Int32
        var output: String
    }

    /// Runs a tool to its end, stdout and stderr together; as the server's account when `asServer`.
    ///
    /// - Parameter daemon: the tool leaves a daemon behind (`pg_ctl start`).
    ///   Foundation's Process learns that its child ended when a socket it
    ///   hands the child closes; a daemon would inherit that socket and keep
    ///   `waitUntilExit` waiting for as long as the server runs. So bash first
    ///   closes every descriptor past stderr, then runs the tool.
    func run(_ tool: URL, _ arguments: [String], asServer: Bool, daemon: Bool = false) throws -> Outcome {
        OffThePool.checkNotOnThePool("PostgresTestServer (\(tool.lastPathComponent))")
        var command = [tool.path] + arguments
        if daemon {
            let closeInherited = #"for fd in /proc/$$/fd/*; do fd=${fd##*/}; [ "$fd" -gt 2 ] && eval "exec $fd>&-"; done; exec "$@""#
            command = ["/bin/bash", "-c", closeInherited, "bash"] + command
        }
        if asServer, let account {
            command = ["/usr/bin/setpriv", "--reuid=\(account.uid)", "--regid=\(account.gid)", "--clear-groups", "--"] + command
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: command[0])
        process.arguments = Array(command.dropFirst())
        var environment = ProcessInfo.processInfo.environment
        // The client tools would take these over their arguments.
        for name in ["PGPASSWORD", "PGHOST", "PGPORT", "PGUSER", "PGDATABASE", "PGDATA"] { environment[name] = nil }
        process.environment = environment
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Outcome(
            status: process.terminationStatus, output: String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        )
    }

    static func check(_ outcome: Outcome, _ what: String) throws {
        guard outcome.status == 0 else { throw failure("\(what) exited \(outcome.status): \(outcome.output)") }
    }

    /// A loopback port that was free a moment ago.
    package static func freePort() throws -> Int {
        let fd = Sockets.tcp()
        defer { close(fd) }
        var address = Sockets.loopback(port: 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard ok else { throw failure("no free loopback port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    static func failure(_ message: String) -> Failure {
        Failure(description: "test PostgreSQL server: \(message)")
    }
}

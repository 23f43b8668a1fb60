import Foundation
import Logging
import NIOCore
import NIOPosix
import PostgresNIO
import TourpackCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Where `state.postgres` points: `postgresql://user@host:port/database`,
/// with an optional `?sslmode=disable|prefer|require`. The password is never
/// in it (the loader refuses one); it comes from the variable `passwordEnv`
/// names, read once at load into a `Secret`.
///
/// Unset parts take libpq's defaults: port 5432, the user running tourpack,
/// a database named as the user, and `sslmode=prefer` (TLS when the server
/// offers it). `require` also verifies the server's certificate and host
/// name, as libpq's `verify-full` does.
package struct PostgresURL: Sendable, Hashable, CustomStringConvertible {
    package enum TLSMode: String, Sendable { case disable, prefer, require }

    var host: String
    var port: Int
    var user: String
    var database: String
    var tls: TLSMode

    init(_ text: String) throws {
        // The loader checked the URL; this only reads it, and never quotes it
        // back: a mistyped password would be in it.
        guard let components = URLComponents(string: text), let scheme = components.scheme?.lowercased(),
            scheme == "postgres" || scheme == "postgresql", let host = components.host, !host.isEmpty, components.password == nil
        else {
            throw TourpackError.invalidInput("state.postgres: not a PostgreSQL URL like postgresql://tourpack@db.internal:5432/tourpack")
        }
        self.host = host
        port = components.port ?? 5432
        user = components.user.flatMap { $0.removingPercentEncoding } ?? ProcessInfo.processInfo.userName
        let path = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        database = path.isEmpty ? user : (path.removingPercentEncoding ?? path)
        let mode = components.queryItems?.first { $0.name == "sslmode" }?.value ?? "prefer"
        guard let tls = Self.tlsMode(mode) else { throw TourpackError.invalidInput("state.postgres: \(Self.sslmodeProblem(mode))") }
        self.tls = tls
    }

    /// libpq's `sslmode` values, as far as PostgresNIO can honour them.
    package static func tlsMode(_ sslmode: String) -> TLSMode? {
        switch sslmode {
        case "disable": .disable
        case "allow", "prefer": .prefer
        case "require", "verify-ca", "verify-full": .require
        default: nil
        }
    }

    package static func sslmodeProblem(_ sslmode: String) -> String {
        "sslmode '\(sslmode.prefix(20))' is not one of disable, prefer, require (or libpq's allow, verify-ca, verify-full)"
    }

    /// `postgresql://user@host:port/database`: what errors and `state migrate` print.
    package var description: String {
        let shownHost = host.contains(":") ? "[\(host)]" : host
        return "postgresql://\(user)@\(shownHost):\(port)/\(database)"
    }
}

/// The PostgreSQL connections of one opened state, handed out one caller at
/// a time and kept for the next.
///
/// The state's callers are synchronous (the build calls the stores from its
/// thread pool, the commands from their own thread), so each call blocks on
/// PostgresNIO's event-loop futures: the I/O runs on NIO's event loops and
/// the caller's thread waits, as it waits on SQLite's file lock. Nothing
/// here needs Swift's cooperative pool, so a caller on any thread but an
/// event loop cannot starve it or deadlock on it, however many wait at once.
/// (PostgresClient's pool is async-only; bridging it to these synchronous
/// callers would park cooperative threads on semaphores.)
///
/// At most `maximum` connections are open; a caller beyond that waits for
/// one to come back. A connection that failed below SQL (a lost socket) is
/// closed, not reused; a refused statement leaves it usable.
final class PostgresConnections: @unchecked Sendable {
    let url: PostgresURL
    let location: StateLocation
    private let configuration: PostgresConnection.Configuration
    private let maximum: Int
    private let condition = NSCondition()
    private var idle: [PostgresConnection] = []
    private var open = 0
    private var nextID = 0

    /// PostgresNIO logs at debug and trace; nothing it logs is wanted on
    /// stdout (which `--json` keeps machine-readable), and nothing here may
    /// ever print a credential.
    static let logger = Logger(label: "tourpack.state.postgres", factory: { _ in SwiftLogNoOpLogHandler() })

    init(url: PostgresURL, password: Secret?, maximum: Int = 8, connectTimeout: TimeAmount = .seconds(10)) throws {
        self.url = url
        location = .postgres(url: url.description)
        self.maximum = max(1, maximum)
        let tls: PostgresConnection.Configuration.TLS
        switch url.tls {
        case .disable:
            tls = .disable
        case .prefer, .require:
            let context: NIOSSLContext
            do { context = try NIOSSLContext(configuration: .makeClientConfiguration()) } catch {
                throw location.failure("cannot set up TLS: \(error)")
            }
            tls = url.tls == .prefer ? .prefer(context) : .require(context)
        }
        var configuration = PostgresConnection.Configuration(
            host: url.host, port: url.port, username: url.user, password: password?.value, database: url.database, tls: tls)
        configuration.options.connectTimeout = connectTimeout
        self.configuration = configuration
    }

    deinit {
        for connection in idle { Self.close(connection) }
    }

    /// Closes without waiting; the completion keeps the connection alive
    /// until it is closed (PostgresNIO asserts that no open connection is freed).
    private static func close(_ connection: PostgresConnection) {
        connection.close().whenComplete { _ in _ = connection }
    }

    /// Runs `body` with a connection of its own.
    func withConnection<T>(_ body: (PostgresSession) throws -> T) throws -> T {
        let connection = try checkOut()
        do {
            let result = try body(PostgresSession(connection: connection))
            checkIn(connection, usable: true)
            return result
        } catch {
            // A statement the server refused leaves the connection as good as
            // before (a transaction is rolled back by `transaction`); a
            // failure of the connection itself does not.
            let broken = (error as? PSQLError).map { $0.code != .server } ?? false
            checkIn(connection, usable: !broken)
            throw error
        }
    }

    /// Runs `body` in one transaction on a connection of its own.
    func transaction<T>(_ body: (PostgresSession) throws -> T) throws -> T {
        try withConnection { session in try session.transaction { try body(session) } }
    }

    private func checkOut() throws -> PostgresConnection {
        condition.lock()
        while true {
            if let connection = idle.popLast() {
                if connection.isClosed {
                    open -= 1
                    continue
                }
                condition.unlock()
                return connection
            }
            if open < maximum { break }
            condition.wait()
        }
        open += 1
        let id = nextID
        nextID += 1
        condition.unlock()
        do {
            return try PostgresConnection.connect(
                on: MultiThreadedEventLoopGroup.singleton.next(), configuration: configuration, id: id, logger: Self.logger
            ).wait()
        } catch {
            condition.lock()
            open -= 1
            condition.signal()
            condition.unlock()
            throw location.failure(Self.reason(error), cause: error)
        }
    }

    private func checkIn(_ connection: PostgresConnection, usable: Bool) {
        condition.lock()
        if usable, !connection.isClosed {
            idle.append(connection)
        } else {
            open -= 1
            Self.close(connection)
        }
        condition.signal()
        condition.unlock()
    }

    /// What went wrong, in words a person can act on: the server's own
    /// message and SQLSTATE, or the socket's errno. PSQLError's description
    /// says nothing on purpose (it may hold a query's values); these parts
    /// never hold the password, which PostgreSQL never sends back.
    static func reason(_ error: any Error) -> String {
        if let error = error as? TourpackError { return error.message }
        if let error = error as? PSQLError {
            if let info = error.serverInfo, let message = info[.message] {
                return message + (info[.sqlState].map { " (SQLSTATE \($0))" } ?? "")
            }
            switch error.code {
            case .connectionError:
                return error.underlying.map(reason) ?? "cannot connect"
            case .authMechanismRequiresPassword:
                return "the server asks for a password and none is set (in the variable state.passwordEnv names, PGPASSWORD by default)"
            case .serverClosedConnection:
                return "the server closed the connection" + (error.underlying.map { ": \(reason($0))" } ?? "")
            case .sslUnsupported:
                return "the server does not offer TLS, which sslmode=require asks for"
            case .unsupportedAuthMechanism:
                return "the server asks for an authentication method PostgresNIO does not speak"
            default:
                return "\(error.code)" + (error.underlying.map { ": \(reason($0))" } ?? "")
            }
        }
        if let error = error as? IOError { return errnoText(error.errnoCode) }
        if let error = error as? NIOConnectionError {
            if let first = error.connectionErrors.first { return reason(first.error) }
            if error.dnsAError != nil || error.dnsAAAAError != nil { return "cannot resolve the host name \(error.host)" }
            return "cannot connect to \(error.host):\(error.port)"
        }
        if let error = error as? ChannelError, case .connectTimeout(let timeout) = error {
            return "no connection within \(timeout.nanoseconds / 1_000_000_000) s"
        }
        return String(describing: error)
    }

    /// `connection refused`: strerror's text, as a clause.
    private static func errnoText(_ code: Int32) -> String {
        let text = errnoDescription(code)
        return text.prefix(1).lowercased() + text.dropFirst()
    }
}

/// One connection, used by one caller, with blocking calls.
struct PostgresSession {
    let connection: PostgresConnection

    /// Runs one statement and collects its rows.
    @discardableResult
    func query(_ query: PostgresQuery) throws -> PostgresQueryResult {
        try connection.query(query, logger: PostgresConnections.logger).wait()
    }

    func execute(_ query: PostgresQuery) throws {
        _ = try self.query(query)
    }

    /// Runs `body` in one transaction: committed when it returns, rolled back when it throws.
    func transaction<T>(_ body: () throws -> T) throws -> T {
        try execute("BEGIN")
        do {
            let result = try body()
            try execute("COMMIT")
            return result
        } catch {
            // Fails only with the connection, which is then dropped anyway.
            try? execute("ROLLBACK")
            throw error
        }
    }
}

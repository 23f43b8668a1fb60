import CSQLiteShims
package import Foundation
package import GRDB
package import TourpackCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads an MBTiles 1.3 file (a local extract, or a pack `validate` checks):
/// its metadata and its tiles. Tiles are addressed in XYZ; the file's TMS
/// rows are converted.
///
/// The file is never trusted:
/// - It is opened by descriptor (`O_RDONLY | O_NONBLOCK`), and refused
///   unless it is a regular file: a directory, a FIFO or a device is named
///   as such, and a FIFO never blocks.
/// - SQLite reads it through a read-only VFS from that descriptor
///   (`tp_sqlite_register_descriptor_vfs`), as an immutable file: nothing
///   is ever created beside it (no `-wal`, `-shm` or `-journal`), and its
///   path may be as long as the system allows (SQLite's own VFS stops at
///   512 bytes).
/// - `metadata()`, `tile(_:)` and `tileIDs()` read only `tiles` and
///   `metadata` that are plain tables with the MBTiles columns (not views,
///   virtual tables or generated columns): a view can hide an endless query.
/// - No string or blob longer than `maxValueBytes` is read, and every
///   `read` stops with an error after `timeLimit`.
///
/// Blocking (SQLite); call it from a thread pool.
package final class MBTilesReader: Sendable {
    package let url: URL
    private let queue: DatabaseQueue
    private let timeLimitMilliseconds: Int64
    /// Why `tiles` or `metadata` cannot be read as MBTiles; empty when they can.
    package let schemaProblems: [String]

    /// The longest string or blob read from a file: a tile (the fetcher's
    /// answers stop at the same size) or a metadata value.
    package static let maxValueBytes = 16 * 1024 * 1024
    /// The longest one `read` may take by default: far beyond what an
    /// intact pack or extract needs for one tile, or `validate` for a whole pack.
    package static let defaultTimeLimit: Duration = .seconds(120)
    /// Metadata rows read at most.
    package static let maxMetadataRows = 1_000

    package init(_ url: URL, timeLimit: Duration = MBTilesReader.defaultTimeLimit) throws {
        self.url = url
        let milliseconds = timeLimit.components.seconds * 1_000 + timeLimit.components.attoseconds / 1_000_000_000_000_000
        timeLimitMilliseconds = max(1, milliseconds)
        let descriptor = try Self.openRegularFile(url)
        defer { close(descriptor) }
        guard tp_sqlite_register_descriptor_vfs() == 0 else {
            throw MBTilesError(path: url.path, message: "SQLite's descriptor VFS could not be registered")
        }
        var configuration = Configuration()
        configuration.readonly = true
        configuration.label = "tourpack.mbtiles"
        let (limit, bytes) = (timeLimitMilliseconds, Int32(Self.maxValueBytes))
        configuration.prepareDatabase { db in
            guard let connection = db.sqliteConnection else { return }
            tp_sqlite_limit_length(UnsafeMutableRawPointer(connection), bytes)
            tp_sqlite_set_time_limit(UnsafeMutableRawPointer(connection), limit)
        }
        do {
            // The descriptor is duplicated when SQLite opens the file, so it may be closed after.
            queue = try DatabaseQueue(
                path: "file:/descriptor/\(descriptor)?mode=ro&immutable=1&vfs=\(TP_SQLITE_DESCRIPTOR_VFS)", configuration: configuration)
        } catch {
            throw MBTilesError(path: url.path, message: Self.describe(error))
        }
        schemaProblems = try Self.read(queue, url: url, limit: timeLimitMilliseconds) { db in try Self.schemaProblems(db) }
    }

    /// The `metadata` table as name → value: text as it is, numbers as
    /// their decimal text (other tools write `minzoom` as an integer), a
    /// blob when it is UTF-8; NULL and other blobs are left out.
    package func metadata() throws -> [String: String] {
        try requireSchema()
        return try read { db in try Self.metadata(db) }
    }

    /// The bytes of one tile, or nil when the file has no such tile. A tile
    /// stored as text or NULL is an error naming it.
    package func tile(_ id: TileID) throws -> [UInt8]? {
        try requireSchema()
        return try read { db -> [UInt8]? in
            guard
                let value = try DatabaseValue.fetchOne(
                    db, sql: "SELECT tile_data FROM tiles WHERE zoom_level = ? AND tile_column = ? AND tile_row = ?",
                    arguments: [id.z, id.x, id.tmsRow])
            else { return nil }
            switch value.storage {
            case .blob(let data): return Array(data)
            case .string: throw MBTilesError(path: url.path, message: "tile \(id) is text, not a blob")
            case .null: throw MBTilesError(path: url.path, message: "tile \(id) has no data (NULL)")
            case .int64, .double: throw MBTilesError(path: url.path, message: "tile \(id) is a number, not a blob")
            }
        }
    }

    /// Every tile the file holds, in XYZ, sorted: what a map may ask the
    /// pack for (`tourpack review` draws nothing else). Rows whose numbers
    /// are not integers in range are left out.
    package func tileIDs() throws -> [TileID] {
        try requireSchema()
        return try read { db in
            var ids: [TileID] = []
            let cursor = try Row.fetchCursor(db, sql: "SELECT zoom_level, tile_column, tile_row FROM tiles")
            while let row = try cursor.next() {
                guard case .int64(let z) = (row[0] as DatabaseValue).storage, case .int64(let x) = (row[1] as DatabaseValue).storage,
                    case .int64(let tmsRow) = (row[2] as DatabaseValue).storage, (0...30).contains(z)
                else { continue }
                let side = Int64(1) << z
                guard (0..<side).contains(x), (0..<side).contains(tmsRow) else { continue }
                ids.append(TileID(z: Int(z), x: Int(x), y: Int(side - 1 - tmsRow)))
            }
            return ids.sorted()
        }
    }

    /// Runs `body` on the file, within the time limit; SQLite's errors
    /// become `MBTilesError`s naming it.
    package func read<T>(_ body: (Database) throws -> T) throws -> T {
        try Self.read(queue, url: url, limit: timeLimitMilliseconds, body)
    }

    private static func read<T>(_ queue: DatabaseQueue, url: URL, limit: Int64, _ body: (Database) throws -> T) throws -> T {
        do {
            return try queue.read { db in
                if let connection = db.sqliteConnection { tp_sqlite_set_time_limit(UnsafeMutableRawPointer(connection), limit) }
                defer { if let connection = db.sqliteConnection { tp_sqlite_set_time_limit(UnsafeMutableRawPointer(connection), 0) } }
                return try body(db)
            }
        } catch let error as MBTilesError {
            throw error
        } catch let error as DatabaseError where error.resultCode == .SQLITE_INTERRUPT {
            let shown = limit % 1_000 == 0 ? "\(limit / 1_000) s" : "\(limit) ms"
            throw MBTilesError(
                path: url.path, message: "reading it took longer than \(shown), the most tourpack allows (an endless query?)")
        } catch let error as DatabaseError where error.resultCode == .SQLITE_TOOBIG {
            throw MBTilesError(
                path: url.path, message: "it holds a value larger than \(maxValueBytes / 1_048_576) MiB, the most tourpack reads")
        } catch {
            throw MBTilesError(path: url.path, message: Self.describe(error))
        }
    }

    private func requireSchema() throws {
        if let problem = schemaProblems.first { throw MBTilesError(path: url.path, message: problem) }
    }

    /// The file's descriptor, opened read-only without blocking (a FIFO
    /// would wait for a writer), once it is known to be a regular file.
    private static func openRegularFile(_ url: URL) throws -> Int32 {
        let descriptor = open(url.path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard descriptor >= 0 else {
            let code = errno
            throw MBTilesError(path: url.path, message: code == ENOENT ? "no such file" : String(cString: strerror(code)))
        }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            let code = errno
            close(descriptor)
            throw MBTilesError(path: url.path, message: String(cString: strerror(code)))
        }
        let kind = status.st_mode & S_IFMT
        guard kind == S_IFREG else {
            close(descriptor)
            let what =
                switch kind {
                case S_IFDIR: "a directory"
                case S_IFIFO: "a FIFO"
                case S_IFCHR, S_IFBLK: "a device"
                case S_IFSOCK: "a socket"
                default: "not a regular file"
                }
            throw MBTilesError(path: url.path, message: "is \(what), not an MBTiles file")
        }
        return descriptor
    }

    /// `tiles` and `metadata`: plain tables (a view can hide an endless or
    /// enormous query; a virtual table runs a module's code) with the
    /// columns MBTiles names, none of them generated. Each problem once.
    package static func schemaProblems(_ db: Database) throws -> [String] {
        let required = [("metadata", ["name", "value"]), ("tiles", ["zoom_level", "tile_column", "tile_row", "tile_data"])]
        var problems: [String] = []
        for (name, columns) in required {
            guard
                let row = try Row.fetchOne(
                    db, sql: "SELECT type, sql FROM sqlite_master WHERE lower(name) = ? AND type IN ('table', 'view')", arguments: [name])
            else {
                problems.append("no `\(name)` table; MBTiles needs one")
                continue
            }
            let type = (row[0] as DatabaseValue).storage.text ?? ""
            let sql = (row[1] as DatabaseValue).storage.text ?? ""
            guard type == "table" else {
                // Deduplicating writers (mbutil) make `tiles` a view over `map` and `images`.
                let hint =
                    type == "view"
                    ? "; on a copy of the file, make it one: sqlite3 COPY \"CREATE TABLE t AS SELECT * FROM \(name); DROP VIEW \(name); ALTER TABLE t RENAME TO \(name)\""
                    : ""
                problems.append(
                    "`\(name)` is a \(ValidationText.printable(type, limit: 20)), not a table; tourpack reads MBTiles tables only\(hint)")
                continue
            }
            guard !sql.uppercased().hasPrefix("CREATE VIRTUAL") else {
                problems.append("`\(name)` is a virtual table, not a table; tourpack reads MBTiles tables only")
                continue
            }
            var present: Set<String> = []
            var generated: [String] = []
            for column in try Row.fetchAll(db, sql: "PRAGMA table_xinfo(\(name))") {
                guard let columnName = (column["name"] as DatabaseValue).storage.text?.lowercased() else { continue }
                present.insert(columnName)
                if case .int64(let hidden) = (column["hidden"] as DatabaseValue).storage, hidden != 0 { generated.append(columnName) }
            }
            let missing = columns.filter { !present.contains($0) }
            if !missing.isEmpty {
                problems.append("`\(name)` lacks the column\(missing.count == 1 ? "" : "s") \(missing.joined(separator: ", "))")
            } else if let column = generated.first(where: { columns.contains($0) }) {
                problems.append("`\(name)`'s column \(column) is generated, not stored; tourpack reads stored MBTiles columns only")
            }
        }
        return problems
    }

    /// The metadata as name → value, any storage class read safely (see `metadata()`).
    package static func metadata(_ db: Database) throws -> [String: String] {
        var values: [String: String] = [:]
        let cursor = try Row.fetchCursor(db, sql: "SELECT name, value FROM metadata LIMIT \(maxMetadataRows)")
        while let row = try cursor.next() {
            guard let name = (row[0] as DatabaseValue).storage.text, let value = (row[1] as DatabaseValue).storage.text else { continue }
            values[name] = value
        }
        return values
    }

    static func describe(_ error: any Error) -> String {
        if let error = error as? DatabaseError { return error.message ?? "\(error.resultCode)" }
        return "\(error)"
    }
}

extension DatabaseValue.Storage {
    /// The value as text: a string as it is, an integer or a whole real in
    /// decimal, another real as Swift prints it, a UTF-8 blob decoded; nil
    /// for NULL and other blobs. Never traps, whatever the storage class.
    var text: String? {
        switch self {
        case .string(let text): return text
        case .int64(let value): return String(value)
        case .double(let value):
            if value.rounded() == value, abs(value) < 1e15 { return String(Int64(value)) }
            return String(value)
        case .blob(let data): return String(data: data, encoding: .utf8)
        case .null: return nil
        }
    }
}

/// Text from a file, made printable for a message.
enum ValidationText {
    static func printable(_ text: String, limit: Int) -> String {
        let cleaned = String(text.unicodeScalars.map { $0.properties.generalCategory == .control ? "?" : Character($0) })
        return cleaned.count > limit ? String(cleaned.prefix(limit)) + "…" : cleaned
    }
}

/// A tile pack or extract that cannot be read as MBTiles.
package struct MBTilesError: Error, Sendable, CustomStringConvertible {
    package var path: String
    package var message: String
    package var description: String { "\(path): \(message)" }
}

/// A local extract named by `maps.source.mbtiles`.
package enum MBTilesExtract {
    /// Opens the extract and checks that it can be read as MBTiles (a
    /// regular SQLite file whose `tiles` and `metadata` are tables with
    /// their columns), so that a bad extract is a configuration error at
    /// load, naming the file, not a failure halfway through a build.
    package static func check(_ url: URL) throws {
        let reader = try MBTilesReader(url)
        if let problem = reader.schemaProblems.first { throw MBTilesError(path: url.path, message: problem) }
    }

    /// The tiles' format from the extract's `format` metadata.
    package static func format(of url: URL) throws -> TileFormat {
        let metadata = try MBTilesReader(url).metadata()
        guard let name = metadata["format"] else {
            throw MBTilesError(path: url.path, message: "the metadata names no format; set maps.source.format")
        }
        guard let format = TileFormat(rawValue: name.lowercased() == "jpeg" ? "jpg" : name.lowercased()) else {
            throw MBTilesError(
                path: url.path, message: "format '\(ValidationText.printable(name, limit: 40))' is not one of png, jpg, webp, pbf")
        }
        return format
    }
}

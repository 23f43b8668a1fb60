import Foundation
import GRDB
import Testing
import TourpackTesting

@testable import TourpackCore
@testable import TourpackKit
@testable import TourpackMaps

#if canImport(Glibc)
import Glibc
#endif

/// A result handed from a thread to the waiter.
private final class Box: @unchecked Sendable { var value: String? }

/// The reader of extracts and packs against hostile files (issue 27,
/// defects 6, 8, 11, 14 and 16): metadata of any storage class, views,
/// huge values and endless queries, WAL files and FIFOs, paths longer than
/// SQLite's own limit. Hangs are caught by a bounded wait, never a timed assertion.
@Suite(.offThePool) struct MBTilesReaderTests {
    /// Writes an MBTiles file with SQLite directly (as other tools do), then
    /// closes it; `setUp` adds whatever the case needs.
    static func extract(_ url: URL, journal: String = "DELETE", _ setUp: (Database) throws -> Void) throws {
        var configuration = Configuration()
        configuration.journalMode = journal == "WAL" ? .wal : .default
        let queue = try DatabaseQueue(path: url.path, configuration: configuration)
        try queue.writeWithoutTransaction { db in
            if journal == "WAL" { try db.execute(sql: "PRAGMA journal_mode = WAL") }
            try setUp(db)
        }
        try queue.close()
    }

    /// The plain tables and a few rows: format png, one tile at 12/2190/1437.
    /// `value` has no type, so a number or a blob is stored as it is given.
    static func plainTables(_ db: Database) throws {
        try db.execute(
            sql: """
                CREATE TABLE metadata (name TEXT, value);
                CREATE TABLE tiles (zoom_level INTEGER, tile_column INTEGER, tile_row INTEGER, tile_data BLOB);
                INSERT INTO metadata VALUES ('format', 'png'), ('name', 'Test');
                """)
        try db.execute(
            sql: "INSERT INTO tiles VALUES (12, 2190, ?, ?)", arguments: [TileID(z: 12, x: 2190, y: 1437).tmsRow, Data(png)])
    }

    static let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 1, 2, 3]

    /// `body`'s result, or nil when it has not returned within `seconds`
    /// (the thread is left behind; the caller unblocks it when it can).
    static func within(seconds: Double, _ body: @escaping @Sendable () -> String) -> String? {
        let box = Box()
        let done = DispatchSemaphore(value: 0)
        Thread {
            box.value = body()
            done.signal()
        }.start()
        return done.wait(timeout: .now() + seconds) == .success ? box.value : nil
    }

    @Test func metadataOfEveryStorageClassIsReadNotATrap() throws {
        let scratch = try StoreScratch()
        defer { scratch.remove() }
        let url = scratch.root.appendingPathComponent("numbers.mbtiles")
        try Self.extract(url) { db in
            try Self.plainTables(db)
            try db.execute(
                sql:
                    "INSERT INTO metadata VALUES ('minzoom', 12), ('maxzoom', 16.0), ('center', 7.5), ('attribution', ?), ('junk', ?), ('nothing', NULL)",
                arguments: [Data("© Tiles".utf8), Data([0xFF, 0xFE, 0x00])])
        }
        let metadata = try MBTilesReader(url).metadata()
        #expect(metadata["minzoom"] == "12" && metadata["maxzoom"] == "16" && metadata["center"] == "7.5")
        #expect(metadata["attribution"] == "© Tiles" && metadata["format"] == "png")
        #expect(metadata["junk"] == nil && metadata["nothing"] == nil)
        #expect(try MBTilesExtract.format(of: url) == .png)
    }

    @Test(arguments: ["tiles", "metadata"])
    func aViewIsRefusedEvenAnEndlessOne(table: String) throws {
        let scratch = try StoreScratch()
        defer { scratch.remove() }
        let url = scratch.root.appendingPathComponent("view.mbtiles")
        try Self.extract(url) { db in
            try Self.plainTables(db)
            try db.execute(sql: "DROP TABLE \(table)")
            // Endless: a recursive CTE with no bound.
            let endless = "WITH RECURSIVE n(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM n)"
            try db.execute(
                sql: table == "tiles"
                    ? "CREATE VIEW tiles AS \(endless) SELECT 12 AS zoom_level, x AS tile_column, x AS tile_row, zeroblob(1000) AS tile_data FROM n"
                    : "CREATE VIEW metadata AS \(endless) SELECT 'k' || x AS name, 'v' AS value FROM n")
        }
        let outcome = Self.within(seconds: 30) { () -> String in
            do {
                let reader = try MBTilesReader(url)
                _ = try reader.metadata()
                _ = try reader.tile(TileID(z: 12, x: 2190, y: 1437))
                return "read"
            } catch { return "\(error)" }
        }
        let message = try #require(outcome, "reading an extract whose \(table) is an endless view did not return within 30 s")
        #expect(message.contains("`\(table)` is a view, not a table"), "\(message)")
        #expect(message.contains("DROP VIEW \(table); ALTER TABLE t RENAME TO \(table)"), "says how to make it a table: \(message)")
        #expect(message.hasPrefix(url.path) && message.components(separatedBy: url.path).count == 2, "\(message)")
        // At load, as a configuration error naming the file.
        #expect(throws: MBTilesError.self) { try MBTilesExtract.check(url) }
    }

    @Test func anEndlessQueryStopsAtTheTimeLimitAndNoValueIsHuge() throws {
        let scratch = try StoreScratch()
        defer { scratch.remove() }
        let url = scratch.root.appendingPathComponent("plain.mbtiles")
        try Self.extract(url, Self.plainTables)
        let reader = try MBTilesReader(url, timeLimit: .milliseconds(200))
        let outcome = Self.within(seconds: 30) { () -> String in
            do {
                let count = try reader.read { db in
                    try Int.fetchOne(db, sql: "WITH RECURSIVE n(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM n) SELECT count(*) FROM n")
                }
                return "counted \(count ?? -1)"
            } catch { return "\(error)" }
        }
        let message = try #require(outcome, "an endless query was not stopped within 30 s")
        #expect(message.contains("took longer than 200 ms"), "\(message)")
        // The reader still works after an interruption, and a value over the bound is an error, never allocated.
        #expect(try reader.tile(TileID(z: 12, x: 2190, y: 1437)) == Self.png)
        #expect {
            _ = try reader.read { db in try Data.fetchOne(db, sql: "SELECT zeroblob(?)", arguments: [MBTilesReader.maxValueBytes + 1]) }
        } throws: { error in
            "\(error)".contains("larger than 16 MiB")
        }
    }

    @Test func aWALExtractIsReadWithoutAnyFileAppearingBesideIt() throws {
        let scratch = try StoreScratch()
        defer { scratch.remove() }
        let folder = scratch.root.appendingPathComponent("extracts")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let url = folder.appendingPathComponent("wal.mbtiles")
        try Self.extract(url, journal: "WAL", Self.plainTables)
        let header = try FileHandle(forReadingFrom: url).readData(ofLength: 20)
        #expect(header[18] == 2 && header[19] == 2, "the extract is not in WAL mode")
        let before = scratch.names(in: folder)
        #expect(before == ["wal.mbtiles"])
        let reader = try MBTilesReader(url)
        #expect(try reader.metadata()["format"] == "png")
        #expect(try reader.tile(TileID(z: 12, x: 2190, y: 1437)) == Self.png)
        #expect(try reader.tileIDs() == [TileID(z: 12, x: 2190, y: 1437)])
        #expect(scratch.names(in: folder) == before)
    }

    @Test func aFIFOOrADirectoryIsRefusedByWhatItIs() throws {
        let scratch = try StoreScratch()
        defer { scratch.remove() }
        let fifo = scratch.root.appendingPathComponent("fifo.mbtiles")
        #expect(mkfifo(fifo.path, 0o600) == 0)
        let outcome = Self.within(seconds: 30) { () -> String in
            do {
                _ = try MBTilesReader(fifo)
                return "opened"
            } catch { return "\(error)" }
        }
        if outcome == nil {
            // Unblock the reader left waiting for a writer before failing.
            let writer = open(fifo.path, O_WRONLY | O_NONBLOCK)
            if writer >= 0 { close(writer) }
        }
        let message = try #require(outcome, "opening a FIFO as an extract did not return within 30 s")
        #expect(message == "\(fifo.path): is a FIFO, not an MBTiles file")

        let folder = scratch.root.appendingPathComponent("folder.mbtiles")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        #expect {
            try MBTilesExtract.check(folder)
        } throws: { error in
            "\(error)" == "\(folder.path): is a directory, not an MBTiles file"
        }
    }

    @Test func anExtractWithoutATilesTableIsRefusedNamingIt() throws {
        let scratch = try StoreScratch()
        defer { scratch.remove() }
        let url = scratch.root.appendingPathComponent("no-tiles.mbtiles")
        try Self.extract(url) { db in
            try Self.plainTables(db)
            try db.execute(sql: "DROP TABLE tiles")
        }
        #expect {
            try MBTilesExtract.check(url)
        } throws: { error in
            "\(error)" == "\(url.path): no `tiles` table; MBTiles needs one"
        }
    }

    @Test func aPathLongerThanSQLitesLimitIsRead() throws {
        let scratch = try StoreScratch()
        defer { scratch.remove() }
        let short = scratch.root.appendingPathComponent("short.mbtiles")
        try Self.extract(short, Self.plainTables)
        // About 1,100 characters: past SQLite's 512 and FFmpeg's 1,024.
        var folder = scratch.root
        for index in 0..<5 { folder.appendPathComponent(String(repeating: "\(index)", count: 200)) }
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let url = folder.appendingPathComponent("tiles.mbtiles")
        try FileManager.default.moveItem(at: short, to: url)
        #expect(url.path.utf8.count > 1_050)
        let reader = try MBTilesReader(url)
        #expect(try reader.metadata()["format"] == "png")
        #expect(try reader.tile(TileID(z: 12, x: 2190, y: 1437)) == Self.png)
    }
}

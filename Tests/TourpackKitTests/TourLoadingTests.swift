import Foundation
import Testing
import TourpackTesting

@testable import TourpackCore
@testable import TourpackKit
@testable import TourpackLoad

@Suite struct TourLoadingTests {
    static let resources = Bundle.module.url(forResource: "Resources", withExtension: nil)!

    static func errors(_ bytes: [UInt8], name: String = "t.json") -> [Diagnostic] {
        var diagnostics = DiagnosticCollector()
        _ = TourLoader().parse(bytes, displayName: name, into: &diagnostics)
        return diagnostics.diagnostics.filter { $0.severity == .error }
    }

    @Test func goodTourDecodes() throws {
        var diagnostics = DiagnosticCollector()
        let tour = try #require(
            TourLoader().load(Self.resources.appendingPathComponent("good-tour.json"), displayName: "good.json", into: &diagnostics))
        #expect(diagnostics.diagnostics.isEmpty)
        #expect(tour.id.value == "0b7c2f0e-5d1a-4f55-9a0e-2f3b8f6c1d42")
        #expect(tour.route.waypoints.count == 2)
        #expect(tour.route.segments.first?.distanceMeters == 1000)
        #expect(tour.pois.map(\.name) == ["First", "Second"])
        #expect(tour.pois[0].phases == [.approaching, .detailed])
        #expect(tour.pois[1].phases == [.guidedTour])
    }

    /// Every file of the corpus gives exactly its expected errors, each with the file and JSON path.
    @Test(arguments: try! Self.corpus())
    func badTourIsReportedWithPath(file: String, expected: [String]) throws {
        var diagnostics = DiagnosticCollector()
        let tour = TourLoader().load(
            Self.resources.appendingPathComponent("bad-tours/\(file)"), displayName: "tours/\(file)", into: &diagnostics)
        #expect(tour == nil)
        let errors = diagnostics.diagnostics.filter { $0.severity == .error }
        #expect(errors.allSatisfy { $0.file == "tours/\(file)" })
        let rendered = errors.map { $0.path.isEmpty ? $0.message : "\($0.path): \($0.message)" }
        #expect(rendered == expected)
    }

    static func corpus() throws -> [(String, [String])] {
        let data = try Data(contentsOf: resources.appendingPathComponent("bad-tours/expected.json"))
        let map = try JSONDecoder().decode([String: [String]].self, from: data)
        return map.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }

    @Test func corpusIsLargeEnough() throws {
        #expect(try Self.corpus().count >= 20)
    }

    @Test func fiveMistakesGiveFiveMessagesInOneRun() throws {
        let file = "26-five-mistakes.json"
        var diagnostics = DiagnosticCollector()
        _ = TourLoader().load(
            Self.resources.appendingPathComponent("bad-tours/\(file)"), displayName: "tours/alps.json", into: &diagnostics)
        let error = DiagnosticsError(diagnostics: diagnostics.diagnostics)
        #expect(error.errors.count == 5)
        #expect(error.description.contains("tours/alps.json: pois[0].narrations.detaild: unknown phase"))
        #expect(error.description.hasSuffix("5 errors found"))
    }

    @Test func invalidUTF8IsRefusedWithOffset() {
        let errors = Self.errors(Array(#"{"name":"caf"#.utf8) + [0xC3, 0x28] + Array(#""}"#.utf8))
        #expect(errors.map(\.message) == ["invalid JSON: line 1, column 14: invalid UTF-8 (byte 0x28 at offset 13)"])
    }

    @Test func deepNestingIsRefused() {
        let deep = String(repeating: "[", count: 65) + String(repeating: "]", count: 65)
        #expect(Self.errors(Array(deep.utf8)).map(\.message) == ["invalid JSON: line 1, column 65: nesting deeper than 64 levels"])
        let ok = "{\"a\":" + String(repeating: "[", count: 63) + String(repeating: "]", count: 63) + "}"
        #expect(Self.errors(Array(ok.utf8)).allSatisfy { !$0.message.contains("nesting") })
    }

    @Test func oversizedFileIsRefusedUnread() throws {
        let dir = try TemporaryFolder.make("tourpack-big")
        defer { TemporaryFolder.remove(dir) }
        let url = dir.appendingPathComponent("big.json")
        _ = FileManager.default.createFile(atPath: url.path, contents: nil)
        let handle = try FileHandle(forWritingTo: url)
        try handle.truncate(atOffset: 8 * 1024 * 1024 + 1)  // sparse: nothing to read
        try handle.close()
        var diagnostics = DiagnosticCollector()
        #expect(TourLoader().load(url, displayName: "tours/big.json", into: &diagnostics) == nil)
        #expect(diagnostics.diagnostics.map(\.description) == ["tours/big.json: file is 8388609 bytes, more than the 8388608 allowed"])
    }

    /// Only a regular file is read (one `lstat`): a folder, a FIFO and a
    /// symlink, even to a good tour, are refused unread; a missing file is
    /// an error that says it cannot be read.
    @Test func onlyARegularFileIsRead() throws {
        let dir = try TemporaryFolder.make("tourpack-kinds")
        defer { TemporaryFolder.remove(dir) }
        let good = dir.appendingPathComponent("good.json")
        try FileManager.default.copyItem(at: Self.resources.appendingPathComponent("good-tour.json"), to: good)
        try FileManager.default.createDirectory(at: dir.appendingPathComponent("folder.json"), withIntermediateDirectories: false)
        #expect(mkfifo(dir.appendingPathComponent("fifo.json").path, 0o644) == 0)
        try FileManager.default.createSymbolicLink(at: dir.appendingPathComponent("link.json"), withDestinationURL: good)
        func problems(_ name: String) -> [String] {
            var diagnostics = DiagnosticCollector()
            _ = TourLoader().load(dir.appendingPathComponent(name), displayName: name, into: &diagnostics)
            return diagnostics.diagnostics.map(\.description)
        }
        #expect(problems("good.json").isEmpty)
        for name in ["folder.json", "fifo.json", "link.json"] {
            #expect(problems(name) == ["\(name): not a regular file"])
        }
        let missing = problems("missing.json")
        #expect(missing.count == 1 && missing.first?.hasPrefix("missing.json: cannot read: ") == true, "\(missing)")
    }

    @Test func unknownTopLevelKeyIsOnlyAWarning() throws {
        var json = try String(contentsOf: Self.resources.appendingPathComponent("good-tour.json"), encoding: .utf8)
        json = json.replacingOccurrences(of: "\"version\": 1,", with: "\"version\": 1, \"author\": \"me\",")
        var diagnostics = DiagnosticCollector()
        #expect(TourLoader().parse(Array(json.utf8), displayName: "t.json", into: &diagnostics) != nil)
        #expect(diagnostics.diagnostics.map(\.description) == ["t.json: author: warning: unknown key, ignored"])
    }

    @Test func escapedUnicodeAndSurrogatesDecode() throws {
        let value = try StrictJSONReader().read(Array(#"{"a":"H\u00f6he \ud83c\udfd4"}"#.utf8))
        #expect(value == .object([(key: "a", value: .string("Höhe 🏔"))]))
        #expect(throws: JSONSyntaxError.self) { try StrictJSONReader().read(Array(#"{"a":"\ud83c"}"#.utf8)) }
        #expect(throws: JSONSyntaxError.self) { try StrictJSONReader().read(Array(#"{"a":01}"#.utf8)) }
        #expect(throws: JSONSyntaxError.self) { try StrictJSONReader().read(Array(#"{"a":1} x"#.utf8)) }
    }

    @Test func duplicateTourIDsAcrossFilesAreReported() throws {
        let dir = try TemporaryFolder.make("tourpack-dup")
        defer { TemporaryFolder.remove(dir) }
        let good = try Data(contentsOf: Self.resources.appendingPathComponent("good-tour.json"))
        try good.write(to: dir.appendingPathComponent("a.json"))
        try good.write(to: dir.appendingPathComponent("b.json"))
        let error = #expect(throws: DiagnosticsError.self) {
            try TourLoader().loadAll(globs: [dir.path + "/*.json"], relativeTo: dir)
        }
        #expect(
            error?.errors.map(\.description) == ["b.json: id: duplicate tour id 0b7c2f0e-5d1a-4f55-9a0e-2f3b8f6c1d42, also used by a.json"])
    }

    @Test func sampleToursAllLoad() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let tours = try TourLoader().loadAll(globs: [root.path + "/tours/*.json"], relativeTo: root)
        #expect(tours.count >= 3)
        #expect(tours.reduce(0) { $0 + $1.pois.count } >= 12)
        let longest = tours.flatMap(\.pois).flatMap(\.narrations.values).map(\.text.utf8.count).max() ?? 0
        #expect(longest > 5000)
        #expect(tours.flatMap(\.pois).contains { $0.name.unicodeScalars.contains { !$0.isASCII } })
    }
}

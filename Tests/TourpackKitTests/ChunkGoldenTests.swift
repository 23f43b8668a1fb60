import Foundation
import Testing

@testable import TourpackCore
@testable import TourpackKit
@testable import TourpackPlan

/// The chunker's golden files: `Resources/chunker/<case>.txt` holds a limit
/// line (`limit: google 300`, `limit: google 5000 headroom 100` or
/// `limit: openai 120`) and then the narration; `<case>.golden.json` holds
/// the chunks it must give, or the error it must throw.
///
/// `TOURPACK_UPDATE_GOLDENS=1 swift test --filter ChunkGolden` rewrites the
/// goldens in the source tree instead of comparing; review every change by
/// eye before committing, because the goldens are the specification.
@Suite struct ChunkGoldenTests {
    struct Golden: Codable, Equatable {
        struct Piece: Codable, Equatable {
            var size: Int
            var text: String
        }

        var limit: String
        var ssml: Bool
        var chunks: [Piece]?
        var error: String?
    }

    static let sourceDirectory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()
        .appendingPathComponent("Resources/chunker")

    static var updating: Bool { ProcessInfo.processInfo.environment["TOURPACK_UPDATE_GOLDENS"] == "1" }

    /// Inputs come from the test bundle, except when updating, where the
    /// source tree is the truth (the bundle may not be rebuilt yet).
    static var directory: URL? {
        if updating { return sourceDirectory }
        return Bundle.module.url(forResource: "chunker", withExtension: nil, subdirectory: "Resources")
            ?? Bundle.module.url(forResource: "chunker", withExtension: nil)
    }

    static func caseNames() -> [String] {
        guard let directory, let files = try? FileManager.default.contentsOfDirectory(atPath: directory.path) else { return [] }
        return files.filter { $0.hasSuffix(".txt") }.map { String($0.dropLast(4)) }.sorted()
    }

    /// Reads `limit: google 5000 headroom 100` into a limit with the headroom taken off.
    static func parseLimit(_ line: String) throws -> ChunkLimit {
        let words = line.split(separator: " ").map(String.init)
        guard words.count == 3 || words.count == 5, words[0] == "limit:", let value = Int(words[2]) else {
            throw GoldenFileError(message: "bad limit line: \(line)")
        }
        let headroom = words.count == 5 && words[3] == "headroom" ? Int(words[4]) ?? 0 : 0
        switch words[1] {
        case "google": return ChunkLimit.utf8BytesAfterEscaping(value).reduced(by: headroom)
        case "openai": return ChunkLimit.characters(value).reduced(by: headroom)
        default: throw GoldenFileError(message: "unknown API in: \(line)")
        }
    }

    struct GoldenFileError: Error { var message: String }

    @Test func thereAreEnoughCases() {
        #expect(Self.caseNames().count >= 15)
    }

    @Test(arguments: caseNames())
    func golden(_ name: String) throws {
        let directory = try #require(Self.directory)
        let input = try String(contentsOf: directory.appendingPathComponent("\(name).txt"), encoding: .utf8)
        let newline = try #require(input.firstIndex(of: "\n"))
        let limitLine = String(input[..<newline])
        let narration = Narration(text: String(input[input.index(after: newline)...]))
        let limit = try Self.parseLimit(limitLine)

        var actual = Golden(limit: String(limitLine.dropFirst("limit: ".count)), ssml: narration.isSSML)
        do throws(ChunkingError) {
            let chunks = try Chunker(limit: limit).chunks(for: narration)
            actual.chunks = chunks.map { .init(size: ChunkInvariants.size($0.text, limit, isSSML: $0.isSSML), text: $0.text) }
            // Whatever the golden says, these must hold.
            for chunk in chunks {
                #expect(ChunkInvariants.size(chunk.text, limit, isSSML: chunk.isSSML) <= limit.value, "\(name): over the limit")
                if chunk.isSSML { #expect(SSML.validate(chunk.text) == [], "\(name): malformed chunk") }
            }
            if !narration.isSSML {
                ChunkInvariants.expectReassembles(chunks.map(\.text), narration.text, seed: 0)
            }
        } catch {
            actual.error = error.message
        }

        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        let encoded = try encoder.encode(actual) + Data("\n".utf8)
        let goldenURL = directory.appendingPathComponent("\(name).golden.json")
        if Self.updating {
            try encoded.write(to: Self.sourceDirectory.appendingPathComponent("\(name).golden.json"), options: .atomic)
            return
        }
        let expected = try JSONDecoder().decode(Golden.self, from: Data(contentsOf: goldenURL))
        #expect(actual == expected, "\(name): differs from its golden; run with TOURPACK_UPDATE_GOLDENS=1 and review the diff")
    }
}

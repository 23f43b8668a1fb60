import Foundation
import Testing
import TourpackTesting

/// The article's sample is the example's code, which `swift build` compiles.
@Suite struct DocsTests {
    @Test func theArticlesSampleIsTheCompiledExample() throws {
        let root = Executable.packageRoot
        let example = try String(contentsOf: root.appendingPathComponent("Examples/OfflineTourApp/main.swift"), encoding: .utf8)
        let article = try String(
            contentsOf: root.appendingPathComponent("Sources/TourpackKit/TourpackKit.docc/Articles/EmbeddingTheClient.md"), encoding: .utf8)
        let snippets = try ["flow", "background", "row", "early"].map { name in
            let start = try #require(example.range(of: "    // snippet: \(name)\n"), "no snippet \(name)")
            let end = try #require(example.range(of: "    // snippet: end\n", range: start.upperBound..<example.endIndex))
            return example[start.upperBound..<end.lowerBound].split(separator: "\n", omittingEmptySubsequences: false)
                .map { $0.hasPrefix("    ") ? String($0.dropFirst(4)) : String($0) }.joined(separator: "\n")
        }
        #expect(
            snippets[0].contains("resumeDownloads()") && snippets[0].contains("download(tourId:")
                && snippets[0].contains("storageStatistics()"))
        #expect(snippets[1].contains("resumeDownloads()") && snippets[2].contains("allowsCellular: true"))
        #expect(
            snippets[3].contains("prioritize(tourId:") && snippets[3].contains("remoteAudioURL(") && snippets[0].contains("job.playable"))
        for code in snippets {
            #expect(
                article.contains("```swift\n" + code + "```"),
                "the article's sample differs from Examples/OfflineTourApp/main.swift:\n\(code)")
        }
    }
}

import Foundation
import Testing
import TourpackCore
import TourpackKit
import TourpackTesting

/// `tourpack cache stats|prune|clear` on a root the real build made.
@Suite(.serialized, .offThePool) struct CacheCommandTests {
    @Test func statsPruneAndClearKeepEveryLivePackageWhole() throws {
        let server = try LocalVoiceServer()
        let workspace = try BuildWorkspace(extraYAML: "budgets: {cacheMaxMB: 50, audioMaxAgeDays: 30}")
        #expect(try workspace.build(server).status == 0)
        let audio = workspace.output.appendingPathComponent("AudioCache")

        // An old stray, a fresh stray big enough to break the 50 MB budget, and an expired package.
        let old = audio.appendingPathComponent("\(BuildWorkspace.alpsID)/old-stray.m4a")
        try Data(repeating: 1, count: 1000).write(to: old)
        try FileManager.default.setAttributes([.modificationDate: Date().addingTimeInterval(-60 * 86_400)], ofItemAtPath: old.path)
        let fresh = audio.appendingPathComponent("\(BuildWorkspace.alpsID)/fresh-stray.m4a")
        try Data(repeating: 2, count: 53_000_000).write(to: fresh)
        let packages = RootCheck.allFiles(under: workspace.output).filter { $0.hasSuffix("package.json") }
        let lakes = try #require(
            packages.first { path in
                (try? String(contentsOf: workspace.output.appendingPathComponent(path), encoding: .utf8))?.contains("Lake Test Loop")
                    == true
            })
        let lakesURL = workspace.output.appendingPathComponent(lakes)
        let text = try String(contentsOf: lakesURL, encoding: .utf8)
        try text.replacingOccurrences(
            of: #""expiresAt" *: *"[^"]*""#, with: #""expiresAt": "2020-01-01T00:00:00Z""#, options: .regularExpression
        )
        .write(to: lakesURL, atomically: true, encoding: .utf8)

        let stats = try Executable.run(["cache", "stats", workspace.pipeline.path, "--json"], in: workspace.root)
        #expect(stats.status == 0, "\(stats.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(stats.stdout.utf8)) as? [String: Any])
        #expect(object["packages"] as? Int == 2)
        #expect(object["expiredPackages"] as? Int == 1)
        #expect(object["files"] as? Int == 7)
        #expect(object["expiredAudioFiles"] as? Int == 1)
        #expect(object["unreferencedFiles"] as? Int == 4, "2 strays + the expired package's 2 files")
        #expect((object["tours"] as? [[String: Any]])?.count == 2)
        // From the state database: the chunks spoken, and one completed build with no failed tour.
        #expect((object["synthesisCacheEntries"] as? Int ?? 0) >= 5)
        #expect((object["synthesisCacheBytes"] as? Int ?? 0) > 0)
        #expect(object["failedTours"] as? Int == 0)
        #expect((object["builds"] as? [String: Int]) == ["completed": 1])

        let pruned = try Executable.run(["cache", "prune", workspace.pipeline.path, "--json"], in: workspace.root)
        #expect(pruned.status == 0, "\(pruned.stderr)")
        let plan = try #require(try JSONSerialization.jsonObject(with: Data(pruned.stdout.utf8)) as? [String: Any])
        let removals = try #require(plan["removals"] as? [[String: Any]])
        let reasons = Dictionary(removals.map { ($0["path"] as? String ?? "", $0["reason"] as? String ?? "") }, uniquingKeysWith: { $1 })
        #expect(reasons[lakes.replacingOccurrences(of: "/package.json", with: "")] == "expired package")
        #expect(reasons["AudioCache/\(BuildWorkspace.alpsID)/old-stray.m4a"] == "expired audio")
        #expect(reasons["AudioCache/\(BuildWorkspace.alpsID)/fresh-stray.m4a"] == "over budget")
        #expect(!FileManager.default.fileExists(atPath: lakesURL.path))
        #expect(!FileManager.default.fileExists(atPath: old.path) && !FileManager.default.fileExists(atPath: fresh.path))
        // The live package keeps every file it lists.
        #expect(RootCheck.problems(in: workspace.output).isEmpty, "\(RootCheck.problems(in: workspace.output))")
        #expect(RootCheck.allFiles(under: workspace.output).filter { $0.hasSuffix("package.json") }.count == 1)

        let refused = try Executable.run(["cache", "clear", workspace.pipeline.path], in: workspace.root)
        #expect(refused.status == 2)
        #expect(refused.stderr.contains("--yes"))
        #expect(FileManager.default.fileExists(atPath: audio.path))

        let cleared = try Executable.run(["cache", "clear", workspace.pipeline.path, "--yes"], in: workspace.root)
        #expect(cleared.status == 0, "\(cleared.stderr)")
        #expect(RootCheck.allFiles(under: workspace.output).isEmpty)
        // Left: the database (with the quota ledger) and the lock files; the caches, kept plans and records are gone.
        let left = RootCheck.allFiles(under: workspace.state)
        #expect(
            left.allSatisfy { $0.hasPrefix("state.sqlite") || $0.hasSuffix("/" + BuildLock.fileName) || $0 == "plans.kept.lock" }, "\(left)"
        )
        #expect(left.contains("state.sqlite"))
        let after = try Executable.run(["cache", "stats", workspace.pipeline.path, "--json"], in: workspace.root)
        let afterObject = try #require(try JSONSerialization.jsonObject(with: Data(after.stdout.utf8)) as? [String: Any])
        #expect(afterObject["synthesisCacheEntries"] as? Int == 0)
        #expect((afterObject["builds"] as? [String: Int])?.isEmpty == true)
    }
}

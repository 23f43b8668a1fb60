import Foundation
import Testing
import TourpackTesting

@Suite(.offThePool) struct PlanCommandTests {
    @Test func planPrintsConfigurationTableAndQuota() throws {
        let result = try Executable.run(["plan", "pipelines/demo.yaml"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.hasPrefix("configuration:\n  pipeline  pipelines/demo.yaml (version 1)"))
        for expected in [
            "Grossglockner High Alpine Road", "Furka and Grimsel Passes", "total (3 tours)", "quota: tier local has no monthly limit",
            "map tiles",
            "lexicons  lexicons/alps.pls (6 lexemes, en-US) · aliases as plain text",
        ] {
            #expect(result.stdout.contains(expected), "missing \(expected)")
        }
    }

    @Test func planJSONIsStableAndMachineReadable() throws {
        let result = try Executable.run(["plan", "pipelines/demo.yaml", "--json"])
        #expect(result.status == 0, "\(result.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        #expect(object["version"] as? Int == 1)
        let totals = try #require(object["totals"] as? [String: Any])
        #expect(totals["tours"] as? Int == 3)
        #expect(totals["pois"] as? Int == 13)
        #expect((totals["chunks"] as? Int ?? 0) >= totals["phases"] as? Int ?? 0)
        let tours = try #require(object["tours"] as? [[String: Any]])
        let glockner = try #require(tours.first { $0["name"] as? String == "Grossglockner High Alpine Road" })
        let tiles = try #require(glockner["mapTiles"] as? [String: Any])
        // The demo keeps its maps small (zoom 11–13) so `make tour` stays fast.
        #expect(tiles["minZoom"] as? Int == 11 && tiles["maxZoom"] as? Int == 13 && tiles["selection"] as? String == "bbox")
        let ranges = try #require(tiles["ranges"] as? [[String: Any]])
        #expect(ranges.count == 3)
        // Both selections, with what a build would fetch.
        let selections = try #require(glockner["tileSelections"] as? [[String: Any]])
        #expect(selections.compactMap { $0["selection"] as? String } == ["bbox", "corridor"])
        #expect(selections.allSatisfy { ($0["tiles"] as? Int ?? 0) >= ($0["toFetch"] as? Int ?? -1) })
        let quota = try #require(object["quota"] as? [String: Any])
        #expect(quota["tier"] as? String == "local")
        #expect(quota["monthlyLimit"] is NSNull)
        #expect(quota["fits"] as? Bool == true)
        #expect(object["refused"] is NSNull)
    }

    /// A plan the quota would refuse says so ("refused:", exit 0), and a dry
    /// run of it exits 3 as the build would, after printing the plan.
    @Test func aPlanABudgetWouldRefuseSaysSoAndTheDryRunExitsThree() throws {
        let workspace = try BuildWorkspace(extraYAML: "budgets: {monthlyCharacters: {standard: 1}}")
        let voice = Executable.packageRoot.appendingPathComponent("voices/en-US-standard.yaml").path
        let plan = try Executable.run(["plan", workspace.pipeline.path, "--voice", voice], in: workspace.root)
        #expect(plan.status == 0, "\(plan.stderr)")
        let refusedLine = try #require(plan.stdout.split(separator: "\n").last.map(String.init))
        #expect(refusedLine.hasPrefix("refused: the standard tier's monthly quota is 1 characters"), "\(plan.stdout)")

        let json = try Executable.run(["plan", workspace.pipeline.path, "--voice", voice, "--json"], in: workspace.root)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any], "\(json.stderr)")
        #expect((object["refused"] as? String)?.hasPrefix("the standard tier's monthly quota is 1 characters") == true)

        let dryRun = try Executable.run(["build", workspace.pipeline.path, "--voice", voice, "--dry-run"], in: workspace.root)
        #expect(dryRun.status == 3, "\(dryRun.stdout)\n\(dryRun.stderr)")
        #expect(dryRun.stdout.contains("dry run: nothing was synthesized or written"))
        #expect(dryRun.stderr.contains("budget refused the build: the standard tier's monthly quota is 1 characters"), "\(dryRun.stderr)")
        let dryJSON = try Executable.run(["build", workspace.pipeline.path, "--voice", voice, "--dry-run", "--json"], in: workspace.root)
        #expect(dryJSON.status == 3)
        let document = try #require(
            try JSONSerialization.jsonObject(with: Data(dryJSON.stdout.utf8)) as? [String: Any], "\(dryJSON.stdout)")
        #expect(((document["plan"] as? [String: Any])?["refused"] as? String) != nil)
        #expect(!FileManager.default.fileExists(atPath: workspace.output.path))
        #expect(!FileManager.default.fileExists(atPath: workspace.state.path))

        // Within the quota, nothing is refused and the dry run exits 0.
        let fits = try Executable.run(["build", workspace.pipeline.path, "--dry-run"], in: workspace.root)
        #expect(fits.status == 0, "\(fits.stderr)")
        #expect(!fits.stdout.contains("refused:"))
    }

    @Test func badTourExitsTwoWithEveryMessage() throws {
        let dir = TemporaryFolder.path("tourpack-cli")
        try FileManager.default.createDirectory(at: dir.appendingPathComponent("tours"), withIntermediateDirectories: true)
        defer { TemporaryFolder.remove(dir) }
        let corpus = Executable.packageRoot.appendingPathComponent("Tests/TourpackKitTests/Resources/bad-tours/26-five-mistakes.json")
        try FileManager.default.copyItem(at: corpus, to: dir.appendingPathComponent("tours/alps.json"))
        try "version: 1\ntours: [\"tours/*.json\"]\n".write(to: dir.appendingPathComponent("p.yaml"), atomically: true, encoding: .utf8)
        let result = try Executable.run(["plan", "p.yaml"], in: dir)
        #expect(result.status == 2)
        let lines = result.stderr.split(separator: "\n").map(String.init)
        #expect(lines.filter { $0.hasPrefix("tours/alps.json: ") }.count == 5)
        #expect(
            lines.contains(
                "tours/alps.json: pois[0].narrations.detaild: unknown phase (did you mean 'detailed'?); phases are approaching, detailed, guidedTour"
            ))
        #expect(lines.last == "5 errors found")
        #expect(result.stdout.isEmpty)
    }

    /// Issue 27, defect 7: a mapping key that is an alias to eight nested
    /// lists of ten (10⁸ leaves) kept `plan` busy for minutes, Yams hashing
    /// the key for its duplicate check. The wait is bounded: a run still
    /// going after 30 s is killed and the test fails.
    @Test func aYAMLAliasBombIsRefusedAtOnceWithExitTwo() throws {
        let dir = try TemporaryFolder.make("tourpack-cli")
        defer { TemporaryFolder.remove(dir) }
        var yaml = "version: 1\ntours: [\"tours/*.json\"]\nl0: &l0 [x,x,x,x,x,x,x,x,x,x]\n"
        for level in 1...7 {
            yaml += "l\(level): &l\(level) [" + Array(repeating: "*l\(level - 1)", count: 10).joined(separator: ",") + "]\n"
        }
        yaml += "? *l7\n: boom\n"
        #expect(yaml.utf8.count < 500)
        try yaml.write(to: dir.appendingPathComponent("bomb.yaml"), atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = Executable.tourpack
        process.arguments = ["plan", "bomb.yaml"]
        process.currentDirectoryURL = dir
        let stderrURL = dir.appendingPathComponent("stderr.txt")
        _ = FileManager.default.createFile(atPath: stderrURL.path, contents: nil)
        let stderr = try FileHandle(forWritingTo: stderrURL)
        defer { try? stderr.close() }
        process.standardError = stderr
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let deadline = Date().addingTimeInterval(30)
        while process.isRunning, Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            Issue.record("plan was still reading the 10⁸-leaf alias after 30 s")
            return
        }
        let message = try String(contentsOf: stderrURL, encoding: .utf8)
        #expect(process.terminationStatus == 2, "\(message)")
        #expect(message.contains("bomb.yaml: line 4: YAML aliases (*l0) are not allowed"), "\(message)")
    }

    /// Found by the `pls-lexicon` fuzz target (issue 27): a lexicon declaring
    /// another encoding than UTF-8, or holding a processing instruction
    /// without data, crashed libxml2 or FoundationXML (SIGSEGV).
    @Test(arguments: [
        (
            "<?xml version=\"1.0\" encoding=\"EBCDIC-US\"?>\n<lexicon/>\n",
            "odd.pls: line 1: the XML declaration says encoding=\"EBCDIC-US\""
        ),
        ("<?x?>\n<lexicon/>\n", "odd.pls: line 1: processing instructions (<?x …?>) are not allowed in a lexicon"),
        ("\u{0}\u{0}\u{0}<?xml version=\"1.0\"?>\n<lexicon/>\n", "odd.pls: line 1: a NUL character"),
    ])
    func aLexiconLibxml2CrashedOnIsRefused(lexicon: String, message: String) throws {
        let dir = try TemporaryFolder.make("tourpack-cli")
        defer { TemporaryFolder.remove(dir) }
        try lexicon.write(to: dir.appendingPathComponent("odd.pls"), atomically: true, encoding: .utf8)
        let tours = Executable.packageRoot.appendingPathComponent("tours").path
        try "version: 1\ntours: [\"\(tours)/*.json\"]\nlexicons: [odd.pls]\n".write(
            to: dir.appendingPathComponent("p.yaml"), atomically: true, encoding: .utf8)
        let result = try Executable.run(["plan", "p.yaml"], in: dir)
        #expect(result.status == 2, "\(result.stderr)")
        #expect(result.stderr.contains(message), "\(result.stderr)")
    }

    @Test func usageErrorsExitTwo() throws {
        #expect(try Executable.run(["plan"]).status == 2)
        #expect(try Executable.run(["plan", "pipelines/demo.yaml", "--format", "wav"]).status == 2)
        #expect(try Executable.run(["frobnicate"]).status == 2)
        let missing = try Executable.run(["plan", "pipelines/nope.yaml"])
        #expect(missing.status == 2)
        #expect(missing.stderr.contains("pipelines/nope.yaml: cannot read: no such file"))
    }

    /// `--format ''` used to settle on no format at all, so a build made
    /// nothing and exited 0; an empty name anywhere in the list is a usage error.
    @Test(arguments: [[""], ["aac,"], [",opus"], ["aac", ""], [" "]])
    func anEmptyFormatIsAUsageError(values: [String]) throws {
        let flags = values.flatMap { ["--format", $0] }
        for command in [["plan", "pipelines/demo.yaml"], ["build", "pipelines/demo.yaml", "--dry-run"]] {
            let result = try Executable.run(command + flags)
            #expect(result.status == 2, "\(command) \(values): \(result.stdout)")
            #expect(result.stderr.contains("--format: an empty format name"), "\(result.stderr)")
        }
    }

    /// A negative number is the option's value, not an unknown option "-1"
    /// ("Missing value for '--pitch <pitch>'"), and its range is then checked.
    @Test func negativeNumbersAreValuesAndTheirRangeIsChecked() throws {
        for (value, expected) in [("-2", -2.0), ("-0", 0.0)] {
            let result = try Executable.run(["plan", "pipelines/demo.yaml", "--pitch", value, "--json"])
            #expect(result.status == 0, "--pitch \(value): \(result.stderr)")
            let object = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
            #expect((object["voice"] as? [String: Any])?["pitch"] as? Double == expected)
            #expect(!result.stdout.contains("-0,"), "a negative zero reached the plan")
        }
        let refusals: [([String], String)] = [
            (["plan", "pipelines/demo.yaml", "--pitch", "-25"], "--pitch: -25.0 is out of range -20...20"),
            (["plan", "pipelines/demo.yaml", "--speaking-rate", "-1"], "--speaking-rate: -1.0 is out of range 0.25...4"),
            (["plan", "pipelines/demo.yaml", "--concurrency", "-3"], "--concurrency: -3 is out of range 1...256"),
            (
                ["build", "pipelines/demo.yaml", "--dry-run", "--refresh-expiring", "-1"],
                "--refresh-expiring: DAYS must be 0 or more, not -1"
            ),
        ]
        for (arguments, message) in refusals {
            let result = try Executable.run(arguments)
            #expect(result.status == 2, "\(arguments)")
            #expect(result.stderr.contains(message), "\(arguments): \(result.stderr)")
            #expect(!result.stderr.contains("Missing value"), "\(arguments): \(result.stderr)")
        }
    }

    @Test func helpReadsWell() throws {
        let root = try Executable.run(["--help"])
        #expect(root.status == 0)
        #expect(root.stdout.contains("Build the touring app's offline audio packages."))
        #expect(root.stdout.contains("Exit codes:"))
        let plan = try Executable.run(["plan", "--help"])
        #expect(plan.status == 0)
        #expect(plan.stdout.contains("--json"))
        #expect(plan.stdout.contains("before anything is spent"))
    }

    /// Every command spells its name out (`commandName:`), which spares
    /// argument-parser deriving it from the type through
    /// `String(describing:)`, a scan of the conformance table at every start;
    /// the names are the ones that derivation gave, which scripts call.
    @Test func commandNamesAreTheDerivedOnes() throws {
        let dump = try Executable.run(["--experimental-dump-help"])
        #expect(dump.status == 0, "\(dump.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(dump.stdout.utf8)) as? [String: Any])
        func paths(_ command: [String: Any], under parent: String) -> [String] {
            let name = "\(parent) \(command["commandName"] as? String ?? "?")".trimmingCharacters(in: .whitespaces)
            let subcommands = command["subcommands"] as? [[String: Any]] ?? []
            return [name] + subcommands.flatMap { paths($0, under: name) }
        }
        let commands = try paths(#require(object["command"] as? [String: Any]), under: "")
        #expect(
            commands == [
                "tourpack", "tourpack build", "tourpack plan", "tourpack validate", "tourpack review", "tourpack publish",
                "tourpack install", "tourpack installed", "tourpack cache", "tourpack cache stats", "tourpack cache prune",
                "tourpack cache clear", "tourpack quota", "tourpack state", "tourpack state migrate", "tourpack keys",
                "tourpack keys generate", "tourpack keys root", "tourpack keys rotate", "tourpack serve-tts",
                "tourpack serve-tiles", "tourpack web", "tourpack help",
            ])
    }
}

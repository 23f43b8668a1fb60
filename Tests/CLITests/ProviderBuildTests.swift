import Foundation
import Testing
import TourpackCore
import TourpackKit
import TourpackTesting

/// The demo tours built under Polly, Azure Speech and ElevenLabs against
/// `serve-tts`, which requires the key and misbehaves: 5xx, each provider's
/// own throttling answer, cut bodies and error pages under a 200. Every
/// build's files pass `validate`, the ledger holds exactly what the server
/// billed in the provider's unit, and the key appears nowhere.
@Suite(.serialized, .offThePool) struct ProviderBuildTests {
    static let key = "AKIDPROVIDERSENTINEL42"
    static let secret = "provider-secret-sentinel-0123456789"

    /// The voice preset and the `tts:` lines of each dialect.
    static func setup(_ api: String) -> (voice: String, tts: String) {
        switch api {
        case "polly":
            return (
                "version: 1\nprovider: polly\nlanguageCode: en-US\nname: en-US\ntier: neural\nengine: neural\n",
                "  region: eu-central-1\n  accessKeyEnv: TP_TEST_ACCESS\n  secretKeyEnv: TP_TEST_SECRET\n"
            )
        case "azure":
            return ("version: 1\nprovider: azure\nlanguageCode: en-US\nname: en-US\ntier: neural\n", "  apiKeyEnv: TP_TEST_KEY\n")
        default:
            return (
                "version: 1\nprovider: elevenlabs\nlanguageCode: en-US\nname: en-US\ntier: half-credit\nmodelId: eleven_flash_v2_5\n"
                    + "voiceSettings: {stability: 0.5, similarityBoost: 0.75}\n",
                "  apiKeyEnv: TP_TEST_KEY\n"
            )
        }
    }

    @Test(arguments: ["polly", "azure", "elevenlabs"])
    func aBuildUnderFaultsValidatesAndTheLedgerMatchesTheBill(api: String) throws {
        let server = try LocalVoiceServer(
            faults: [
                "--api-key-env", "TP_SERVER_KEY", "--failure-rate", "0.15", "--rate-limit-rate", "0.15", "--retry-after", "0",
                "--truncate-rate", "0.1", "--garbage-rate", "0.1", "--fault-seed", "11",
            ],
            environment: ["TP_SERVER_KEY": Self.key])
        let workspace = try BuildWorkspace()
        let (voice, tts) = Self.setup(api)
        try voice.write(to: workspace.root.appendingPathComponent("voice.yaml"), atomically: true, encoding: .utf8)
        try """
        version: 1
        tours: ["tours/*.json"]
        voice: voice.yaml
        formats: [aac]
        tts:
          api: \(api)
          endpoint: \(server.endpoint)
          concurrency: 4
          requestsPerMinute: 6000
          maxAttempts: 12
          initialBackoffMs: 1
          maxBackoffMs: 5
        \(tts)
        output: Documents
        state: state
        """.write(to: workspace.pipeline, atomically: true, encoding: .utf8)
        let environment = ["TP_TEST_KEY": Self.key, "TP_TEST_ACCESS": Self.key, "TP_TEST_SECRET": Self.secret]

        let build = try Executable.run(["build", workspace.pipeline.path], in: workspace.root, environment: environment)
        #expect(build.status == 0, "\(build.stdout)\n\(build.stderr)")
        #expect(build.stdout.contains(api == "elevenlabs" ? "credits billed" : "characters billed"), "\(build.stdout)")
        let validate = try Executable.run(["validate", workspace.output.path], in: workspace.root)
        #expect(validate.status == 0, "\(validate.stdout)\n\(validate.stderr)")
        // Captions: on by default where the provider reports sentence starts (Polly's speech
        // marks, ElevenLabs' alignment, each answered by serve-tts from espeak-ng), off for Azure.
        for package in try FileManager.default.contentsOfDirectory(
            at: workspace.output.appendingPathComponent("OfflineTours"), includingPropertiesForKeys: nil)
        {
            let manifest = try PackageManifest.read(from: package.appendingPathComponent("package.json"))
            for entry in manifest.audio {
                if api == "azure" {
                    #expect(entry.captions == nil, "\(entry.path)")
                } else {
                    #expect(entry.captions?.timing == .provider, "\(entry.path): \(String(describing: entry.captions))")
                }
            }
        }

        let stats = try server.stats()
        let faults = (stats["faultsInjected"] as? [String: Int] ?? [:]).values.reduce(0, +)
        #expect(faults > 0, "no fault fired; the test proves nothing")
        let billed = try #require(stats["characters"] as? Int)
        #expect(billed > 0)
        let quota = try Executable.run(["quota", workspace.pipeline.path, "--json"], in: workspace.root, environment: environment)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(quota.stdout.utf8)) as? [String: Any], "\(quota.stderr)")
        let tiers = try #require(object["tiers"] as? [[String: Any]])
        let tier = api == "elevenlabs" ? "half-credit" : "neural"
        let used = tiers.first { $0["tier"] as? String == tier }?["used"] as? Int
        #expect(used == billed, "the ledger holds \(used ?? -1) \(tier), the server billed \(billed)")

        // The key (and Polly's secret) appear in no output and no file.
        for text in [build.stdout, build.stderr, validate.stdout, quota.stdout, quota.stderr] {
            #expect(!text.contains(Self.key) && !text.contains(Self.secret))
        }
        let files = FileManager.default.enumerator(at: workspace.root, includingPropertiesForKeys: nil)?.compactMap { $0 as? URL } ?? []
        for file in files where (try? file.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true {
            guard let data = try? Data(contentsOf: file) else { continue }
            #expect(data.range(of: Data(Self.key.utf8)) == nil && data.range(of: Data(Self.secret.utf8)) == nil, "\(file.path)")
        }
    }

    @Test(arguments: ["polly", "azure", "elevenlabs"])
    func aRefusedKeyFailsAtOnceNamingTheVariable(api: String) throws {
        let server = try LocalVoiceServer(faults: ["--api-key-env", "TP_SERVER_KEY"], environment: ["TP_SERVER_KEY": Self.key])
        let workspace = try BuildWorkspace()
        let (voice, tts) = Self.setup(api)
        try voice.write(to: workspace.root.appendingPathComponent("voice.yaml"), atomically: true, encoding: .utf8)
        try """
        version: 1
        tours: ["tours/*.json"]
        voice: voice.yaml
        tts:
          api: \(api)
          endpoint: \(server.endpoint)
        \(tts)
        output: Documents
        state: state
        """.write(to: workspace.pipeline, atomically: true, encoding: .utf8)
        let wrong = "WRONGKEYSENTINEL77"
        let environment = ["TP_TEST_KEY": wrong, "TP_TEST_ACCESS": wrong, "TP_TEST_SECRET": Self.secret]
        let build = try Executable.run(["build", workspace.pipeline.path], in: workspace.root, environment: environment)
        #expect(build.status == 1, "\(build.stdout)\n\(build.stderr)")
        let variable = api == "polly" ? "TP_TEST_ACCESS" : "TP_TEST_KEY"
        #expect((build.stdout + build.stderr).contains(variable), "\(build.stdout)\n\(build.stderr)")
        #expect(!(build.stdout + build.stderr).contains(wrong))
        // Failed at once: one request per chunk that was tried, never a retry.
        let statuses = try server.stats()["responsesByStatus"] as? [String: Int] ?? [:]
        #expect(statuses["200"] == nil && (statuses["401"] ?? 0) + (statuses["403"] ?? 0) > 0, "\(statuses)")
    }

    /// `plan` names the provider account and its unit, and prices the build
    /// from `budgets.pricePerMillion`; a quota in credits refuses in credits.
    @Test func planShowsTheProviderAccountUnitAndCost() throws {
        let workspace = try BuildWorkspace()
        let (voice, tts) = Self.setup("elevenlabs")
        try voice.write(to: workspace.root.appendingPathComponent("voice.yaml"), atomically: true, encoding: .utf8)
        func write(quota: Int) throws {
            try """
            version: 1
            tours: ["tours/*.json"]
            voice: voice.yaml
            tts:
              api: elevenlabs
              endpoint: https://api.elevenlabs.io
            \(tts)
            output: Documents
            state: state
            budgets:
              monthlyCharacters: {half-credit: \(quota)}
              pricePerMillion: {half-credit: 150}
            """.write(to: workspace.pipeline, atomically: true, encoding: .utf8)
        }
        try write(quota: 1_000_000)
        let environment = ["TP_TEST_KEY": Self.key]
        let plan = try Executable.run(["plan", workspace.pipeline.path, "--json"], in: workspace.root, environment: environment)
        #expect(plan.status == 0, "\(plan.stdout)\n\(plan.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(plan.stdout.utf8)) as? [String: Any])
        let quota = try #require(object["quota"] as? [String: Any])
        let credits = try #require(quota["thisBuild"] as? Int)
        let characters = try #require((object["totals"] as? [String: Any])?["characters"] as? Int)
        #expect(
            quota["provider"] as? String == "elevenlabs" && quota["unit"] as? String == "credits"
                && quota["tier"] as? String == "half-credit")
        #expect((quota["account"] as? String)?.hasPrefix("https://api.elevenlabs.io#") == true)
        #expect(credits > 0 && credits <= (characters + 1) / 2 + 20, "Flash bills half a credit a character: \(credits) for \(characters)")
        let cost = try #require(quota["estimatedCost"] as? Double)
        #expect(abs(cost - Double(credits) * 150 / 1_000_000) < 0.01)
        let text = try Executable.run(["plan", workspace.pipeline.path], in: workspace.root, environment: environment)
        #expect(text.stdout.contains("credits a month") && text.stdout.contains("elevenlabs account"), "\(text.stdout)")
        // The settled configuration lists the quotas of this provider's tiers only, in its unit.
        let budgets = (text.stdout + text.stderr).split(separator: "\n").first { $0.contains("budgets ") }.map(String.init) ?? ""
        #expect(budgets.hasSuffix("monthly half-credit 1,000,000, in credits"), "\(budgets)")
        #expect(!(text.stdout + plan.stdout).contains(Self.key))

        try write(quota: 10)
        let refused = try Executable.run(["build", workspace.pipeline.path], in: workspace.root, environment: environment)
        #expect(refused.status == 3, "\(refused.stdout)\n\(refused.stderr)")
        #expect((refused.stdout + refused.stderr).contains("monthly quota is 10 credits"), "\(refused.stdout)\n\(refused.stderr)")
    }
}

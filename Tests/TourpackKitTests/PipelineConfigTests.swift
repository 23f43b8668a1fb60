import Foundation
import Testing
import TourpackTesting

@testable import TourpackCore
@testable import TourpackKit
@testable import TourpackLoad

/// A scratch folder with `pipelines/`, `voices/` and `tours/`, like a real project.
struct ConfigFixture {
    let root: URL

    init() throws {
        root = TemporaryFolder.path("tourpack-config")
        for folder in ["pipelines", "voices", "tours"] {
            try FileManager.default.createDirectory(at: root.appendingPathComponent(folder), withIntermediateDirectories: true)
        }
        try write(
            "voices/v.yaml",
            "version: 1\nprovider: google\nlanguageCode: en-US\nname: en-US-Neural2-F\ntier: neural2\nspeakingRate: 1.25\npitch: -2\n")
    }

    @discardableResult
    func write(_ path: String, _ text: String) throws -> URL {
        let url = root.appendingPathComponent(path)
        try text.write(to: url, atomically: true, encoding: .utf8)
        return url
    }

    func load(_ yaml: String, overrides: PipelineOverrides = .init(), environment: [String: String] = [:]) throws -> PipelineConfig {
        let url = try write("pipelines/p.yaml", yaml)
        return try PipelineLoader.load(url, overrides: overrides, workingDirectory: root, environment: environment)
    }

    func errors(_ yaml: String, overrides: PipelineOverrides = .init()) -> [String] {
        do {
            _ = try load(yaml, overrides: overrides)
            return []
        } catch let error as DiagnosticsError {
            return error.errors.map(\.description)
        } catch {
            return ["unexpected: \(error)"]
        }
    }

    func remove() { TemporaryFolder.remove(root) }
}

@Suite struct PipelineConfigTests {
    static let minimal = "version: 1\ntours: [\"../tours/*.json\"]\nvoice: ../voices/v.yaml\n"

    @Test func relativePathsResolveAgainstThePipelineFolder() throws {
        let fixture = try ConfigFixture()
        defer { fixture.remove() }
        let config = try fixture.load(Self.minimal + "output: ../out/Documents\nstate: ../out/state\n")
        let root = fixture.root.standardizedFileURL.path
        #expect(config.tourGlobs == [root + "/tours/*.json"])
        #expect(config.output.path == root + "/out/Documents")
        #expect(config.state.path == root + "/out/state")
        #expect(
            config.voice
                == VoicePreset(
                    provider: "google", languageCode: "en-US", name: "en-US-Neural2-F", tier: .neural2, speakingRate: 1.25, pitch: -2))
        // Defaults where the file is silent.
        #expect(config.formats == [.aac])
        #expect(config.tts.concurrency == 8)
        #expect(config.budgets.cacheMaxMB == 500)
        #expect(config.budgets.monthlyQuota(for: .neural2) == 1_000_000)
        #expect(config.budgets.monthlyQuota(for: .local) == nil)
    }

    @Test func unknownKeysAreRejectedWithTheirPath() throws {
        let fixture = try ConfigFixture()
        defer { fixture.remove() }
        let errors = fixture.errors(
            Self.minimal + "colour: blue\ntts:\n  api: google\n  retries: 3\nbudgets:\n  monthlyCharacters: {gold: 5}\n")
        #expect(errors.count == 3)
        #expect(errors.contains { $0.hasPrefix("pipelines/p.yaml: colour: unknown key; expected one of version, tours") })
        #expect(errors.contains { $0.hasPrefix("pipelines/p.yaml: tts.retries: unknown key; expected one of api, endpoint") })
        #expect(errors.contains { $0.hasPrefix("pipelines/p.yaml: budgets.monthlyCharacters.gold: unknown key") })
    }

    @Test func rangesAreChecked() throws {
        let fixture = try ConfigFixture()
        defer { fixture.remove() }
        let errors = fixture.errors(
            Self.minimal
                + "tts: {concurrency: 0}\nbudgets: {cacheMaxMB: 10, audioMaxAgeDays: 4000, packageMaxAgeDays: 0}\nformats: [aac, wav]\n"
        )
        #expect(
            errors == [
                "pipelines/p.yaml: formats[1]: 'wav' is not one of aac, mp3, opus",
                "pipelines/p.yaml: tts.concurrency: 0 is out of range 1...256",
                "pipelines/p.yaml: budgets.cacheMaxMB: 10 is out of range 50...100000",
                "pipelines/p.yaml: budgets.audioMaxAgeDays: 4000 is out of range 1...3650",
                "pipelines/p.yaml: budgets.packageMaxAgeDays: 0 is out of range 1...3650",
            ])
    }

    @Test func voiceRangesAndKeysAreChecked() throws {
        let fixture = try ConfigFixture()
        defer { fixture.remove() }
        try fixture.write(
            "voices/v.yaml", "provider: google\nlanguageCode: en-US\nname: x\ntier: platinum\nspeakingRate: 5\npitch: 21\nvolume: 3\n")
        #expect(
            fixture.errors(Self.minimal) == [
                "voices/v.yaml: volume: unknown key; expected one of version, provider, languageCode, name, tier, speakingRate, pitch, lexicons, engine, modelId, voiceSettings",
                "voices/v.yaml: tier: 'platinum' is not one of standard, wavenet, neural2, studio, chirp3-hd, neural, long-form, generative, full-credit, half-credit, local",
                "voices/v.yaml: speakingRate: 5 is out of range 0.25...4",
                "voices/v.yaml: pitch: 21 is out of range -20...20",
            ])
    }

    /// A voice's name reaches package.json: a bidi override or another
    /// invisible format character is refused with the file and key; the
    /// joiners some scripts need are not.
    @Test func voiceNamesRefuseFormatCharacters() throws {
        let fixture = try ConfigFixture()
        defer { fixture.remove() }
        try fixture.write(
            "voices/v.yaml", "provider: \"goo\\u200Bgle\"\nlanguageCode: en-US\nname: \"en-US-\\u202EF2-laruen\"\ntier: standard\n")
        #expect(
            fixture.errors(Self.minimal) == [
                "voices/v.yaml: provider: invisible format character U+200B is not allowed in a name (of the format characters, only the joiners U+200C and U+200D are)",
                "voices/v.yaml: name: control character U+202E is not allowed",
            ])
        try fixture.write("voices/v.yaml", "provider: local\nlanguageCode: fa-IR\nname: \"fa\\u200Cir\"\ntier: local\n")
        #expect(try fixture.load(Self.minimal).voice.name == "fa\u{200C}ir")
    }

    @Test func versionIsRequiredAndChecked() throws {
        let fixture = try ConfigFixture()
        defer { fixture.remove() }
        #expect(fixture.errors("tours: [a]\n") == ["pipelines/p.yaml: version: missing required field (use version: 1)"])
        #expect(
            fixture.errors("version: 2\ntours: [a]\n") == [
                "pipelines/p.yaml: version: unsupported version 2; this tourpack reads version 1"
            ])
    }

    @Test func stateMustLieOutsideOutput() throws {
        let fixture = try ConfigFixture()
        defer { fixture.remove() }
        let errors = fixture.errors(Self.minimal + "output: ../build/Documents\nstate: ../build/Documents/.state\n")
        #expect(errors.count == 1)
        #expect(errors.first?.contains("state: the state folder") == true)
    }

    @Test func keysNeverGoInURLsOrConfig() throws {
        let fixture = try ConfigFixture()
        defer { fixture.remove() }
        let errors = fixture.errors(Self.minimal + "tts:\n  endpoint: https://example.com/v1?key=abc\n  apiKeyEnv: sk-live-123\n")
        #expect(
            errors == [
                "pipelines/p.yaml: tts.endpoint: the endpoint is a base URL and takes no query or fragment (an API key never goes in a URL)",
                "pipelines/p.yaml: tts.apiKeyEnv: \(PipelineLoader.notAnEnvironmentName)",
            ])
    }

    /// A key pasted where the variable's name belongs is refused, and the
    /// message never repeats it: not for a key with a dash, nor for one that
    /// is letters and digits only (a Google key), nor for a name too long.
    @Test(arguments: ["sk-live-123", "FakePastedKey0123456789abcdefghijklmnop", String(repeating: "K", count: 65), "9LIVES", "my_tts_key"])
    func aPastedKeyIsRefusedAndNeverEchoed(value: String) throws {
        let fixture = try ConfigFixture()
        defer { fixture.remove() }
        let tts = fixture.errors(Self.minimal + "tts:\n  apiKeyEnv: '\(value)'\n")
        #expect(tts == ["pipelines/p.yaml: tts.apiKeyEnv: \(PipelineLoader.notAnEnvironmentName)"])
        let maps = fixture.errors(
            Self.minimal + "maps:\n  source:\n    url: 'https://tiles.example.com/{z}/{x}/{y}.png'\n    apiKeyEnv: '\(value)'\n")
        #expect(
            maps.count == 1 && maps.first?.contains("maps.source.apiKeyEnv: this is not an environment variable name") == true, "\(maps)")
        for message in tts + maps { #expect(!message.contains(value)) }
        #expect(try fixture.load(Self.minimal + "tts: {apiKeyEnv: \(String(repeating: "K", count: 64))}\n").tts.apiKeyEnv?.count == 64)
    }

    @Test func flagsOverrideTheFileWhichOverridesDefaults() throws {
        let fixture = try ConfigFixture()
        defer { fixture.remove() }
        let yaml = Self.minimal + "formats: [mp3]\ntts: {concurrency: 3, endpoint: 'http://127.0.0.1:9'}\n"
        let fromFile = try fixture.load(yaml)
        #expect(fromFile.formats == [.mp3])
        #expect(fromFile.tts.concurrency == 3)
        let overridden = try fixture.load(
            yaml,
            overrides: PipelineOverrides(
                formats: [.opus, .aac, .opus], endpoint: "http://127.0.0.1:4242", concurrency: 5, output: "elsewhere", speakingRate: 0.5)
        )
        #expect(overridden.formats == [.opus, .aac])
        #expect(overridden.tts.concurrency == 5)
        #expect(overridden.tts.endpoint == "http://127.0.0.1:4242")
        #expect(overridden.output.path == fixture.root.standardizedFileURL.path + "/elsewhere")
        #expect(overridden.voice.speakingRate == 0.5)
        #expect(overridden.voice.pitch == -2)
        #expect(fixture.errors(yaml, overrides: PipelineOverrides(concurrency: 0)) == ["--concurrency: 0 is out of range 1...256"])
    }

    @Test func settledConfigurationNamesTheKeyVariableButNeverItsValue() throws {
        let fixture = try ConfigFixture()
        defer { fixture.remove() }
        let config = try fixture.load(Self.minimal + "tts: {apiKeyEnv: MY_TTS_KEY}\n", environment: ["MY_TTS_KEY": "sk-secret-sentinel-42"])
        // Read once, at load: the key is in the configuration, and nothing prints it.
        #expect(config.tts.apiKey?.value == "sk-secret-sentinel-42")
        let text = config.settledDescription()
        #expect(text.contains("key from $MY_TTS_KEY (set)"))
        for shown in [text, "\(config)", String(reflecting: config), "\(config.tts)"] {
            #expect(!shown.contains("sk-secret-sentinel-42"))
        }
        let unset = try fixture.load(Self.minimal + "tts: {apiKeyEnv: MY_TTS_KEY}\n", environment: [:])
        #expect(unset.tts.apiKey == nil && unset.settledDescription().contains("key from $MY_TTS_KEY (not set)"))
    }

    @Test func yamlSyntaxErrorIsReported() throws {
        let fixture = try ConfigFixture()
        defer { fixture.remove() }
        let errors = fixture.errors("version: 1\ntours: [unclosed\n")
        #expect(errors.count == 1)
        #expect(errors.first?.hasPrefix("pipelines/p.yaml: invalid YAML:") == true)
    }

    /// Issue 27, defect 7: aliases are refused before Yams expands one (as a
    /// key, hashing it), in pipelines and voices alike; `*` elsewhere is text.
    @Test func yamlAliasesAreRefusedWithTheirLine() throws {
        let fixture = try ConfigFixture()
        defer { fixture.remove() }
        let errors = fixture.errors(Self.minimal + "output: &out ../out\n? *out\n: 1\n")
        #expect(
            errors == ["pipelines/p.yaml: line 5: YAML aliases (*out) are not allowed in tourpack's configuration; write the value out"])
        try fixture.write("voices/alias.yaml", "version: 1\nprovider: &p google\nlanguageCode: en-US\nname: *p\ntier: neural2\n")
        #expect(throws: DiagnosticsError.self) {
            try VoiceLoader.load(fixture.root.appendingPathComponent("voices/alias.yaml"), displayName: "v")
        }
        // Not aliases: `*` inside a word, before a space, or closing an emphasis.
        for text in ["a*b", "* 2", "'*quoted'", "*emphasis*"] {
            #expect(YAMLAliases.first(in: "name: \(text)\n") == nil, "\(text)")
        }
        #expect(YAMLAliases.first(in: "[*a, b]")?.name == "a")
        #expect(YAMLAliases.first(in: "{k: v}\n# see *this\n")?.line == 2)
    }

    @Test func repositoryPipelinesAndVoicesLoad() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        for name in ["demo", "google", "polly", "azure", "elevenlabs"] {
            let config = try PipelineLoader.load(root.appendingPathComponent("pipelines/\(name).yaml"), workingDirectory: root)
            #expect(config.tourGlobs == [root.standardizedFileURL.path + "/tours/*.json"])
        }
        let google = try PipelineLoader.load(root.appendingPathComponent("pipelines/google.yaml"), workingDirectory: root)
        #expect(google.voice.name == "en-US-Neural2-F")
        #expect(google.tts.apiKeyEnv == "GOOGLE_TTS_API_KEY")
        let voices = try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("voices").path).sorted()
        #expect(
            voices == [
                "azure-ava.yaml", "elevenlabs-george.yaml", "en-US-female.yaml", "en-US-male.yaml", "en-US-neutral.yaml",
                "en-US-standard.yaml", "local-en-us.yaml", "piper-joe.yaml", "polly-joanna.yaml",
            ])
        let tiers = try voices.map { try VoiceLoader.load(root.appendingPathComponent("voices/\($0)"), displayName: $0).tier }
        #expect(Set(tiers) == [.neural2, .wavenet, .standard, .local, .neural, .fullCredit])
    }
}

import Foundation
import Testing
import TourpackState

@testable import TourpackCore
@testable import TourpackKit
@testable import TourpackLoad
@testable import TourpackPlan

/// `tts.api: polly | azure | elevenlabs`: what each dialect needs, what it
/// refuses (with the path of the field at fault), the chunk limit it gets,
/// and how a lexicon is written for it.
@Suite struct ProviderConfigTests {
    static func pipeline(_ tts: String, voice: String = "../voices/p.yaml", extra: String = "") -> String {
        "version: 1\ntours: [\"../tours/*.json\"]\nvoice: \(voice)\ntts:\n\(tts)\n\(extra)"
    }

    @Test func pollyReadsRegionAndTheKeyPairAndSignsWithThem() throws {
        let fixture = try ConfigFixture()
        defer { fixture.remove() }
        try fixture.write(
            "voices/p.yaml", "version: 1\nprovider: polly\nlanguageCode: en-GB\nname: Amy\ntier: generative\nengine: generative\n")
        let config = try fixture.load(
            Self.pipeline("  api: polly\n  endpoint: https://polly.eu-west-1.amazonaws.com\n  accessKeyEnv: AK\n  secretKeyEnv: SK"),
            environment: ["AK": "AKIDEXAMPLE", "SK": "wJalrXUtnFEMI"])
        #expect(config.tts.api == .polly)
        #expect(config.tts.region == "eu-west-1", "taken from the endpoint's host")
        #expect(config.tts.accessKey?.value == "AKIDEXAMPLE" && config.tts.secretKey?.value == "wJalrXUtnFEMI")
        #expect(config.voice.pollyEngine == "generative")
        #expect(config.requestLimit == .billedCharacters(3000))
        #expect(config.billing.unit == "characters")
        let settled = config.settledDescription(environment: [:])
        #expect(settled.contains("$AK (set)") && settled.contains("$SK (set)"))
        #expect(!settled.contains("AKIDEXAMPLE") && !settled.contains("wJalrXUtnFEMI"))
        // The defaults are state.objects': AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.
        let defaults = try fixture.load(Self.pipeline("  api: polly\n  endpoint: http://127.0.0.1:8787\n  region: us-east-1"))
        #expect(defaults.tts.accessKeyEnv == "AWS_ACCESS_KEY_ID" && defaults.tts.secretKeyEnv == "AWS_SECRET_ACCESS_KEY")
    }

    @Test func eachDialectRefusesWhatItCannotUseWithThePath() throws {
        let fixture = try ConfigFixture()
        defer { fixture.remove() }
        try fixture.write("voices/p.yaml", "version: 1\nprovider: polly\nlanguageCode: en-US\nname: Joanna\ntier: neural\n")
        let polly = fixture.errors(Self.pipeline("  api: polly\n  endpoint: http://127.0.0.1:8787\n  apiKeyEnv: KEY"))
        #expect(polly.contains { $0.contains("tts.apiKeyEnv") && $0.contains("accessKeyEnv") }, "\(polly)")
        #expect(polly.contains { $0.contains("tts.region") }, "\(polly)")
        let azure = fixture.errors(Self.pipeline("  api: azure\n  region: westeurope\n  apiKeyEnv: KEY", voice: "../voices/v.yaml"))
        #expect(azure.contains { $0.contains("tts.region") && $0.contains("only api polly") }, "\(azure)")
        // A Google tier under Azure, named in the voice file.
        #expect(azure.contains { $0.contains("voices/v.yaml") && $0.contains("tier") && $0.contains("neural2 is not a tier of azure") })
    }

    @Test func voicePresetFieldsAreCheckedWithTheirPaths() throws {
        let fixture = try ConfigFixture()
        defer { fixture.remove() }
        try fixture.write(
            "voices/p.yaml",
            "version: 1\nprovider: elevenlabs\nlanguageCode: en-US\nname: JBFqnCBsd6RMkjVDRZzb\ntier: full-credit\n"
                + "modelId: eleven_turbo_v9\nengine: turbo\nvoiceSettings: {stability: 1.5, loudness: 2, useSpeakerBoost: maybe}\n")
        let errors = fixture.errors(Self.pipeline("  api: elevenlabs\n  apiKeyEnv: XI"))
        for expected in ["modelId", "voiceSettings.stability", "voiceSettings.loudness", "voiceSettings.useSpeakerBoost"] {
            #expect(errors.contains { $0.contains("voices/p.yaml") && $0.contains(expected) }, "\(expected): \(errors)")
        }
        // Each provider checks its own fields' values as the preset loads, whatever the pipeline speaks.
        #expect(errors.contains("voices/p.yaml: engine: 'turbo' is not one of standard, neural, long-form, generative"), "\(errors)")
        #expect(errors.contains { $0.hasPrefix("voices/p.yaml: modelId: 'eleven_turbo_v9' is not an ElevenLabs model") }, "\(errors)")
        try fixture.write(
            "voices/p.yaml",
            "version: 1\nprovider: elevenlabs\nlanguageCode: en-US\nname: JBFqnCBsd6RMkjVDRZzb\ntier: full-credit\n"
                + "modelId: eleven_flash_v2_5\nengine: neural\n")
        let mismatched = fixture.errors(Self.pipeline("  api: elevenlabs\n  apiKeyEnv: XI"))
        #expect(mismatched.contains { $0.contains("engine") && $0.contains("only Polly") }, "\(mismatched)")
        #expect(mismatched.contains { $0.contains("tier") && $0.contains("half-credit") }, "\(mismatched)")
    }

    @Test func elevenLabsLimitAndUnitComeFromTheModel() throws {
        let fixture = try ConfigFixture()
        defer { fixture.remove() }
        try fixture.write(
            "voices/p.yaml",
            "version: 1\nprovider: elevenlabs\nlanguageCode: en-US\nname: JBFqnCBsd6RMkjVDRZzb\ntier: full-credit\nmodelId: eleven_v3\n"
                + "voiceSettings: {stability: 0.4, similarityBoost: 0.8, style: 0, useSpeakerBoost: true}\n")
        let config = try fixture.load(
            Self.pipeline(
                "  api: elevenlabs\n  apiKeyEnv: XI",
                extra: "budgets:\n  monthlyCharacters: {full-credit: 100000, standard: 5}\n  pricePerMillion: {full-credit: 180}\n"))
        #expect(config.requestLimit == .characters(5000))
        #expect(config.billing.unit == "credits")
        #expect(config.voice.voiceSettings == VoiceSettings(stability: 0.4, similarityBoost: 0.8, style: 0, useSpeakerBoost: true))
        #expect(config.budgets.monthlyQuota(for: .fullCredit) == 100_000)
        #expect(config.budgets.monthlyQuota(for: .standard) == 5, "the old keys keep working")
        #expect(config.budgets.pricePerMillion[.fullCredit] == 180)
    }

    @Test func lexiconsAreWrittenForEachDialect() {
        let polly = VoicePreset(provider: "polly", languageCode: "en-US", name: "Joanna", tier: .neural)
        #expect(PronunciationDialect(api: .polly, voice: polly) == .ssml)
        #expect(PronunciationDialect(api: .azure, voice: polly) == .ssml)
        #expect(PronunciationDialect(api: .elevenlabs, voice: polly) == .alias)
        #expect(PronunciationDialect(api: .polly, voice: VoiceLoader.defaultVoice) == .alias, "the local voice reads no phonemes")
    }

    @Test func chunkLimitsAreCountedAsTheProviderCounts() throws {
        // Polly counts billed characters: the tags of an SSML narration are free.
        let tags = String(repeating: #"<break time="1ms"/>"#, count: 3)
        let text = "<speak>" + String(repeating: "Word. ", count: 10) + tags + "</speak>"
        let chunks = try Chunker(limit: .billedCharacters(100)).chunks(for: Narration(text: text))
        #expect(chunks.count == 1, "60 billed characters fit in 100 although the SSML is \(text.count) long")
        let counted = try Chunker(limit: .characters(100)).chunks(for: Narration(text: text))
        #expect(counted.count > 1)
    }

    /// Polly also caps a request's characters, tags included, at 6,000 (twice
    /// its 3,000 billed): a narration dense with markup is cut so each chunk
    /// holds both caps, where the billed count alone would send 15,000 characters.
    @Test func pollyChunksHoldTheTotalCapToo() throws {
        let text = "<speak>" + String(repeating: "<emphasis>word</emphasis> ", count: 600) + "</speak>"
        let limit = ChunkLimit.billedCharacters(3000)
        let chunks = try Chunker(limit: limit).chunks(for: Narration(text: text))
        #expect(chunks.count > 1)
        for chunk in chunks {
            #expect(BillingRule.textCharacters(chunk) <= 3000)
            #expect(chunk.characters <= 6000, "\(chunk.characters) characters in one Polly request")
        }
    }

    /// A lexicon applied under each new dialect: SSML `<sub>` for Polly and
    /// Azure, the alias as words for ElevenLabs; editing one lexeme changes
    /// the keys of exactly the chunks that hold its grapheme, so only those
    /// are requested again.
    @Test(arguments: [TTSAPI.polly, .azure, .elevenlabs])
    func anEditedLexemeReRequestsOnlyItsChunks(api: TTSAPI) throws {
        let before = try LexiconTests.lexicon(
            """
            <lexeme><grapheme>Zermatt</grapheme><alias>Tser-matt</alias></lexeme>
            <lexeme><grapheme>Grindelwald</grapheme><alias>Grin-del-vald</alias></lexeme>
            """)
        var after = before
        after.lexemes[1].alias = "Grin-dl-valt"
        let narration = Narration(
            text: """
                Grindelwald sits under the north face of the Eiger, with trains every half hour. \
                The railway climbs for the better part of an hour, past meadows and barns. \
                Zermatt has had no petrol cars for decades; electric taxis meet every train. \
                Zermatt and Grindelwald both began as farming villages.
                """)
        let voice = VoicePreset(provider: api.rawValue, languageCode: "en-US", name: "en-US", tier: api.tiers[0])
        let dialect = PronunciationDialect(api: api, voice: voice)
        let limit: ChunkLimit = api == .polly ? .billedCharacters(120) : .characters(api == .azure ? 150 : 90)
        let chunker = Chunker(limit: limit)
        func keyed(_ lexicon: Lexicon) throws -> [(text: String, key: SynthesisKey)] {
            let chunks = try LexiconRewriter(lexicons: [lexicon], dialect: dialect).chunks(for: narration, using: chunker)
            return chunks.map { ($0.text, SynthesisKey(chunk: $0, voice: voice, sampleRateHz: 24_000)) }
        }
        let old = try keyed(before), new = try keyed(after)
        try #require(old.count == 4 && new.count == 4, "\(old.map(\.text))")
        #expect(old.indices.filter { old[$0].key != new[$0].key } == [0, 3], "only the chunks holding Grindelwald")
        if api == .elevenlabs {
            #expect(old[0].text.hasPrefix("Grin-del-vald sits") && !old[0].text.contains("<"))
        } else {
            #expect(old[0].text.contains(#"<sub alias="Grin-del-vald">Grindelwald</sub>"#), "\(old[0].text)")
        }
    }

    /// A phoneme-only lexeme is speakable by Polly and Azure (SSML
    /// `<phoneme>`), and a config error naming the lexicon and lexeme under
    /// ElevenLabs, which gets aliases.
    @Test func aLexemeElevenLabsCannotSayIsAConfigError() throws {
        let lexicon = try LexiconTests.lexicon(
            "<lexeme><grapheme>Zermatt</grapheme><phoneme>ˈtsɛrmat</phoneme></lexeme>", file: "lexicons/alps.pls")
        for api in [TTSAPI.polly, .azure, .elevenlabs] {
            var diagnostics = DiagnosticCollector()
            let voice = VoicePreset(provider: api.rawValue, languageCode: "en-US", name: "v", tier: api.tiers[0])
            LexiconLoader.checkSpeakable([lexicon], api: api, voice: voice, into: &diagnostics)
            let errors = diagnostics.diagnostics.map(\.description)
            if api == .elevenlabs {
                #expect(errors.count == 1 && errors[0].contains("lexicons/alps.pls") && errors[0].contains("Zermatt"), "\(errors)")
                #expect(errors.first?.contains("ElevenLabs") == true)
            } else {
                #expect(errors.isEmpty, "\(api): \(errors)")
            }
        }
    }

    /// A chunk spoken by another Polly engine or ElevenLabs model is another
    /// chunk; a voice without those fields keeps the key it always had.
    @Test func engineAndModelReachTheSynthesisKey() {
        let chunk = Chunk(text: "The pass opens in June.", isSSML: false)
        func key(_ voice: VoicePreset) -> SynthesisKey { SynthesisKey(chunk: chunk, voice: voice, sampleRateHz: 24_000) }
        let neural = VoicePreset(provider: "polly", languageCode: "en-US", name: "Joanna", tier: .neural, engine: "neural")
        var generative = neural
        generative.engine = "generative"
        generative.tier = .generative
        #expect(key(neural) != key(generative))
        let v2 = VoicePreset(
            provider: "elevenlabs", languageCode: "en-US", name: "id", tier: .fullCredit, modelId: "eleven_multilingual_v2")
        var v3 = v2
        v3.modelId = "eleven_v3"
        var steadier = v2
        steadier.voiceSettings = VoiceSettings(stability: 0.9)
        #expect(Set([key(v2), key(v3), key(steadier)]).count == 3)
        // Google's keys are unchanged by the new fields (pinned by the golden chunk keys elsewhere).
        let google = VoicePreset(provider: "google", languageCode: "en-US", name: "en-US-Neural2-F", tier: .neural2)
        var withTier = google
        withTier.tier = .wavenet
        #expect(key(google) == key(withTier))
    }
}

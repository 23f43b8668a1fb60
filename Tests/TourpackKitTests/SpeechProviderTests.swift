import Foundation
import Testing
import TourpackCore
import TourpackState

@testable import TourpackKit
@testable import TourpackLoad
@testable import TourpackSpeech

/// The one list of providers (`SpeechProviders.all`), its descriptors'
/// facts, and that the house asks a descriptor rather than switching on a
/// provider's name: a provider the house has never heard of (`Acme`, below)
/// is billed, chunked, checked and spoken to through its descriptor alone.
@Suite struct SpeechProviderTests {
    /// Every named provider is registered once, under the name it parses from.
    @Test func theListHoldsEveryProviderOnce() {
        let ids = SpeechProviders.all.map(\.id)
        #expect(ids == ["google", "openai", "polly", "azure", "elevenlabs", "piper"])
        #expect(Set(ids).count == ids.count)
        #expect(Set(SpeechProviders.all.map(\.name)).count == ids.count)
        let named: [TTSAPI] = [.google, .openai, .polly, .azure, .elevenlabs, .piper]
        #expect(TTSAPI.allCases == named)
        for api in named {
            #expect(TTSAPI(rawValue: api.rawValue) == api)
            #expect(api.provider.id == api.rawValue && api.description == api.rawValue)
        }
        #expect(TTSAPI(rawValue: "acme") == nil)
        #expect(SpeechProviders.defaultAPI == .google)
    }

    /// Each descriptor's facts hold together.
    @Test(arguments: SpeechProviders.all.map(\.id))
    func aDescriptorsFactsAreConsistent(id: String) throws {
        let provider = try #require(SpeechProviders.named(id))
        let voice = VoicePreset(provider: id, languageCode: "en-US", name: "v", tier: provider.tiers[0])
        #expect(provider.tiers.contains(.local), "the local voice is counted, never refused")
        #expect(Set(provider.tiers).count == provider.tiers.count)
        #expect(provider.requestLimit(for: nil).value > 0 && provider.requestLimit(for: voice).value > 0)
        #expect(provider.billingUnit(for: .local) == "characters", "the local tier counts characters")
        #expect(provider.requestsPerChunk(timings: false) == 1 && provider.requestsPerChunk(timings: true) >= 1)
        if let rates = provider.offeredSampleRates {
            #expect(!rates.isEmpty && rates == rates.sorted() && Set(rates).count == rates.count)
        }
        if provider.sendsSentencePerRequest { #expect(provider.reportsSentenceTimes, "the join places each sentence") }
        #expect(!provider.phonemeRefusal(for: voice).isEmpty)
        let chunk = Chunk(text: "Five words are said here.", isSSML: false)
        let units = provider.requestUnits(for: chunk, billing: BillingRule(api: TTSAPI(provider), tier: provider.tiers[0]))
        #expect(units > 0 && units <= chunk.characters, "\(id): \(units)")
        var settings = TTSSettings(api: TTSAPI(provider), sampleRateHz: 24_000)
        settings.region = "eu-central-1"
        let request = SynthesisRequest(chunk: chunk, voice: voice, sampleRateHz: 24_000, itemLabel: "t/p/Detailed")
        #expect(try HTTPSpeechSynthesizer.dialect(for: settings).path(for: request).hasPrefix("/"))
    }

    /// A provider's own voice fields are refused under every other provider,
    /// naming the voice file, the field and the provider they belong to.
    @Test func anotherProvidersFieldIsRefused() {
        let voice = VoicePreset(
            provider: "google", languageCode: "en-US", name: "v", tier: .standard, engine: "neural", modelId: "eleven_v3")
        var diagnostics = DiagnosticCollector()
        VoiceLoader.checkProvider(voice, api: .google, displayName: "voices/v.yaml", into: &diagnostics)
        let found = diagnostics.diagnostics.map { "\($0.file) \($0.path): \($0.message)" }
        #expect(
            found == [
                "voices/v.yaml engine: only Polly voices take an engine; this pipeline speaks google",
                "voices/v.yaml modelId: only ElevenLabs voices take modelId; this pipeline speaks google",
            ], "\(found)")
    }

    /// A seventh provider, known to no switch: its descriptor alone gives
    /// the billing, the limits, the rates, the lexicon dialect and the checks.
    @Test func aNewProviderIsDrivenByItsDescriptor() {
        let acme = TTSAPI(AcmeProvider())
        let voice = VoicePreset(provider: "acme", languageCode: "en-US", name: "v", tier: .neural, pitch: 2)
        let chunk = Chunk(text: "Hello there.", isSSML: false)

        let billing = BillingRule(api: acme, voice: voice, timings: true)
        #expect(billing.unit == "credits" && billing.requestsPerChunk == 3)
        #expect(billing.requestUnits(for: chunk) == 2 * chunk.characters && billing.units(for: chunk) == 6 * chunk.characters)

        #expect(acme.requestLimit == .characters(77) && acme.tiers == [.neural, .local])
        #expect(acme.sendsSentencePerRequest && acme.reportsSentenceTimes)
        var settings = TTSSettings(api: acme, sampleRateHz: 24_000)
        #expect(settings.requestedSampleRateHz == 32_000)
        settings.sampleRateHz = 48_000
        #expect(settings.requestedSampleRateHz == 32_000)
        #expect(PronunciationDialect(api: acme, voice: voice) == .ssml)
        #expect(PronunciationDialect.speaker(api: acme, voice: voice) == "Acme's voice v")

        var diagnostics = DiagnosticCollector()
        VoiceLoader.checkProvider(voice, api: acme, displayName: "voices/acme.yaml", into: &diagnostics)
        #expect(
            diagnostics.diagnostics.map(\.message) == [
                "Acme has no pitch control; 2 must be 0 (or left out)", "Acme wants a name longer than one letter",
            ])
        #expect(QuotaAccount(settings: settings) == QuotaAccount(endpoint: settings.endpoint, apiKey: nil))
    }
}

/// A provider that is in no list: every fact differs from the defaults.
private struct AcmeProvider: HTTPSpeechProvider {
    var id: String { "acme" }
    var name: String { "Acme" }
    func requestLimit(for voice: VoicePreset?) -> ChunkLimit { .characters(77) }
    var sendsSentencePerRequest: Bool { true }
    var offeredSampleRates: [Int]? { [16_000, 32_000] }
    var reportsSentenceTimes: Bool { true }
    var tiers: [PricingTier] { [.neural, .local] }
    func billingUnit(for tier: PricingTier) -> String { "credits" }
    func requestsPerChunk(timings: Bool) -> Int { timings ? 3 : 1 }
    func requestUnits(for chunk: Chunk, billing: BillingRule) -> Int { 2 * chunk.characters }
    var readsPhonemes: Bool { true }
    func phonemeRefusal(for voice: VoicePreset) -> String { "Acme's voice \(voice.name)" }
    var takesPitch: Bool { false }

    func checkVoice(_ voice: VoicePreset, displayName: String, into diagnostics: inout DiagnosticCollector) {
        if voice.name.count < 2 { diagnostics.error(displayName, "name", "Acme wants a name longer than one letter") }
    }

    func dialect(for settings: TTSSettings) -> any TTSDialect { PiperDialect() }
}

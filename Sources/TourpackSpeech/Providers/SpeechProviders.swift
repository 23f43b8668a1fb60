package import TourpackCore

/// A provider tourpack reaches over HTTP: the descriptor's facts, and the
/// wire dialect `HTTPSpeechSynthesizer` speaks with it.
protocol HTTPSpeechProvider: SpeechProvider {
    /// The dialect for these settings (Azure's names the rate it asks for).
    func dialect(for settings: TTSSettings) -> any TTSDialect
}

/// Every provider tourpack speaks to, in one list. A provider is one file
/// in this folder (its descriptor, its `TTSAPI` name and its dialect) and
/// one line here; the Voices article gives the recipe.
package enum SpeechProviders {
    static let all: [any HTTPSpeechProvider] = [
        GoogleProvider(),
        OpenAIProvider(),
        PollyProvider(),
        AzureProvider(),
        ElevenLabsProvider(),
        PiperProvider(),
    ]

    /// Every provider's descriptor, in `all`'s order: what the loader checks
    /// a pipeline and a voice against.
    package static var descriptors: [any SpeechProvider] { all }

    /// The provider a pipeline speaks to when it names none.
    package static let defaultAPI = TTSAPI.google

    /// The registered provider named `id`; nil when there is none.
    static func named(_ id: String) -> (any HTTPSpeechProvider)? { all.first { $0.id == id } }
}

/// `tts.api` and `--api` name a provider; these are the names there are.
extension TTSAPI: RawRepresentable, CaseIterable {
    package init?(rawValue: String) {
        guard let provider = SpeechProviders.named(rawValue) else { return nil }
        self.init(provider)
    }

    package static var allCases: [TTSAPI] { SpeechProviders.all.map { TTSAPI($0) } }
}

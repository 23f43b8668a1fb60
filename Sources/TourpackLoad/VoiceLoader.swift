package import Foundation
package import TourpackCore
import TourpackSpeech
import Yams

/// Loads a voice preset (`voices/*.yaml`): provider, languageCode, name,
/// tier, speakingRate (0.25–4.0) and pitch (-20…+20), and optionally the
/// pronunciation `lexicons` this voice needs (paths relative to the preset).
package enum VoiceLoader {
    static let keys = [
        "version", "provider", "languageCode", "name", "tier", "speakingRate", "pitch", "lexicons", "engine", "modelId", "voiceSettings",
    ]
    static let voiceSettingsKeys = ["stability", "similarityBoost", "style", "useSpeakerBoost"]
    package static let speakingRateRange: ClosedRange<Double> = 0.25...4.0
    package static let pitchRange: ClosedRange<Double> = -20...20

    /// The voice used when a pipeline names none: the embedded espeak-ng voice.
    package static let defaultVoice = VoicePreset(provider: "local", languageCode: "en-US", name: "en-us", tier: .local)

    package static func load(_ url: URL, displayName: String) throws(DiagnosticsError) -> VoicePreset {
        var diagnostics = DiagnosticCollector()
        let voice = load(url, displayName: displayName, into: &diagnostics)
        try diagnostics.throwIfErrors()
        return voice!
    }

    static func load(_ url: URL, displayName: String, into diagnostics: inout DiagnosticCollector) -> VoicePreset? {
        var lexicons: [URL] = []
        return load(url, displayName: displayName, lexicons: &lexicons, into: &diagnostics)
    }

    /// The preset, and in `lexicons` the lexicon files it names, resolved
    /// against its folder. They stay out of `VoicePreset`, which is what
    /// package.json and the package ID record: a lexicon changes the words
    /// sent, and those reach the chunk keys on their own.
    static func load(_ url: URL, displayName: String, lexicons: inout [URL], into diagnostics: inout DiagnosticCollector) -> VoicePreset? {
        guard let text = ConfigFile.read(url, displayName: displayName, into: &diagnostics) else { return nil }
        var reader = YAMLReader(file: displayName)
        defer { diagnostics.append(contentsOf: reader.diagnostics.diagnostics) }
        guard let root = reader.root(text), let map = reader.mapping(root, at: "", allowed: keys) else { return nil }
        if let version = map["version"] {
            _ = reader.integer(version, at: "version", range: 1...1)
        }
        for key in ["provider", "languageCode", "name", "tier"] where map[key] == nil {
            reader.error(key, "missing required field")
        }
        let provider = reader.string(map["provider"], at: "provider")
        let languageCode = reader.string(map["languageCode"], at: "languageCode")
        if let languageCode, !LanguageCode.isValid(languageCode) {
            reader.error("languageCode", "not a BCP-47 language code like en-US: \"\(languageCode)\"")
        }
        let name = reader.string(map["name"], at: "name")
        // The voice's name and provider reach package.json: the names' rule.
        for (key, value) in [("provider", provider), ("name", name)] {
            if let value, let problem = NameCharacters.problem(in: value) { reader.error(key, problem) }
        }
        let tier = reader.choice(map["tier"], at: "tier", as: PricingTier.self)
        let rate = map["speakingRate"].map { reader.number($0, at: "speakingRate", range: speakingRateRange) } ?? 1.0
        let pitch = map["pitch"].map { reader.number($0, at: "pitch", range: pitchRange) } ?? 0.0
        lexicons = LexiconLoader.paths(map["lexicons"], base: url.deletingLastPathComponent(), reader: &reader)
        // A provider's own fields (Polly's engine, ElevenLabs' model): each
        // provider knows the values it takes, and checks them.
        let engine = reader.string(map["engine"], at: "engine")
        let modelId = reader.string(map["modelId"], at: "modelId")
        let owned = VoicePreset(
            provider: provider ?? "", languageCode: languageCode ?? "", name: name ?? "", tier: tier ?? .local, engine: engine,
            modelId: modelId)
        for descriptor in SpeechProviders.descriptors {
            descriptor.checkOwnFields(of: owned, displayName: displayName, into: &reader.diagnostics)
        }
        var settings: VoiceSettings?
        if let node = map["voiceSettings"], let fields = reader.mapping(node, at: "voiceSettings", allowed: voiceSettingsKeys) {
            var read = VoiceSettings()
            read.stability = reader.number(fields["stability"], at: "voiceSettings.stability", range: 0...1)
            read.similarityBoost = reader.number(fields["similarityBoost"], at: "voiceSettings.similarityBoost", range: 0...1)
            read.style = reader.number(fields["style"], at: "voiceSettings.style", range: 0...1)
            if let node = fields["useSpeakerBoost"] {
                if case .scalar = node, let flag = node.bool {
                    read.useSpeakerBoost = flag
                } else {
                    reader.error("voiceSettings.useSpeakerBoost", "expected true or false, found \(YAMLReader.kind(node))")
                }
            }
            settings = read
        }
        guard !reader.diagnostics.hasErrors, let provider, let languageCode, let name, let tier, let rate, let pitch else { return nil }
        // `pitch: -0` is 0, as `--pitch -0` is.
        return VoicePreset(
            provider: provider, languageCode: languageCode, name: name, tier: tier, speakingRate: rate, pitch: pitch == 0 ? 0 : pitch,
            engine: engine, modelId: modelId, voiceSettings: settings)
    }

    /// A preset's fields against the provider the pipeline speaks to: its
    /// tier must be one the provider bills in, the fields that belong to one
    /// provider (`SpeechProvider.ownFields`) must belong to this one, its
    /// pitch must be 0 where the provider has none, and the provider's own
    /// checks must pass. Errors name the voice file and field.
    static func checkProvider(_ voice: VoicePreset, api: TTSAPI, displayName: String, into diagnostics: inout DiagnosticCollector) {
        if !api.tiers.contains(voice.tier) {
            diagnostics.error(
                displayName, "tier",
                "\(voice.tier.rawValue) is not a tier of \(api.rawValue); it bills in \(api.tiers.map(\.rawValue).joined(separator: ", "))")
        }
        for other in SpeechProviders.descriptors where other.id != api.rawValue {
            for (field, phrase) in other.ownFields(of: voice) {
                diagnostics.error(displayName, field, "only \(other.name) voices take \(phrase); this pipeline speaks \(api.rawValue)")
            }
        }
        if !api.provider.takesPitch, voice.pitch != 0 {
            diagnostics.error(
                displayName, "pitch", "\(api.provider.name) has no pitch control; \(voice.pitch.compactText) must be 0 (or left out)")
        }
        api.provider.checkVoice(voice, displayName: displayName, into: &diagnostics)
    }
}

/// Reading a small config file as UTF-8 text, with a size cap.
enum ConfigFile {
    static let maxBytes = 1024 * 1024

    static func read(_ url: URL, displayName: String, into diagnostics: inout DiagnosticCollector) -> String? {
        do {
            guard let size = try FileReading.size(of: url) else {
                diagnostics.error(displayName, "", "not a regular file")
                return nil
            }
            guard size <= maxBytes else {
                diagnostics.error(displayName, "", "file is \(size) bytes, more than the \(maxBytes) allowed")
                return nil
            }
            let bytes = try FileReading.bytes(of: url, limit: maxBytes)
            guard let text = String(validating: bytes, as: UTF8.self) else {
                diagnostics.error(displayName, "", "not valid UTF-8")
                return nil
            }
            return text
        } catch {
            diagnostics.error(displayName, "", "cannot read: \(Self.reason(error))")
            return nil
        }
    }

    static func reason(_ error: any Error) -> String {
        if let cocoa = error as? CocoaError, cocoa.code == .fileReadNoSuchFile || cocoa.code == .fileNoSuchFile {
            return "no such file"
        }
        let nsError = error as NSError
        if nsError.domain == NSPOSIXErrorDomain { return errnoDescription(Int32(nsError.code)) }
        return error.localizedDescription
    }
}

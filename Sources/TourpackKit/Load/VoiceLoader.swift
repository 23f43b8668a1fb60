public import Foundation
public import TourpackCore

/// Loads a voice preset (`voices/*.yaml`): provider, languageCode, name,
/// tier, speakingRate (0.25–4.0) and pitch (-20…+20), and optionally the
/// pronunciation `lexicons` this voice needs (paths relative to the preset).
public enum VoiceLoader {
    static let keys = ["version", "provider", "languageCode", "name", "tier", "speakingRate", "pitch", "lexicons"]
    public static let speakingRateRange: ClosedRange<Double> = 0.25...4.0
    public static let pitchRange: ClosedRange<Double> = -20...20

    /// The voice used when a pipeline names none: the embedded espeak-ng voice.
    public static let defaultVoice = VoicePreset(provider: "local", languageCode: "en-US", name: "en-us", tier: .local)

    public static func load(_ url: URL, displayName: String) throws(DiagnosticsError) -> VoicePreset {
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
        guard !reader.diagnostics.hasErrors, let provider, let languageCode, let name, let tier, let rate, let pitch else { return nil }
        // `pitch: -0` is 0, as `--pitch -0` is.
        return VoicePreset(
            provider: provider, languageCode: languageCode, name: name, tier: tier, speakingRate: rate, pitch: pitch == 0 ? 0 : pitch)
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

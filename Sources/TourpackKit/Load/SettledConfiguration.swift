public import Foundation

extension PipelineConfig {
    /// The configuration a run settled on, for the top of its output.
    ///
    /// It names the variable that holds the API key and whether it is set,
    /// never the key's value.
    public func settledDescription(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        let cwd = URL(fileURLWithPath: FileManager.default.currentDirectoryPath, isDirectory: true)
        func shown(_ url: URL) -> String { TourLoader.relativePath(of: url, to: cwd) }
        let keyLine: String
        if let name = tts.apiKeyEnv {
            keyLine = "key from $\(name) (\(environment[name].map { $0.isEmpty ? "empty" : "set" } ?? "not set"))"
        } else {
            keyLine = "no key"
        }
        let quotas = PricingTier.allCases.compactMap { tier in budgets.monthlyQuota(for: tier).map { "\(tier.rawValue) \(PlanReport.grouped($0))" } }
        var lines = [
            "pipeline  \(shown(sourceFile)) (version \(version))",
            "tours     \(tourGlobs.map { shown(URL(fileURLWithPath: $0)) }.joined(separator: ", "))",
            "voice     \(voice.name) · \(voice.languageCode) · \(voice.provider) · tier \(voice.tier.rawValue) · rate \(voice.speakingRate) · pitch \(voice.pitch)"
                + (voiceFile.map { " (\(shown($0)))" } ?? " (default)"),
            "formats   \(formats.map { "\($0.rawValue) (.\($0.fileExtension) \($0.bitrateKbps) kbps \($0.sampleRateHz) Hz mono)" }.joined(separator: ", "))",
            "tts       \(tts.api.rawValue) \(tts.endpoint) · \(keyLine) · concurrency \(tts.concurrency) · \(tts.requestsPerMinute)/min · timeout \(tts.timeoutSeconds.compactText) s · \(tts.maxAttempts) attempts · \(tts.sampleRateHz) Hz",
            "output    \(shown(output))",
            "state     \(shown(state))",
            "budgets   cache \(budgets.cacheMaxMB) MB · synthesis cache \(budgets.synthesisCacheMaxMB) MB · audio \(budgets.audioMaxAgeDays) d · packages \(budgets.packageMaxAgeDays) d · monthly \(quotas.joined(separator: ", "))",
            "maps      zoom \(maps.minZoom)–\(maps.maxZoom) · buffer \(maps.bufferMiles.compactText) mi · \(maps.tileKB) KB/tile",
            "chunking  limit \(tts.api.requestLimit.value) \(tts.api == .google ? "UTF-8 bytes" : "characters") − headroom \(chunking.headroom) · pause \(audio.pauseMilliseconds) ms",
        ]
        lines = lines.map { "  " + $0 }
        return (["configuration:"] + lines).joined(separator: "\n")
    }
}

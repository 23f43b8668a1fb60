import Foundation
package import TourpackCore
import TourpackHTTP

extension PipelineConfig {
    /// The configuration a run settled on, for the top of its output.
    ///
    /// It names the variable that holds the API key and whether the loader
    /// found it set, never the key's value.
    /// - Parameter environment: only says whether the shared state's key
    ///   variables are set; the API keys were read when the pipeline was loaded.
    package func settledDescription(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        let cwd = URL(fileURLWithPath: FileManager.default.currentDirectoryPath, isDirectory: true)
        func shown(_ url: URL) -> String { TourLoader.relativePath(of: url, to: cwd) }
        let keyLine: String
        if case .sigV4(let service) = tts.api.provider.credentials, let access = tts.accessKeyEnv, let secret = tts.secretKeyEnv {
            keyLine =
                "signed (SigV4, \(service), \(tts.region ?? "no region")) with $\(access) (\(tts.accessKey == nil ? "not set" : "set")) "
                + "and $\(secret) (\(tts.secretKey == nil ? "not set" : "set"))"
        } else if let name = tts.apiKeyEnv {
            keyLine = "key from $\(name) (\(tts.apiKey == nil ? "not set" : "set"))"
        } else {
            keyLine = "no key"
        }
        var tiles = "no tile source: packages carry the coverage only"
        if let source = maps.source {
            let key =
                source.apiKeyEnv.map { name in
                    "key from $\(name) (\(source.apiKey == nil ? "not set" : "set")) in "
                        + (source.apiKeyHeader.map { "header \($0)" } ?? "query \(source.apiKeyParam)")
                } ?? "no key"
            switch source.location {
            case .url(let template):
                tiles =
                    "tiles \(template) (\(source.format.rawValue)) · \(key) · concurrency \(source.concurrency) · "
                    + (source.requestsPerSecond > 0 ? "\(source.requestsPerSecond.compactText)/s" : "no rate limit")
                    + " · fresh \(source.maxAgeDays) d unless the server says · cached as \(source.name ?? "the template")"
            case .mbtiles(let file):
                tiles = "tiles from the extract \(shown(file)) (\(source.format.rawValue))"
            }
        }
        // Only the tiers this provider bills in: Google's default quotas mean
        // nothing to an ElevenLabs build.
        let quotas =
            PricingTier.allCases.filter { tts.api.tiers.contains($0) || $0 == voice.tier }.compactMap { tier in
                budgets.monthlyQuota(for: tier).map { "\(tier.rawValue) \($0.groupedText)" }
            } + ["in \(billing.unit)"]
        var lines =
            [
                "pipeline  \(shown(sourceFile)) (version \(version))",
                "tours     \(tourGlobs.map { shown(URL(fileURLWithPath: $0)) }.joined(separator: ", "))",
                "voice     \(voice.name) · \(voice.languageCode) · \(voice.provider) · tier \(voice.tier.rawValue) · rate \(voice.speakingRate) · pitch \(voice.pitch)"
                    + (voiceFile.map { " (\(shown($0)))" } ?? " (default)"),
                "formats   \(formats.map { "\($0.rawValue) (.\($0.fileExtension) \(bitrate(for: $0)) kbps \(sampleRate(for: $0)) Hz mono)" }.joined(separator: ", "))"
                    + qualityDescription(shown: shown),
                "tts       \(tts.api.rawValue) \(tts.endpoint) · \(keyLine) · concurrency \(tts.concurrency) · \(tts.requestsPerMinute)/min · timeout \(tts.timeoutSeconds.compactText) s · \(tts.maxAttempts) attempts · \(tts.sampleRateHz) Hz",
                "output    \(shown(output))",
                "state     \(shown(state))",
            ] + sharedStateLines(environment: environment, shown: shown) + [
                "budgets   cache \(budgets.cacheMaxMB) MB · synthesis cache \(budgets.synthesisCacheMaxMB) MB · tile cache \(budgets.tileCacheMaxMB) MB · audio \(budgets.audioMaxAgeDays) d · packages \(budgets.packageMaxAgeDays) d · monthly \(quotas.joined(separator: ", "))",
                "maps      zoom \(maps.minZoom)–\(maps.maxZoom) · buffer \(maps.bufferMiles.compactText) mi · \(maps.selection.rawValue) · at most \(maps.maxTiles.groupedText) tiles a package · \(maps.tileKB) KB/tile",
                "          \(tiles)",
                "chunking  limit \(requestLimit.value) \(requestLimit.unitName) − headroom \(chunking.headroom) · pause \(audio.pauseMilliseconds) ms",
                "lexicons  \(lexiconsDescription)",
                "loudness  \(loudnessDescription)",
                "captions  \(captionsDescription)",
            ]
        lines = lines.map { "  " + $0 }
        return (["configuration:"] + lines).joined(separator: "\n")
    }

    /// With a quality ladder: which rung this is, and the others.
    func qualityDescription(shown: (URL) -> String) -> String {
        let qualities = qualityRoots()
        guard qualities.count > 1 || quality != .high else { return "" }
        let others = qualities.filter { $0.quality != quality }.map { "\($0.quality.rawValue) in \(shown($0.output))" }
        return " · quality \(quality.rawValue)" + (others.isEmpty ? "" : " (ladder: also \(others.joined(separator: ", ")))")
    }

    /// Whether captions are written, and where their times come from.
    var captionsDescription: String {
        switch audio.captions {
        case .off: return "off"
        case .webvtt where tts.api.reportsSentenceTimes:
            return "webvtt, a cue per sentence, timed by the voice (\(tts.api.rawValue) reports each sentence's start)"
        case .webvtt: return "webvtt, a cue per sentence, times estimated (\(tts.api.rawValue) reports none)"
        }
    }

    /// The target, and where the limiter holds the peaks for these formats.
    var loudnessDescription: String {
        guard let target = loudnessTarget else { return "off (files keep the endpoint's levels)" }
        return "\(target.integratedLUFS.compactText) LUFS integrated · true peak ≤ \(target.truePeakDBTP.compactText) dBTP"
            + " (limiter at \(target.limiterCeilingDBTP.compactText), the headroom the lossy encoders need)"
    }

    /// The shared parts of `state:`, when named: the bucket and the names of
    /// the variables holding the keys (set or not), never a key.
    func sharedStateLines(environment: [String: String], shown: (URL) -> String) -> [String] {
        func variable(_ name: String) -> String { "$\(name) (\(environment[name].map { $0.isEmpty ? "empty" : "set" } ?? "not set"))" }
        var lines: [String] = []
        if let objects = shared.objects {
            lines.append(
                "          objects s3 \(Secret.redacting(url: objects.endpoint)) bucket \(objects.bucket) prefix '\(objects.prefix)' · region \(objects.region) · keys from \(variable(objects.accessKeyEnv)) and \(variable(objects.secretKeyEnv)) · not used by this build yet"
            )
        }
        if let postgres = shared.postgres {
            lines.append(
                "          postgres \(Secret.redacting(url: postgres)) · password from \(variable(shared.postgresPasswordEnv)) · holds the quota ledger, the cache indexes and the build records"
            )
        }
        if let scratch = shared.scratch { lines.append("          scratch \(shown(scratch))") }
        return lines
    }

    /// The lexicons in the order they apply, and how they are written for this endpoint.
    var lexiconsDescription: String {
        guard !lexicons.isEmpty else { return "none" }
        let files = lexicons.map { "\($0.file) (\($0.lexemes.count) lexeme\($0.lexemes.count == 1 ? "" : "s"), \($0.language))" }
        let how = pronunciationDialect == .ssml ? "SSML <phoneme>/<sub alias>" : "aliases as plain text"
        return files.joined(separator: ", ") + " · " + how
    }
}

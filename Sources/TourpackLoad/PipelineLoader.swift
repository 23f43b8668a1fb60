package import Foundation
package import TourpackCore
import TourpackMaps
import TourpackSpeech
import Yams

/// Values given on the command line; each one beats the pipeline file,
/// which beats the defaults.
package struct PipelineOverrides: Sendable, Hashable {
    package var formats: [AudioFormat]?
    package var voiceFile: String?
    package var endpoint: String?
    package var api: TTSAPI?
    package var concurrency: Int?
    package var requestsPerMinute: Int?
    package var output: String?
    package var state: String?
    package var speakingRate: Double?
    package var pitch: Double?
    /// Replaces `maps.source.url` (or names one); the format comes from its extension.
    package var tilesURL: String?

    package init(
        formats: [AudioFormat]? = nil, voiceFile: String? = nil, endpoint: String? = nil, api: TTSAPI? = nil,
        concurrency: Int? = nil, requestsPerMinute: Int? = nil, output: String? = nil, state: String? = nil,
        speakingRate: Double? = nil, pitch: Double? = nil
    ) {
        self.formats = formats
        self.voiceFile = voiceFile
        self.endpoint = endpoint
        self.api = api
        self.concurrency = concurrency
        self.requestsPerMinute = requestsPerMinute
        self.output = output
        self.state = state
        self.speakingRate = speakingRate
        self.pitch = pitch
    }
}

/// Loads `pipelines/*.yaml` into a complete `PipelineConfig`.
///
/// Unknown keys are errors, named by their path. Relative paths resolve
/// against the pipeline file's own folder; paths given as flags resolve
/// against the working directory, as a shell user expects.
package enum PipelineLoader {
    package static let currentVersion = 1

    static let topKeys = [
        "version", "tours", "voice", "formats", "tts", "output", "state", "budgets", "maps", "chunking", "audio", "lexicons", "loudness",
        "publish", "captions",
    ]
    static let ttsKeys = [
        "api", "endpoint", "apiKeyEnv", "concurrency", "requestsPerMinute", "timeoutSeconds",
        "maxAttempts", "initialBackoffMs", "maxBackoffMs", "sampleRateHertz", "model", "region", "accessKeyEnv", "secretKeyEnv",
    ]
    static let budgetKeys = [
        "cacheMaxMB", "synthesisCacheMaxMB", "tileCacheMaxMB", "audioMaxAgeDays", "packageMaxAgeDays", "monthlyCharacters",
        "pricePerMillion",
    ]
    static let mapKeys = ["minZoom", "maxZoom", "bufferMiles", "tileKB", "selection", "maxTiles", "source"]
    static let tileSourceKeys = [
        "url", "mbtiles", "format", "name", "apiKeyEnv", "apiKeyParam", "apiKeyHeader", "attribution", "userAgent",
        "concurrency", "requestsPerSecond", "maxAgeDays",
    ]

    /// - Parameters:
    ///   - url: the pipeline file; relative paths in it resolve against its folder.
    ///   - overrides: the command line's flags, which win over the file.
    ///   - workingDirectory: where relative command-line paths start; the process's when nil.
    ///   - environment: where the variables that `apiKeyEnv` settings name
    ///     are read, once, here; the process's own by default.
    package static func load(
        _ url: URL, overrides: PipelineOverrides = .init(), workingDirectory: URL? = nil,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(DiagnosticsError) -> PipelineConfig {
        let cwd = workingDirectory ?? URL(fileURLWithPath: FileManager.default.currentDirectoryPath, isDirectory: true)
        let file = url.isFileURL && url.path.hasPrefix("/") ? url : URL(fileURLWithPath: url.path, relativeTo: cwd)
        let displayName = TourLoader.relativePath(of: file, to: cwd)
        var diagnostics = DiagnosticCollector()
        guard let text = ConfigFile.read(file, displayName: displayName, into: &diagnostics) else {
            throw DiagnosticsError(diagnostics: diagnostics.diagnostics)
        }
        let base = file.deletingLastPathComponent()
        var reader = YAMLReader(file: displayName)
        guard let root = reader.root(text), let map = reader.mapping(root, at: "", allowed: topKeys) else {
            diagnostics.append(contentsOf: reader.diagnostics.diagnostics)
            throw DiagnosticsError(diagnostics: diagnostics.diagnostics)
        }

        // version
        if let node = map["version"] {
            if let version = reader.integer(node, at: "version", range: 1...Int.max), version != currentVersion {
                reader.error("version", "unsupported version \(version); this tourpack reads version \(currentVersion)")
            }
        } else {
            reader.error("version", "missing required field (use version: \(currentVersion))")
        }

        // tours
        var tourGlobs: [String] = []
        if let patterns = reader.strings(map["tours"], at: "tours") {
            if patterns.isEmpty { reader.error("tours", "list at least one tour file or glob") }
            tourGlobs = patterns.map { resolve($0, against: base).path }
        } else if map["tours"] == nil {
            reader.error("tours", "missing required field")
        }

        // formats
        var ladder: [LadderEntry] = [LadderEntry(variant: AudioVariant(.aac), index: 0, explicitRate: false)]
        if let node = map["formats"] {
            ladder = parseLadder(node, at: "formats", reader: &reader) ?? ladder
        }
        if let override = overrides.formats {
            ladder = override.reduce(into: []) { list, format in
                if !list.contains(where: { $0.variant.format == format }) {
                    list.append(LadderEntry(variant: AudioVariant(format), index: list.count, explicitRate: false))
                }
            }
        }

        // tts
        var tts = TTSSettings(api: SpeechProviders.defaultAPI)
        if let node = map["tts"], let ttsMap = reader.mapping(node, at: "tts", allowed: ttsKeys) {
            readTTS(ttsMap, into: &tts, reader: &reader)
        }
        applyTTSOverrides(overrides, to: &tts, diagnostics: &diagnostics)

        // output and state
        let output =
            overrides.output.map { resolve($0, against: cwd) }
            ?? reader.string(map["output"], at: "output").map { resolve($0, against: base) }
            ?? resolve("../build/Documents", against: base)
        let stateSection = readState(map["state"], base: base, reader: &reader)
        let state =
            overrides.state.map { resolve($0, against: cwd) }
            ?? stateSection.path
            ?? resolve("../build/state", against: base)
        if isInside(state, output) {
            reader.error(
                "state", "the state folder (\(state.path)) must lie outside the output root (\(output.path)), which holds only what ships")
        }

        let publish = readPublish(map["publish"], base: base, reader: &reader)
        if case .folder(let site)? = publish?.target, isInside(site, output) || isInside(output, site) {
            reader.error(
                "publish.target.folder",
                "the site (\(site.path)) and the output root (\(output.path)) must not hold each other: the root holds only what ships")
        }

        var budgets = Budgets()
        if let node = map["budgets"], let budgetMap = reader.mapping(node, at: "budgets", allowed: budgetKeys) {
            readBudgets(budgetMap, into: &budgets, reader: &reader)
        }
        var maps = MapSettings()
        if let node = map["maps"], let mapMap = reader.mapping(node, at: "maps", allowed: mapKeys) {
            maps.minZoom = reader.integer(mapMap["minZoom"], at: "maps.minZoom", range: 0...20) ?? maps.minZoom
            maps.maxZoom = reader.integer(mapMap["maxZoom"], at: "maps.maxZoom", range: 0...20) ?? maps.maxZoom
            maps.bufferMiles = reader.number(mapMap["bufferMiles"], at: "maps.bufferMiles", range: 0...100) ?? maps.bufferMiles
            maps.tileKB = reader.integer(mapMap["tileKB"], at: "maps.tileKB", range: 1...10_000) ?? maps.tileKB
            if maps.minZoom > maps.maxZoom { reader.error("maps.minZoom", "minZoom \(maps.minZoom) is above maxZoom \(maps.maxZoom)") }
            maps.selection = reader.choice(mapMap["selection"], at: "maps.selection", as: TileSelection.self) ?? maps.selection
            maps.maxTiles = reader.integer(mapMap["maxTiles"], at: "maps.maxTiles", range: 1...10_000_000) ?? maps.maxTiles
            if let node = mapMap["source"], let sourceMap = reader.mapping(node, at: "maps.source", allowed: tileSourceKeys) {
                maps.source = readTileSource(sourceMap, base: base, reader: &reader)
            }
        }
        if let template = overrides.tilesURL {
            if let problem = tileTemplateProblem(template) {
                diagnostics.error("--tiles-url", "", problem)
            } else {
                let probe = template.replacingOccurrences(of: "{z}", with: "0").replacingOccurrences(of: "{x}", with: "0")
                    .replacingOccurrences(of: "{y}", with: "0")
                let format = URLComponents(string: probe).flatMap { TileFormat(pathExtension: ($0.path as NSString).pathExtension) }
                var source = maps.source ?? TileSource(location: .url(template), format: format ?? .png)
                source.location = .url(template)
                if let format { source.format = format }
                maps.source = source
            }
        }
        var chunking = ChunkingSettings()
        if let node = map["chunking"], let chunkMap = reader.mapping(node, at: "chunking", allowed: ["headroom"]) {
            chunking.headroom = reader.integer(chunkMap["headroom"], at: "chunking.headroom", range: 0...2000) ?? chunking.headroom
        }
        var audio = AudioSettings()
        if let node = map["audio"], let audioMap = reader.mapping(node, at: "audio", allowed: ["pauseMs", "sampleRateHz"]) {
            audio.pauseMilliseconds = reader.integer(audioMap["pauseMs"], at: "audio.pauseMs", range: 0...5000) ?? audio.pauseMilliseconds
            if let node = audioMap["sampleRateHz"],
                let rates = reader.mapping(node, at: "audio.sampleRateHz", allowed: AudioFormat.allCases.map(\.rawValue))
            {
                for format in AudioFormat.allCases {
                    let path = "audio.sampleRateHz.\(format.rawValue)"
                    guard let rate = reader.integer(rates[format.rawValue], at: path, range: 1...384_000) else { continue }
                    if format.sampleRates.contains(rate) {
                        audio.sampleRates[format] = rate
                    } else {
                        reader.error(
                            path,
                            "\(format.rawValue) cannot be encoded at \(rate) Hz; it takes \(format.sampleRates.map(String.init).joined(separator: ", "))"
                        )
                    }
                }
            }
        }

        if let node = map["loudness"] { audio.loudness = loudnessTarget(node, reader: &reader) }
        // On by default where the voice reports when each sentence starts.
        audio.captions = tts.api.reportsSentenceTimes ? .webvtt : .off
        if let node = map["captions"] {
            if case .scalar(let scalar) = node, let setting = CaptionsSetting(rawValue: scalar.string.lowercased()) {
                audio.captions = setting
            } else if case .scalar(let scalar) = node, scalar.string.lowercased() == "false" {
                audio.captions = .off
            } else {
                let found: String
                if case .scalar(let scalar) = node { found = "\"\(scalar.string)\"" } else { found = YAMLReader.kind(node) }
                reader.error("captions", "expected webvtt or off, found \(found)")
            }
        }
        // A rung's rate must be one its codec carries at the rate it is encoded at.
        for entry in ladder where entry.explicitRate {
            let format = entry.variant.format
            let sampleRate = audio.sampleRates[format] ?? format.defaultSampleRate(endpointRate: tts.sampleRateHz)
            if let problem = format.bitrateProblem(entry.variant.bitrateKbps, sampleRateHz: sampleRate) {
                reader.error("formats[\(entry.index)].bitrateKbps", problem)
            }
        }

        let pipelineLexicons = LexiconLoader.paths(map["lexicons"], base: base, reader: &reader)

        // voice, last: its file has its own diagnostics
        var voice = VoiceLoader.defaultVoice
        var voiceLexicons: [URL] = []
        var voiceFile: URL?
        if let override = overrides.voiceFile {
            voiceFile = resolve(override, against: cwd)
        } else if let path = reader.string(map["voice"], at: "voice") {
            voiceFile = resolve(path, against: base)
        }
        diagnostics.append(contentsOf: reader.diagnostics.diagnostics)
        if let voiceFile {
            let shown = TourLoader.relativePath(of: voiceFile, to: cwd)
            if let loaded = VoiceLoader.load(voiceFile, displayName: shown, lexicons: &voiceLexicons, into: &diagnostics) { voice = loaded }
        }
        if let rate = overrides.speakingRate {
            if VoiceLoader.speakingRateRange.contains(rate) {
                voice.speakingRate = rate
            } else {
                diagnostics.error("--speaking-rate", "", "\(rate) is out of range 0.25...4")
            }
        }
        if let pitch = overrides.pitch {
            // `--pitch -0` is 0: a negative zero would print, and hash into the package ID, as "-0".
            if !tts.api.provider.takesPitch, pitch != 0 {
                diagnostics.error("--pitch", "", "\(tts.api.provider.name) has no pitch control; \(pitch.compactText) must be 0")
            } else if VoiceLoader.pitchRange.contains(pitch) {
                voice.pitch = pitch == 0 ? 0 : pitch
            } else {
                diagnostics.error("--pitch", "", "\(pitch) is out of range -20...20")
            }
        }

        // The voice's lexicons first: they are the more specific, so where
        // both give the same grapheme, the voice's lexeme wins.
        let lexicons = LexiconLoader.loadAll(voiceLexicons + pipelineLexicons, cwd: cwd, into: &diagnostics)
        LexiconLoader.checkSpeakable(lexicons, api: tts.api, voice: voice, into: &diagnostics)
        if voiceFile != nil, let shown = voiceFile.map({ TourLoader.relativePath(of: $0, to: cwd) }) {
            VoiceLoader.checkProvider(voice, api: tts.api, displayName: shown, into: &diagnostics)
        }

        try diagnostics.throwIfErrors()
        // The keys, read once: nothing after this reads the environment for them.
        tts.apiKey = tts.apiKeyEnv.flatMap { Secret(environment[$0]) }
        tts.accessKey = tts.accessKeyEnv.flatMap { Secret(environment[$0]) }
        tts.secretKey = tts.secretKeyEnv.flatMap { Secret(environment[$0]) }
        if let name = maps.source?.apiKeyEnv { maps.source?.apiKey = Secret(environment[name]) }
        var shared = stateSection.shared
        if shared.postgres != nil { shared.postgresPassword = Secret(environment[shared.postgresPasswordEnv]) }
        let variants = ladder.map(\.variant)
        let config = PipelineConfig(
            sourceFile: file.standardizedFileURL, version: currentVersion, tourGlobs: tourGlobs, voiceFile: voiceFile?.standardizedFileURL,
            voice: voice, formats: variants.map(\.format), tts: tts, output: output, state: state, budgets: budgets, maps: maps,
            chunking: chunking, audio: audio, lexicons: lexicons, shared: shared, publish: publish, ladder: variants
        )
        // The first quality of the ladder; `qualityRoots()` gives the others.
        return config.qualityRoots()[0]
    }

    // MARK: Sections

    /// One entry of `formats`, with where it was written.
    struct LadderEntry {
        var variant: AudioVariant
        var index: Int
        /// Whether the entry named its bit rate (which is then checked against the codec).
        var explicitRate: Bool
    }

    /// `formats`: a format's name (at the contract's rate, high), or
    /// `{format, bitrateKbps, quality}`. A format may appear once per
    /// quality, and a rate once per format.
    static func parseLadder(_ node: Node, at path: String, reader: inout YAMLReader) -> [LadderEntry]? {
        let items: [Node]
        switch node {
        case .scalar: items = [node]
        case .sequence(let sequence): items = Array(sequence)
        default:
            reader.error(path, "expected a list of formats, found \(YAMLReader.kind(node))")
            return nil
        }
        if items.isEmpty { reader.error(path, "list at least one format") }
        var entries: [LadderEntry] = []
        for (index, item) in items.enumerated() {
            let at = "\(path)[\(index)]"
            let entry: LadderEntry
            if case .mapping = item {
                guard let fields = reader.mapping(item, at: at, allowed: ["format", "bitrateKbps", "quality"]) else { continue }
                if fields["format"] == nil { reader.error("\(at).format", "missing required field") }
                guard let format = reader.choice(fields["format"], at: "\(at).format", as: AudioFormat.self) else { continue }
                let rate = reader.integer(fields["bitrateKbps"], at: "\(at).bitrateKbps", range: 1...10_000)
                if fields["bitrateKbps"] != nil, rate == nil { continue }
                let quality =
                    fields["quality"] == nil ? .high : reader.choice(fields["quality"], at: "\(at).quality", as: AudioQuality.self)
                guard let quality else { continue }
                entry = LadderEntry(
                    variant: AudioVariant(format, bitrateKbps: rate, quality: quality), index: index, explicitRate: rate != nil)
            } else {
                guard let name = reader.string(item, at: at) else { continue }
                guard let format = AudioFormat(rawValue: name.lowercased()) else {
                    reader.error(at, "'\(name)' is not one of aac, mp3, opus")
                    continue
                }
                entry = LadderEntry(variant: AudioVariant(format), index: index, explicitRate: false)
            }
            let variant = entry.variant
            if let twin = entries.first(where: { $0.variant.format == variant.format && $0.variant.bitrateKbps == variant.bitrateKbps }) {
                reader.error(at, "\(variant.format.rawValue) at \(variant.bitrateKbps) kbps is already \(path)[\(twin.index)]")
                continue
            }
            if let twin = entries.first(where: { $0.variant.format == variant.format && $0.variant.quality == variant.quality }) {
                reader.error(
                    at,
                    "\(variant.format.rawValue) is already offered as \(variant.quality.rawValue) by \(path)[\(twin.index)]; "
                        + "give each rate of a format its own quality (high, medium, low)")
                continue
            }
            entries.append(entry)
        }
        return entries.isEmpty ? nil : entries
    }

    static func readTTS(_ map: [String: Node], into tts: inout TTSSettings, reader: inout YAMLReader) {
        tts.api = reader.choice(map["api"], at: "tts.api", as: TTSAPI.self) ?? tts.api
        if let endpoint = reader.string(map["endpoint"], at: "tts.endpoint") {
            if let problem = endpointProblem(endpoint) { reader.error("tts.endpoint", problem) } else { tts.endpoint = endpoint }
        }
        if let name = reader.string(map["apiKeyEnv"], at: "tts.apiKeyEnv") {
            if isEnvironmentName(name) { tts.apiKeyEnv = name } else { reader.error("tts.apiKeyEnv", notAnEnvironmentName) }
        }
        tts.concurrency = reader.integer(map["concurrency"], at: "tts.concurrency", range: 1...256) ?? tts.concurrency
        tts.requestsPerMinute =
            reader.integer(map["requestsPerMinute"], at: "tts.requestsPerMinute", range: 1...1_000_000) ?? tts.requestsPerMinute
        tts.timeoutSeconds = reader.number(map["timeoutSeconds"], at: "tts.timeoutSeconds", range: 1...600) ?? tts.timeoutSeconds
        tts.maxAttempts = reader.integer(map["maxAttempts"], at: "tts.maxAttempts", range: 1...20) ?? tts.maxAttempts
        if let ms = reader.integer(map["initialBackoffMs"], at: "tts.initialBackoffMs", range: 1...60_000) {
            tts.initialBackoffSeconds = Double(ms) / 1000
        }
        if let ms = reader.integer(map["maxBackoffMs"], at: "tts.maxBackoffMs", range: 1...600_000) {
            tts.maxBackoffSeconds = Double(ms) / 1000
        }
        tts.sampleRateHz = reader.integer(map["sampleRateHertz"], at: "tts.sampleRateHertz", range: 8000...48_000) ?? tts.sampleRateHz
        tts.model = reader.string(map["model"], at: "tts.model") ?? tts.model
        if let region = reader.string(map["region"], at: "tts.region") {
            if region.count <= 64, region.unicodeScalars.allSatisfy({ ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "-" }) {
                tts.region = region
            } else {
                reader.error("tts.region", "a signing region is lowercase letters, digits and '-', like eu-central-1")
            }
        }
        for (key, keyPath) in [("accessKeyEnv", \TTSSettings.accessKeyEnv), ("secretKeyEnv", \TTSSettings.secretKeyEnv)] {
            guard let name = reader.string(map[key], at: "tts.\(key)") else { continue }
            if isEnvironmentName(name) { tts[keyPath: keyPath] = name } else { reader.error("tts.\(key)", notAnEnvironmentName) }
        }
        checkDialect(map, tts: &tts, reader: &reader)
    }

    /// What each provider's credentials need and refuse: one that signs
    /// with an AWS key pair (Polly) needs a region and takes no `apiKeyEnv`;
    /// the others take no key pair.
    static func checkDialect(_ map: [String: Node], tts: inout TTSSettings, reader: inout YAMLReader) {
        if case .sigV4(let service) = tts.api.provider.credentials {
            if map["apiKeyEnv"] != nil {
                reader.error(
                    "tts.apiKeyEnv",
                    "\(tts.api.provider.name) signs its requests with a key pair: name accessKeyEnv and secretKeyEnv instead")
            }
            if tts.region == nil {
                let prefix = "\(service)."
                if let host = URLComponents(string: tts.endpoint)?.host, host.hasPrefix(prefix), host.hasSuffix(".amazonaws.com") {
                    tts.region = String(host.dropFirst(prefix.count).dropLast(".amazonaws.com".count))
                } else {
                    reader.error(
                        "tts.region", "missing required field for api \(tts.api.rawValue) (the signing region, like eu-central-1)")
                }
            }
            tts.accessKeyEnv = tts.accessKeyEnv ?? ObjectStoreSettings.defaultAccessKeyEnv
            tts.secretKeyEnv = tts.secretKeyEnv ?? ObjectStoreSettings.defaultSecretKeyEnv
        } else {
            let signed = SpeechProviders.descriptors.filter { $0.credentials != .apiKey }.map { "api \($0.id)" }
            for key in ["region", "accessKeyEnv", "secretKeyEnv"] where map[key] != nil {
                reader.error(
                    "tts.\(key)", "only \(signed.joined(separator: " or ")) takes \(key); \(tts.api.rawValue) reads its key from apiKeyEnv")
            }
        }
    }

    static func applyTTSOverrides(_ overrides: PipelineOverrides, to tts: inout TTSSettings, diagnostics: inout DiagnosticCollector) {
        if let api = overrides.api { tts.api = api }
        if let endpoint = overrides.endpoint {
            if let problem = endpointProblem(endpoint) { diagnostics.error("--endpoint", "", problem) } else { tts.endpoint = endpoint }
        }
        if let concurrency = overrides.concurrency {
            if (1...256).contains(concurrency) {
                tts.concurrency = concurrency
            } else {
                diagnostics.error("--concurrency", "", "\(concurrency) is out of range 1...256")
            }
        }
        if let rpm = overrides.requestsPerMinute {
            if (1...1_000_000).contains(rpm) {
                tts.requestsPerMinute = rpm
            } else {
                diagnostics.error("--requests-per-minute", "", "\(rpm) is out of range 1...1000000")
            }
        }
    }

    static func readBudgets(_ map: [String: Node], into budgets: inout Budgets, reader: inout YAMLReader) {
        budgets.cacheMaxMB = reader.integer(map["cacheMaxMB"], at: "budgets.cacheMaxMB", range: 50...100_000) ?? budgets.cacheMaxMB
        budgets.synthesisCacheMaxMB =
            reader.integer(map["synthesisCacheMaxMB"], at: "budgets.synthesisCacheMaxMB", range: 50...1_000_000)
            ?? budgets.synthesisCacheMaxMB
        budgets.tileCacheMaxMB =
            reader.integer(map["tileCacheMaxMB"], at: "budgets.tileCacheMaxMB", range: 10...1_000_000) ?? budgets.tileCacheMaxMB
        budgets.audioMaxAgeDays =
            reader.integer(map["audioMaxAgeDays"], at: "budgets.audioMaxAgeDays", range: 1...3650) ?? budgets.audioMaxAgeDays
        budgets.packageMaxAgeDays =
            reader.integer(map["packageMaxAgeDays"], at: "budgets.packageMaxAgeDays", range: 1...3650) ?? budgets.packageMaxAgeDays
        if let node = map["monthlyCharacters"],
            let quotas = reader.mapping(
                node, at: "budgets.monthlyCharacters", allowed: PricingTier.allCases.filter { $0 != .local }.map(\.rawValue))
        {
            for (name, value) in quotas {
                guard let tier = PricingTier(rawValue: name),
                    let limit = reader.integer(value, at: "budgets.monthlyCharacters.\(name)", range: 0...1_000_000_000_000)
                else { continue }
                budgets.monthlyCharacters[tier] = limit
            }
        }
        if let node = map["pricePerMillion"],
            let prices = reader.mapping(
                node, at: "budgets.pricePerMillion", allowed: PricingTier.allCases.filter { $0 != .local }.map(\.rawValue))
        {
            for (name, value) in prices {
                guard let tier = PricingTier(rawValue: name),
                    let price = reader.number(value, at: "budgets.pricePerMillion.\(name)", range: 0...1_000_000)
                else { continue }
                budgets.pricePerMillion[tier] = price
            }
        }
    }

    /// `maps.source`: a URL template or a local MBTiles extract, and how to fetch politely.
    static func readTileSource(_ map: [String: Node], base: URL, reader: inout YAMLReader) -> TileSource? {
        let path = "maps.source"
        let template = reader.string(map["url"], at: "\(path).url")
        let extract = reader.string(map["mbtiles"], at: "\(path).mbtiles")
        var format: TileFormat?
        if map["format"] != nil {
            guard let chosen = reader.choice(map["format"], at: "\(path).format", as: TileFormat.self) else { return nil }
            format = chosen
        }
        let location: TileSource.Location
        switch (template, extract) {
        case (let template?, nil):
            if let problem = tileTemplateProblem(template) {
                reader.error("\(path).url", problem)
                return nil
            }
            location = .url(template)
            if format == nil {
                let probe = template.replacingOccurrences(of: "{z}", with: "0").replacingOccurrences(of: "{x}", with: "0")
                    .replacingOccurrences(of: "{y}", with: "0")
                format = URLComponents(string: probe).flatMap { TileFormat(pathExtension: ($0.path as NSString).pathExtension) }
                if format == nil {
                    reader.error(
                        "\(path).format",
                        "the URL does not end in .png, .jpg, .webp or .pbf; name the tiles' format (png, jpg, webp or pbf)")
                    return nil
                }
            }
        case (nil, let extract?):
            let file = resolve(extract, against: base)
            guard FileManager.default.isReadableFile(atPath: file.path) else {
                reader.error("\(path).mbtiles", "\(file.path) is not a readable file")
                return nil
            }
            location = .mbtiles(file)
            // Opened and its tables checked now, so that a bad extract is a configuration error naming it (the error names the path once).
            do {
                try MBTilesExtract.check(file)
                if format == nil { format = try MBTilesExtract.format(of: file) }
            } catch {
                reader.error("\(path).mbtiles", "\(error)")
                return nil
            }
        case (nil, nil):
            reader.error(path, "name the tiles' url (an XYZ template) or a local mbtiles extract")
            return nil
        case (.some, .some):
            reader.error(path, "give url or mbtiles, not both")
            return nil
        }
        guard let format else { return nil }
        var source = TileSource(location: location, format: format)
        if let name = reader.string(map["apiKeyEnv"], at: "\(path).apiKeyEnv") {
            if isEnvironmentName(name) { source.apiKeyEnv = name } else { reader.error("\(path).apiKeyEnv", notAnEnvironmentName) }
        }
        if let name = reader.string(map["apiKeyParam"], at: "\(path).apiKeyParam") {
            if isToken(name) {
                source.apiKeyParam = name
            } else {
                reader.error("\(path).apiKeyParam", "'\(name)' is not a query parameter name")
            }
        }
        if let name = reader.string(map["apiKeyHeader"], at: "\(path).apiKeyHeader") {
            if isToken(name) {
                source.apiKeyHeader = name
            } else {
                reader.error("\(path).apiKeyHeader", "'\(name)' is not an HTTP header name")
            }
        }
        if case .url(let template) = location, source.apiKeyEnv != nil, source.apiKeyHeader == nil,
            URLComponents(string: template)?.queryItems?.contains(where: { $0.name == source.apiKeyParam }) == true
        {
            reader.error(
                "\(path).url",
                "the template already has a '\(source.apiKeyParam)' parameter; the key goes in the variable apiKeyEnv names, never in the file"
            )
        }
        if let text = reader.string(map["attribution"], at: "\(path).attribution") {
            if text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control || $0.properties.generalCategory == .format }
            ) {
                reader.error("\(path).attribution", "control and format characters are not allowed")
            } else {
                source.attribution = text
            }
        }
        if let text = reader.string(map["userAgent"], at: "\(path).userAgent") {
            if text.isEmpty || text.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value >= 0x7F }) {
                reader.error("\(path).userAgent", "give printable ASCII, e.g. \"tourpack (content@example.com)\"")
            } else {
                source.userAgent = text
            }
        }
        source.concurrency = reader.integer(map["concurrency"], at: "\(path).concurrency", range: 1...64) ?? source.concurrency
        source.requestsPerSecond =
            reader.number(map["requestsPerSecond"], at: "\(path).requestsPerSecond", range: 0...10_000) ?? source.requestsPerSecond
        if let name = reader.string(map["name"], at: "\(path).name") {
            if name.isEmpty || name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
                reader.error("\(path).name", "give a short name for the tiles, e.g. outdoors-2026")
            } else {
                source.name = name
            }
        }
        source.maxAgeDays = reader.integer(map["maxAgeDays"], at: "\(path).maxAgeDays", range: 1...3650) ?? source.maxAgeDays
        return source
    }

    // MARK: Checks

    /// Why a tile URL template is unusable, or nil.
    static func tileTemplateProblem(_ template: String) -> String? {
        for placeholder in ["{z}", "{x}", "{y}"] where !template.contains(placeholder) {
            return "the template has no \(placeholder); it needs {z}, {x} and {y}"
        }
        let probe = template.replacingOccurrences(of: "{z}", with: "0").replacingOccurrences(of: "{x}", with: "0")
            .replacingOccurrences(of: "{y}", with: "0")
        guard let components = URLComponents(string: probe), let scheme = components.scheme?.lowercased(),
            scheme == "http" || scheme == "https", let host = components.host, !host.isEmpty
        else {
            return "not an http(s) URL template like https://tiles.example.com/{z}/{x}/{y}.png"
        }
        if components.user != nil || components.password != nil {
            return "credentials in the URL are not allowed; put the key in the variable named by apiKeyEnv"
        }
        if probe.contains("{") || probe.contains("}") {
            return "only {z}, {x} and {y} may be placeholders"
        }
        return nil
    }

    /// An RFC 9110 token: a header or parameter name.
    static func isToken(_ name: String) -> Bool {
        !name.isEmpty
            && name.unicodeScalars.allSatisfy {
                $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || "!#$%&'*+-.^_`|~".unicodeScalars.contains($0))
            }
    }

    /// Why an endpoint is unusable, or nil. Credentials in the URL are refused
    /// because URLs end up in logs; keys belong in the environment.
    static func endpointProblem(_ endpoint: String) -> String? {
        guard let components = URLComponents(string: endpoint), let scheme = components.scheme?.lowercased(),
            scheme == "http" || scheme == "https", let host = components.host, !host.isEmpty
        else {
            return "'\(endpoint)' is not an http(s) base URL like http://127.0.0.1:8787"
        }
        if components.user != nil || components.password != nil {
            return "credentials in the endpoint URL are not allowed; put the key in the variable named by apiKeyEnv"
        }
        if components.query != nil || components.fragment != nil {
            return "the endpoint is a base URL and takes no query or fragment (an API key never goes in a URL)"
        }
        return nil
    }

    /// Whether `name` is an environment variable name as `apiKeyEnv` takes
    /// it: `[A-Z_][A-Z0-9_]*`, at most 64 characters. Uppercase only, and
    /// short, so that an API key pasted in by mistake (mixed case, dashes,
    /// or long) is refused rather than taken for a name and printed.
    static func isEnvironmentName(_ name: String) -> Bool {
        let scalars = name.unicodeScalars
        guard let first = scalars.first, scalars.count <= 64, !("0"..."9").contains(first) else { return false }
        return scalars.allSatisfy { $0 == "_" || ("A"..."Z").contains($0) || ("0"..."9").contains($0) }
    }

    /// The error for an `apiKeyEnv` that is not a variable name. It never
    /// quotes the value: that may be the key itself.
    static let notAnEnvironmentName =
        "this is not an environment variable name (A-Z, 0-9 and _, not starting with a digit, at most 64 characters); give the variable's name, not the key"

    static func resolve(_ path: String, against base: URL) -> URL {
        let expanded = path.hasPrefix("~/") ? FileManager.default.homeDirectoryForCurrentUser.path + path.dropFirst(1) : path
        if expanded.hasPrefix("/") { return URL(fileURLWithPath: expanded).standardizedFileURL }
        let folder = URL(fileURLWithPath: base.path, isDirectory: true)
        return URL(fileURLWithPath: expanded, relativeTo: folder).standardizedFileURL
    }

    static func isInside(_ child: URL, _ parent: URL) -> Bool {
        let c = child.standardizedFileURL.path, p = parent.standardizedFileURL.path
        return c == p || c.hasPrefix(p.hasSuffix("/") ? p : p + "/")
    }

    /// `loudness: off`, or `{targetLUFS, truePeakDBTP}` (either may be left
    /// to its default). A target above -5 LUFS or a ceiling above 0 dBTP
    /// would be distortion, not loudness; one below -40 LUFS is inaudible
    /// in a car or on a trail.
    static func loudnessTarget(_ node: Node, reader: inout YAMLReader) -> LoudnessTarget? {
        if case .scalar(let scalar) = node, ["off", "false"].contains(scalar.string.lowercased()) { return nil }
        var target = LoudnessTarget.standard
        guard case .mapping = node else {
            reader.error("loudness", "expected off or a mapping with targetLUFS and truePeakDBTP, found \(YAMLReader.kind(node))")
            return target
        }
        guard let map = reader.mapping(node, at: "loudness", allowed: ["targetLUFS", "truePeakDBTP"]) else { return target }
        target.integratedLUFS = reader.number(map["targetLUFS"], at: "loudness.targetLUFS", range: -40 ... -5) ?? target.integratedLUFS
        target.truePeakDBTP = reader.number(map["truePeakDBTP"], at: "loudness.truePeakDBTP", range: -9...0) ?? target.truePeakDBTP
        return target
    }

}

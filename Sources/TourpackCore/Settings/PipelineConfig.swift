package import Foundation

/// A pipeline, fully resolved: every default applied, every path absolute,
/// every value range-checked. Produced by `PipelineLoader` from
/// `pipelines/*.yaml`, the voice preset it names, and the command-line overrides.
package struct PipelineConfig: Sendable, Hashable {
    /// The YAML file this came from; relative paths were resolved against its folder.
    package var sourceFile: URL
    package var version: Int
    /// The tour globs, absolute.
    package var tourGlobs: [String]
    package var voiceFile: URL?
    package var voice: VoicePreset
    /// The formats this configuration builds, at `bitrate(for:)`, offered as
    /// `quality`. A pipeline with a quality ladder has one configuration per
    /// quality (`qualityRoots()`); this is the first.
    package var formats: [AudioFormat]
    /// Every variant the pipeline's `formats` asks for, in its order: the
    /// quality ladder. Without one, each format at the contract's rate, high.
    package var ladder: [AudioVariant]
    /// The quality this configuration's packages are offered under.
    package var quality: AudioQuality
    /// The pipeline's `output`: the root of the ladder's first quality, and
    /// where the others' roots are named from (`qualityRoots()`).
    package var ladderOutput: URL
    package var tts: TTSSettings
    /// The app's Documents root. Holds only what ships.
    package var output: URL
    /// Cache index, quota ledger, build records. Never under `output`.
    package var state: URL
    /// What `state:` names beyond the local folder (object storage,
    /// PostgreSQL, scratch); all nil on one machine.
    package var shared: SharedStateSettings
    package var budgets: Budgets
    package var maps: MapSettings
    package var chunking: ChunkingSettings
    package var audio: AudioSettings
    /// Pronunciation lexicons, the voice's first, then the pipeline's; their
    /// lexemes rewrite narration before it is chunked.
    package var lexicons: [Lexicon]
    /// Where `tourpack publish` puts the packages and their catalogue; nil
    /// without a `publish:` section.
    package var publish: PublishSettings?

    package init(
        sourceFile: URL, version: Int, tourGlobs: [String], voiceFile: URL?, voice: VoicePreset,
        formats: [AudioFormat], tts: TTSSettings, output: URL, state: URL, budgets: Budgets,
        maps: MapSettings, chunking: ChunkingSettings, audio: AudioSettings, lexicons: [Lexicon] = [],
        shared: SharedStateSettings = .init(), publish: PublishSettings? = nil, ladder: [AudioVariant]? = nil
    ) {
        self.sourceFile = sourceFile
        self.version = version
        self.tourGlobs = tourGlobs
        self.voiceFile = voiceFile
        self.voice = voice
        self.formats = formats
        self.ladder = ladder ?? formats.map { AudioVariant($0) }
        self.quality = .high
        self.ladderOutput = output
        self.tts = tts
        self.output = output
        self.state = state
        self.budgets = budgets
        self.maps = maps
        self.chunking = chunking
        self.audio = audio
        self.lexicons = lexicons
        self.shared = shared
        self.publish = publish
    }

    /// How the provider bills this pipeline's requests.
    package var billing: BillingRule { BillingRule(api: tts.api, voice: voice, timings: audio.captions != .off) }

    /// The chunker's limit for this endpoint and voice (ElevenLabs: the model's).
    package var requestLimit: ChunkLimit { tts.api.requestLimit(for: voice) }

    /// How lexemes are written for this endpoint and voice.
    package var pronunciationDialect: PronunciationDialect { PronunciationDialect(api: tts.api, voice: voice) }
}

/// How to reach the TTS endpoint. The pipeline file names the environment
/// variable that holds the key (`apiKeyEnv`); the key is read from it once,
/// when the pipeline is loaded, into `apiKey`, which never prints.
package struct TTSSettings: Sendable, Hashable {
    package var api: TTSAPI
    /// Base URL; Google: `POST {endpoint}/v1/text:synthesize`.
    package var endpoint: String
    package var apiKeyEnv: String?
    /// The key `apiKeyEnv` named, as the environment held it at load time; nil when unset.
    package var apiKey: Secret?
    /// Requests in flight at most.
    package var concurrency: Int
    /// Requests started per minute at most, across all concurrent work.
    package var requestsPerMinute: Int
    /// Total time for one HTTP request.
    package var timeoutSeconds: Double
    /// Tries per chunk, the first included.
    package var maxAttempts: Int
    /// The first backoff; each retry doubles it, with full jitter.
    package var initialBackoffSeconds: Double
    package var maxBackoffSeconds: Double
    /// The sample rate requested from the endpoint (LINEAR16).
    package var sampleRateHz: Int
    /// OpenAI dialect only: the `model` field.
    package var model: String?
    /// Polly only: the AWS region the SigV4 signature is scoped to (`eu-central-1`).
    package var region: String?
    /// Polly only: the variables holding the access key ID and the secret key.
    package var accessKeyEnv: String?
    package var secretKeyEnv: String?
    /// The pair those variables held at load time; nil when unset.
    package var accessKey: Secret?
    package var secretKey: Secret?

    package init(
        api: TTSAPI, endpoint: String = "http://127.0.0.1:8787", apiKeyEnv: String? = nil,
        concurrency: Int = 8, requestsPerMinute: Int = 1000, timeoutSeconds: Double = 30,
        maxAttempts: Int = 5, initialBackoffSeconds: Double = 0.5, maxBackoffSeconds: Double = 30,
        sampleRateHz: Int = 24_000, model: String? = nil
    ) {
        self.api = api
        self.endpoint = endpoint
        self.apiKeyEnv = apiKeyEnv
        self.concurrency = concurrency
        self.requestsPerMinute = requestsPerMinute
        self.timeoutSeconds = timeoutSeconds
        self.maxAttempts = maxAttempts
        self.initialBackoffSeconds = initialBackoffSeconds
        self.maxBackoffSeconds = maxBackoffSeconds
        self.sampleRateHz = sampleRateHz
        self.model = model
    }

    /// The rate asked of the endpoint: the pipeline's, or the nearest the
    /// provider offers as uncompressed PCM (`SpeechProvider.offeredSampleRates`:
    /// Polly's 8000 or 16000, Azure's and ElevenLabs' raw PCM rates). The
    /// chunk recorder resamples to `sampleRateHz`.
    package var requestedSampleRateHz: Int {
        guard let offered = api.provider.offeredSampleRates, let highest = offered.last else { return sampleRateHz }
        return offered.first { $0 >= sampleRateHz } ?? highest
    }
}

package struct Budgets: Sendable, Hashable {
    package var cacheMaxMB: Int
    package var synthesisCacheMaxMB: Int
    /// The map tile cache (`<state>/tiles`), least recently used first.
    package var tileCacheMaxMB: Int
    package var audioMaxAgeDays: Int
    package var packageMaxAgeDays: Int
    /// Monthly units per tier, in the provider's unit (`BillingRule.unit`:
    /// characters, or ElevenLabs' credits); a tier not listed here (and `local`) is unlimited.
    package var monthlyCharacters: [PricingTier: Int]
    /// Money per million billed units, per tier (`budgets.pricePerMillion`),
    /// for `plan`'s cost estimate; empty: no estimate.
    package var pricePerMillion: [PricingTier: Double] = [:]

    package static let defaultMonthlyCharacters: [PricingTier: Int] = [
        .standard: 4_000_000, .wavenet: 1_000_000, .neural2: 1_000_000,
    ]

    package init(
        cacheMaxMB: Int = 500, synthesisCacheMaxMB: Int = 2000, tileCacheMaxMB: Int = 2000, audioMaxAgeDays: Int = 30,
        packageMaxAgeDays: Int = 90, monthlyCharacters: [PricingTier: Int] = Budgets.defaultMonthlyCharacters
    ) {
        self.cacheMaxMB = cacheMaxMB
        self.synthesisCacheMaxMB = synthesisCacheMaxMB
        self.tileCacheMaxMB = tileCacheMaxMB
        self.audioMaxAgeDays = audioMaxAgeDays
        self.packageMaxAgeDays = packageMaxAgeDays
        self.monthlyCharacters = monthlyCharacters
    }

    /// The monthly quota of a tier, or nil when it is unlimited.
    package func monthlyQuota(for tier: PricingTier) -> Int? {
        tier == .local ? nil : monthlyCharacters[tier]
    }

    /// `cacheMaxMB` in bytes: the AudioCache budget that the plan, the
    /// eviction after a build, `cache` and `validate` all hold the root to.
    package var cacheMaxBytes: Int64 { Self.bytes(megabytes: cacheMaxMB) }
    /// `synthesisCacheMaxMB` in bytes: what the synthesis cache is evicted to fit.
    package var synthesisCacheMaxBytes: Int64 { Self.bytes(megabytes: synthesisCacheMaxMB) }
    /// `tileCacheMaxMB` in bytes: what the map tile cache is evicted to fit.
    package var tileCacheMaxBytes: Int64 { Self.bytes(megabytes: tileCacheMaxMB) }

    /// Megabytes in bytes. A budget's MB are MiB (1,048,576 bytes) everywhere
    /// in tourpack; this is the one place that says so.
    package static func bytes(megabytes: Int) -> Int64 { Int64(megabytes) * 1_048_576 }
}

package struct MapSettings: Sendable, Hashable {
    package var minZoom: Int
    package var maxZoom: Int
    package var bufferMiles: Double
    package var tileKB: Int
    package var selection: TileSelection
    /// A plan with more tiles than this in one tour is refused before anything is fetched (exit 3).
    package var maxTiles: Int
    /// Where the tiles come from; nil: packages carry the coverage only.
    package var source: TileSource?

    package init(
        minZoom: Int = 12, maxZoom: Int = 16, bufferMiles: Double = 5, tileKB: Int = 15,
        selection: TileSelection = .bbox, maxTiles: Int = 60_000, source: TileSource? = nil
    ) {
        self.minZoom = minZoom
        self.maxZoom = maxZoom
        self.bufferMiles = bufferMiles
        self.tileKB = tileKB
        self.selection = selection
        self.maxTiles = maxTiles
        self.source = source
    }
}

package struct ChunkingSettings: Sendable, Hashable {
    /// Bytes (Google) or characters (OpenAI) kept free under the endpoint's limit.
    package var headroom: Int
    package init(headroom: Int = 100) { self.headroom = headroom }
}

package struct AudioSettings: Sendable, Hashable {
    /// The pause put between a phase's chunks when they are joined.
    package var pauseMilliseconds: Int
    /// Rates the pipeline names per format (`audio.sampleRateHz`); the others
    /// take `AudioFormat.defaultSampleRate(endpointRate:)`.
    package var sampleRates: [AudioFormat: Int]
    /// Bit rates other than the contract's, per format, for the quality
    /// being built (a rung of the ladder); the others take `AudioFormat.bitrateKbps`.
    package var bitrates: [AudioFormat: Int] = [:]
    /// What every file is normalized to (the pipeline's top-level
    /// `loudness`); nil with `loudness: off`.
    package var loudness: LoudnessTarget?
    /// Whether each narration gets a WebVTT file of its sentences (the
    /// pipeline's top-level `captions`; on by default).
    package var captions: CaptionsSetting = .webvtt

    package init(pauseMilliseconds: Int = 350, sampleRates: [AudioFormat: Int] = [:], loudness: LoudnessTarget? = .standard) {
        self.pauseMilliseconds = pauseMilliseconds
        self.sampleRates = sampleRates
        self.loudness = loudness
    }
}

extension PipelineConfig {
    /// The rate `format`'s files are encoded at: the pipeline's choice, or
    /// the format's default for the endpoint's rate.
    package func sampleRate(for format: AudioFormat) -> Int {
        audio.sampleRates[format] ?? format.defaultSampleRate(endpointRate: tts.sampleRateHz)
    }

    /// The bit rate `format`'s files are encoded at in this configuration.
    package func bitrate(for format: AudioFormat) -> Int {
        audio.bitrates[format] ?? format.bitrateKbps
    }

    /// One configuration per quality of the ladder, in the order the
    /// pipeline first names each. The first builds into `output`, every other
    /// into a Documents root of its own beside it, `<output>-<quality>`:
    /// two rates of one format share the app's file names
    /// (`<poiId>_<Phase>.<ext>`), so they cannot share a root, and each root
    /// holds exactly what a device that chose that quality holds.
    package func qualityRoots() -> [PipelineConfig] {
        var qualities: [AudioQuality] = []
        for variant in ladder where !qualities.contains(variant.quality) { qualities.append(variant.quality) }
        return qualities.enumerated().map { index, quality in
            var config = self
            let rungs = ladder.filter { $0.quality == quality }
            config.formats = rungs.map(\.format)
            config.audio.bitrates = Dictionary(
                uniqueKeysWithValues: rungs.filter { !$0.isContractRate }.map { ($0.format, $0.bitrateKbps) })
            config.quality = quality
            config.output = index == 0 ? ladderOutput : Self.outputRoot(ladderOutput, quality: quality)
            return config
        }
    }

    /// `<output>-<quality>`: where a quality other than the ladder's first is built.
    private static func outputRoot(_ output: URL, quality: AudioQuality) -> URL {
        let base = output.standardizedFileURL
        return base.deletingLastPathComponent().appendingPathComponent("\(base.lastPathComponent)-\(quality.rawValue)")
    }

    /// The loudness files are made to; nil with `loudness: off`.
    package var loudnessTarget: LoudnessTarget? { audio.loudness }
}

import Crypto
public import Foundation

/// `OfflineTours/<packageId>/package.json`: everything the app needs to
/// play a tour offline (the contract's "package.json"), and what `validate` reads back.
///
/// Encoding is canonical (`encoded()`): sorted keys, POIs in tour order,
/// audio by POI then phase, numbers in one fixed form, so the same inputs
/// give the same bytes apart from `createdAt` and `expiresAt`.
/// `schemas/package.schema.json` describes the result field by field.
public struct PackageManifest: Sendable, Hashable, Decodable {
    /// The version of this layout of package.json; bump it on any incompatible change.
    public static let currentSchemaVersion = 1

    public var schemaVersion: Int
    /// `PackageID.make(tourID:voice:format:)`, lowercase.
    public var packageId: String
    public var tourId: String
    public var tourName: String
    public var tourVersion: Int
    /// The tour's BCP-47 language, e.g. `en-US`.
    public var language: String
    /// When the package was built, UTC, whole seconds.
    public var createdAt: Date
    /// `createdAt` plus the package maximum age (90 days by default); `validate` fails the package after it.
    public var expiresAt: Date
    /// The app's "update available" signal: see `computeContentHash()`.
    public var contentHash: String
    /// The sum of the `audio` entries' `sizeBytes`: what the package's audio
    /// takes on the device. package.json itself and map tiles are not counted
    /// (the tiles' estimate is `mapTiles.estimatedBytes`).
    public var sizeBytes: Int64
    public var voice: Voice
    public var route: RouteEntry
    public var pois: [POIEntry]
    public var audio: [AudioEntry]
    public var mapTiles: MapCoverage
    /// The loudness every file was normalized to; nil with `loudness: off`.
    public var loudness: Loudness?
    /// The quality the package is offered as, when it is not `high`: a
    /// lower rung of the pipeline's quality ladder.
    public var quality: AudioQuality?

    /// The pipeline's loudness target, as package.json states it.
    public struct Loudness: Sendable, Hashable, Codable {
        public var targetLUFS: Double
        public var truePeakDBTP: Double

        package init(targetLUFS: Double, truePeakDBTP: Double) {
            self.targetLUFS = targetLUFS
            self.truePeakDBTP = truePeakDBTP
        }
    }

    public struct Voice: Sendable, Hashable, Codable {
        public var provider: String
        public var name: String
        public var languageCode: String
        public var tier: PricingTier
        public var speakingRate: Double
        public var pitch: Double

        package init(provider: String, name: String, languageCode: String, tier: PricingTier, speakingRate: Double, pitch: Double) {
            self.provider = provider
            self.name = name
            self.languageCode = languageCode
            self.tier = tier
            self.speakingRate = speakingRate
            self.pitch = pitch
        }
    }

    public struct RouteEntry: Sendable, Hashable, Codable {
        public var waypoints: [Waypoint]
        public var segments: [Segment]

        package init(waypoints: [Waypoint], segments: [Segment]) {
            self.waypoints = waypoints
            self.segments = segments
        }
    }

    /// A route point; `name` is left out of the JSON when the tour has none.
    public struct Waypoint: Sendable, Hashable, Codable {
        public var latitude: Double
        public var longitude: Double
        public var name: String?

        package init(latitude: Double, longitude: Double, name: String?) {
            self.latitude = latitude
            self.longitude = longitude
            self.name = name
        }
    }

    public struct Segment: Sendable, Hashable, Codable {
        public var from: Int
        public var to: Int
        public var distanceMeters: Double
        public var durationSeconds: Double

        package init(from: Int, to: Int, distanceMeters: Double, durationSeconds: Double) {
            self.from = from
            self.to = to
            self.distanceMeters = distanceMeters
            self.durationSeconds = durationSeconds
        }
    }

    public struct POIEntry: Sendable, Hashable, Codable {
        public var id: String
        public var name: String
        public var location: Coordinate
        public var triggerRadiusMeters: Double

        package init(id: String, name: String, location: Coordinate, triggerRadiusMeters: Double) {
            self.id = id
            self.name = name
            self.location = location
            self.triggerRadiusMeters = triggerRadiusMeters
        }
    }

    /// One audio file. `phase` is the tour JSON key (`approaching`,
    /// `detailed`, `guidedTour`); the file name uses the label (`Guided Tour`).
    public struct AudioEntry: Sendable, Hashable, Codable {
        public var poiId: String
        public var phase: Phase
        /// Relative to the output root, e.g. `AudioCache/<tourId>/<poiId>_Guided Tour.m4a`.
        public var path: String
        public var format: AudioFormat
        public var codec: String
        /// The format's nominal rate, the one the encoder targets (the contract's
        /// table). What a file measures differs a little (AAC's rate control,
        /// container overhead on a short file); `validate` checks that within a tolerance.
        public var bitrateKbps: Int
        public var sampleRateHz: Int
        public var channels: Int
        /// Rounded to the millisecond, so float noise in a measurement never changes the bytes.
        public var durationSeconds: Double
        public var sizeBytes: Int64
        /// Lowercase hex SHA-256 of the file.
        public var sha256: String
        public var characters: Int
        /// The file's measured loudness and how it was levelled, to 0.01 dB;
        /// nil only in packages from before it was recorded.
        public var loudness: AudioLoudness?
        /// The narration's WebVTT captions; nil with `captions: off` and in
        /// packages from before captions.
        public var captions: CaptionsEntry?

        package init(
            poiId: String, phase: Phase, path: String, format: AudioFormat, codec: String, bitrateKbps: Int, sampleRateHz: Int,
            channels: Int, durationSeconds: Double, sizeBytes: Int64, sha256: String, characters: Int, loudness: AudioLoudness?,
            captions: CaptionsEntry?
        ) {
            self.poiId = poiId
            self.phase = phase
            self.path = path
            self.format = format
            self.codec = codec
            self.bitrateKbps = bitrateKbps
            self.sampleRateHz = sampleRateHz
            self.channels = channels
            self.durationSeconds = durationSeconds
            self.sizeBytes = sizeBytes
            self.sha256 = sha256
            self.characters = characters
            self.loudness = loudness
            self.captions = captions
        }
    }

    /// A narration's caption file, in the package's own folder.
    public struct CaptionsEntry: Sendable, Hashable, Codable {
        /// Relative to the output root: `OfflineTours/<packageId>/captions/<poiId>_<Phase>.vtt`.
        public var path: String
        public var sha256: String
        public var sizeBytes: Int64
        /// One cue per sentence.
        public var cues: Int
        /// `provider` when the voice reported every sentence's start, `estimated` otherwise.
        public var timing: CaptionTiming

        package init(path: String, sha256: String, sizeBytes: Int64, cues: Int, timing: CaptionTiming) {
            self.path = path
            self.sha256 = sha256
            self.sizeBytes = sizeBytes
            self.cues = cues
            self.timing = timing
        }
    }

    /// Every field as given, at the current schema version; `contentHash`
    /// is worked out from the rest (`computeContentHash()`), unless it is
    /// given: a build that compares a new manifest with one it knows to be
    /// sound gives that one's hash, and hashes only when they differ.
    package init(
        packageId: String, tourId: String, tourName: String, tourVersion: Int, language: String, createdAt: Date,
        expiresAt: Date, sizeBytes: Int64, voice: Voice, route: RouteEntry, pois: [POIEntry], audio: [AudioEntry],
        mapTiles: MapCoverage, loudness: Loudness?, quality: AudioQuality?, contentHash: String? = nil
    ) {
        self.schemaVersion = PackageManifest.currentSchemaVersion
        self.packageId = packageId
        self.tourId = tourId
        self.tourName = tourName
        self.tourVersion = tourVersion
        self.language = language
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.contentHash = ""
        self.sizeBytes = sizeBytes
        self.voice = voice
        self.route = route
        self.pois = pois
        self.audio = audio
        self.mapTiles = mapTiles
        self.loudness = loudness
        self.quality = quality
        self.contentHash = contentHash ?? computeContentHash()
    }

    /// Whether the package has expired at `now`.
    public func isExpired(at now: Date) -> Bool {
        now >= expiresAt
    }
}

import Crypto
public import Foundation
public import TourpackAudio
public import TourpackCore
public import TourpackMaps

/// One finished audio file, as the store stage hands it to the manifest.
public struct PackageAudio: Sendable, Hashable {
    public var poiID: SafeID
    public var phase: Phase
    /// Measured from the file the encoder wrote (size, sha256, duration).
    public var encoded: EncodedAudio
    /// Characters billed for this phase's narration.
    public var characters: Int
    /// The narration's WebVTT captions (the same bytes in every format's
    /// package); nil with `captions: off`.
    public var captions: PackageCaptions?

    public init(poiID: SafeID, phase: Phase, encoded: EncodedAudio, characters: Int, captions: PackageCaptions? = nil) {
        self.poiID = poiID
        self.phase = phase
        self.encoded = encoded
        self.characters = characters
        self.captions = captions
    }
}

/// One narration's caption file as the store stage hands it to the
/// manifest: what package.json says of it.
public struct PackageCaptions: Sendable, Hashable {
    /// Lowercase hex SHA-256 of the file's bytes.
    public var sha256: String
    public var sizeBytes: Int64
    public var cues: Int
    public var timing: CaptionTiming

    public init(sha256: String, sizeBytes: Int64, cues: Int, timing: CaptionTiming) {
        self.sha256 = sha256
        self.sizeBytes = sizeBytes
        self.cues = cues
        self.timing = timing
    }

    /// The facts of a WebVTT file's `bytes`.
    public init(bytes: [UInt8], cues: Int, timing: CaptionTiming) {
        self.init(sha256: SHA256.hash(data: bytes).lowercaseHex, sizeBytes: Int64(bytes.count), cues: cues, timing: timing)
    }
}

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
    }

    public struct Voice: Sendable, Hashable, Codable {
        public var provider: String
        public var name: String
        public var languageCode: String
        public var tier: PricingTier
        public var speakingRate: Double
        public var pitch: Double
    }

    public struct RouteEntry: Sendable, Hashable, Codable {
        public var waypoints: [Waypoint]
        public var segments: [Segment]
    }

    /// A route point; `name` is left out of the JSON when the tour has none.
    public struct Waypoint: Sendable, Hashable, Codable {
        public var latitude: Double
        public var longitude: Double
        public var name: String?
    }

    public struct Segment: Sendable, Hashable, Codable {
        public var from: Int
        public var to: Int
        public var distanceMeters: Double
        public var durationSeconds: Double
    }

    public struct POIEntry: Sendable, Hashable, Codable {
        public var id: String
        public var name: String
        public var location: Coordinate
        public var triggerRadiusMeters: Double
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
    }

    /// Builds the manifest of one tour package: one voice, one format.
    ///
    /// Refuses (`invalidInput`) audio that does not match the tour exactly:
    /// an unknown POI or phase, a duplicate, another format, or a narration of
    /// the tour with no audio. A package.json is the promise that every file
    /// is there, so an incomplete one is never built.
    ///
    /// `bitrateKbps` is the rate the files were encoded at (nil: the
    /// format's contract rate) and `quality` what the package is offered as;
    /// both come from the pipeline's `formats`.
    public init(
        tour: Tour, voice: VoicePreset, format: AudioFormat, bitrateKbps: Int? = nil, quality: AudioQuality = .high,
        audio: [PackageAudio], mapTiles: MapCoverage, createdAt: Date, maxAgeDays: Int, loudness: LoudnessTarget? = nil
    ) throws {
        let bitrate = bitrateKbps ?? format.bitrateKbps
        let packageID = PackageID.make(tourID: tour.id, voice: voice, format: format, bitrateKbps: bitrate)
        let label = "package \(packageID) (tour \(tour.id), \(format.rawValue))"
        var byItem: [String: PackageAudio] = [:]
        for item in audio {
            let key = "\(item.poiID.value)_\(item.phase.rawValue)"
            guard byItem[key] == nil else {
                throw TourpackError.invalidInput("\(label): two audio files for POI \(item.poiID) \(item.phase.rawValue)")
            }
            guard item.encoded.format == format else {
                throw TourpackError.invalidInput(
                    "\(label): POI \(item.poiID) \(item.phase.rawValue) is \(item.encoded.format.rawValue), expected \(format.rawValue)")
            }
            guard let poi = tour.pois.first(where: { $0.id == item.poiID }), poi.narrations[item.phase] != nil else {
                throw TourpackError.invalidInput("\(label): POI \(item.poiID) \(item.phase.rawValue) is not a narration of the tour")
            }
            byItem[key] = item
        }
        var entries: [AudioEntry] = []
        for poi in tour.pois {
            for phase in poi.phases {
                guard let item = byItem["\(poi.id.value)_\(phase.rawValue)"] else {
                    throw TourpackError.invalidInput("\(label): no audio for POI \(poi.id) \(phase.rawValue)")
                }
                let encoded = item.encoded
                entries.append(
                    AudioEntry(
                        poiId: poi.id.value, phase: phase,
                        path: Layout.audioRelativePath(tourID: tour.id, poiID: poi.id, phase: phase, format: format),
                        format: format, codec: encoded.codec, bitrateKbps: bitrate,
                        sampleRateHz: encoded.sampleRateHz, channels: encoded.channels,
                        durationSeconds: (encoded.durationSeconds * 1000).rounded() / 1000,
                        sizeBytes: encoded.sizeBytes, sha256: encoded.sha256.lowercased(), characters: item.characters,
                        loudness: encoded.loudness?.rounded,
                        captions: item.captions.map {
                            CaptionsEntry(
                                path: Layout.captionsRelativePath(packageID: packageID, poiID: poi.id, phase: phase), sha256: $0.sha256,
                                sizeBytes: $0.sizeBytes, cues: $0.cues, timing: $0.timing)
                        }
                    ))
            }
        }
        let created = Date(timeIntervalSince1970: createdAt.timeIntervalSince1970.rounded(.down))
        self.schemaVersion = PackageManifest.currentSchemaVersion
        self.packageId = packageID.value
        self.tourId = tour.id.value
        self.tourName = tour.name
        self.tourVersion = tour.version
        self.language = tour.language
        self.createdAt = created
        self.expiresAt = created.addingTimeInterval(Double(maxAgeDays) * 86_400)
        self.sizeBytes = entries.reduce(0) { $0 + $1.sizeBytes }
        self.voice = Voice(
            provider: voice.provider, name: voice.name, languageCode: voice.languageCode,
            tier: voice.tier, speakingRate: voice.speakingRate, pitch: voice.pitch
        )
        self.route = RouteEntry(
            waypoints: tour.route.waypoints.map {
                Waypoint(latitude: $0.coordinate.latitude, longitude: $0.coordinate.longitude, name: $0.name)
            },
            segments: tour.route.segments.map {
                Segment(from: $0.from, to: $0.to, distanceMeters: $0.distanceMeters, durationSeconds: $0.durationSeconds)
            }
        )
        self.pois = tour.pois.map {
            POIEntry(id: $0.id.value, name: $0.name, location: $0.location, triggerRadiusMeters: $0.triggerRadiusMeters)
        }
        self.audio = entries
        self.mapTiles = mapTiles
        self.loudness = loudness.map { Loudness(targetLUFS: $0.integratedLUFS, truePeakDBTP: $0.truePeakDBTP) }
        self.contentHash = ""
        self.quality = quality == .high ? nil : quality
        self.contentHash = computeContentHash()
    }

    /// Whether the package has expired at `now`.
    public func isExpired(at now: Date) -> Bool {
        now >= expiresAt
    }
}

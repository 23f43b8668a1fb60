import Crypto
package import Foundation
package import TourpackAudio
package import TourpackCore
import TourpackMaps
import TourpackPlan

/// One finished audio file, as the store stage hands it to the manifest.
package struct PackageAudio: Sendable, Hashable {
    package var poiID: SafeID
    package var phase: Phase
    /// Measured from the file the encoder wrote (size, sha256, duration).
    package var encoded: EncodedAudio
    /// Characters billed for this phase's narration.
    package var characters: Int
    /// The narration's WebVTT captions (the same bytes in every format's
    /// package); nil with `captions: off`.
    package var captions: PackageCaptions?

    package init(poiID: SafeID, phase: Phase, encoded: EncodedAudio, characters: Int, captions: PackageCaptions? = nil) {
        self.poiID = poiID
        self.phase = phase
        self.encoded = encoded
        self.characters = characters
        self.captions = captions
    }
}

/// One narration's caption file as the store stage hands it to the
/// manifest: what package.json says of it.
package struct PackageCaptions: Sendable, Hashable {
    /// Lowercase hex SHA-256 of the file's bytes.
    package var sha256: String
    package var sizeBytes: Int64
    package var cues: Int
    package var timing: CaptionTiming

    package init(sha256: String, sizeBytes: Int64, cues: Int, timing: CaptionTiming) {
        self.sha256 = sha256
        self.sizeBytes = sizeBytes
        self.cues = cues
        self.timing = timing
    }

    /// The facts of a WebVTT file's `bytes`.
    package init(bytes: [UInt8], cues: Int, timing: CaptionTiming) {
        self.init(sha256: SHA256.hash(data: bytes).lowercaseHex, sizeBytes: Int64(bytes.count), cues: cues, timing: timing)
    }
}

extension PackageManifest {
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
    package init(
        tour: Tour, voice: VoicePreset, format: AudioFormat, bitrateKbps: Int? = nil, quality: AudioQuality = .high,
        audio: [PackageAudio], mapTiles: MapCoverage, createdAt: Date, maxAgeDays: Int, loudness: LoudnessTarget? = nil
    ) throws {
        try self.init(
            tour: tour, voice: voice, format: format, bitrateKbps: bitrateKbps, quality: quality, audio: audio, mapTiles: mapTiles,
            createdAt: createdAt, maxAgeDays: maxAgeDays, loudness: loudness, contentHash: nil)
    }

    /// The same, under `contentHash` as given (nil: worked out), for
    /// comparing with a package.json known to be sound (`TourPublisher`).
    init(
        tour: Tour, voice: VoicePreset, format: AudioFormat, bitrateKbps: Int?, quality: AudioQuality,
        audio: [PackageAudio], mapTiles: MapCoverage, createdAt: Date, maxAgeDays: Int, loudness: LoudnessTarget?,
        contentHash: String?
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
        let voiceEntry = Voice(
            provider: voice.provider, name: voice.name, languageCode: voice.languageCode,
            tier: voice.tier, speakingRate: voice.speakingRate, pitch: voice.pitch
        )
        let route = RouteEntry(
            waypoints: tour.route.waypoints.map {
                Waypoint(latitude: $0.coordinate.latitude, longitude: $0.coordinate.longitude, name: $0.name)
            },
            segments: tour.route.segments.map {
                Segment(from: $0.from, to: $0.to, distanceMeters: $0.distanceMeters, durationSeconds: $0.durationSeconds)
            }
        )
        let pois = tour.pois.map {
            POIEntry(id: $0.id.value, name: $0.name, location: $0.location, triggerRadiusMeters: $0.triggerRadiusMeters)
        }
        self.init(
            packageId: packageID.value, tourId: tour.id.value, tourName: tour.name, tourVersion: tour.version,
            language: tour.language, createdAt: created, expiresAt: created.addingTimeInterval(Double(maxAgeDays) * 86_400),
            sizeBytes: entries.reduce(0) { $0 + $1.sizeBytes }, voice: voiceEntry, route: route, pois: pois, audio: entries,
            mapTiles: mapTiles,
            loudness: loudness.map { Loudness(targetLUFS: $0.integratedLUFS, truePeakDBTP: $0.truePeakDBTP) },
            quality: quality == .high ? nil : quality, contentHash: contentHash)
    }

}

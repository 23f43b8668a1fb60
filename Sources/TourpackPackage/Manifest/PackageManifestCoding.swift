import Crypto
public import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

// package.json as bytes: canonical writing, the content hash, reading back.
extension PackageManifest {
    /// The package.json bytes: canonical pretty JSON (see `JSONValue.canonicalBytes`).
    public func encoded() -> [UInt8] {
        jsonValue().canonicalBytes(pretty: true)
    }

    /// Writes package.json atomically to `OfflineTours/<packageId>/package.json`
    /// and returns where it went. The store writes it last, after every audio file.
    @discardableResult
    public func write(into layout: Layout) throws -> StoredPath {
        guard let id = SafeID(validating: packageId), id.value == packageId else {
            throw TourpackError.invalidInput("package id \(packageId) is not a lowercase UUID")
        }
        let target = layout.manifest(packageID: id)
        try AtomicFile.write(encoded(), to: target.url)
        return target
    }

    /// Reads a package.json. Unknown keys are ignored here; `isCanonical(_:)`
    /// and the JSON Schema are the strict checks.
    public static func decode(_ bytes: [UInt8]) throws -> PackageManifest {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            guard let date = PackageManifest.parseTimestamp(text) else {
                throw DecodingError.dataCorruptedError(in: container, debugDescription: "expected YYYY-MM-DDTHH:MM:SSZ, found \(text)")
            }
            return date
        }
        return try decoder.decode(PackageManifest.self, from: Data(bytes))
    }

    /// Reads the package.json at `url`.
    public static func read(from url: URL) throws -> PackageManifest {
        let data: Data
        do { data = try Data(contentsOf: url) } catch {
            throw TourpackError.storageFailed(path: url.path, operation: "read", reason: "\(error)")
        }
        return try decode(Array(data))
    }

    /// Whether `bytes` are exactly what this manifest encodes to: no unknown
    /// key, nothing missing, nothing reformatted by hand.
    public func isCanonical(_ bytes: [UInt8]) -> Bool {
        encoded() == bytes
    }

    /// SHA-256 (lowercase hex) over the compact canonical JSON of exactly what
    /// the app plays or shows: tour ID, name, version and language; the voice;
    /// the route; the POIs; every audio entry except `characters` (path,
    /// phase, format and codec facts, duration, size and sha256, so it changes
    /// when any file's bytes change); the map tiles; and the quality, when
    /// it is not `high`.
    ///
    /// Left out, because they change without anything changing for the
    /// listener: `createdAt`, `expiresAt`, `packageId`, `schemaVersion`,
    /// `sizeBytes` (a sum of sizes already covered) and `characters`.
    /// Arrays are in their fixed order (POIs as in the tour, audio by POI then
    /// phase), so the hash never depends on the order work finished in.
    public func computeContentHash() -> String {
        var members: [(key: String, value: JSONValue)] = [
            ("tourId", .string(tourId)), ("tourName", .string(tourName)), ("tourVersion", .number(Double(tourVersion))),
            ("language", .string(language)), ("voice", voiceValue), ("route", routeValue), ("pois", poisValue),
            ("audio", .array(audio.map { $0.jsonValue(includingCharacters: false) })), ("mapTiles", mapTilesValue),
        ]
        // The quality the app shows, when a ladder names one.
        if let quality { members.append(("quality", .string(quality.rawValue))) }
        let content: JSONValue = .object(members)
        return SHA256.hash(data: content.canonicalBytes(pretty: false)).lowercaseHex
    }

    /// The whole manifest as a JSON value, in its fixed array order.
    public func jsonValue() -> JSONValue {
        var members: [(key: String, value: JSONValue)] = [
            ("schemaVersion", .number(Double(schemaVersion))), ("packageId", .string(packageId)),
            ("tourId", .string(tourId)), ("tourName", .string(tourName)), ("tourVersion", .number(Double(tourVersion))),
            ("language", .string(language)),
            ("createdAt", .string(PackageManifest.timestamp(createdAt))),
            ("expiresAt", .string(PackageManifest.timestamp(expiresAt))),
            ("contentHash", .string(contentHash)), ("sizeBytes", .number(Double(sizeBytes))),
            ("voice", voiceValue), ("route", routeValue), ("pois", poisValue),
            ("audio", .array(audio.map { $0.jsonValue(includingCharacters: true) })), ("mapTiles", mapTilesValue),
        ]
        if let quality { members.append(("quality", .string(quality.rawValue))) }
        if let loudness {
            members.append(
                ("loudness", .object([("targetLUFS", .number(loudness.targetLUFS)), ("truePeakDBTP", .number(loudness.truePeakDBTP))])))
        }
        return .object(members)
    }

    // MARK: Pieces

    private var voiceValue: JSONValue {
        .object([
            ("provider", .string(voice.provider)), ("name", .string(voice.name)), ("languageCode", .string(voice.languageCode)),
            ("tier", .string(voice.tier.rawValue)), ("speakingRate", .number(voice.speakingRate)), ("pitch", .number(voice.pitch)),
        ])
    }

    private var routeValue: JSONValue {
        let waypoints: [JSONValue] = route.waypoints.map { point in
            var members: [(key: String, value: JSONValue)] = [
                ("latitude", .number(point.latitude)), ("longitude", .number(point.longitude)),
            ]
            if let name = point.name { members.append(("name", .string(name))) }
            return .object(members)
        }
        let segments: [JSONValue] = route.segments.map { segment in
            .object([
                ("from", .number(Double(segment.from))), ("to", .number(Double(segment.to))),
                ("distanceMeters", .number(segment.distanceMeters)), ("durationSeconds", .number(segment.durationSeconds)),
            ])
        }
        return .object([("waypoints", .array(waypoints)), ("segments", .array(segments))])
    }

    private var poisValue: JSONValue {
        .array(
            pois.map { poi in
                .object([
                    ("id", .string(poi.id)), ("name", .string(poi.name)),
                    ("location", .object([("latitude", .number(poi.location.latitude)), ("longitude", .number(poi.location.longitude))])),
                    ("triggerRadiusMeters", .number(poi.triggerRadiusMeters)),
                ])
            })
    }

    private var mapTilesValue: JSONValue {
        let b = mapTiles.bounds
        var members: [(key: String, value: JSONValue)] = [
            ("minZoom", .number(Double(mapTiles.minZoom))), ("maxZoom", .number(Double(mapTiles.maxZoom))),
            ("bufferMiles", .number(mapTiles.bufferMiles)), ("selection", .string(mapTiles.selection.rawValue)),
            (
                "bounds",
                .object([("south", .number(b.south)), ("west", .number(b.west)), ("north", .number(b.north)), ("east", .number(b.east))])
            ),
            (
                "ranges",
                .array(
                    mapTiles.ranges.map { r in
                        .object([
                            ("zoom", .number(Double(r.zoom))), ("minX", .number(Double(r.minX))), ("maxX", .number(Double(r.maxX))),
                            ("minY", .number(Double(r.minY))), ("maxY", .number(Double(r.maxY))),
                        ])
                    })
            ),
            ("tileCount", .number(Double(mapTiles.tileCount))), ("estimatedBytes", .number(Double(mapTiles.estimatedBytes))),
        ]
        // The pack's fields, when there is a pack: all of them or none.
        if let file = mapTiles.file, let format = mapTiles.format, let stored = mapTiles.storedTiles,
            let empty = mapTiles.emptyTiles, let size = mapTiles.sizeBytes, let sha256 = mapTiles.sha256
        {
            members += [
                ("file", .string(file)), ("format", .string(format.rawValue)), ("storedTiles", .number(Double(stored))),
                ("emptyTiles", .number(Double(empty))), ("sizeBytes", .number(Double(size))), ("sha256", .string(sha256)),
                ("attribution", .string(mapTiles.attribution ?? "")),
            ]
        }
        return .object(members)
    }

    // MARK: Timestamps

    /// `YYYY-MM-DDTHH:MM:SSZ`, UTC, whole seconds (any fraction is dropped).
    /// A date outside years 0001–9999 (a time from a file or a header is
    /// data) is written as the nearest of them: `time_t(_:)` of it would trap.
    public static func timestamp(_ date: Date) -> String {
        var seconds = time_t(Int(clamping: date.timeIntervalSince1970, to: -62_135_596_800...253_402_300_799, rounding: .down))
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ v: Int32) -> String { v < 10 ? "0\(v)" : "\(v)" }
        let year = String(parts.tm_year + 1900)
        return
            "\(String(repeating: "0", count: max(0, 4 - year.count)))\(year)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))Z"
    }

    /// Parses exactly the form `timestamp(_:)` writes; anything else is nil.
    public static func parseTimestamp(_ text: String) -> Date? {
        let b = Array(text.utf8)
        guard b.count == 20, b[4] == 0x2D, b[7] == 0x2D, b[10] == 0x54, b[13] == 0x3A, b[16] == 0x3A, b[19] == 0x5A else { return nil }
        func number(_ range: Range<Int>) -> Int32? {
            guard b[range].allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
            return Int32(String(decoding: b[range], as: UTF8.self))
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
            let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19),
            (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 60
        else { return nil }
        var parts = tm()
        parts.tm_year = year - 1900
        parts.tm_mon = month - 1
        parts.tm_mday = day
        parts.tm_hour = hour
        parts.tm_min = minute
        parts.tm_sec = second
        let date = Date(timeIntervalSince1970: Double(timegm(&parts)))
        // Refuses days that do not exist (2025-02-30), which timegm would roll over.
        return timestamp(date) == text ? date : nil
    }
}

extension PackageManifest.AudioEntry {
    fileprivate func jsonValue(includingCharacters: Bool) -> JSONValue {
        var members: [(key: String, value: JSONValue)] = [
            ("poiId", .string(poiId)), ("phase", .string(phase.rawValue)), ("path", .string(path)),
            ("format", .string(format.rawValue)), ("codec", .string(codec)), ("bitrateKbps", .number(Double(bitrateKbps))),
            ("sampleRateHz", .number(Double(sampleRateHz))), ("channels", .number(Double(channels))),
            ("durationSeconds", .number(durationSeconds)), ("sizeBytes", .number(Double(sizeBytes))), ("sha256", .string(sha256)),
        ]
        if includingCharacters { members.append(("characters", .number(Double(characters)))) }
        if let loudness {
            var measured: [(key: String, value: JSONValue)] = [
                ("gainDB", .number(loudness.gainDB)), ("limiterReductionDB", .number(loudness.limiterReductionDB)),
            ]
            if let integrated = loudness.integratedLUFS { measured.append(("integratedLUFS", .number(integrated))) }
            if let peak = loudness.truePeakDBTP { measured.append(("truePeakDBTP", .number(peak))) }
            members.append(("loudness", .object(measured)))
        }
        if let captions {
            members.append(
                (
                    "captions",
                    .object([
                        ("path", .string(captions.path)), ("sha256", .string(captions.sha256)),
                        ("sizeBytes", .number(Double(captions.sizeBytes))), ("cues", .number(Double(captions.cues))),
                        ("timing", .string(captions.timing.rawValue)),
                    ])
                ))
        }
        return .object(members)
    }
}

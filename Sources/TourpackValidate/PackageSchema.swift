package import TourpackCore

/// `schemas/package.schema.json`, mirrored rule for rule in Swift.
///
/// `validate` must not need Python or a JSON Schema library on a CI runner,
/// so the schema's rules are restated here as a small tree of `Rule`s that
/// reads like the schema file: required keys, no unknown keys
/// (`additionalProperties: false`), types, patterns, ranges, enums and
/// consts, the two conditional blocks of an audio entry (the format's
/// codec, bit rate, sample rate and extension; the phase's file label), and
/// the `dependentRequired` group of `mapTiles`' pack fields (all or none).
/// Duplicate keys, which JSON Schema cannot see, are refused too.
///
/// The schema file stays the contract: `StoreSchemaTests` checks generated
/// manifests against it with Python's `jsonschema`, and `PackageSchemaTests`
/// checks that this mirror refuses the same edits. Change both together.
package enum PackageSchema {
    /// Every way `document` breaks the schema, as `json.path: message`, in document order.
    package static func problems(in document: JSONValue) -> [String] {
        var problems: [String] = []
        package.check(document, at: JSONPath(), into: &problems)
        return problems
    }

    // MARK: The schema

    static let uuidPattern = Pattern(name: "a lowercase UUID") { SafeID(validating: $0)?.value == $0 }
    static let sha256Pattern = Pattern(name: "64 lowercase hex digits") { text in
        text.utf8.count == 64 && text.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }
    }
    /// `YYYY-MM-DDTHH:MM:SSZ`, and a real date (the schema's `format: date-time`).
    static let timestampPattern = Pattern(name: "a UTC time like 2025-01-15T10:20:30Z") { PackageManifest.parseTimestamp($0) != nil }
    /// A version 5 UUID: the version nibble is 5 and the variant bits are 10.
    static let packageIdPattern = Pattern(name: "a lowercase version 5 UUID") { text in
        let bytes = Array(text.utf8)
        return SafeID(validating: text)?.value == text && bytes[14] == UInt8(ascii: "5") && "89ab".utf8.contains(bytes[19])
    }
    static let audioPathPattern = Pattern(name: "AudioCache/<tourId>/<poiId>_<Phase>.<ext>") { Layout.parseAudioPath($0) != nil }
    /// `^OfflineTours/[0-9a-f-]{36}/tiles\.mbtiles$`
    static let tilePackPattern = Pattern(name: "OfflineTours/<packageId>/tiles.mbtiles") { text in
        let prefix = "\(Layout.offlineToursFolder)/", suffix = "/\(Layout.tilePackFileName)"
        guard text.hasPrefix(prefix), text.hasSuffix(suffix) else { return false }
        let folder = text.utf8.dropFirst(prefix.utf8.count).dropLast(suffix.utf8.count)
        return folder.count == 36
            && folder.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) || $0 == UInt8(ascii: "-") }
    }
    /// `^OfflineTours/<uuid>/captions/<uuid>_(Approaching|Detailed|Guided Tour)\.vtt$`
    static let captionsPathPattern = Pattern(name: "OfflineTours/<packageId>/captions/<poiId>_<Phase>.vtt") { text in
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == Layout.offlineToursFolder, parts[2] == Layout.captionsFolderName,
            parts[3].hasSuffix(".vtt"), SafeID(validating: String(parts[1]))?.value == String(parts[1])
        else { return false }
        let name = parts[3].dropLast(".vtt".count)
        guard name.count > 37, name[name.index(name.startIndex, offsetBy: 36)] == "_" else { return false }
        let poi = String(name.prefix(36))
        let label = String(name.dropFirst(37))
        return SafeID(validating: poi)?.value == poi && Phase.allCases.contains { $0.fileLabel == label }
    }
    /// `mapTiles`' pack fields: present all together or not at all.
    static let tilePackFields = ["file", "format", "storedTiles", "emptyTiles", "sizeBytes", "sha256", "attribution"]

    static let latitude = Rule.number(minimum: -90, maximum: 90)
    static let longitude = Rule.number(minimum: -180, maximum: 180)
    static let zoom = Rule.integer(minimum: 0, maximum: 22)
    static let coordinate = Rule.object([("latitude", latitude), ("longitude", longitude)])

    static let package = Rule.object(
        [
            ("schemaVersion", .const(.number(1))),
            ("packageId", .string(pattern: packageIdPattern)),
            ("tourId", .string(pattern: uuidPattern)),
            ("tourName", .string(minLength: 1)),
            ("tourVersion", .integer()),
            ("language", .string(minLength: 1)),
            ("createdAt", .string(pattern: timestampPattern)),
            ("expiresAt", .string(pattern: timestampPattern)),
            ("contentHash", .string(pattern: sha256Pattern)),
            ("sizeBytes", .integer(minimum: 0)),
            (
                "voice",
                .object([
                    ("provider", .string(minLength: 1)),
                    ("name", .string(minLength: 1)),
                    ("languageCode", .string(minLength: 1)),
                    ("tier", .oneOf(PricingTier.allCases.map { .string($0.rawValue) })),
                    ("speakingRate", .number(minimum: 0.25, maximum: 4)),
                    ("pitch", .number(minimum: -20, maximum: 20)),
                ])
            ),
            (
                "route",
                .object([
                    (
                        "waypoints",
                        .array(
                            minItems: 2,
                            items: .object([("latitude", latitude), ("longitude", longitude), ("name", .string())], optional: ["name"]))
                    ),
                    (
                        "segments",
                        .array(
                            items: .object([
                                ("from", .integer(minimum: 0)), ("to", .integer(minimum: 0)),
                                ("distanceMeters", .number(minimum: 0)), ("durationSeconds", .number(minimum: 0)),
                            ]))
                    ),
                ])
            ),
            (
                "pois",
                .array(
                    minItems: 1,
                    items: .object([
                        ("id", .string(pattern: uuidPattern)),
                        ("name", .string(minLength: 1)),
                        ("location", coordinate),
                        ("triggerRadiusMeters", .number(exclusiveMinimum: 0)),
                    ]))
            ),
            (
                "audio",
                .array(
                    minItems: 1,
                    items: .object(
                        [
                            ("poiId", .string(pattern: uuidPattern)),
                            ("phase", .oneOf(Phase.allCases.map { .string($0.rawValue) })),
                            ("path", .string(pattern: audioPathPattern)),
                            ("format", .oneOf(AudioFormat.allCases.map { .string($0.rawValue) })),
                            ("codec", .oneOf(AudioFormat.allCases.map { .string($0.codecName) })),
                            ("bitrateKbps", .integer(exclusiveMinimum: 0)),
                            ("sampleRateHz", .oneOf(Set(AudioFormat.allCases.flatMap(\.sampleRates)).sorted().map { .number(Double($0)) })),
                            ("channels", .const(.number(1))),
                            ("durationSeconds", .number(exclusiveMinimum: 0)),
                            ("sizeBytes", .integer(exclusiveMinimum: 0)),
                            ("sha256", .string(pattern: sha256Pattern)),
                            ("characters", .integer(minimum: 0)),
                            (
                                "loudness",
                                .object(
                                    [
                                        ("integratedLUFS", .number(minimum: -70, maximum: 10)),
                                        ("truePeakDBTP", .number(maximum: 20)),
                                        ("gainDB", .number(minimum: -LoudnessTarget.maximumGainDB, maximum: LoudnessTarget.maximumGainDB)),
                                        ("limiterReductionDB", .number(minimum: 0)),
                                    ], optional: ["integratedLUFS", "truePeakDBTP"])
                            ),
                            (
                                "captions",
                                .object([
                                    ("path", .string(pattern: captionsPathPattern)),
                                    ("sha256", .string(pattern: sha256Pattern)),
                                    ("sizeBytes", .integer(exclusiveMinimum: 0)),
                                    ("cues", .integer(minimum: 0)),
                                    ("timing", .oneOf([CaptionTiming.provider, .estimated].map { .string($0.rawValue) })),
                                ])
                            ),
                        ], optional: ["loudness", "captions"], conditions: .audioEntry))
            ),
            (
                "mapTiles",
                .object(
                    [
                        ("minZoom", zoom), ("maxZoom", zoom),
                        ("bufferMiles", .number(minimum: 0)),
                        ("selection", .oneOf(TileSelection.allCases.map { .string($0.rawValue) })),
                        ("bounds", .object([("south", latitude), ("west", longitude), ("north", latitude), ("east", longitude)])),
                        (
                            "ranges",
                            .array(
                                minItems: 1,
                                items: .object([
                                    ("zoom", zoom), ("minX", .integer(minimum: 0)), ("maxX", .integer(minimum: 0)),
                                    ("minY", .integer(minimum: 0)), ("maxY", .integer(minimum: 0)),
                                ]))
                        ),
                        ("tileCount", .integer(minimum: 0)),
                        ("estimatedBytes", .integer(minimum: 0)),
                        ("file", .string(pattern: tilePackPattern)),
                        ("format", .oneOf(TileFormat.allCases.map { .string($0.rawValue) })),
                        ("storedTiles", .integer(minimum: 0)),
                        ("emptyTiles", .integer(minimum: 0)),
                        ("sizeBytes", .integer(minimum: 1)),
                        ("sha256", .string(pattern: sha256Pattern)),
                        ("attribution", .string()),
                    ], optional: Set(tilePackFields), together: tilePackFields)
            ),
            (
                "loudness",
                .object([
                    ("targetLUFS", .number(minimum: -40, maximum: -5)),
                    ("truePeakDBTP", .number(minimum: -9, maximum: 0)),
                ])
            ),
            // A lower rung of a quality ladder; `high` is never written.
            ("quality", .oneOf(AudioQuality.allCases.filter { $0 != .high }.map { .string($0.rawValue) })),
        ], optional: ["loudness", "quality"])

    // MARK: Rules

    /// A named string test, standing in for the schema's regular expressions.
    struct Pattern: Sendable {
        var name: String
        var matches: @Sendable (String) -> Bool
    }

    /// The schema's `if/then` blocks, which only make sense for one kind of object.
    enum Conditions: Sendable {
        /// `audioEntry`'s per-format consts and `phaseMatchesPath`.
        case audioEntry
    }

    indirect enum Rule: Sendable {
        /// `type: object`, every listed key required unless `optional`, no other keys;
        /// the keys of `together` are all present or all absent (`dependentRequired` among them).
        case object([(String, Rule)], optional: Set<String> = [], together: [String] = [], conditions: Conditions? = nil)
        case array(minItems: Int = 0, items: Rule)
        case string(minLength: Int = 0, pattern: Pattern? = nil)
        case integer(minimum: Double? = nil, exclusiveMinimum: Double? = nil, maximum: Double? = nil)
        case number(minimum: Double? = nil, exclusiveMinimum: Double? = nil, maximum: Double? = nil)
        case oneOf([JSONValue])
        case const(JSONValue)

        func check(_ value: JSONValue, at path: JSONPath, into problems: inout [String]) {
            func problem(_ message: String) {
                problems.append(path.description.isEmpty ? message : "\(path): \(message)")
            }
            switch self {
            case .object(let properties, let optional, let together, let conditions):
                guard case .object(let members) = value else { return problem("expected an object, found \(value.kindName)") }
                var seen = Set<String>()
                for member in members {
                    if !seen.insert(member.key).inserted {
                        problems.append("\(path.appending(member.key)): duplicate key")
                    } else if let rule = properties.first(where: { $0.0 == member.key })?.1 {
                        rule.check(member.value, at: path.appending(member.key), into: &problems)
                    } else {
                        problems.append("\(path.appending(member.key)): unknown key (the schema allows no other keys here)")
                    }
                }
                for (key, _) in properties where !seen.contains(key) && !optional.contains(key) {
                    problems.append("\(path.appending(key)): missing required field")
                }
                if together.contains(where: seen.contains) {
                    let names = together.dropLast().joined(separator: ", ") + " and " + (together.last ?? "")
                    for key in together where !seen.contains(key) {
                        problems.append("\(path.appending(key)): missing required field (\(names) go together)")
                    }
                }
                if conditions == .audioEntry { PackageSchema.checkAudioEntry(members, at: path, into: &problems) }
            case .array(let minItems, let items):
                guard case .array(let values) = value else { return problem("expected an array, found \(value.kindName)") }
                if values.count < minItems { problem("needs at least \(minItems) item\(minItems == 1 ? "" : "s"), found \(values.count)") }
                for (index, item) in values.enumerated() { items.check(item, at: path.appending(index), into: &problems) }
            case .string(let minLength, let pattern):
                guard case .string(let text) = value else { return problem("expected a string, found \(value.kindName)") }
                if text.unicodeScalars.count < minLength { problem("must not be empty") }
                if let pattern, !pattern.matches(text) { problem("\(Rule.shown(value)) is not \(pattern.name)") }
            case .integer(let minimum, let exclusiveMinimum, let maximum):
                guard case .number(let n) = value, n.rounded() == n else {
                    return problem("expected an integer, found \(value.kindName == "a number" ? "a fraction" : value.kindName)")
                }
                Rule.checkRange(n, minimum: minimum, exclusiveMinimum: exclusiveMinimum, maximum: maximum, problem: problem)
            case .number(let minimum, let exclusiveMinimum, let maximum):
                guard case .number(let n) = value else { return problem("expected a number, found \(value.kindName)") }
                Rule.checkRange(n, minimum: minimum, exclusiveMinimum: exclusiveMinimum, maximum: maximum, problem: problem)
            case .oneOf(let allowed):
                if !allowed.contains(value) {
                    problem("\(Rule.shown(value)) is not one of \(allowed.map(Rule.shown).joined(separator: ", "))")
                }
            case .const(let expected):
                if value != expected { problem("expected \(Rule.shown(expected)), found \(Rule.shown(value))") }
            }
        }

        static func checkRange(_ n: Double, minimum: Double?, exclusiveMinimum: Double?, maximum: Double?, problem: (String) -> Void) {
            if let minimum, n < minimum { problem("\(n.compactText) is less than the minimum \(minimum.compactText)") }
            if let exclusiveMinimum, n <= exclusiveMinimum {
                problem("\(n.compactText) must be greater than \(exclusiveMinimum.compactText)")
            }
            if let maximum, n > maximum { problem("\(n.compactText) is more than the maximum \(maximum.compactText)") }
        }

        static func shown(_ value: JSONValue) -> String {
            switch value {
            // Values come from an untrusted file: escaped, and cut after a long path's length.
            case .string(let s): return "\"\(ValidationFinding.printable(s, limit: 200))\""
            case .number(let n): return n.compactText
            default: return value.kindName
            }
        }
    }

    /// The `allOf` of `audioEntry`: each format pins its codec, sample rate
    /// and extension, and takes its contract bit rate or one its codec carries, and the phase must be the one the file name spells.
    static func checkAudioEntry(_ members: [(key: String, value: JSONValue)], at path: JSONPath, into problems: inout [String]) {
        func member(_ key: String) -> JSONValue? { members.first { $0.key == key }?.value }
        guard case .string(let formatName)? = member("format"), let format = AudioFormat(rawValue: formatName) else { return }
        let pinned: [(String, JSONValue)] = [("codec", .string(format.codecName))]
        for (key, expected) in pinned {
            if let value = member(key), value != expected {
                problems.append(
                    "\(path.appending(key)): expected \(Rule.shown(expected)) for format \(format.rawValue), found \(Rule.shown(value))")
            }
        }
        // The numbers are untrusted: `Int(exactly:)`, never `Int(_:)`, which
        // traps on 1e300. A whole number past Int's range is a finding here.
        if case .number(let kbps)? = member("bitrateKbps"), kbps.rounded() == kbps, Int(exactly: kbps) == nil {
            problems.append("\(path.appending("bitrateKbps")): \(Rule.shown(.number(kbps))) is out of range")
        }
        // The contract's rate, or one a quality ladder may ask for: a rate
        // the codec carries at the file's sample rate.
        if case .number(let kbpsValue)? = member("bitrateKbps"), let kbps = Int(exactly: kbpsValue),
            case .number(let rateValue)? = member("sampleRateHz"), let rate = Int(exactly: rateValue),
            kbps != format.bitrateKbps, format.sampleRates.contains(rate),
            let problem = format.bitrateProblem(kbps, sampleRateHz: rate)
        {
            problems.append("\(path.appending("bitrateKbps")): \(problem)")
        }
        if case .number(let rate)? = member("sampleRateHz"), !format.sampleRates.map(Double.init).contains(rate) {
            problems.append(
                "\(path.appending("sampleRateHz")): \(format.rawValue) cannot be at \(Rule.shown(.number(rate))) Hz; expected one of \(format.sampleRates.map(String.init).joined(separator: ", "))"
            )
        }
        guard case .string(let audioPath)? = member("path") else { return }
        if !audioPath.hasSuffix(".\(format.fileExtension)") {
            problems.append("\(path.appending("path")): expected the .\(format.fileExtension) extension for format \(format.rawValue)")
        }
        if case .string(let phaseName)? = member("phase"), let phase = Phase(rawValue: phaseName),
            let dot = audioPath.lastIndex(of: "."), !audioPath[..<dot].hasSuffix("_\(phase.fileLabel)")
        {
            problems.append("\(path.appending("path")): the file name must end in _\(phase.fileLabel) for phase \(phase.rawValue)")
        }
    }
}

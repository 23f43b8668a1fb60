import TourpackCore

/// Turns a tour's JSON tree into a `Tour`, recording every problem it finds
/// with the file and JSON path instead of stopping at the first.
///
/// The rules are the contract's "Input: tours". Only values that pass become part of
/// the `Tour`; IDs become `SafeID`s, the only kind allowed into paths.
struct TourValidator {
    let file: String
    var diagnostics = DiagnosticCollector()

    init(file: String) {
        self.file = file
    }

    static let topLevelKeys: Set<String> = ["id", "name", "language", "version", "route", "pois"]
    static let poiKeys: Set<String> = ["id", "name", "location", "triggerRadiusMeters", "narrations"]
    static let maxNarrationScalars = 100_000

    mutating func validate(_ root: JSONValue) -> Tour? {
        let path = JSONPath()
        guard let object = object(root, at: path) else { return nil }
        warnUnknownKeys(object, allowed: Self.topLevelKeys, at: path)

        let id = uuid(object, "id", at: path)
        let name = text(object, "name", at: path)
        let language = languageCode(object, "language", at: path)
        let version = integer(object, "version", at: path, range: 1...1_000_000)
        let route = self.route(object, at: path)
        let pois = self.pois(object, at: path, tourID: id)

        guard !diagnostics.hasErrors, let id, let name, let language, let version, let route, let pois else { return nil }
        return Tour(id: id, name: name, language: language, version: version, route: route, pois: pois, sourceFile: file)
    }

    // MARK: Sections

    private mutating func route(_ parent: Members, at parentPath: JSONPath) -> Route? {
        let path = parentPath.appending("route")
        guard let value = require(parent, "route", at: parentPath), let route = object(value, at: path) else { return nil }
        warnUnknownKeys(route, allowed: ["waypoints", "segments"], at: path)

        var waypoints: [Route.Waypoint] = []
        var waypointCount = 0
        var waypointsValid = true
        let waypointsPath = path.appending("waypoints")
        if let list = require(route, "waypoints", at: path).flatMap({ array($0, at: waypointsPath) }) {
            waypointCount = list.count
            if list.count < 2 {
                error(waypointsPath, "a route needs at least 2 waypoints, found \(list.count)")
                waypointsValid = false
            }
            for (index, item) in list.enumerated() {
                let itemPath = waypointsPath.appending(index)
                guard let point = object(item, at: itemPath) else { waypointsValid = false; continue }
                warnUnknownKeys(point, allowed: ["latitude", "longitude", "name"], at: itemPath)
                let coordinate = self.coordinate(point, at: itemPath)
                var name: String?
                if let raw = point["name"] { name = checkedText(raw, at: itemPath.appending("name")) }
                if let coordinate { waypoints.append(.init(coordinate: coordinate, name: name)) } else { waypointsValid = false }
            }
        } else {
            waypointsValid = false
        }

        var segments: [Route.Segment] = []
        let segmentsPath = path.appending("segments")
        if let raw = route["segments"], let list = array(raw, at: segmentsPath) {
            for (index, item) in list.enumerated() {
                let itemPath = segmentsPath.appending(index)
                guard let segment = object(item, at: itemPath) else { continue }
                warnUnknownKeys(segment, allowed: ["from", "to", "distanceMeters", "durationSeconds"], at: itemPath)
                let upper = max(0, waypointCount - 1)
                let from = integer(
                    segment, "from", at: itemPath, range: 0...upper, rangeMessage: "waypoint index out of range (0...\(upper))")
                let to = integer(segment, "to", at: itemPath, range: 0...upper, rangeMessage: "waypoint index out of range (0...\(upper))")
                let distance = number(segment, "distanceMeters", at: itemPath, range: 0...50_000_000)
                let duration = number(segment, "durationSeconds", at: itemPath, range: 0...100_000_000)
                if let from, let to, let distance, let duration {
                    segments.append(.init(from: from, to: to, distanceMeters: distance, durationSeconds: duration))
                }
            }
        }
        return waypointsValid ? Route(waypoints: waypoints, segments: segments) : nil
    }

    private mutating func pois(_ parent: Members, at parentPath: JSONPath, tourID: SafeID?) -> [POI]? {
        let path = parentPath.appending("pois")
        guard let value = require(parent, "pois", at: parentPath), let list = array(value, at: path) else { return nil }
        if list.isEmpty { error(path, "a tour needs at least one POI") }
        var pois: [POI] = []
        var seen: [SafeID: Int] = [:]
        for (index, item) in list.enumerated() {
            let itemPath = path.appending(index)
            guard let poi = object(item, at: itemPath) else { continue }
            warnUnknownKeys(poi, allowed: Self.poiKeys, at: itemPath)
            let id = uuid(poi, "id", at: itemPath)
            if let id {
                if let first = seen[id] {
                    error(itemPath.appending("id"), "duplicate POI id \(id), first used at pois[\(first)]")
                } else if id == tourID {
                    error(itemPath.appending("id"), "POI id \(id) is the tour's own id")
                } else {
                    seen[id] = index
                }
            }
            let name = text(poi, "name", at: itemPath)
            let location = require(poi, "location", at: itemPath).flatMap { value -> Coordinate? in
                let locationPath = itemPath.appending("location")
                guard let members = object(value, at: locationPath) else { return nil }
                warnUnknownKeys(members, allowed: ["latitude", "longitude"], at: locationPath)
                return coordinate(members, at: locationPath)
            }
            let radius = number(poi, "triggerRadiusMeters", at: itemPath, range: 1...100_000)
            let narrations = self.narrations(poi, at: itemPath)
            if let id, let name, let location, let radius, let narrations {
                pois.append(POI(id: id, name: name, location: location, triggerRadiusMeters: radius, narrations: narrations))
            }
        }
        return pois
    }

    private mutating func narrations(_ parent: Members, at parentPath: JSONPath) -> [Phase: Narration]? {
        let path = parentPath.appending("narrations")
        guard let value = require(parent, "narrations", at: parentPath), let members = object(value, at: path) else { return nil }
        var result: [Phase: Narration] = [:]
        var valid = true
        for (key, value) in members.entries {
            let keyPath = path.appending(key)
            guard let phase = Phase(rawValue: key) else {
                let hint = PhaseSuggestion.closest(to: key).map { " (did you mean '\($0.rawValue)'?)" } ?? ""
                error(keyPath, "unknown phase\(hint); phases are approaching, detailed, guidedTour")
                valid = false
                continue
            }
            guard case .string(let raw) = value else {
                error(keyPath, "expected a string, found \(value.kindName)")
                valid = false
                continue
            }
            guard let narration = narration(raw, at: keyPath) else { valid = false; continue }
            result[phase] = narration
        }
        if members.entries.isEmpty {
            error(path, "a POI needs at least one narration (approaching, detailed or guidedTour)")
            valid = false
        }
        return valid ? result : nil
    }

    private mutating func narration(_ raw: String, at path: JSONPath) -> Narration? {
        if raw.allSatisfy(\.isWhitespace) {
            error(path, raw.isEmpty ? "narration is empty" : "narration is only whitespace")
            return nil
        }
        if raw.unicodeScalars.count > Self.maxNarrationScalars {
            error(path, "narration is \(raw.unicodeScalars.count) characters, more than the \(Self.maxNarrationScalars) allowed")
            return nil
        }
        if let bad = raw.unicodeScalars.first(where: { Self.isForbiddenControl($0, allowLineBreaks: true) }) {
            error(path, "control character U+\(Self.hex(bad)) is not allowed")
            return nil
        }
        let narration = Narration(text: raw)
        if narration.isSSML {
            let problems = SSML.validate(raw)
            for problem in problems { error(path, problem.message) }
            if !problems.isEmpty { return nil }
            if SSML.hasNothingToSpeak(raw) {
                error(path, "narration is empty: its SSML has no text to speak, only tags")
                return nil
            }
        }
        return narration
    }
}

// MARK: - Field access

extension TourValidator {
    /// An object's members with lookup by key; duplicates are reported once when read.
    struct Members {
        var entries: [(key: String, value: JSONValue)]
        subscript(key: String) -> JSONValue? { entries.first { $0.key == key }?.value }
    }

    mutating func error(_ path: JSONPath, _ message: String) {
        diagnostics.error(file, path.description, message)
    }

    mutating func object(_ value: JSONValue, at path: JSONPath) -> Members? {
        guard case .object(let entries) = value else {
            error(path, "expected an object, found \(value.kindName)")
            return nil
        }
        var seen = Set<String>()
        for entry in entries where !seen.insert(entry.key).inserted {
            error(path.appending(entry.key), "duplicate key")
        }
        return Members(entries: entries)
    }

    mutating func array(_ value: JSONValue, at path: JSONPath) -> [JSONValue]? {
        guard case .array(let values) = value else {
            error(path, "expected an array, found \(value.kindName)")
            return nil
        }
        return values
    }

    mutating func require(_ members: Members, _ key: String, at path: JSONPath) -> JSONValue? {
        guard let value = members[key] else {
            error(path.appending(key), "missing required field")
            return nil
        }
        return value
    }

    mutating func warnUnknownKeys(_ members: Members, allowed: Set<String>, at path: JSONPath) {
        for entry in members.entries where !allowed.contains(entry.key) {
            diagnostics.warning(file, path.appending(entry.key).description, "unknown key, ignored")
        }
    }

    mutating func text(_ members: Members, _ key: String, at path: JSONPath) -> String? {
        guard let value = require(members, key, at: path) else { return nil }
        return checkedText(value, at: path.appending(key))
    }

    /// A short, single-line, non-empty name without control or invisible
    /// format characters (see `NameCharacters`).
    mutating func checkedText(_ value: JSONValue, at path: JSONPath) -> String? {
        guard case .string(let raw) = value else {
            error(path, "expected a string, found \(value.kindName)")
            return nil
        }
        if raw.allSatisfy(\.isWhitespace) {
            error(path, "must not be empty")
            return nil
        }
        if let problem = NameCharacters.problem(in: raw) {
            error(path, problem)
            return nil
        }
        if raw.unicodeScalars.count > 500 {
            error(path, "longer than 500 characters")
            return nil
        }
        return raw
    }

    mutating func uuid(_ members: Members, _ key: String, at path: JSONPath) -> SafeID? {
        guard let value = require(members, key, at: path) else { return nil }
        let fieldPath = path.appending(key)
        guard case .string(let raw) = value else {
            error(fieldPath, "expected a UUID string, found \(value.kindName)")
            return nil
        }
        guard let id = SafeID(validating: raw) else {
            error(fieldPath, "not a UUID: \"\(JSONPath.displayKey(raw))\"")
            return nil
        }
        return id
    }

    mutating func languageCode(_ members: Members, _ key: String, at path: JSONPath) -> String? {
        guard let raw = text(members, key, at: path) else { return nil }
        guard LanguageCode.isValid(raw) else {
            error(path.appending(key), "not a BCP-47 language code like en-US: \"\(raw)\"")
            return nil
        }
        return raw
    }

    mutating func number(
        _ members: Members, _ key: String, at path: JSONPath, range: ClosedRange<Double>
    ) -> Double? {
        guard let value = require(members, key, at: path) else { return nil }
        guard case .number(let n) = value else {
            error(path.appending(key), "expected a number, found \(value.kindName)")
            return nil
        }
        guard range.contains(n) else {
            error(path.appending(key), "\(n.compactText) is out of range \(range.lowerBound.compactText)...\(range.upperBound.compactText)")
            return nil
        }
        return n
    }

    mutating func integer(
        _ members: Members, _ key: String, at path: JSONPath, range: ClosedRange<Int>, rangeMessage: String? = nil
    ) -> Int? {
        guard let value = require(members, key, at: path) else { return nil }
        guard case .number(let n) = value, n.rounded() == n, abs(n) < 1e15 else {
            error(path.appending(key), "expected an integer, found \(value.kindName == "a number" ? "a fraction" : value.kindName)")
            return nil
        }
        guard range.contains(Int(n)) else {
            error(
                path.appending(key),
                rangeMessage.map { "\(Int(n)): \($0)" } ?? "\(Int(n)) is out of range \(range.lowerBound)...\(range.upperBound)")
            return nil
        }
        return Int(n)
    }

    mutating func coordinate(_ members: Members, at path: JSONPath) -> Coordinate? {
        let latitude = number(members, "latitude", at: path, range: -90...90)
        let longitude = number(members, "longitude", at: path, range: -180...180)
        guard let latitude, let longitude else { return nil }
        return Coordinate(latitude: latitude, longitude: longitude)
    }

    static func isForbiddenControl(_ scalar: Unicode.Scalar, allowLineBreaks: Bool) -> Bool {
        if allowLineBreaks, scalar == "\n" || scalar == "\r" || scalar == "\t" { return false }
        switch scalar.value {
        case 0x00...0x1F, 0x7F...0x9F: return true
        // Bidirectional overrides and isolates can disguise text; line/paragraph separators break logs.
        case 0x202A...0x202E, 0x2066...0x2069, 0x2028, 0x2029: return true
        default: return false
        }
    }

    static func hex(_ scalar: Unicode.Scalar) -> String {
        let digits = String(scalar.value, radix: 16, uppercase: true)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }
}

/// The characters a name may hold: tour, POI and waypoint names, and a
/// voice's name and provider. Names reach package.json and the app's screens,
/// so they refuse what a person cannot see or what changes how the text
/// around it reads:
/// - control characters (C0, DEL, C1) and the line and paragraph separators;
/// - every format character (Unicode general category Cf): the bidi
///   embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069), the
///   marks (U+200E, U+200F, U+061C), zero-width space and word joiner, soft
///   hyphen, the byte-order mark and the tag characters;
/// - except ZWNJ (U+200C) and ZWJ (U+200D), which spell real names in
///   Persian, the Indic scripts and others.
///
/// Narrations keep their own, looser rule (line breaks and format
/// characters other than the bidi controls pass): they are spoken, not shown.
enum NameCharacters {
    /// Why `text` is not a valid name, for its first offending character; nil when it is.
    static func problem(in text: String) -> String? {
        for scalar in text.unicodeScalars {
            if TourValidator.isForbiddenControl(scalar, allowLineBreaks: false) {
                return "control character U+\(TourValidator.hex(scalar)) is not allowed"
            }
            if scalar.properties.generalCategory == .format, scalar != "\u{200C}", scalar != "\u{200D}" {
                return "invisible format character U+\(TourValidator.hex(scalar)) is not allowed in a name "
                    + "(of the format characters, only the joiners U+200C and U+200D are)"
            }
        }
        return nil
    }
}

/// Suggests the phase a misspelt key probably meant.
enum PhaseSuggestion {
    static func closest(to key: String) -> Phase? {
        let lowered = key.lowercased()
        let scored = Phase.allCases.map { ($0, editDistance(lowered, $0.rawValue.lowercased())) }
        guard let best = scored.min(by: { $0.1 < $1.1 }), best.1 <= 3 else { return nil }
        return best.0
    }

    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        if a.isEmpty { return b.count }
        var previous = Array(0...b.count)
        for i in 1...a.count {
            var current = [i] + Array(repeating: 0, count: b.count)
            for j in 1...max(b.count, 1) where j <= b.count {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            previous = current
        }
        return previous[b.count]
    }
}

/// A light BCP-47 check: a 2–3 letter language, then optional subtags.
enum LanguageCode {
    static func isValid(_ code: String) -> Bool {
        let parts = code.split(separator: "-", omittingEmptySubsequences: false)
        guard let first = parts.first, (2...3).contains(first.count), first.allSatisfy({ $0.isASCII && $0.isLetter }) else { return false }
        return parts.dropFirst().allSatisfy { part in
            (1...8).contains(part.count) && part.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) }
        }
    }
}

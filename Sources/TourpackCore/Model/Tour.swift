import Foundation

/// A tour as loaded and validated from tour JSON (the contract's "Input: tours").
///
/// Every value here has passed validation: IDs are lowercase UUIDs, so they
/// are safe to use in paths; coordinates are in range; every POI has at
/// least one non-empty narration.
public struct Tour: Sendable, Hashable {
    public var id: SafeID
    public var name: String
    public var language: String
    public var version: Int
    public var route: Route
    public var pois: [POI]
    /// The file the tour came from, as the user named it; for messages.
    public var sourceFile: String

    public init(id: SafeID, name: String, language: String, version: Int, route: Route, pois: [POI], sourceFile: String) {
        self.id = id
        self.name = name
        self.language = language
        self.version = version
        self.route = route
        self.pois = pois
        self.sourceFile = sourceFile
    }

    /// Every point the tour names: its route's waypoints, then its POIs'
    /// locations. A map that covers the tour covers all of these.
    public var coordinates: [Coordinate] { route.waypoints.map(\.coordinate) + pois.map(\.location) }
}

public struct Route: Sendable, Hashable {
    public struct Waypoint: Sendable, Hashable {
        public var coordinate: Coordinate
        public var name: String?
        public init(coordinate: Coordinate, name: String?) {
            self.coordinate = coordinate
            self.name = name
        }
    }

    public struct Segment: Sendable, Hashable {
        public var from: Int
        public var to: Int
        public var distanceMeters: Double
        public var durationSeconds: Double
        public init(from: Int, to: Int, distanceMeters: Double, durationSeconds: Double) {
            self.from = from
            self.to = to
            self.distanceMeters = distanceMeters
            self.durationSeconds = durationSeconds
        }
    }

    public var waypoints: [Waypoint]
    public var segments: [Segment]
    public init(waypoints: [Waypoint], segments: [Segment]) {
        self.waypoints = waypoints
        self.segments = segments
    }
}

/// A point of interest with narration for one to three phases.
public struct POI: Sendable, Hashable {
    public var id: SafeID
    public var name: String
    public var location: Coordinate
    public var triggerRadiusMeters: Double
    /// Narration per phase, in phase order; only the phases the tour gives.
    public var narrations: [Phase: Narration]

    public init(id: SafeID, name: String, location: Coordinate, triggerRadiusMeters: Double, narrations: [Phase: Narration]) {
        self.id = id
        self.name = name
        self.location = location
        self.triggerRadiusMeters = triggerRadiusMeters
        self.narrations = narrations
    }

    /// The phases present, in the app's order.
    public var phases: [Phase] { Phase.allCases.filter { narrations[$0] != nil } }
}

/// The narration of one phase: plain text, or SSML when it begins with `<speak>`.
public struct Narration: Sendable, Hashable {
    public var text: String
    public var isSSML: Bool
    public init(text: String) {
        self.text = text
        self.isSSML = Narration.looksLikeSSML(text)
    }

    /// SSML begins with `<speak`, optionally after an XML declaration
    /// (`<?xml version="1.0"?><speak>`), which must not be read aloud as text.
    public static func looksLikeSSML(_ text: String) -> Bool {
        var rest = text.drop { $0.isWhitespace }
        if rest.hasPrefix("<?xml"), let end = rest.range(of: "?>") {
            rest = rest[end.upperBound...].drop { $0.isWhitespace }
        }
        return rest.hasPrefix("<speak")
    }
}

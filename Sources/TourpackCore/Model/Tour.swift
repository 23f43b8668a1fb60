import Foundation

/// A tour as loaded and validated from tour JSON (the contract's "Input: tours").
///
/// Every value here has passed validation: IDs are lowercase UUIDs, so they
/// are safe to use in paths; coordinates are in range; every POI has at
/// least one non-empty narration.
package struct Tour: Sendable, Hashable {
    package var id: SafeID
    package var name: String
    package var language: String
    package var version: Int
    package var route: Route
    package var pois: [POI]
    /// The file the tour came from, as the user named it; for messages.
    package var sourceFile: String

    package init(id: SafeID, name: String, language: String, version: Int, route: Route, pois: [POI], sourceFile: String) {
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
    package var coordinates: [Coordinate] { route.waypoints.map(\.coordinate) + pois.map(\.location) }
}

package struct Route: Sendable, Hashable {
    package struct Waypoint: Sendable, Hashable {
        package var coordinate: Coordinate
        package var name: String?
        package init(coordinate: Coordinate, name: String?) {
            self.coordinate = coordinate
            self.name = name
        }
    }

    package struct Segment: Sendable, Hashable {
        package var from: Int
        package var to: Int
        package var distanceMeters: Double
        package var durationSeconds: Double
        package init(from: Int, to: Int, distanceMeters: Double, durationSeconds: Double) {
            self.from = from
            self.to = to
            self.distanceMeters = distanceMeters
            self.durationSeconds = durationSeconds
        }
    }

    package var waypoints: [Waypoint]
    package var segments: [Segment]
    package init(waypoints: [Waypoint], segments: [Segment]) {
        self.waypoints = waypoints
        self.segments = segments
    }
}

/// A point of interest with narration for one to three phases.
package struct POI: Sendable, Hashable {
    package var id: SafeID
    package var name: String
    package var location: Coordinate
    package var triggerRadiusMeters: Double
    /// Narration per phase, in phase order; only the phases the tour gives.
    package var narrations: [Phase: Narration]

    package init(id: SafeID, name: String, location: Coordinate, triggerRadiusMeters: Double, narrations: [Phase: Narration]) {
        self.id = id
        self.name = name
        self.location = location
        self.triggerRadiusMeters = triggerRadiusMeters
        self.narrations = narrations
    }

    /// The phases present, in the app's order.
    package var phases: [Phase] { Phase.allCases.filter { narrations[$0] != nil } }
}

/// The narration of one phase: plain text, or SSML when it begins with `<speak>`.
package struct Narration: Sendable, Hashable {
    package var text: String
    package var isSSML: Bool
    package init(text: String) {
        self.text = text
        self.isSSML = Narration.looksLikeSSML(text)
    }

    /// SSML begins with `<speak`, optionally after an XML declaration
    /// (`<?xml version="1.0"?><speak>`), which must not be read aloud as text.
    package static func looksLikeSSML(_ text: String) -> Bool {
        var rest = text.drop { $0.isWhitespace }
        if rest.hasPrefix("<?xml"), let end = rest.range(of: "?>") {
            rest = rest[end.upperBound...].drop { $0.isWhitespace }
        }
        return rest.hasPrefix("<speak")
    }
}

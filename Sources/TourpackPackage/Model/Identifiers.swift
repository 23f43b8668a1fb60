/// A UUID that passed validation, kept in lowercase: the only kind of ID that
/// may ever become part of a path.
public struct SafeID: Sendable, Hashable, Comparable, CustomStringConvertible {
    public let value: String

    /// Accepts only the canonical 8-4-4-4-12 hex form; returns nil otherwise.
    public init?(validating raw: String) {
        let lower = raw.lowercased()
        let utf8 = Array(lower.utf8)
        guard utf8.count == 36 else { return nil }
        for (index, byte) in utf8.enumerated() {
            switch index {
            case 8, 13, 18, 23:
                guard byte == UInt8(ascii: "-") else { return nil }
            default:
                guard byte.isLowercaseHexDigit else { return nil }
            }
        }
        self.value = lower
    }

    public var description: String { value }
    public static func < (lhs: SafeID, rhs: SafeID) -> Bool { lhs.value < rhs.value }
}

public struct Coordinate: Sendable, Hashable, Codable {
    public var latitude: Double
    public var longitude: Double
    public init(latitude: Double, longitude: Double) {
        self.latitude = latitude
        self.longitude = longitude
    }
}

/// The three narration phases. The raw value is the JSON key; `fileLabel` is
/// the exact spelling the app expects in file names.
public enum Phase: String, Sendable, Hashable, CaseIterable, Codable, Comparable {
    case approaching
    case detailed
    case guidedTour

    /// `Approaching`, `Detailed` or `Guided Tour` (with the space), as in `<poiId>_<Phase>.<ext>`.
    public var fileLabel: String {
        switch self {
        case .approaching: return "Approaching"
        case .detailed: return "Detailed"
        case .guidedTour: return "Guided Tour"
        }
    }

    public static func < (lhs: Phase, rhs: Phase) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }
}

/// Pricing tiers; each has its own monthly quota in the unit its provider
/// bills (`BillingRule`). `local` (the embedded espeak-ng voice) costs
/// nothing and is unlimited.
///
/// Google's tiers are its voice families. Polly's are its engines
/// (`standard`, `neural`, `long-form`, `generative`); Azure's is its voice
/// type (`neural`); ElevenLabs' is the model's credit class (`full-credit`:
/// one credit a character, `half-credit`: Flash and Turbo, half a credit).
/// A tier's ledger is kept per provider account, so Google's `standard`
/// and Polly's `standard` never share a count.
public enum PricingTier: String, Sendable, Hashable, CaseIterable, Codable {
    case standard
    case wavenet
    case neural2
    case studio
    case chirp3HD = "chirp3-hd"
    case neural
    case longForm = "long-form"
    case generative
    case fullCredit = "full-credit"
    case halfCredit = "half-credit"
    case local
}

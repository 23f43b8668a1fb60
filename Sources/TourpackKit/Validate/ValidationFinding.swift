/// What `tourpack validate` checks, one name per concern.
///
/// The raw values are part of the output contract: they appear in the text
/// report, as `check` in the JSON report and in JUnit test-case names, so CI
/// rules can match on them. Add cases; never rename one.
public enum ValidationCheck: String, Sendable, Hashable, CaseIterable, Codable, Comparable {
    // The package.json itself.
    /// package.json can be read and is well-formed JSON (no duplicate keys).
    case json
    /// package.json matches `schemas/package.schema.json`.
    case schema
    /// package.json is in the canonical form the store writes (sorted keys, fixed number form).
    case canonical
    /// The folder name equals `packageId`, which is the UUIDv5 of tour, voice and format.
    case packageId
    /// The audio list matches the POIs: no duplicates, no unknown POI, every POI heard, one format.
    case audioList
    /// `expiresAt` is in the future and a whole number of days after `createdAt`.
    case expiry
    /// `mapTiles` is the coverage `TileMath` computes for the route and POIs.
    case mapTiles
    /// `contentHash` recomputes to the same value.
    case contentHash
    /// `sizeBytes` is the sum of the audio entries' sizes.
    case sizeBytes

    // One audio entry.
    /// The path is safe (inside the root, no `..`, no symlink out) and is the layout's path for its POI, phase and format.
    case path
    /// The file exists and is a regular file.
    case exists
    /// The file's size equals the entry's `sizeBytes`.
    case size
    /// The file's SHA-256 equals the entry's `sha256`.
    case sha256
    /// FFmpeg demuxes and decodes the whole file with no error.
    case decode
    /// Container, codec, sample rate, channels and measured bit rate match the format table.
    case format
    /// The decoded duration matches the entry's `durationSeconds`.
    case duration
    /// An .m4a file's top-level boxes start with `ftyp` and put `moov` before `mdat`.
    case faststart
    /// An .opus file's Ogg pages are intact, its pre-skip is sane and its end granule matches the duration.
    case oggOpus
    /// An .mp3 file is MPEG-1 Layer III whose first frame carries a Xing/Info header.
    case mp3Header

    // The bundle as a whole.
    /// OfflineTours holds at least one package.
    case packages
    /// Every file under AudioCache and OfflineTours belongs to a package.
    case stray
    /// No temp file of an interrupted write is left behind.
    case temporary
    /// AudioCache fits the pipeline's `budgets.cacheMaxMB`.
    case cacheBudget

    public static func < (lhs: ValidationCheck, rhs: ValidationCheck) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }
}

/// One problem `validate` found, with the file a person has to look at.
///
/// `path` is relative to the validated root (`AudioCache/<tour>/<poi>_Detailed.m4a`,
/// `OfflineTours/<package>/package.json`); for an audio path that a
/// package.json lists but that may not be followed (`../x.m4a`), it is that
/// path exactly as written. A problem inside package.json starts its message
/// with the JSON path (`audio[2].sampleRateHz: ...`).
public struct ValidationFinding: Sendable, Hashable, CustomStringConvertible {
    public typealias Severity = Diagnostic.Severity

    public var severity: Severity
    /// The package folder's name (normally its `packageId`); nil for the bundle as a whole.
    public var package: String?
    public var path: String
    public var check: ValidationCheck
    public var message: String

    public init(_ severity: Severity, package: String?, path: String, check: ValidationCheck, message: String) {
        self.severity = severity
        self.package = package
        self.path = path
        self.check = check
        self.message = message
    }

    /// `path: error: message [check]`, the form of one line of the text report.
    /// Paths and messages can carry text from the bundle (file names, package
    /// fields), so control characters are shown escaped: one finding is one line.
    public var description: String {
        "\(Self.printable(path)): \(severity.rawValue): \(Self.printable(message)) [\(check.rawValue)]"
    }

    /// `text` with control and format characters (newlines, bidi overrides) as `\u{...}`,
    /// cut after `limit` characters.
    static func printable(_ text: String, limit: Int = .max) -> String {
        var shown = ""
        for scalar in text.unicodeScalars.prefix(limit) {
            let category = scalar.properties.generalCategory
            if category == .control || category == .format || scalar == "\u{2028}" || scalar == "\u{2029}" {
                shown += "\\u{\(String(scalar.value, radix: 16))}"
            } else {
                shown.unicodeScalars.append(scalar)
            }
        }
        return text.unicodeScalars.count > limit ? shown + "…" : shown
    }
}

/// One check run on one subject (a package.json, an audio file, the cache),
/// with what it found. A check that found nothing passed; JUnit reports it
/// as a passing test case, which is how CI sees what was covered.
public struct CheckOutcome: Sendable, Hashable {
    public var package: String?
    /// The root-relative path the check looked at.
    public var subject: String
    public var check: ValidationCheck
    public var findings: [ValidationFinding]

    public init(package: String?, subject: String, check: ValidationCheck, findings: [ValidationFinding] = []) {
        self.package = package
        self.subject = subject
        self.check = check
        self.findings = findings
    }

    public var hasErrors: Bool { findings.contains { $0.severity == .error } }
}

/// Collects the outcomes of one subject's checks, so a check function can
/// record several problems and the caller never forgets the passing ones.
struct OutcomeRecorder {
    let package: String?
    let subject: String
    private(set) var outcomes: [CheckOutcome] = []

    init(package: String?, subject: String) {
        self.package = package
        self.subject = subject
    }

    /// Marks `check` as run, even if it finds nothing.
    mutating func ran(_ check: ValidationCheck) {
        if !outcomes.contains(where: { $0.check == check }) {
            outcomes.append(CheckOutcome(package: package, subject: subject, check: check))
        }
    }

    mutating func error(_ check: ValidationCheck, _ message: String, path: String? = nil) {
        add(.error, check, message, path: path)
    }

    mutating func warning(_ check: ValidationCheck, _ message: String, path: String? = nil) {
        add(.warning, check, message, path: path)
    }

    private mutating func add(_ severity: ValidationFinding.Severity, _ check: ValidationCheck, _ message: String, path: String?) {
        ran(check)
        let index = outcomes.firstIndex { $0.check == check }!
        outcomes[index].findings.append(ValidationFinding(severity, package: package, path: path ?? subject, check: check, message: message))
    }
}

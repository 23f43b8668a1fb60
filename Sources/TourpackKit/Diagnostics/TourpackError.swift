/// The failures of a run, with the context a person needs to act on them.
///
/// The taxonomy follows the app's own (networkUnavailable,
/// audioGenerationFailed, storageFailed, alreadyBuilding, invalidInput) plus
/// the budget refusal. No case ever carries an API key: HTTP failures keep
/// the status and the server's message only.
public enum TourpackError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The endpoint could not be reached at all (connection refused, DNS, timeout after all retries).
    case networkUnavailable(endpoint: String, reason: String)
    /// The endpoint answered, but not with audio. `item` names tour, POI and phase.
    case audioGenerationFailed(item: String, status: Int?, message: String)
    /// A file could not be read, written, synced or renamed.
    case storageFailed(path: String, errno: Int32, operation: String)
    /// Another build holds the output root's lock (`--no-wait`).
    case alreadyBuilding(lockPath: String)
    /// Input, configuration or usage is wrong; see also `DiagnosticsError` for collected input problems.
    case invalidInput(String)
    /// A budget (cache size, monthly characters) refused the work before anything was spent.
    case budgetExceeded(String)
    /// Encoding or decoding audio failed inside FFmpeg.
    case audioEncodingFailed(item: String, message: String)
    /// The run was cancelled by SIGINT/SIGTERM.
    case cancelled
    /// The state database (`<state>/state.sqlite`) could not be opened, read or written.
    case stateFailed(path: String, message: String)
    /// A map tile could not be fetched: its z/x/y, the URL without its key,
    /// the HTTP status when there was one, and why. Fails its tour only.
    case mapDownloadFailed(tile: String, url: String, status: Int?, message: String)
    /// The shared object store (`state.objects`) failed an operation: the
    /// verb, the object's URL (no query, no user info), the HTTP status when
    /// there was one, and the server's message scrubbed of both keys.
    case objectStorageFailed(operation: String, object: String, status: Int?, message: String)

    public var description: String {
        switch self {
        case .networkUnavailable(let endpoint, let reason):
            return "network unavailable: \(endpoint): \(reason)"
        case .audioGenerationFailed(let item, let status, let message):
            if let status { return "\(item): audio generation failed: HTTP \(status): \(message)" }
            return "\(item): audio generation failed: \(message)"
        case .storageFailed(let path, let errno, let operation):
            return "\(path): \(operation) failed: \(errnoDescription(errno)) (errno \(errno))"
        case .alreadyBuilding(let lockPath):
            return "another build is running on this output root (lock \(lockPath)); retry later, or drop --no-wait to wait for it"
        case .invalidInput(let message):
            return message
        case .budgetExceeded(let message):
            return "budget refused the build: \(message)"
        case .audioEncodingFailed(let item, let message):
            return "\(item): encoding failed: \(message)"
        case .cancelled:
            return "cancelled"
        case .stateFailed(let path, let message):
            return "\(path): state database: \(message)"
        case .mapDownloadFailed(let tile, let url, let status, let message):
            let answer = status.map { "HTTP \($0): " } ?? ""
            return "mapDownloadFailed: tile \(tile) (\(url)): \(answer)\(message)"
        case .objectStorageFailed(let operation, let object, let status, let message):
            let answer = status.map { "HTTP \($0): " } ?? ""
            return "object storage: \(operation) \(object) failed: \(answer)\(message)"
        }
    }

    /// The process exit code SPEC.md assigns to this failure.
    public var exitCode: Int32 {
        switch self {
        case .invalidInput: return ExitStatus.badInput
        case .budgetExceeded: return ExitStatus.budget
        case .cancelled: return ExitStatus.cancelled
        default: return ExitStatus.failure
        }
    }
}

/// Exit codes from SPEC.md, plus 130 for a run cancelled by a signal.
public enum ExitStatus {
    public static let ok: Int32 = 0
    public static let failure: Int32 = 1
    public static let badInput: Int32 = 2
    public static let budget: Int32 = 3
    public static let cancelled: Int32 = 130
}

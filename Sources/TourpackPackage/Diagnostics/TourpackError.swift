/// The failures of a run, with the context a person needs to act on them.
///
/// One value carries what kind of failure it is (the app's own taxonomy:
/// networkUnavailable, audioGenerationFailed, storageFailed,
/// alreadyBuilding, invalidInput, plus the budget refusal and the rest),
/// the message, the context it happened in (tour, POI and phase, path, URL
/// without its key, HTTP status, errno), and the error underneath, as
/// swift-nio's `FileSystemError` does. Each kind maps to an exit code in one
/// place, in TourpackCore (`Kind.exitCode`): the app's library has no exit codes. Nothing here ever carries an API key: HTTP
/// failures keep the status and the server's message only, and URLs are
/// redacted before they get here.
///
/// The constructors keep the names of the kinds, so
/// `TourpackError.storageFailed(path:errno:operation:)` reads as before;
/// code that needs to tell failures apart asks `kind`, never the message.
public struct TourpackError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: String, Sendable, Hashable, Codable, CaseIterable {
        /// The endpoint could not be reached at all (connection refused, DNS, timeout after all retries).
        case networkUnavailable
        /// The endpoint answered, but not with audio.
        case audioGenerationFailed
        /// A file could not be read, written, synced or renamed.
        case storageFailed
        /// Another build holds the output root's lock (`--no-wait`).
        case alreadyBuilding
        /// Input, configuration or usage is wrong; see also `DiagnosticsError` for collected input problems.
        case invalidInput
        /// A budget (cache size, monthly characters) refused the work before anything was spent.
        case budgetExceeded
        /// Encoding or decoding audio failed inside FFmpeg.
        case audioEncodingFailed
        /// The run was cancelled by SIGINT/SIGTERM.
        case cancelled
        /// The state database (`<state>/state.sqlite`) could not be opened, read or written.
        case stateFailed
        /// A map tile could not be fetched. Fails its tour only.
        case mapDownloadFailed
        /// The shared object store (`state.objects`) failed an operation.
        case objectStorageFailed
        /// Something tourpack itself got wrong: a bug, never the user's input.
        case internalInvariant
        /// Another install holds the Documents root (`tourpack install`).
        case alreadyDownloading
        /// The package is installed at the catalogue's version and `--no-reinstall` was given.
        case alreadyDownloaded
        /// Something the site served does not match what names it: a catalogue
        /// whose signature fails, a manifest or file whose SHA-256 or size differs.
        case integrityFailed
        /// The site's catalogue is past its `expiresAt`: a mirror may be
        /// serving a frozen copy. Installed packages keep playing; nothing new is downloaded.
        case catalogExpired
        /// The site's catalogue is older than one this device verified
        /// (a lower generation), or absurdly far ahead of it: nothing on the device changed.
        case rollbackRefused
    }

    /// Where a failure happened; every field optional.
    public struct Context: Sendable, Hashable {
        /// `tour / POI / Phase`, for audio failures.
        public var item: String?
        /// A file or folder.
        public var path: String?
        /// What was being done to `path` (`rename`, `fsync folder`…).
        public var operation: String?
        /// The errno the system call returned; never made up.
        public var errno: Int32?
        /// An endpoint or tile URL, without its key or query.
        public var url: String?
        /// The HTTP status, when an answer came back.
        public var status: Int?
        /// A map tile, `z/x/y`.
        public var tile: String?

        public init(
            item: String? = nil, path: String? = nil, operation: String? = nil, errno: Int32? = nil, url: String? = nil,
            status: Int? = nil, tile: String? = nil
        ) {
            self.item = item
            self.path = path
            self.operation = operation
            self.errno = errno
            self.url = url
            self.status = status
            self.tile = tile
        }
    }

    public var kind: Kind
    /// What went wrong, in words, without the context (which `description` adds).
    public var message: String
    public var context: Context
    /// The error underneath, when there was one.
    public var cause: (any Error & Sendable)?

    public init(_ kind: Kind, _ message: String, context: Context = Context(), cause: (any Error & Sendable)? = nil) {
        self.kind = kind
        self.message = message
        self.context = context
        self.cause = cause
    }

    /// Kind, message and context; the cause is not compared.
    public static func == (lhs: TourpackError, rhs: TourpackError) -> Bool {
        lhs.kind == rhs.kind && lhs.message == rhs.message && lhs.context == rhs.context
    }

    public var description: String {
        let c = context
        // An install's failures name the package first (`item`); no other kind below sets it.
        let package = c.item.map { "\($0): " } ?? ""
        switch kind {
        case .networkUnavailable:
            let answer = c.status.map { "HTTP \($0): " } ?? ""
            return "\(package)network unavailable: \(c.url ?? "the endpoint"): \(answer)\(message)"
        case .audioGenerationFailed:
            let status = c.status.map { "HTTP \($0): " } ?? ""
            return "\(c.item ?? "audio"): audio generation failed: \(status)\(message)"
        case .storageFailed:
            let errno = c.errno.map { ": \(errnoDescription($0)) (errno \($0))" } ?? (message.isEmpty ? "" : ": \(message)")
            return "\(package)\(c.path ?? "?"): \(c.operation ?? "file operation") failed\(errno)"
        case .alreadyBuilding:
            // A command that never waits (`cache prune`, `cache clear`) has no --no-wait to drop.
            guard let command = c.operation else {
                return "another build is running on this output root (lock \(c.path ?? "?")); retry later, or drop --no-wait to wait for it"
            }
            return
                "another build is running on this output root (lock \(c.path ?? "?")); \(command) does not wait: retry once it has finished"
        case .invalidInput:
            return message
        case .budgetExceeded:
            return "budget refused the build: \(message)"
        case .audioEncodingFailed:
            return "\(c.item ?? "audio"): encoding failed: \(message)"
        case .cancelled:
            return "cancelled"
        case .stateFailed:
            // A PostgreSQL backend is named by its URL (never with a password), a SQLite one by its file.
            if c.path == nil, let url = c.url { return "state: \(url): \(message)" }
            return "\(c.path ?? "?"): state database: \(message)"
        case .mapDownloadFailed:
            let answer = c.status.map { "HTTP \($0): " } ?? ""
            // A tile of a build, or an installed package's whole tile pack.
            let what = c.tile.map { "tile \($0)" } ?? c.path ?? "tile ?"
            return "\(package)mapDownloadFailed: \(what) (\(c.url ?? "?")): \(answer)\(message)"
        case .objectStorageFailed:
            let answer = c.status.map { "HTTP \($0): " } ?? ""
            return "object storage: \(c.operation ?? "?") \(c.url ?? "?") failed: \(answer)\(message)"
        case .internalInvariant:
            return "internal error (a bug in tourpack, please report it): \(message)"
        case .alreadyDownloading:
            return "alreadyDownloading: another install is running on \(c.path ?? "this Documents root"); retry when it has finished"
        case .alreadyDownloaded:
            return "\(package)alreadyDownloaded: \(message)"
        case .integrityFailed:
            // A message that opens with its file (`….json is damaged`) names it once.
            let file = c.path.map { message.hasPrefix($0) ? "" : "\($0): " } ?? ""
            return "\(package)integrity check failed: \(file)\(message)"
        case .catalogExpired:
            return "catalogExpired: \(c.url.map { "\($0): " } ?? "")\(message)"
        case .rollbackRefused:
            return "rollbackRefused: \(c.url.map { "\($0): " } ?? "")\(message)"
        }
    }

    // MARK: The kinds, as constructors

    public static func networkUnavailable(endpoint: String, reason: String) -> TourpackError {
        TourpackError(.networkUnavailable, reason, context: Context(url: endpoint))
    }

    public static func audioGenerationFailed(item: String, status: Int?, message: String) -> TourpackError {
        TourpackError(.audioGenerationFailed, message, context: Context(item: item, status: status))
    }

    /// A system call on `path` failed with `errno` (as it returned it).
    public static func storageFailed(path: String, errno: Int32, operation: String) -> TourpackError {
        TourpackError(.storageFailed, "", context: Context(path: path, operation: operation, errno: errno))
    }

    /// A file operation on `path` failed for a reason that is not an errno
    /// from a system call: no errno is made up for it.
    public static func storageFailed(path: String, operation: String, reason: String, cause: (any Error & Sendable)? = nil) -> TourpackError
    {
        TourpackError(.storageFailed, reason, context: Context(path: path, operation: operation), cause: cause)
    }

    /// - Parameter command: a command that never waits for the lock (`cache prune`), named in the advice.
    public static func alreadyBuilding(lockPath: String, command: String? = nil) -> TourpackError {
        TourpackError(.alreadyBuilding, "another build holds the lock", context: Context(path: lockPath, operation: command))
    }

    public static func invalidInput(_ message: String) -> TourpackError {
        TourpackError(.invalidInput, message)
    }

    public static func budgetExceeded(_ message: String) -> TourpackError {
        TourpackError(.budgetExceeded, message)
    }

    public static func audioEncodingFailed(item: String, message: String) -> TourpackError {
        TourpackError(.audioEncodingFailed, message, context: Context(item: item))
    }

    public static let cancelled = TourpackError(.cancelled, "cancelled")

    public static func stateFailed(path: String, message: String) -> TourpackError {
        TourpackError(.stateFailed, message, context: Context(path: path))
    }

    public static func mapDownloadFailed(tile: String, url: String, status: Int?, message: String) -> TourpackError {
        TourpackError(.mapDownloadFailed, message, context: Context(url: url, status: status, tile: tile))
    }

    /// The object store failed `operation` on `object` (its URL without query
    /// or user info), with the server's message scrubbed of both keys.
    public static func objectStorageFailed(operation: String, object: String, status: Int?, message: String) -> TourpackError {
        TourpackError(.objectStorageFailed, message, context: Context(operation: operation, url: object, status: status))
    }

    /// Another install holds `lockPath` (the Documents root).
    public static func alreadyDownloading(lockPath: String) -> TourpackError {
        TourpackError(.alreadyDownloading, "another install holds the lock", context: Context(path: lockPath))
    }

    /// `package` is installed at the version on offer and was not to be installed again.
    public static func alreadyDownloaded(package: String, message: String) -> TourpackError {
        TourpackError(.alreadyDownloaded, message, context: Context(item: package))
    }

    /// `file` (of `package`, when there is one) is not what names it.
    public static func integrityFailed(package: String?, file: String?, message: String, url: String? = nil) -> TourpackError {
        TourpackError(.integrityFailed, message, context: Context(item: package, path: file, url: url))
    }

    /// Something that cannot happen did: exit 1, and the message says it is ours.
    public static func internalInvariant(_ message: String) -> TourpackError {
        TourpackError(.internalInvariant, message)
    }
}

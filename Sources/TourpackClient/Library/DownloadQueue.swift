import Dispatch
import Foundation
import TourpackPackage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// One download the library owes the app, as `.tourpack-install/queue.json`
/// keeps it between launches: the tour, the choice it was started with,
/// and where it stands.
struct QueuedDownload: Codable, Sendable, Hashable {
    enum State: String, Codable, Sendable {
        /// Waiting for its turn, or for a network it may use.
        case queued
        /// Fetching or installing when the record was written.
        case running
        /// Paused by the user.
        case paused
        /// Failed; kept until the app retries, deletes or dismisses it.
        case failed
    }

    /// Why a failed download failed, as the app was told.
    struct Failure: Codable, Sendable, Hashable {
        var kind: String
        var message: String
        var package: String?
        var file: String?

        init(_ error: OfflineError) {
            kind = error.kind.rawValue
            message = error.message
            package = error.package
            file = error.file
        }

        var error: OfflineError {
            OfflineError(OfflineError.Kind(rawValue: kind) ?? .storageFailed, message, package: package, file: file)
        }
    }

    var tourId: UUID
    var tourName: String
    var format: AudioFormat?
    var quality: AudioQuality?
    /// The download's own cellular choice; nil: the policy's.
    var allowsCellular: Bool?
    var state: State
    var failure: Failure?
    /// The POIs the app asked to go first (`prioritize`), nearest first:
    /// a download a relaunch resumes keeps them. Absent in earlier versions' files.
    var preferredPOIs: [String]?
}

/// `.tourpack-install/queue.json`: every download the library owes, in
/// order, written at each change of state (never per byte), one write
/// after another on a serial queue off the cooperative pool.
///
/// Each write is the whole queue on one line of JSON, appended to the file
/// this library wrote last: a file made and renamed per change would cost a
/// new inode each time, the dearest thing a small download does on a file
/// system. A reader takes the last line that reads whole, so a write a kill
/// cut short reads as the one before it. The file is written anew (a
/// temporary file renamed over it) when it holds another writer's lines,
/// when this library has not written it yet, and past `compactionBytes`.
///
/// A change the app waits on (a pause, a failure) is on disk before the
/// call returns (`write`); a download asked for is written at once, not
/// waited for (`post`); a download that completed is written within a tenth
/// of a second, together with what follows it (a small package's on a fast
/// link, with the next download asked for). A write the file already holds
/// is skipped.
final class DownloadQueueFile: @unchecked Sendable {
    let url: URL
    private let storage: DeviceStorage
    private let queue = DispatchQueue(label: "tourpack.client.queue-file", qos: .utility)
    /// How long a posted change waits for the ones that follow it.
    static let postDelay: DispatchTimeInterval = .milliseconds(100)
    /// Past this size the file is written anew with the last line only.
    static let compactionBytes: Int64 = 64 * 1024
    // Touched on `queue` only.
    /// What this library wrote last, and the file as it left it (inode,
    /// size and time): a write is skipped, or appended, only while the file
    /// is still that one.
    private var written: (data: Data, file: FileStatus?)?
    /// The change posted last and not written yet, and whether a write is
    /// scheduled for it; under `lock`. A write asked for since (`write`, a
    /// prompt `post`) clears it before it goes on `queue`, so nothing older
    /// is written after it.
    private let lock = NSLock()
    private var pending: [QueuedDownload]?
    private var scheduled = false

    init(folder: InstallFolder, storage: DeviceStorage) {
        url = folder.url.appendingPathComponent("queue.json")
        self.storage = storage
    }

    private struct Contents: Decodable {
        var schemaVersion = 1
        var downloads: [QueuedDownload]
    }

    /// The downloads recorded; none when there is no file. A file that does
    /// not read is set aside (`queue.json.damaged`), never trusted: the
    /// downloads it held are asked for again by the app.
    func read() async -> [QueuedDownload] {
        let url = self.url
        return await withCheckedContinuation { continuation in
            queue.async {
                guard let data = FileManager.default.contents(atPath: url.path) else { return continuation.resume(returning: []) }
                if let downloads = Self.decode(data) { return continuation.resume(returning: downloads) }
                _ = try? AtomicFile.move(url, to: url.appendingPathExtension("damaged"))
                continuation.resume(returning: [])
            }
        }
    }

    /// Writes `downloads` in place of what the file held; returns once it is on disk.
    func write(_ downloads: [QueuedDownload]) async {
        await withCheckedContinuation { continuation in
            // Newer than anything posted before it: that goes unwritten.
            lock.withLock { pending = nil }
            queue.async {
                self.store(downloads)
                continuation.resume()
            }
        }
    }

    /// Writes `downloads` after every change asked for before, and returns
    /// at once: `promptly`, as soon as the queue gets to it (a download asked
    /// for); otherwise within `postDelay`, and a later change replaces it
    /// unwritten (a download that completed: a record a kill kept finds its
    /// package installed, and goes).
    ///
    /// A change that may wait wakes no thread: it is left for the write
    /// already scheduled, and schedules one only when none is.
    func post(_ downloads: [QueuedDownload], promptly: Bool) {
        if promptly {
            lock.withLock { pending = nil }
            return queue.async { self.store(downloads) }
        }
        let schedules = lock.withLock { () -> Bool in
            pending = downloads
            defer { scheduled = true }
            return !scheduled
        }
        guard schedules else { return }
        queue.asyncAfter(deadline: .now() + Self.postDelay) {
            let latest = self.lock.withLock { () -> [QueuedDownload]? in
                defer { (self.pending, self.scheduled) = (nil, false) }
                return self.pending
            }
            if let latest { self.store(latest) }
        }
    }

    /// The queue a file holds: the whole file as one document (as an
    /// earlier version wrote it, or one line), else its last line that
    /// reads whole; nil when nothing in it reads.
    static func decode(_ data: Data) -> [QueuedDownload]? {
        let decoder = JSONDecoder()
        if let whole = try? decoder.decode(Contents.self, from: data) { return whole.downloads }
        for line in data.split(separator: UInt8(ascii: "\n")).reversed() {
            if let contents = try? decoder.decode(Contents.self, from: Data(line)) { return contents.downloads }
        }
        return nil
    }

    private func store(_ downloads: [QueuedDownload]) {
        let line = Self.line(downloads)
        let present = FileStatus(path: url.path)
        if let written, written.data == line, written.file == present { return }
        if downloads.isEmpty, present == nil { return }  // Nothing owed and no file: nothing to write.
        // Not synced: a record a power cut loses is a download the app asks for again.
        do {
            if let written, let present, written.file == present, present.size + Int64(line.count) <= Self.compactionBytes {
                try append(line)
            } else {
                try AtomicFile.createFolder(url.deletingLastPathComponent())
                try AtomicFile.replace(Array(line), at: url)
                storage.protect(url)
            }
            written = (line, FileStatus(path: url.path))
        } catch {
            // The queue lives on in memory; the next write tries again, whole.
            written = nil
        }
    }

    /// The queue as one line of JSON and its newline, keys sorted, as
    /// `JSONEncoder` with `.sortedKeys` wrote `Contents` (and `decode`
    /// reads): through the package's canonical JSON writer, because
    /// `JSONEncoder` takes about a tenth of a millisecond for one record,
    /// more than the rest of a small download's bookkeeping.
    static func line(_ downloads: [QueuedDownload]) -> Data {
        func string(_ text: String?) -> JSONValue? { text.map(JSONValue.string) }
        let records: [JSONValue] = downloads.map { record in
            let failure = record.failure.map { failure in
                JSONValue.object(
                    [
                        ("file", string(failure.file)), ("kind", .string(failure.kind)), ("message", .string(failure.message)),
                        ("package", string(failure.package)),
                    ].compactMap { key, value in value.map { (key, $0) } })
            }
            let fields: [(String, JSONValue?)] = [
                ("allowsCellular", record.allowsCellular.map(JSONValue.bool)), ("failure", failure),
                ("format", string(record.format?.rawValue)),
                ("preferredPOIs", record.preferredPOIs.map { .array($0.map(JSONValue.string)) }),
                ("quality", string(record.quality?.rawValue)), ("state", .string(record.state.rawValue)),
                ("tourId", .string(record.tourId.uuidString)), ("tourName", .string(record.tourName)),
            ]
            return .object(fields.compactMap { key, value in value.map { (key, $0) } })
        }
        var bytes = JSONValue.object([("downloads", .array(records)), ("schemaVersion", .number(1))]).canonicalBytes(pretty: false)
        bytes.append(UInt8(ascii: "\n"))
        return Data(bytes)
    }

    /// Appends `line` with one `write`, to the file as it is (never a link put in its place).
    private func append(_ line: Data) throws {
        let descriptor = open(url.path, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else { throw TourpackError.storageFailed(path: url.path, errno: errno, operation: "open") }
        defer { close(descriptor) }
        let count = appendOnce(descriptor, line)
        guard count == line.count else {
            throw TourpackError.storageFailed(path: url.path, errno: count < 0 ? errno : EIO, operation: "append")
        }
    }
}

/// Every job update, to every observer: the `jobs` streams any number of
/// screens hold, and the streams `download(tourId:)` returned for a tour.
/// The latest job of each tour is kept too. Lock-protected, so the
/// installer's progress reaches observers in order, without a hop.
final class JobBroadcast: @unchecked Sendable {
    private let lock = NSLock()
    private var listeners: [UUID: AsyncStream<DownloadJob>.Continuation] = [:]
    private var followers: [UUID: [AsyncThrowingStream<DownloadJob, any Error>.Continuation]] = [:]
    private var latest: [UUID: DownloadJob] = [:]

    func stream() -> AsyncStream<DownloadJob> {
        AsyncStream(bufferingPolicy: .bufferingNewest(256)) { continuation in
            let id = UUID()
            lock.withLock { listeners[id] = continuation }
            continuation.onTermination = { [weak self] _ in
                guard let self else { return }
                _ = self.lock.withLock { self.listeners.removeValue(forKey: id) }
            }
        }
    }

    func follow(_ tourId: UUID, _ continuation: AsyncThrowingStream<DownloadJob, any Error>.Continuation) {
        let job = lock.withLock {
            followers[tourId, default: []].append(continuation)
            return latest[tourId]
        }
        if let job { continuation.yield(job) }
    }

    /// The job as last published.
    func job(_ tourId: UUID) -> DownloadJob? { lock.withLock { latest[tourId] } }

    func publish(_ job: DownloadJob) {
        let (all, mine) = lock.withLock {
            latest[job.tourId] = job
            return (Array(listeners.values), followers[job.tourId] ?? [])
        }
        for listener in all { listener.yield(job) }
        for follower in mine { follower.yield(job) }
    }

    /// Ends the tour's `download` streams: normally, or with `error`.
    func finish(_ tourId: UUID, throwing error: OfflineError?) {
        let mine = lock.withLock { followers.removeValue(forKey: tourId) ?? [] }
        for follower in mine { follower.finish(throwing: error) }
    }

    func forget(_ tourId: UUID) { _ = lock.withLock { latest.removeValue(forKey: tourId) } }
}

/// One `write(2)` of `bytes`: what it wrote, or -1 (`errno` says why).
private func appendOnce(_ descriptor: Int32, _ bytes: Data) -> Int {
    bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
}

import Dispatch
import Foundation
import TourpackPackage

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
}

/// `.tourpack-install/queue.json`: every download the library owes, in
/// order, written whole and atomically at each change of state (never per
/// byte), one write after another on a serial queue off the cooperative pool.
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
    // Touched on `queue` only.
    /// What this library wrote last, and the file it made (inode and time):
    /// a write is skipped only while the file is still that one.
    private var written: (data: Data, file: FileStatus?)?
    private var pending: [QueuedDownload]?

    init(folder: InstallFolder, storage: DeviceStorage) {
        url = folder.url.appendingPathComponent("queue.json")
        self.storage = storage
    }

    private struct Contents: Codable {
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
                do {
                    continuation.resume(returning: try JSONDecoder().decode(Contents.self, from: data).downloads)
                } catch {
                    _ = try? AtomicFile.move(url, to: url.appendingPathExtension("damaged"))
                    continuation.resume(returning: [])
                }
            }
        }
    }

    /// Writes `downloads` in place of what the file held; returns once it is on disk.
    func write(_ downloads: [QueuedDownload]) async {
        await withCheckedContinuation { continuation in
            queue.async {
                // Newer than anything posted before it: that goes unwritten.
                self.pending = nil
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
    func post(_ downloads: [QueuedDownload], promptly: Bool) {
        queue.async {
            if promptly {
                self.pending = nil
                return self.store(downloads)
            }
            let scheduled = self.pending != nil
            self.pending = downloads
            guard !scheduled else { return }
            self.queue.asyncAfter(deadline: .now() + Self.postDelay) {
                guard let latest = self.pending else { return }
                self.pending = nil
                self.store(latest)
            }
        }
    }

    private func store(_ downloads: [QueuedDownload]) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        guard let data = try? encoder.encode(Contents(downloads: downloads)) else { return }
        let present = FileStatus(path: url.path)
        if let written, written.data == data, written.file == present { return }
        if downloads.isEmpty, present == nil { return }  // Nothing owed and no file: nothing to write.
        do {
            try AtomicFile.createFolder(url.deletingLastPathComponent())
            // Not synced: a record a power cut loses is a download the app asks for again.
            try AtomicFile.replace(Array(data), at: url)
            storage.protect(url)
            written = (data, FileStatus(path: url.path))
        } catch {
            // The queue lives on in memory; the next write tries again.
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

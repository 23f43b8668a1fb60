import Dispatch
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The live `InProcessSite`s by host, held weakly: how the protocol, which
/// URLSession makes for each task, finds the site a request is for.
final class InProcessSites: @unchecked Sendable {
    static let shared = InProcessSites()

    private struct Entry {
        weak var site: InProcessSite?
    }

    private let lock = NSLock()
    private var sites: [String: Entry] = [:]

    func add(_ site: InProcessSite, host: String) { lock.withLock { sites[host.lowercased()] = Entry(site: site) } }
    func remove(host: String) { _ = lock.withLock { sites.removeValue(forKey: host.lowercased()) } }
    func site(host: String) -> InProcessSite? { lock.withLock { sites[host.lowercased()]?.site } }
}

/// The `URLProtocol` behind `InProcessSite.configuration`: answers every
/// request for a host under `tourpack.test` from the site registered for
/// it, and streams the body from the file, 64 KiB at a time, on a queue of
/// its own, in the order URLSession's client expects (head, pieces, end).
///
/// swift-corelibs-foundation's URLSession suspends a task by calling
/// `stopLoading()` and resumes it by calling `startLoading()` again on the
/// same instance (Darwin's does neither), so a stop while the task is not
/// being cancelled or finished pauses the stream, and a second start
/// continues it where it was: a suspended task neither restarts its body
/// nor loses it.
final class InProcessSiteProtocol: URLProtocol {
    /// A piece of a file's body as it is read and sent.
    static let pieceBytes = 65_536

    private enum Phase {
        case idle
        case streaming
        case paused
        case stopped
    }

    private let lock = NSLock()
    private let queue = DispatchQueue(label: "tourpack.in-process-site")
    private var phase = Phase.idle
    /// Set once the loading system stopped the protocol for good (the task
    /// cancelled or done, its session invalidated): nothing more is told to
    /// `client`. corelibs looks up the task's session for every call, and
    /// a session released meanwhile would be a null dereference there.
    private var ended = false
    private var site: InProcessSite?
    private var logId = 0
    private var handle: FileHandle?
    private var remaining: Int64 = 0
    /// Body bytes still allowed before the injected cut; nil: none.
    private var cutLeft: Int64?

    override class func canInit(with request: URLRequest) -> Bool {
        guard let host = request.url?.host?.lowercased(), let scheme = request.url?.scheme?.lowercased() else { return false }
        return (scheme == "https" || scheme == "http") && (host == InProcessSite.domain || host.hasSuffix("." + InProcessSite.domain))
    }

    override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }

    override func startLoading() {
        let first: Bool = lock.withLock {
            switch phase {
            case .idle:
                phase = .streaming
                return true
            case .paused:
                phase = .streaming
                return false
            case .streaming, .stopped:
                return false
            }
        }
        let this = Unchecked(self)
        if first {
            queue.async { this.value.begin() }
        } else {
            queue.async { this.value.step() }
        }
    }

    override func stopLoading() {
        // corelibs' suspend(): the task is neither cancelled nor complete; pause.
        let state = task?.state
        let pauses = state == .running || state == .suspended
        let close: FileHandle? = lock.withLock {
            if pauses, phase == .streaming {
                phase = .paused
                return nil
            }
            guard !pauses else { return nil }
            phase = .stopped
            ended = true
            defer { handle = nil }
            return handle
        }
        if let close { queue.async { try? close.close() } }
    }

    /// Asks the site, sends the head, and starts the body.
    private func begin() {
        guard let host = request.url?.host, let site = InProcessSites.shared.site(host: host) else {
            finish(.cannotFindHost)
            return
        }
        let (answer, id) = site.answer(request)
        switch answer {
        case .failure(let code):
            finish(code)
        case .answer(let response, let body, let cutAfter):
            var opened: FileHandle?
            if case .file(let url, let offset, _) = body {
                do {
                    let handle = try FileHandle(forReadingFrom: url)
                    try handle.seek(toOffset: UInt64(offset))
                    opened = handle
                } catch {
                    // Gone between the answer and the read (a publish replacing it): a connection lost.
                    finish(.networkConnectionLost)
                    return
                }
            }
            let going: Bool = lock.withLock {
                self.site = site
                logId = id
                handle = opened
                remaining = body.length
                cutLeft = cutAfter
                return phase != .stopped
            }
            guard going else {
                try? opened?.close()
                return
            }
            tell { $0.urlProtocol(self, didReceive: response, cacheStoragePolicy: .notAllowed) }
            if case .text(let data) = body {
                send(data)
                lock.withLock { remaining = 0 }
            }
            step()
        }
    }

    /// Sends the next piece of the file, then schedules the one after; ends the answer after the last.
    private func step() {
        enum Next {
            case wait
            case piece(FileHandle, Int)
            case done
            case cut
        }
        let next: Next = lock.withLock {
            guard phase == .streaming else { return .wait }
            if remaining == 0 { return .done }
            if let cutLeft, cutLeft == 0 { return .cut }
            guard let handle else { return .done }
            let size = min(Int64(Self.pieceBytes), remaining, cutLeft ?? .max)
            return .piece(handle, Int(size))
        }
        switch next {
        case .wait:
            return
        case .done:
            close()
            tell { $0.urlProtocolDidFinishLoading(self) }
        case .cut:
            close()
            tell { $0.urlProtocol(self, didFailWithError: URLError(.networkConnectionLost)) }
        case .piece(let handle, let size):
            guard let data = try? handle.read(upToCount: size), !data.isEmpty else {
                // The file is shorter than when it was answered.
                close()
                tell { $0.urlProtocol(self, didFailWithError: URLError(.networkConnectionLost)) }
                return
            }
            lock.withLock {
                remaining -= Int64(data.count)
                if let left = cutLeft { cutLeft = left - Int64(data.count) }
            }
            send(data)
            let this = Unchecked(self)
            queue.async { this.value.step() }
        }
    }

    private func send(_ data: Data) {
        let (site, id) = lock.withLock { (self.site, logId) }
        site?.sent(data.count, to: id)
        tell { $0.urlProtocol(self, didLoad: data) }
    }

    /// Tells `client`, unless the task is being cancelled or is done, or the
    /// loading system has stopped the protocol since (a piece read from the
    /// file while the task was cancelled). A session invalidated and released
    /// (an app's source let go) cancels its tasks at once, and stops their
    /// protocols only later, on its own queue: the task's state says so
    /// first. A suspended task is still told: corelibs holds what arrives.
    private func tell(_ call: (any URLProtocolClient) -> Void) {
        let state = task?.state
        guard let client, state != .canceling, state != .completed, !lock.withLock({ ended }) else { return }
        call(client)
    }

    private func close() {
        let closing: FileHandle? = lock.withLock {
            phase = .stopped
            defer { handle = nil }
            return handle
        }
        try? closing?.close()
    }

    private func finish(_ code: URLError.Code) {
        close()
        tell { $0.urlProtocol(self, didFailWithError: URLError(code)) }
    }
}

/// The protocol on its own queue. corelibs marks `URLProtocol` not
/// `Sendable`; this one's mutable state is behind its lock, and its body
/// work runs on its serial queue, so handing it to that queue is safe.
private struct Unchecked<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}

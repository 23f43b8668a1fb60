import Dispatch
import Foundation
import TourpackPackage

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The session's delegate: hands each task's events to the `Receiver`
/// registered for it. One per `URLSessionSiteSource`.
final class TaskRouter: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    private let lock = NSLock()
    private var receivers: [Int: Receiver] = [:]

    func register(_ receiver: Receiver, for task: Int) { lock.withLock { receivers[task] = receiver } }
    func remove(_ task: Int) { _ = lock.withLock { receivers.removeValue(forKey: task) } }
    private func receiver(_ task: URLSessionTask) -> Receiver? { lock.withLock { receivers[task.taskIdentifier] } }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping (URLSession.ResponseDisposition) -> Void
    ) {
        completionHandler(receiver(dataTask)?.head(response) ?? .cancel)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        receiver(dataTask)?.body(data)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        receiver(task)?.finish(error)
    }

    /// Redirects are followed only to the same scheme (never from HTTPS to HTTP).
    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping (URLRequest?) -> Void
    ) {
        let same = request.url?.scheme?.lowercased() == task.originalRequest?.url?.scheme?.lowercased()
        completionHandler(same ? request : nil)
    }
}

/// One exchange's answer as it arrives: the head checked, the body
/// streamed into memory (bounded) or onto the file (continuing it only when
/// `Content-Range` says so, never past its size), and the rate watched, so
/// that a trickle is abandoned as a failed try.
final class Receiver: @unchecked Sendable {
    private let lock = NSLock()
    private let sink: URLSessionSiteSource.Sink
    private let policy: TransferPolicy
    private let deadline: Double
    private var task: URLSessionTask?
    private var continuation: CheckedContinuation<URLSessionSiteSource.Outcome, Never>?
    private var status = 0
    private var headers: [String: String] = [:]
    private var memory: [UInt8] = []
    private var handle: FileHandle?
    private var written: Int64 = 0
    private var accepted = false
    private var failure: URLSessionSiteSource.Failure?
    private var timer: (any DispatchSourceTimer)?
    private let started = ContinuousClock.now
    /// Bytes received at each watchdog tick, for the rate over the window.
    private var samples: [(at: ContinuousClock.Instant, bytes: Int64)] = []
    private var received: Int64 = 0
    private var lastReport = ContinuousClock.now
    /// Whether this receiver suspended its task to let the delegate queue catch up.
    private var heldBack = false

    /// How far the session may run ahead of what has been written. URLSession
    /// hands each chunk to the delegate queue as it arrives, however fast; on
    /// a fast link the queue (and memory) would grow with the file. Past this
    /// backlog the task is suspended (the transfer pauses, the socket's
    /// window closes) until the queue has drained below a quarter of it.
    static let maximumBacklog: Int64 = 4 << 20

    init(sink: URLSessionSiteSource.Sink, policy: TransferPolicy, deadline: Double) {
        self.sink = sink
        self.policy = policy
        self.deadline = deadline
    }

    func start(task: URLSessionTask, continuation: CheckedContinuation<URLSessionSiteSource.Outcome, Never>) {
        lock.withLock {
            self.task = task
            self.continuation = continuation
            samples = [(started, 0)]
        }
        let timer = DispatchSource.makeTimerSource(queue: DispatchQueue.global(qos: .utility))
        timer.schedule(deadline: .now() + 1, repeating: 1)
        timer.setEventHandler { [weak self] in self?.watch() }
        lock.withLock { self.timer = timer }
        timer.resume()
        task.resume()
    }

    /// Once a second: past the deadline, or slower than the minimum rate over a whole window, the try is abandoned.
    private func watch() {
        let cancel: URLSessionTask? = lock.withLock {
            guard failure == nil, continuation != nil else { return nil }
            let now = ContinuousClock.now
            samples.append((now, received))
            let elapsed = started.duration(to: now).seconds
            if elapsed > deadline {
                failure = .init(
                    kind: .retryable, reason: "no whole answer within the file's deadline", status: statusOrNil, sinkAccepted: accepted)
                return task
            }
            let window = policy.rateWindowSeconds
            guard elapsed >= window, policy.minimumBytesPerSecond > 0 else { return nil }
            samples.removeAll { $0.at.duration(to: now).seconds > window + 1 }
            guard let first = samples.first else { return nil }
            let span = max(first.at.duration(to: now).seconds, 1)
            let rate = Double(received - first.bytes) / span
            if span >= window, rate < Double(policy.minimumBytesPerSecond) {
                failure = .init(
                    kind: .retryable,
                    reason: "slower than \(policy.minimumBytesPerSecond) bytes a second over \(Int(window)) s (\(Int(rate)) B/s)",
                    status: statusOrNil, sinkAccepted: accepted)
                return task
            }
            return nil
        }
        cancel?.cancel()
    }

    private var statusOrNil: Int? { status == 0 ? nil : status }

    func head(_ response: URLResponse) -> URLSession.ResponseDisposition {
        lock.withLock {
            guard let http = response as? HTTPURLResponse else {
                failure = .init(kind: .retryable, reason: "not an HTTP answer", status: nil, sinkAccepted: false)
                return .cancel
            }
            status = http.statusCode
            for (name, value) in http.allHeaderFields {
                if let name = name as? String, let value = value as? String { headers[name.lowercased()] = value }
            }
            guard case .file(let attempt, _) = sink else { return .allow }
            let verdict = attempt.accept(status: status, headers: headers)
            switch verdict {
            case .message:
                return .allow
            case .refused(let reason):
                failure = .init(kind: .retryable, reason: reason, status: status, sinkAccepted: false)
                return .cancel
            case .unwritable(let path, let reason):
                failure = .init(kind: .storage(path: path), reason: reason, status: status, sinkAccepted: false)
                return .cancel
            case .fromStart, .continuing:
                break
            }
            do {
                written = verdict == .fromStart ? 0 : attempt.have
                if !FileManager.default.fileExists(atPath: attempt.file.path) {
                    guard FileManager.default.createFile(atPath: attempt.file.path, contents: nil) else {
                        throw CocoaError(.fileWriteUnknown)
                    }
                }
                let opened = try FileHandle(forWritingTo: attempt.file)
                try opened.seekToEnd()
                handle = opened
                accepted = true
            } catch {
                failure = .init(kind: .storage(path: attempt.file.path), reason: "\(error)", status: status, sinkAccepted: false)
                return .cancel
            }
            return .allow
        }
    }

    func body(_ data: Data) {
        var report: (@Sendable (DownloadObservation) -> Void, Int64)?
        let cancel: URLSessionTask? = lock.withLock {
            guard failure == nil else { return task }
            received += Int64(data.count)
            switch sink {
            case .memory(let cap, let what):
                guard memory.count + data.count <= cap else {
                    failure = .init(
                        kind: .tooLong, reason: "the \(what) is over its cap of \(cap) bytes", status: status, sinkAccepted: false)
                    return task
                }
                memory.append(contentsOf: data)
            case .file(let attempt, let observe):
                let (file, size) = (attempt.file, attempt.size)
                guard accepted, let handle else {
                    // An error's body: its first bytes are the server's message.
                    if memory.count < 400 { memory.append(contentsOf: data.prefix(400 - memory.count)) }
                    return nil
                }
                // `size - written` cannot overflow (0 ≤ written ≤ size); `written + count` could, for a size near Int64.max.
                guard Int64(data.count) <= size - written else {
                    failure = .init(
                        kind: .tooLong, reason: "the answer is longer than the \(size) bytes the package.json names", status: status,
                        sinkAccepted: false)
                    return task
                }
                do { try handle.write(contentsOf: data) } catch {
                    failure = .init(kind: .storage(path: file.path), reason: "\(error)", status: status, sinkAccepted: true)
                    return task
                }
                written += Int64(data.count)
                let now = ContinuousClock.now
                if lastReport.duration(to: now) >= .milliseconds(250) {
                    lastReport = now
                    report = (observe, written)
                }
            }
            return nil
        }
        cancel?.cancel()
        if let (observe, bytes) = report { observe(.bytes(bytes)) }
        throttle()
    }

    /// Suspends the task while the delegate queue holds more than
    /// `maximumBacklog` bytes it has not handled yet, and resumes it once
    /// the backlog is under a quarter of that.
    private func throttle() {
        let (running, change): (URLSessionTask?, Bool?) = lock.withLock {
            guard let current = self.task, failure == nil else { return (nil, nil) }
            let backlog = current.countOfBytesReceived - received
            if !heldBack, backlog > Self.maximumBacklog {
                heldBack = true
                return (current, true)
            }
            if heldBack, backlog < Self.maximumBacklog / 4 {
                heldBack = false
                return (current, false)
            }
            return (nil, nil)
        }
        guard let running, let change else { return }
        if change { running.suspend() } else { running.resume() }
    }

    func finish(_ error: (any Error)?) {
        let resumed: (CheckedContinuation<URLSessionSiteSource.Outcome, Never>, URLSessionSiteSource.Outcome)? = lock.withLock {
            timer?.cancel()
            timer = nil
            try? handle?.close()
            handle = nil
            guard let continuation else { return nil }
            self.continuation = nil
            let outcome: URLSessionSiteSource.Outcome
            if let failure {
                outcome = .failed(failure)
            } else if let error {
                outcome = .failed(.init(kind: .retryable, reason: Self.describe(error), status: statusOrNil, sinkAccepted: accepted))
            } else {
                outcome = .answered(.init(status: status, headers: headers, body: memory, sinkAccepted: accepted))
            }
            return (continuation, outcome)
        }
        if let (continuation, outcome) = resumed { continuation.resume(returning: outcome) }
    }

    private static func describe(_ error: any Error) -> String {
        let error = error as NSError
        if error.domain == NSURLErrorDomain {
            switch error.code {
            case NSURLErrorCancelled: return "cancelled"
            case NSURLErrorTimedOut: return "no bytes for the session's timeout"
            case NSURLErrorNetworkConnectionLost: return "the connection was cut"
            case NSURLErrorCannotConnectToHost: return "could not connect"
            case NSURLErrorNotConnectedToInternet: return "not connected"
            default: break
            }
        }
        return error.localizedDescription
    }
}

import CCurl
import CCurlShims
import Foundation

/// Owns one libcurl multi handle and the dedicated thread that drives it.
///
/// Every transfer of a synthesizer runs on this one thread, so blocking
/// network I/O never touches the Swift cooperative pool. The multi handle
/// keeps the connection pool and DNS cache, so connections are reused across
/// requests (and multiplexed over HTTP/2 where the server offers it).
/// Tasks hand transfers over through `lock`; the thread resumes each
/// transfer's continuation exactly once.
final class CurlMulti: @unchecked Sendable {
    private let handle: UnsafeMutableRawPointer  // CURLM *
    private let lock = NSLock()
    // Guarded by `lock`:
    private var incoming: [CurlTransfer] = []
    private var stopRequested = false
    private var lockedActive: [CurlTransfer] = []
    // Touched by the loop thread only:
    private var active: [UnsafeMutableRawPointer: CurlTransfer] = [:]

    init(maxConnections: Int) throws(TransportFailure) {
        guard CurlRuntime.isReady, let handle = curl_multi_init() else { throw .unusable("curl_multi_init failed") }
        self.handle = handle
        _ = tp_curl_multi_setopt_long(handle, CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX))
        _ = tp_curl_multi_setopt_long(handle, CURLMOPT_MAXCONNECTS, max(4, maxConnections * 2))
    }

    deinit { curl_multi_cleanup(handle) }

    /// Starts the thread. It keeps `self` alive until `stop()` has drained it.
    func start(name: String) {
        let thread = Thread { [self] in self.run() }
        thread.name = name
        thread.start()
    }

    /// Queues a transfer; its continuation must already be set.
    func submit(_ transfer: CurlTransfer) {
        lock.lock()
        incoming.append(transfer)
        lock.unlock()
        curl_multi_wakeup(handle)
    }

    /// Asks the thread to abandon a transfer; it resumes with `.cancelled`.
    func cancel(_ transfer: CurlTransfer) {
        lock.lock()
        transfer.cancelRequested = true
        lock.unlock()
        curl_multi_wakeup(handle)
    }

    /// Ends the thread once current transfers are abandoned.
    func stop() {
        lock.lock()
        stopRequested = true
        lock.unlock()
        curl_multi_wakeup(handle)
    }

    private func run() {
        while true {
            lock.lock()
            let arriving = incoming
            incoming.removeAll()
            lockedActive.append(contentsOf: arriving)
            let stopping = stopRequested
            let abandoned = lockedActive.filter { $0.cancelRequested || stopping }
            lockedActive.removeAll { $0.cancelRequested || stopping }
            let starting = arriving.filter { transfer in !abandoned.contains { $0 === transfer } }
            lock.unlock()

            for transfer in starting {
                if curl_multi_add_handle(handle, transfer.easy.handle) == CURLM_OK {
                    active[transfer.easy.handle] = transfer
                } else {
                    forget(transfer)
                    finish(transfer, .failure(.unusable("curl_multi_add_handle failed")))
                }
            }
            for transfer in abandoned {
                if active.removeValue(forKey: transfer.easy.handle) != nil {
                    curl_multi_remove_handle(handle, transfer.easy.handle)
                }
                finish(transfer, transfer.cancelledOutcome())
            }
            if stopping { return }

            var running: Int32 = 0
            curl_multi_perform(handle, &running)
            var queued: Int32 = 0
            while let message = curl_multi_info_read(handle, &queued) {
                guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle,
                    let transfer = active.removeValue(forKey: easy)
                else { continue }
                let code = message.pointee.data.result
                curl_multi_remove_handle(handle, easy)
                forget(transfer)
                finish(transfer, transfer.outcome(code))
            }
            var ready: Int32 = 0
            curl_multi_poll(handle, nil, 0, 1000, &ready)
        }
    }

    private func forget(_ transfer: CurlTransfer) {
        lock.lock()
        lockedActive.removeAll { $0 === transfer }
        lock.unlock()
    }

    private func finish(_ transfer: CurlTransfer, _ result: Result<HTTPResponse, TransportFailure>) {
        let continuation = transfer.continuation
        transfer.continuation = nil
        continuation?.resume(returning: result)
    }
}

/// The synthesizer's HTTP client: one `CurlMulti` and its thread, stopped
/// when the last synthesizer copy goes away.
///
/// The multi handle and its thread are made by the first request, and
/// libcurl's global set-up (`curl_global_init`, TLS included) with them: a
/// build whose every chunk is cached starts none of it. A set-up that fails
/// fails that request (and every later one) with `.unusable`.
package final class HTTPTransport: Sendable {
    /// Internal, not private: the tests look at whether it was made.
    let multi: OnFirstUse<Result<CurlMulti, TransportFailure>>

    package init(maxConnections: Int) {
        multi = OnFirstUse {
            Result { () throws(TransportFailure) in
                let multi = try CurlMulti(maxConnections: maxConnections)
                multi.start(name: "tourpack.curl")
                return multi
            }
        }
    }

    deinit {
        if case .success(let multi)? = multi.made { multi.stop() }
    }

    /// Performs one exchange; suspends the task, never a cooperative thread.
    package func perform(_ request: HTTPRequestSpec) async -> Result<HTTPResponse, TransportFailure> {
        let multi: CurlMulti
        let transfer: CurlTransfer
        do {
            multi = try self.multi.value.get()
            transfer = try CurlTransfer(request)
        } catch {
            return .failure(error)
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                transfer.continuation = continuation
                multi.submit(transfer)
            }
        } onCancel: {
            multi.cancel(transfer)
        }
    }
}

// Everything of the library that exists only on Apple's platforms, in one
// file: the network path (`NWPathMonitor`), backup exclusion, the file
// protection class and the free space an app may count on. Linux, where the
// rest of the library is built and tested, never compiles it; the macOS CI
// workflow (.github/workflows/client.yml) builds it for macOS and the iOS
// Simulator.
#if canImport(Network)
import Foundation
import Network

/// One `NWPathMonitor` for the process, fanned out to every stream asked for.
final class DarwinPathMonitor: @unchecked Sendable {
    static let shared = DarwinPathMonitor()

    private let monitor = NWPathMonitor()
    private let queue = DispatchQueue(label: "tourpack.client.network")
    private let lock = NSLock()
    private var latest: NetworkPath?
    private var waiting: [CheckedContinuation<NetworkPath, Never>] = []
    private var streams: [UUID: AsyncStream<NetworkPath>.Continuation] = [:]

    private init() {
        monitor.pathUpdateHandler = { [weak self] path in self?.publish(Self.path(path)) }
        monitor.start(queue: queue)
    }

    static func path(_ path: NWPath) -> NetworkPath {
        let interface: NetworkPath.Interface? =
            path.usesInterfaceType(.wifi)
            ? .wifi
            : path.usesInterfaceType(.wiredEthernet)
                ? .wiredEthernet : path.usesInterfaceType(.cellular) ? .cellular : (path.status == .satisfied ? .other : nil)
        return NetworkPath(
            isSatisfied: path.status == .satisfied, interface: interface, isExpensive: path.isExpensive,
            isConstrained: path.isConstrained)
    }

    private func publish(_ path: NetworkPath) {
        let (waiters, listeners) = lock.withLock {
            latest = path
            defer { waiting = [] }
            return (waiting, Array(streams.values))
        }
        for waiter in waiters { waiter.resume(returning: path) }
        for listener in listeners { listener.yield(path) }
    }

    /// The path now; the first call waits for the monitor's first answer.
    var currentPath: NetworkPath {
        get async {
            await withCheckedContinuation { continuation in
                let known: NetworkPath? = lock.withLock {
                    if let latest { return latest }
                    waiting.append(continuation)
                    return nil
                }
                if let known { continuation.resume(returning: known) }
            }
        }
    }

    func paths() -> AsyncStream<NetworkPath> {
        AsyncStream { continuation in
            let id = UUID()
            lock.withLock { streams[id] = continuation }
            continuation.onTermination = { [weak self] _ in self?.lock.withLock { _ = self?.streams.removeValue(forKey: id) } }
        }
    }
}
#endif

#if canImport(Darwin)
import Foundation

extension DeviceStorage {
    /// Apple's platforms: the library's folders stay out of iCloud and
    /// iTunes backups (App Review rejects up to 500 MB of re-downloadable
    /// data there), files are readable once the phone was unlocked after
    /// boot (narration plays with the screen locked), and free space is
    /// what the system would free for important work.
    static let system = DeviceStorage(
        excludeFromBackup: { folder in
            var url = folder
            var values = URLResourceValues()
            values.isExcludedFromBackup = true
            try? url.setResourceValues(values)
        },
        protect: { file in
            #if os(iOS) || os(tvOS) || os(watchOS) || os(visionOS)
            try? FileManager.default.setAttributes(
                [.protectionKey: FileProtectionType.completeUntilFirstUserAuthentication], ofItemAtPath: file.path)
            #endif
        },
        availableBytes: { folder in
            let values = try? folder.resourceValues(forKeys: [.volumeAvailableCapacityForImportantUsageKey])
            return values?.volumeAvailableCapacityForImportantUsage
        })
}
#endif

import Foundation
public import TourpackClient

/// A network an app's tests set by hand: `OfflineLibrary(…, network:)`
/// takes it in place of the system's, and each `path = …` reaches the
/// library as the system's change of path would.
///
/// ```swift
/// let network = ManualNetworkMonitor(.cellular)
/// let library = OfflineLibrary(documents: documents, site: site, trust: trust, network: network)
/// // a download waits for Wi-Fi…
/// network.path = .wifi   // …and starts
/// ```
public final class ManualNetworkMonitor: NetworkMonitoring, @unchecked Sendable {
    private let lock = NSLock()
    private var current: NetworkPath
    private var listeners: [UUID: AsyncStream<NetworkPath>.Continuation] = [:]

    public init(_ path: NetworkPath = .wifi) { current = path }

    /// The path now; setting it tells every listener.
    public var path: NetworkPath {
        get { lock.withLock { current } }
        set {
            let listeners = lock.withLock {
                current = newValue
                return Array(self.listeners.values)
            }
            for listener in listeners { listener.yield(newValue) }
        }
    }

    public var currentPath: NetworkPath {
        get async { path }
    }

    public func paths() -> AsyncStream<NetworkPath> {
        AsyncStream { continuation in
            let id = UUID()
            lock.withLock { listeners[id] = continuation }
            continuation.onTermination = { [weak self] _ in
                guard let self else { return }
                _ = self.lock.withLock { self.listeners.removeValue(forKey: id) }
            }
        }
    }
}

/// The system's view of the network: `NWPathMonitor` on Apple's platforms
/// (`Platform/Darwin.swift`); elsewhere (Linux, where the library serves
/// `tourpack install` and the tests) a satisfied wired path that never changes.
public struct SystemNetworkMonitor: NetworkMonitoring {
    public init() {}

    public var currentPath: NetworkPath {
        get async {
            #if canImport(Network)
            return await DarwinPathMonitor.shared.currentPath
            #else
            return .wired
            #endif
        }
    }

    public func paths() -> AsyncStream<NetworkPath> {
        #if canImport(Network)
        return DarwinPathMonitor.shared.paths()
        #else
        // No change will come.
        return AsyncStream { $0.finish() }
        #endif
    }
}

/// The network the device is on, as the system describes it: what the
/// library decides by whether a download may run now.
///
/// On an iPhone it comes from `NWPathMonitor` (`SystemNetworkMonitor`): a
/// Personal Hotspot is Wi-Fi marked expensive, Low Data Mode marks a path
/// constrained.
public struct NetworkPath: Sendable, Hashable {
    /// The kind of link the path goes out through.
    public enum Interface: Sendable, Hashable { case wifi, wiredEthernet, cellular, other }

    /// The path can reach the network at all.
    public var isSatisfied: Bool
    /// Nil when the system names none (no network).
    public var interface: Interface?
    /// Cellular, or a path the system marks costly (a Personal Hotspot).
    public var isExpensive: Bool
    /// Low Data Mode is on for it.
    public var isConstrained: Bool

    public init(isSatisfied: Bool, interface: Interface?, isExpensive: Bool, isConstrained: Bool) {
        self.isSatisfied = isSatisfied
        self.interface = interface
        self.isExpensive = isExpensive
        self.isConstrained = isConstrained
    }

    /// No network.
    public static let unsatisfied = NetworkPath(isSatisfied: false, interface: nil, isExpensive: false, isConstrained: false)
    /// Wi-Fi, neither expensive nor constrained.
    public static let wifi = NetworkPath(isSatisfied: true, interface: .wifi, isExpensive: false, isConstrained: false)
    /// A wired link, neither expensive nor constrained: what a desk (and Linux) has.
    public static let wired = NetworkPath(isSatisfied: true, interface: .wiredEthernet, isExpensive: false, isConstrained: false)
    /// Cellular: expensive.
    public static let cellular = NetworkPath(isSatisfied: true, interface: .cellular, isExpensive: true, isConstrained: false)
}

/// Why a download is not running though nothing failed.
public enum WaitReason: Sendable, Hashable {
    /// The path is cellular or otherwise expensive, and the download may
    /// not use it (`DownloadPolicy.allowsCellular`, or the download's own choice).
    case forWiFi
    /// No network, or it was lost mid-download: it resumes from the last
    /// byte when the path returns.
    case forNetwork
    /// Low Data Mode is on (`DownloadPolicy.allowsLowDataMode` is false).
    case lowDataMode
}

/// Where the library learns the device's network: the system's monitor by
/// default, a fake one in an app's tests (`TourpackClientTesting`).
public protocol NetworkMonitoring: Sendable {
    /// The path now.
    var currentPath: NetworkPath { get async }
    /// Every change of path from now on.
    func paths() -> AsyncStream<NetworkPath>
}

extension DownloadPolicy {
    /// Whether a download may fetch its files over `path` now; why not, when it may not.
    ///
    /// - Parameter allowsCellular: the download's own choice ("Download
    ///   anyway" on the cellular warning), else the policy's.
    func waitReason(on path: NetworkPath, allowsCellular: Bool?) -> WaitReason? {
        guard path.isSatisfied else { return .forNetwork }
        if path.isConstrained, !allowsLowDataMode { return .lowDataMode }
        let cellular = allowsCellular ?? self.allowsCellular
        if path.interface == .cellular, !cellular { return .forWiFi }
        if path.isExpensive, !cellular, !allowsPersonalHotspot { return .forWiFi }
        return nil
    }
}

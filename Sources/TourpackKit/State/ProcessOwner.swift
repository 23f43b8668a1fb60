public import Foundation

/// Who holds a quota reservation or runs a build: host, PID and the
/// process's start time, written as `host:pid:start`.
///
/// The host is the host name plus the PID namespace (`/proc/self/ns/pid`),
/// so two containers that share a host name but not their PIDs are two
/// hosts. The start time (field 22 of `/proc/<pid>/stat`, in clock ticks
/// since boot) tells a live owner from a new process that reused its PID.
/// An owner on another host cannot be checked, and neither can any owner
/// where there is no `/proc`: those count as alive, and their records are
/// judged by age alone.
public struct ProcessOwner: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var pid: Int32
    public var startTicks: UInt64

    public init(host: String, pid: Int32, startTicks: UInt64) {
        self.host = host
        self.pid = pid
        self.startTicks = startTicks
    }

    /// This process.
    public static let current = ProcessOwner(
        host: ProcessInfo.processInfo.hostName + pidNamespace, pid: ProcessInfo.processInfo.processIdentifier,
        startTicks: startTicks(of: ProcessInfo.processInfo.processIdentifier) ?? 0)

    /// `/pid:[4026531836]`, or empty where there is no `/proc`.
    private static var pidNamespace: String {
        guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/ns/pid") else { return "" }
        return "/" + target
    }

    /// Whether this owner can be checked here at all: on this host, with `/proc`.
    public var isCheckable: Bool { host == Self.current.host && Self.current.startTicks != 0 }

    public init?(_ text: String) {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count >= 3, let start = UInt64(parts[parts.count - 1]), let pid = Int32(parts[parts.count - 2]) else { return nil }
        self.init(host: parts[..<(parts.count - 2)].joined(separator: ":"), pid: pid, startTicks: start)
    }

    public var description: String { "\(host):\(pid):\(startTicks)" }

    /// False only when the owner is provably gone: it ran on this host and
    /// its PID is free or belongs to a process started at another time.
    public var mightBeAlive: Bool {
        guard isCheckable else { return true }
        guard let start = Self.startTicks(of: pid) else { return false }
        return start == startTicks
    }

    /// Field 22 of `/proc/<pid>/stat`; nil when there is no such process.
    static func startTicks(of pid: Int32) -> UInt64? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")")
        else { return nil }
        // Fields after the command name (which may hold spaces) start at field 3.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 19 else { return nil }
        return UInt64(fields[19])
    }
}

import Foundation

/// Who holds a quota reservation or runs a build: host, PID and the
/// process's start time, written as `host:pid:start`.
///
/// The host is the host name, the PID namespace (`/proc/self/ns/pid`) and
/// the kernel's boot ID (`/proc/sys/kernel/random/boot_id`), as
/// `name/pid:[4026531836]/boot:<uuid>`. Two containers that share a host
/// name but not their PIDs are two hosts; so are one machine before and
/// after a reboot, or two pods that happen to share a name on different
/// nodes of a cluster, since PIDs, namespace numbers and start times all
/// begin again at boot. Only on the same host, so defined, can a PID be
/// checked at all. The start time (field 22 of `/proc/<pid>/stat`, in clock
/// ticks since boot) tells a live owner from a new process that reused its
/// PID. An owner on another host cannot be checked, and neither can any
/// owner where there is no `/proc`: those count as alive, and their records
/// are judged by age alone.
///
/// Owners written before the boot ID was part of the host (`name/pid:[…]`)
/// read as another host: their records are released by age, never by a
/// PID check that could be wrong.
package struct ProcessOwner: Sendable, Hashable, CustomStringConvertible {
    package var host: String
    package var pid: Int32
    package var startTicks: UInt64

    package init(host: String, pid: Int32, startTicks: UInt64) {
        self.host = host
        self.pid = pid
        self.startTicks = startTicks
    }

    /// This process.
    package static let current = ProcessOwner(
        host: hostIdentity(name: ProcessInfo.processInfo.hostName, pidNamespace: pidNamespace, bootID: bootID),
        pid: ProcessInfo.processInfo.processIdentifier,
        startTicks: startTicks(of: ProcessInfo.processInfo.processIdentifier) ?? 0)

    /// The host part of an owner: `name/pid:[…]/boot:<id>`; the parts that
    /// cannot be read (no `/proc`) are left out.
    package static func hostIdentity(name: String, pidNamespace: String?, bootID: String?) -> String {
        name + (pidNamespace.map { "/" + $0 } ?? "") + (bootID.map { "/boot:" + $0 } ?? "")
    }

    /// `pid:[4026531836]`, or nil where there is no `/proc`.
    static var pidNamespace: String? {
        try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/ns/pid")
    }

    /// This boot of the kernel, a UUID that changes at every boot; nil where there is no `/proc`.
    static var bootID: String? {
        guard let text = try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8) else { return nil }
        let id = text.trimmingCharacters(in: .whitespacesAndNewlines)
        // A UUID: never a ':' that would blur the `host:pid:start` split.
        return id.isEmpty || id.contains(":") ? nil : id
    }

    /// Whether this owner can be checked here at all: on this host (name,
    /// PID namespace and boot), with `/proc`.
    package var isCheckable: Bool { host == Self.current.host && Self.current.startTicks != 0 }

    package init?(_ text: String) {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count >= 3, let start = UInt64(parts[parts.count - 1]), let pid = Int32(parts[parts.count - 2]) else { return nil }
        self.init(host: parts[..<(parts.count - 2)].joined(separator: ":"), pid: pid, startTicks: start)
    }

    package var description: String { "\(host):\(pid):\(startTicks)" }

    /// False only when the owner is provably gone: it ran on this host and
    /// its PID is free or belongs to a process started at another time.
    package var mightBeAlive: Bool {
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

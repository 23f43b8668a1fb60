/// The `Host` names `tourpack review` answers to, so a page on another
/// site cannot read a running review through DNS rebinding (its name
/// pointed at 127.0.0.1, its requests carry `Host: attacker.example`).
///
/// Answered: the address the server bound (`--host`), `localhost`, and,
/// on a loopback bind, the loopback literals `127.0.0.1` and `[::1]`. A
/// wildcard bind (`0.0.0.0`, `::`), chosen to share the pages, also
/// answers any IP literal, since the machine's addresses are not known
/// ahead; names other than `localhost` are still refused. Any port is
/// taken: the name is what rebinding changes. A request whose `Host` names
/// another gets 421 Misdirected Request; one without a `Host` gets 400.
struct ReviewHostCheck: Sendable {
    let bound: String

    init(bound: String) {
        self.bound = Self.normalized(bound)
    }

    enum Verdict: Equatable {
        case allowed
        case missing
        case misdirected(String)
    }

    func verdict(_ host: String?) -> Verdict {
        guard let host, !host.isEmpty else { return .missing }
        let name = Self.normalized(Self.dropPort(host))
        if name == bound || name == "localhost" { return .allowed }
        let loopback = bound.hasPrefix("127.") || bound == "::1" || bound == "localhost"
        if loopback && (name == "127.0.0.1" || name == "::1") { return .allowed }
        let wildcard = bound == "0.0.0.0" || bound == "::" || bound.isEmpty
        if wildcard && Self.isIPLiteral(name) { return .allowed }
        return .misdirected(host)
    }

    /// `name:port`, `[v6]:port` or `[v6]` without its port and brackets.
    static func dropPort(_ host: String) -> String {
        if host.hasPrefix("["), let close = host.firstIndex(of: "]") {
            return String(host[host.index(after: host.startIndex)..<close])
        }
        if host.filter({ $0 == ":" }).count == 1, let colon = host.firstIndex(of: ":") { return String(host[..<colon]) }
        return host
    }

    /// Lowercase, without brackets or the root's trailing dot.
    static func normalized(_ name: String) -> String {
        var name = name.lowercased()
        if name.hasPrefix("["), name.hasSuffix("]") { name = String(name.dropFirst().dropLast()) }
        if name.hasSuffix(".") { name.removeLast() }
        return name
    }

    /// A dotted IPv4 address or an IPv6 address (hex digits and colons).
    static func isIPLiteral(_ name: String) -> Bool {
        let parts = name.split(separator: ".", omittingEmptySubsequences: false)
        if parts.count == 4, parts.allSatisfy({ !$0.isEmpty && $0.count <= 3 && $0.allSatisfy(\.isASCIIDigit) && Int($0)! <= 255 }) {
            return true
        }
        return name.contains(":") && name.allSatisfy { $0 == ":" || $0.isHexDigit }
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { ("0"..."9").contains(self) }
}

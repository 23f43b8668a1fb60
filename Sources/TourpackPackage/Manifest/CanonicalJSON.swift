/// Deterministic JSON text: the same value always gives the same bytes.
///
/// package.json must be byte-identical across rebuilds of the same inputs,
/// and `contentHash` and `PackageID` hash JSON text, so nothing here may
/// depend on Foundation's encoder version. Rules:
/// - object keys sorted by their UTF-8 bytes (duplicates keep their order);
/// - numbers: an integral value within ±2^53 is written as an integer
///   (`14200`, not `14200.0`), any other finite value as the shortest text
///   that reads back to the same `Double` (Swift's `description`, e.g.
///   `47.0417`, `1e-05`); a non-finite value, which JSON cannot hold, as
///   `null`, which the schema then refuses;
/// - strings escape `"`, `\` and control characters only; other text,
///   `/` included, is written as UTF-8;
/// - `pretty`: two-space indent, `"key": value`, a final newline;
///   otherwise no whitespace at all.
extension JSONValue {
    /// The canonical text of this value.
    public func canonicalBytes(pretty: Bool) -> [UInt8] {
        var out: [UInt8] = []
        write(into: &out, pretty: pretty, indent: 0)
        if pretty { out.append(0x0A) }
        return out
    }

    /// The canonical text of a number, as `canonicalBytes` writes it.
    public static func canonicalNumber(_ value: Double) -> String {
        guard value.isFinite else { return "null" }
        if value == value.rounded(), abs(value) <= 9_007_199_254_740_992 {
            return String(Int64(value))
        }
        return value.description
    }

    private func write(into out: inout [UInt8], pretty: Bool, indent: Int) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .number(let n): out.append(contentsOf: JSONValue.canonicalNumber(n).utf8)
        case .string(let s): JSONValue.writeString(s, into: &out)
        case .array(let values):
            guard !values.isEmpty else { out.append(contentsOf: [0x5B, 0x5D]); return }
            out.append(0x5B)
            for (i, value) in values.enumerated() {
                if i > 0 { out.append(0x2C) }
                JSONValue.newline(&out, pretty: pretty, indent: indent + 1)
                value.write(into: &out, pretty: pretty, indent: indent + 1)
            }
            JSONValue.newline(&out, pretty: pretty, indent: indent)
            out.append(0x5D)
        case .object(let members):
            guard !members.isEmpty else { out.append(contentsOf: [0x7B, 0x7D]); return }
            out.append(0x7B)
            for (i, index) in JSONValue.keyOrder(members).enumerated() {
                let member = members[index]
                if i > 0 { out.append(0x2C) }
                JSONValue.newline(&out, pretty: pretty, indent: indent + 1)
                JSONValue.writeString(member.key, into: &out)
                out.append(0x3A)
                if pretty { out.append(0x20) }
                member.value.write(into: &out, pretty: pretty, indent: indent + 1)
            }
            JSONValue.newline(&out, pretty: pretty, indent: indent)
            out.append(0x7D)
        }
    }

    /// The members' indices with their keys sorted by UTF-8 bytes, members
    /// of equal keys in their order; compared in place, without copying a key.
    private static func keyOrder(_ members: [(key: String, value: JSONValue)]) -> [Int] {
        func precedes(_ a: Int, _ b: Int) -> Bool {
            let (ka, kb) = (members[a].key.utf8, members[b].key.utf8)
            if ka.elementsEqual(kb) { return a < b }
            return ka.lexicographicallyPrecedes(kb)
        }
        var order = Array(members.indices)
        // Most objects are built in key order already: then one pass finds nothing to sort.
        if !zip(order, order.dropFirst()).allSatisfy({ precedes($0, $1) }) { order.sort(by: precedes) }
        return order
    }

    private static func newline(_ out: inout [UInt8], pretty: Bool, indent: Int) {
        guard pretty else { return }
        out.append(0x0A)
        out.append(contentsOf: repeatElement(0x20, count: indent * 2))
    }

    private static func writeString(_ s: String, into out: inout [UInt8]) {
        out.append(0x22)
        defer { out.append(0x22) }
        // Most strings need no escape: copied at once.
        guard s.utf8.contains(where: { $0 < 0x20 || $0 == 0x22 || $0 == 0x5C || $0 == 0x7F }) else {
            out.append(contentsOf: s.utf8)
            return
        }
        for byte in s.utf8 {
            switch byte {
            case 0x22: out.append(contentsOf: [0x5C, 0x22])
            case 0x5C: out.append(contentsOf: [0x5C, 0x5C])
            case 0x0A: out.append(contentsOf: [0x5C, 0x6E])
            case 0x0D: out.append(contentsOf: [0x5C, 0x72])
            case 0x09: out.append(contentsOf: [0x5C, 0x74])
            case 0x08: out.append(contentsOf: [0x5C, 0x62])
            case 0x0C: out.append(contentsOf: [0x5C, 0x66])
            case 0x00..<0x20, 0x7F:
                out.append(contentsOf: Array("\\u00\([byte].lowercaseHex)".utf8))
            default: out.append(byte)
            }
        }
    }
}

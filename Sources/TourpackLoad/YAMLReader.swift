import TourpackCore
import Yams

/// Reads YAML config with paths in every message, rejecting unknown keys.
///
/// Like swift-format's configuration, the file is all-optional with a
/// `version`; this reader checks types and ranges and records problems in a
/// `DiagnosticCollector` so one run reports them all.
struct YAMLReader {
    let file: String
    var diagnostics = DiagnosticCollector()

    init(file: String) {
        self.file = file
    }

    /// Parses the document; a syntax error is recorded with its line.
    mutating func root(_ text: String) -> Node? {
        // Refused before Yams composes anything: an alias to a list of lists
        // is a few hundred bytes of YAML for 10⁸ leaves, and Yams hashes
        // every mapping key for its duplicate check, expanding such a key
        // in full (minutes of CPU for a 451-byte file).
        if let alias = YAMLAliases.first(in: text) {
            diagnostics.error(
                file, "line \(alias.line)",
                "YAML aliases (*\(alias.name)) are not allowed in tourpack's configuration; write the value out")
            return nil
        }
        do {
            guard let node = try Yams.compose(yaml: text) else {
                diagnostics.error(file, "", "the file is empty")
                return nil
            }
            return node
        } catch let error as YamlError {
            diagnostics.error(file, "", "invalid YAML: \(Self.describe(error))")
        } catch {
            diagnostics.error(file, "", "invalid YAML: \(error)")
        }
        return nil
    }

    static func describe(_ error: YamlError) -> String {
        // Yams' descriptions quote the offending line; keep the first line only.
        String(describing: error).split(separator: "\n").first.map(String.init) ?? "syntax error"
    }

    mutating func error(_ path: String, _ message: String) {
        diagnostics.error(file, path, message)
    }

    /// A mapping's values by key. Keys outside `allowed` are errors, named by path.
    mutating func mapping(_ node: Node, at path: String, allowed: [String]) -> [String: Node]? {
        guard case .mapping(let mapping) = node else {
            error(path, "expected a mapping, found \(Self.kind(node))")
            return nil
        }
        var result: [String: Node] = [:]
        for (key, value) in mapping {
            guard let name = key.string else {
                error(path, "keys must be strings")
                continue
            }
            let keyPath = Self.join(path, name)
            guard allowed.contains(name) else {
                error(keyPath, "unknown key; expected one of \(allowed.joined(separator: ", "))")
                continue
            }
            result[name] = value
        }
        return result
    }

    mutating func string(_ node: Node?, at path: String) -> String? {
        guard let node else { return nil }
        guard case .scalar(let scalar) = node, !scalar.string.isEmpty else {
            error(path, "expected a non-empty string, found \(Self.kind(node))")
            return nil
        }
        if scalar.string.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
            error(path, "control characters are not allowed")
            return nil
        }
        return scalar.string
    }

    mutating func integer(_ node: Node?, at path: String, range: ClosedRange<Int>) -> Int? {
        guard let node else { return nil }
        guard case .scalar = node, let value = node.int else {
            error(path, "expected an integer, found \(Self.kind(node))")
            return nil
        }
        guard range.contains(value) else {
            error(path, "\(value) is out of range \(range.lowerBound)...\(range.upperBound)")
            return nil
        }
        return value
    }

    mutating func number(_ node: Node?, at path: String, range: ClosedRange<Double>) -> Double? {
        guard let node else { return nil }
        guard case .scalar = node, let value = node.float ?? node.int.map(Double.init), value.isFinite else {
            error(path, "expected a number, found \(Self.kind(node))")
            return nil
        }
        guard range.contains(value) else {
            error(path, "\(value.compactText) is out of range \(range.lowerBound.compactText)...\(range.upperBound.compactText)")
            return nil
        }
        return value
    }

    /// A list of strings; a single string counts as a list of one.
    mutating func strings(_ node: Node?, at path: String) -> [String]? {
        guard let node else { return nil }
        if case .scalar = node { return string(node, at: path).map { [$0] } }
        guard case .sequence(let sequence) = node else {
            error(path, "expected a list, found \(Self.kind(node))")
            return nil
        }
        var values: [String] = []
        var valid = true
        for (index, item) in sequence.enumerated() {
            if let value = string(item, at: "\(path)[\(index)]") { values.append(value) } else { valid = false }
        }
        return valid ? values : nil
    }

    mutating func choice<T: RawRepresentable>(_ node: Node?, at path: String, as type: T.Type) -> T?
    where T.RawValue == String, T: CaseIterable {
        guard let raw = string(node, at: path) else { return nil }
        guard let value = T(rawValue: raw) else {
            error(path, "'\(raw)' is not one of \(T.allCases.map(\.rawValue).joined(separator: ", "))")
            return nil
        }
        return value
    }

    static func join(_ path: String, _ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

    static func kind(_ node: Node) -> String {
        switch node {
        case .scalar(let scalar): return scalar.string.isEmpty ? "an empty value" : "'\(scalar.string.prefix(40))'"
        case .mapping: return "a mapping"
        case .sequence: return "a list"
        case .alias: return "an alias"
        }
    }
}

/// Finds YAML aliases (`*name`) without parsing: every place libyaml could
/// read one, and a few more.
///
/// libyaml reads an alias only at the start of a token, where the text
/// before it is a line break, blank, flow indicator or `:`, and its name is
/// `[0-9A-Za-z_-]+` followed by a blank, the end, or one of ``?:,]}%@` ``.
/// This scan finds every `*` so placed, whether or not it sits in a comment
/// or a quoted string, so it can refuse text such as `# see *here` that
/// libyaml would not read as an alias, but never misses one that it would.
enum YAMLAliases {
    static func first(in text: String) -> (line: Int, name: String)? {
        let bytes = Array(text.utf8)
        var line = 1
        for index in bytes.indices {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\n") { line += 1 }
            guard byte == UInt8(ascii: "*"), index == 0 || opensToken(bytes[index - 1]) else { continue }
            var end = index + 1
            while end < bytes.count, isNameByte(bytes[end]) { end += 1 }
            guard end > index + 1, end == bytes.count || closesName(bytes[end]) else { continue }
            return (line, String(decoding: bytes[index + 1..<end], as: UTF8.self))
        }
        return nil
    }

    /// Blanks, line breaks, flow indicators, `:`, and the last byte of a byte order mark.
    static func opensToken(_ byte: UInt8) -> Bool {
        Array(" \t\r\n[]{},:".utf8).contains(byte) || byte == 0xBF
    }

    static func isNameByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"):
            return true
        default:
            return byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
        }
    }

    static func closesName(_ byte: UInt8) -> Bool {
        Array(" \t\r\n?:,]}%@`".utf8).contains(byte)
    }
}

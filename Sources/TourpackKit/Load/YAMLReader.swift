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

/// A path into a JSON or YAML document, printed the way messages show it:
/// `pois[3].narrations.detaild`.
package struct JSONPath: Sendable, Hashable, CustomStringConvertible {
    private var components: [Component] = []

    enum Component: Hashable {
        case key(String)
        case index(Int)
    }

    package init() {}

    package func appending(_ key: String) -> JSONPath {
        var copy = self
        copy.components.append(.key(key))
        return copy
    }

    package func appending(_ index: Int) -> JSONPath {
        var copy = self
        copy.components.append(.index(index))
        return copy
    }

    package var description: String {
        var out = ""
        for component in components {
            switch component {
            case .key(let key):
                let shown = Self.displayKey(key)
                out += out.isEmpty ? shown : "." + shown
            case .index(let index):
                out += "[\(index)]"
            }
        }
        return out
    }

    /// Keys come from untrusted input: control characters are shown escaped
    /// and very long keys are cut, so a message can never forge output.
    package static func displayKey(_ key: String) -> String {
        var shown = ""
        for scalar in key.unicodeScalars.prefix(64) {
            if scalar.properties.generalCategory == .control || scalar.properties.generalCategory == .format {
                shown += "\\u{\(String(scalar.value, radix: 16))}"
            } else {
                shown.unicodeScalars.append(scalar)
            }
        }
        if key.unicodeScalars.count > 64 { shown += "…" }
        return shown
    }
}

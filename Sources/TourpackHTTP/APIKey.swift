import Foundation

/// An API key that never prints, dumps or reflects itself.
///
/// Only the dialect's header builder reads `value`; every message that came
/// from elsewhere goes through `scrub` before it reaches a log or an error.
package struct APIKey: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    package let value: String

    package init?(_ value: String?) {
        guard let value, !value.isEmpty else { return nil }
        self.value = value
    }

    package var description: String { "<redacted>" }
    package var debugDescription: String { "<redacted>" }
    package var customMirror: Mirror { Mirror(self, children: []) }

    /// `text` with every occurrence of the key replaced, in case a server echoes it.
    package func scrub(_ text: String) -> String {
        text.replacingOccurrences(of: value, with: "<redacted>")
    }
}

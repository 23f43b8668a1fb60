import Foundation

/// A credential read from the environment: an API key, a password. It never
/// prints, dumps or reflects itself, so a configuration that holds one can be
/// logged, compared and passed around without leaking it.
///
/// Keys are read once, when the pipeline is loaded, from the variables its
/// `apiKeyEnv` settings name; nothing else reads the environment for them.
public struct Secret: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The credential itself: only the request builders read it.
    public let value: String

    /// Nil for a missing or empty value.
    public init?(_ value: String?) {
        guard let value, !value.isEmpty else { return nil }
        self.value = value
    }

    public var description: String { "<redacted>" }
    public var debugDescription: String { "<redacted>" }
    public var customMirror: Mirror { Mirror(self, children: []) }
}

extension Secret {
    /// `url` without its user info, query or fragment, for messages and
    /// logs: any of the three may carry a credential (a token in the query,
    /// a password before the host). The one implementation for the CLI's
    /// libcurl code and the app's library.
    package static func redacting(url: String) -> String {
        var text = url
        if let mark = text.firstIndex(where: { $0 == "?" || $0 == "#" }) { text = String(text[..<mark]) }
        if let scheme = text.range(of: "://"), let at = text[scheme.upperBound...].firstIndex(of: "@"),
            !text[scheme.upperBound..<at].contains("/")
        {
            text.removeSubrange(scheme.upperBound...at)
        }
        return text
    }
}

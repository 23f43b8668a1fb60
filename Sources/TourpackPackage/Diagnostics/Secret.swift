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

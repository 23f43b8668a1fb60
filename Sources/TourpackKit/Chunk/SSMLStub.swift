// TEMPORARY until the chunker branch lands: the real SSML checker replaces this file.
public struct SSMLProblem: Sendable, Hashable { public var message: String; public var offset: Int }
public enum SSML {
    public static func validate(_ text: String) -> [SSMLProblem] {
        text.contains("</speak>") ? [] : [SSMLProblem(message: "<speak> is never closed", offset: 0)]
    }
    public static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
    }
}

// TEMPORARY until the chunker branch lands: the real SSML checker replaces this file.
public struct SSMLProblem: Sendable, Hashable { public var message: String; public var offset: Int }
public enum SSML {
    public static func validate(_ text: String) -> [SSMLProblem] {
        var stack: [String] = []
        var rest = Substring(text)
        while let open = rest.firstIndex(of: "<") {
            guard let close = rest[open...].firstIndex(of: ">") else { return [SSMLProblem(message: "unclosed tag", offset: 0)] }
            let tag = rest[rest.index(after: open)..<close]
            let name = tag.split(whereSeparator: { $0 == " " || $0 == "/" }).first.map(String.init) ?? ""
            if tag.hasPrefix("/") {
                if stack.popLast() != String(tag.dropFirst()) { return [SSMLProblem(message: "mismatched </\(tag.dropFirst())>", offset: 0)] }
            } else if !tag.hasSuffix("/") {
                stack.append(name)
            }
            rest = rest[rest.index(after: close)...]
        }
        return stack.isEmpty ? [] : [SSMLProblem(message: "<\(stack.last!)> is never closed", offset: 0)]
    }
    public static func escape(_ text: String) -> String {
        var out = ""
        for c in text {
            switch c {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            default: out.append(c)
            }
        }
        return out
    }
}

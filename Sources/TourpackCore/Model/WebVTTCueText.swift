// Cue text as a viewer reads it, for comparing captions with their narration.
extension WebVTTParser {
    /// Payload text as a viewer reads it: tags out, character references in.
    package static func plainText(_ payload: String) -> String {
        var out = ""
        var scalars = payload.unicodeScalars[...]
        while let scalar = scalars.first {
            switch scalar {
            case "<":
                // A tag (or timestamp tag) runs to `>` or the end of the text.
                if let close = scalars.firstIndex(of: ">") {
                    scalars = scalars[scalars.index(after: close)...]
                } else {
                    scalars = scalars[scalars.endIndex...]
                }
            case "&":
                if let (resolved, rest) = reference(scalars) {
                    out.unicodeScalars.append(resolved)
                    scalars = rest
                } else {
                    out.unicodeScalars.append(scalar)
                    scalars = scalars.dropFirst()
                }
            default:
                out.unicodeScalars.append(scalar)
                scalars = scalars.dropFirst()
            }
        }
        return out
    }

    static let namedReferences: [String: Unicode.Scalar] = [
        "amp": "&", "lt": "<", "gt": ">", "lrm": "\u{200E}", "rlm": "\u{200F}", "nbsp": "\u{A0}", "quot": "\"", "apos": "'",
    ]

    /// `&name;`, `&#123;` or `&#x1F600;` at the start of `scalars`, resolved, and what follows it.
    static func reference(_ scalars: Substring.UnicodeScalarView) -> (Unicode.Scalar, Substring.UnicodeScalarView)? {
        let body = scalars.dropFirst().prefix(12)
        guard let semicolon = body.firstIndex(of: ";") else { return nil }
        let name = String(body[body.startIndex..<semicolon])
        let rest = scalars[scalars.index(after: semicolon)...]
        if let named = namedReferences[name] { return (named, rest) }
        guard name.hasPrefix("#") else { return nil }
        let digits = name.dropFirst()
        let value: UInt32? =
            digits.hasPrefix("x") || digits.hasPrefix("X") ? UInt32(digits.dropFirst(), radix: 16) : UInt32(digits, radix: 10)
        guard let value, let scalar = Unicode.Scalar(value), value != 0 else { return nil }
        return (scalar, rest)
    }
}

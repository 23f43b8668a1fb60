/// How a path or message that came from outside is shown in a message or a
/// report: nothing in it can break a line or reorder what a person reads.
package enum PrintableText {
    /// `text` with control and format characters (newlines, bidi overrides) as `\u{...}`,
    /// cut after `limit` characters.
    package static func of(_ text: String, limit: Int = .max) -> String {
        var shown = ""
        for scalar in text.unicodeScalars.prefix(limit) {
            let category = scalar.properties.generalCategory
            if category == .control || category == .format || scalar == "\u{2028}" || scalar == "\u{2029}" {
                shown += "\\u{\(String(scalar.value, radix: 16))}"
            } else {
                shown.unicodeScalars.append(scalar)
            }
        }
        return text.unicodeScalars.count > limit ? shown + "…" : shown
    }
}

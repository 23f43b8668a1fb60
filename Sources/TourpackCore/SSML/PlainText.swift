import Foundation

extension SSML {
    /// The words of an SSML document, for a provider that reads no markup
    /// (OpenAI) and for the neighbouring text a request carries as context
    /// (ElevenLabs' `previous_text` and `next_text`): each tag becomes a
    /// space, the five XML entities their characters (`&amp;` last, so
    /// `&amp;lt;` stays `&lt;`), and runs of white space one space.
    package static func plainText(_ ssml: String) -> String {
        var text = ""
        var inTag = false
        for character in ssml {
            if character == "<" {
                inTag = true
                text.append(" ")
            } else if character == ">" {
                inTag = false
            } else if !inTag {
                text.append(character)
            }
        }
        for (entity, replacement) in [("&lt;", "<"), ("&gt;", ">"), ("&quot;", "\""), ("&apos;", "'"), ("&amp;", "&")] {
            text = text.replacingOccurrences(of: entity, with: replacement)
        }
        return text.split(whereSeparator: \.isWhitespace).joined(separator: " ")
    }
}

extension Chunk {
    /// The chunk's words without markup (`SSML.plainText`); plain text as it is.
    package var plainText: String { isSSML ? SSML.plainText(text) : text }
}

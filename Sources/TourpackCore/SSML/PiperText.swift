import Foundation

/// What Piper is sent for a chunk, and the SSML it cannot honour.
///
/// Piper's HTTP server reads plain text only: markup sent to it would be
/// spoken. So SSML is turned into the words it stands for, and what Piper
/// cannot do is refused before anything is sent (`unsupported`), never
/// silently dropped:
/// - `<speak>`, `<p>`, `<s>` (and their long names) carry text only;
/// - a top-level `<break/>` is a place the chunker cuts (`TTSAPI.sendsSentencePerRequest`),
///   so it becomes the join's pause;
/// - `<sub alias="…">` is spoken as its alias, as a lexicon's alias is;
/// - `<say-as interpret-as="cardinal">` (or `number`) is spoken as written,
///   which is how Piper's phonemizer (espeak-ng) reads digits anyway.
///
/// Everything else (`<prosody>`, `<emphasis>`, `<phoneme>`, other `<say-as>`,
/// `<audio>`, `<voice>`, `<lang>`, `<mark>`, a `<break/>` inside a sentence
/// element) is refused, naming the element.
package enum PiperText {
    /// The text of a chunk as Piper is sent it: markup left out, entities
    /// decoded, a `<sub>`'s alias in place of its content, whitespace collapsed.
    package static func text(of chunk: Chunk) -> String {
        guard chunk.isSSML else { return chunk.text }
        let scanner = SSMLScanner(chunk.text)
        var out = ""
        var skipDepth = 0
        for token in scanner.tokens {
            switch token.kind {
            case .text where skipDepth == 0:
                out += scanner.string(token.range)
            case .entity(let scalar) where skipDepth == 0:
                out.unicodeScalars.append(scalar)
            case .startTag(let name, let selfClosing):
                let tag = scanner.string(token.range)
                if skipDepth > 0 {
                    if !selfClosing { skipDepth += 1 }
                } else if name == "sub", let alias = attribute("alias", in: tag) {
                    out += alias
                    if !selfClosing { skipDepth = 1 }
                } else {
                    out += " "
                }
            case .endTag:
                if skipDepth > 0 { skipDepth -= 1 } else { out += " " }
            default:
                break
            }
        }
        return out.split(whereSeparator: \.isWhitespace).joined(separator: " ")
    }

    /// Each element in `ssml` Piper cannot honour, with why; empty when it
    /// can speak the document as meant.
    package static func unsupported(_ ssml: String) -> [String] {
        let scanner = SSMLScanner(ssml)
        var problems: [String] = []
        var depth = 0
        for token in scanner.tokens {
            switch token.kind {
            case .startTag(let name, let selfClosing):
                let tag = scanner.string(token.range)
                switch name {
                case "speak", "p", "s", "paragraph", "sentence":
                    break
                case "sub" where attribute("alias", in: tag) != nil:
                    break
                case "say-as" where ["cardinal", "number"].contains(attribute("interpret-as", in: tag) ?? ""):
                    break
                case "break" where depth <= 1:
                    break
                case "break":
                    problems.append(
                        "<break/> inside a sentence element: Piper pauses only between requests, so put the break between sentences")
                default:
                    problems.append("<\(name)>: Piper reads plain text and has no SSML, so it cannot honour this element")
                }
                if !selfClosing { depth += 1 }
            case .endTag:
                depth -= 1
            default:
                break
            }
        }
        return problems
    }

    /// An attribute's value in one start tag, entities left as written
    /// except the five XML ones.
    static func attribute(_ name: String, in tag: String) -> String? {
        for quote in ["\"", "'"] {
            guard let start = tag.range(of: " \(name)=\(quote)") ?? tag.range(of: "\t\(name)=\(quote)"),
                let end = tag[start.upperBound...].firstIndex(of: Character(quote))
            else { continue }
            var value = String(tag[start.upperBound..<end])
            for (entity, replacement) in [("&lt;", "<"), ("&gt;", ">"), ("&quot;", "\""), ("&apos;", "'"), ("&amp;", "&")] {
                value = value.replacingOccurrences(of: entity, with: replacement)
            }
            return value
        }
        return nil
    }
}

import Foundation
import TourpackCore

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

    /// `text` with every occurrence of the key replaced, in whatever form a
    /// server echoes it: see `Redaction.scrub`.
    package func scrub(_ text: String) -> String {
        Redaction.scrub(text, secrets: [value])
    }
}

/// The one place secrets are taken out of text that leaves the process
/// (messages, logs, `--json`, the state's tables).
///
/// A server that echoes a request echoes the key in the form it was sent or
/// in one of its own: percent-encoded (`+` as `%2B`, with upper- or
/// lower-case hex, even twice over as `%252B`), form-encoded (a space as
/// `+`), JSON-escaped (`\/`, `\u002B`), or case-folded. Each character of a
/// secret is therefore matched in any of those spellings, mixed freely, and
/// ASCII letters without regard to case; every match is replaced by
/// `<redacted>`.
package enum Redaction {
    package static let placeholder = "<redacted>"

    /// `text` with every spelling of every non-empty secret in `secrets` replaced.
    package static func scrub(_ text: String, secrets: some Sequence<String>) -> String {
        var bytes = Array(text.utf8)
        var changed = false
        for secret in secrets where !secret.isEmpty {
            let pattern = Array(secret.utf8)
            var output: [UInt8] = []
            output.reserveCapacity(bytes.count)
            var index = 0
            var replaced = false
            while index < bytes.count {
                if let end = match(pattern, in: bytes, at: index) {
                    output.append(contentsOf: placeholder.utf8)
                    index = end
                    replaced = true
                } else {
                    output.append(bytes[index])
                    index += 1
                }
            }
            if replaced {
                bytes = output
                changed = true
            }
        }
        return changed ? String(decoding: bytes, as: UTF8.self) : text
    }

    /// Where a spelling of `pattern` that starts at `start` ends, or nil.
    static func match(_ pattern: [UInt8], in text: [UInt8], at start: Int) -> Int? {
        // Each spelling of one character is tried in turn, so a mix of
        // spellings matches; the depth is the secret's length.
        func from(_ position: Int, _ next: Int) -> Int? {
            guard next < pattern.count else { return position }
            for (byte, end) in spellings(in: text, at: position) where same(byte, pattern[next]) {
                if let found = from(end, next + 1) { return found }
            }
            return nil
        }
        return from(start, 0)
    }

    /// The bytes `text` may stand for at `position`, each with where its spelling ends.
    private static func spellings(in text: [UInt8], at position: Int) -> [(byte: UInt8, end: Int)] {
        guard position < text.count else { return [] }
        let first = text[position]
        var found: [(byte: UInt8, end: Int)] = [(first, position + 1)]
        switch first {
        case UInt8(ascii: "%"):
            if let byte = hexByte(text, position + 1) {
                found.append((byte, position + 3))
                // Encoded twice: %25 then two hex digits.
                if byte == UInt8(ascii: "%"), let inner = hexByte(text, position + 3) { found.append((inner, position + 5)) }
            }
        case UInt8(ascii: "+"):
            found.append((UInt8(ascii: " "), position + 1))
        case UInt8(ascii: "\\"):
            guard position + 1 < text.count else { break }
            let escaped = text[position + 1]
            if escaped == UInt8(ascii: "u"), position + 5 < text.count, let high = hexByte(text, position + 2),
                high == 0, let low = hexByte(text, position + 4)
            {
                found.append((low, position + 6))
            } else if escaped != UInt8(ascii: "u") {
                found.append((escaped, position + 2))
            }
        default:
            break
        }
        return found
    }

    private static func hexByte(_ text: [UInt8], _ position: Int) -> UInt8? {
        guard position + 1 < text.count, let high = text[position].hexDigitValue, let low = text[position + 1].hexDigitValue else {
            return nil
        }
        return high << 4 | low
    }

    /// Equal, ASCII letters without regard to case.
    private static func same(_ lhs: UInt8, _ rhs: UInt8) -> Bool {
        lower(lhs) == lower(rhs)
    }

    private static func lower(_ byte: UInt8) -> UInt8 {
        (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte + 32 : byte
    }
}

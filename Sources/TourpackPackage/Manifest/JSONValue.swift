/// A JSON document as read by `StrictJSONReader`: objects keep their key
/// order and any duplicate keys, so validation can report them by path.
public indirect enum JSONValue: Sendable, Hashable {
    case object([(key: String, value: JSONValue)])
    case array([JSONValue])
    case string(String)
    case number(Double)
    case bool(Bool)
    case null

    /// A short name of the value's kind, for "expected X, found Y" messages.
    public var kindName: String {
        switch self {
        case .object: return "an object"
        case .array: return "an array"
        case .string: return "a string"
        case .number: return "a number"
        case .bool: return "a boolean"
        case .null: return "null"
        }
    }

    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.object(let a), .object(let b)):
            return a.count == b.count && zip(a, b).allSatisfy { $0.key == $1.key && $0.value == $1.value }
        case (.array(let a), .array(let b)): return a == b
        case (.string(let a), .string(let b)): return a == b
        case (.number(let a), .number(let b)): return a == b
        case (.bool(let a), .bool(let b)): return a == b
        case (.null, .null): return true
        default: return false
        }
    }

    public func hash(into hasher: inout Hasher) {
        switch self {
        case .object(let members):
            hasher.combine(0)
            for member in members {
                hasher.combine(member.key)
                hasher.combine(member.value)
            }
        case .array(let values): hasher.combine(1); hasher.combine(values)
        case .string(let s): hasher.combine(2); hasher.combine(s)
        case .number(let n): hasher.combine(3); hasher.combine(n)
        case .bool(let b): hasher.combine(4); hasher.combine(b)
        case .null: hasher.combine(5)
        }
    }
}

/// A syntax problem, placed by line and column (1-based, columns in bytes).
public struct JSONSyntaxError: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String
    public var line: Int
    public var column: Int

    public var description: String { "line \(line), column \(column): \(message)" }
}

/// Reads JSON strictly and defensively, for input that may be hostile.
///
/// Foundation's parser accepts very deep nesting and hides where a problem
/// is; this one refuses invalid UTF-8 (naming the byte offset), nesting
/// deeper than `maxDepth`, raw control characters in strings, lone
/// surrogates, and trailing garbage, and says where each problem is.
public struct StrictJSONReader: Sendable {
    public var maxDepth: Int

    public init(maxDepth: Int = 64) {
        self.maxDepth = maxDepth
    }

    public func read(_ bytes: [UInt8]) throws(JSONSyntaxError) -> JSONValue {
        var parser = Parser(bytes: bytes, maxDepth: maxDepth)
        try parser.checkUTF8()
        parser.skipBOM()
        parser.skipWhitespace()
        let value = try parser.parseValue(depth: 1)
        parser.skipWhitespace()
        if parser.index < bytes.count {
            throw parser.error("unexpected content after the JSON value")
        }
        return value
    }
}

private struct Parser {
    let bytes: [UInt8]
    let maxDepth: Int
    var index = 0

    init(bytes: [UInt8], maxDepth: Int) {
        self.bytes = bytes
        self.maxDepth = maxDepth
    }

    func error(_ message: String, at position: Int? = nil) -> JSONSyntaxError {
        let end = min(position ?? index, bytes.count)
        var line = 1
        var lineStart = 0
        for i in 0..<end where bytes[i] == UInt8(ascii: "\n") {
            line += 1
            lineStart = i + 1
        }
        return JSONSyntaxError(message: message, line: line, column: end - lineStart + 1)
    }

    func checkUTF8() throws(JSONSyntaxError) {
        var i = 0
        while i < bytes.count {
            let b = bytes[i]
            let length: Int
            switch b {
            case 0x00...0x7F: length = 1
            case 0xC2...0xDF: length = 2
            case 0xE0...0xEF: length = 3
            case 0xF0...0xF4: length = 4
            default: throw error("invalid UTF-8 (byte 0x\(hex(b)) at offset \(i))", at: i)
            }
            guard i + length <= bytes.count else { throw error("invalid UTF-8 (truncated sequence at offset \(i))", at: i) }
            for k in 1..<max(length, 1) where bytes[i + k] & 0xC0 != 0x80 {
                throw error("invalid UTF-8 (byte 0x\(hex(bytes[i + k])) at offset \(i + k))", at: i + k)
            }
            // Overlong forms and surrogates encoded in UTF-8.
            if length == 3 {
                let second = bytes[i + 1]
                if (b == 0xE0 && second < 0xA0) || (b == 0xED && second >= 0xA0) {
                    throw error("invalid UTF-8 (overlong or surrogate sequence at offset \(i))", at: i)
                }
            } else if length == 4 {
                let second = bytes[i + 1]
                if (b == 0xF0 && second < 0x90) || (b == 0xF4 && second >= 0x90) {
                    throw error("invalid UTF-8 (out-of-range sequence at offset \(i))", at: i)
                }
            }
            i += length
        }
    }

    mutating func skipBOM() {
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { index = 3 }
    }

    mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    mutating func parseValue(depth: Int) throws(JSONSyntaxError) -> JSONValue {
        guard index < bytes.count else { throw error("unexpected end of file") }
        switch bytes[index] {
        case UInt8(ascii: "{"):
            guard depth <= maxDepth else { throw error("nesting deeper than \(maxDepth) levels") }
            return try parseObject(depth: depth)
        case UInt8(ascii: "["):
            guard depth <= maxDepth else { throw error("nesting deeper than \(maxDepth) levels") }
            return try parseArray(depth: depth)
        case UInt8(ascii: "\""):
            return .string(try parseString())
        case UInt8(ascii: "t"): try expectLiteral("true"); return .bool(true)
        case UInt8(ascii: "f"): try expectLiteral("false"); return .bool(false)
        case UInt8(ascii: "n"): try expectLiteral("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return .number(try parseNumber())
        default:
            throw error("unexpected character '\(printable(bytes[index]))'")
        }
    }

    mutating func expectLiteral(_ literal: String) throws(JSONSyntaxError) {
        let utf8 = Array(literal.utf8)
        guard index + utf8.count <= bytes.count, Array(bytes[index..<index + utf8.count]) == utf8 else {
            throw error("invalid literal, expected '\(literal)'")
        }
        index += utf8.count
    }

    mutating func parseObject(depth: Int) throws(JSONSyntaxError) -> JSONValue {
        index += 1
        var members: [(key: String, value: JSONValue)] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            return .object(members)
        }
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw error("expected a quoted key") }
            let key = try parseString()
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw error("expected ':' after key \"\(key)\"") }
            index += 1
            skipWhitespace()
            let value = try parseValue(depth: depth + 1)
            members.append((key, value))
            skipWhitespace()
            guard index < bytes.count else { throw error("unexpected end of file in an object") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "}") { index += 1; return .object(members) }
            throw error("expected ',' or '}' in an object")
        }
    }

    mutating func parseArray(depth: Int) throws(JSONSyntaxError) -> JSONValue {
        index += 1
        var values: [JSONValue] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            return .array(values)
        }
        while true {
            skipWhitespace()
            values.append(try parseValue(depth: depth + 1))
            skipWhitespace()
            guard index < bytes.count else { throw error("unexpected end of file in an array") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "]") { index += 1; return .array(values) }
            throw error("expected ',' or ']' in an array")
        }
    }

    mutating func parseString() throws(JSONSyntaxError) -> String {
        index += 1  // opening quote
        var runStart = index
        var out: [UInt8] = []
        while true {
            guard index < bytes.count else { throw error("unterminated string") }
            let b = bytes[index]
            if b == UInt8(ascii: "\"") {
                out.append(contentsOf: bytes[runStart..<index])
                index += 1
                break
            }
            if b < 0x20 {
                throw error("raw control character 0x\(hex(b)) in a string; escape it")
            }
            if b == UInt8(ascii: "\\") {
                out.append(contentsOf: bytes[runStart..<index])
                index += 1
                guard index < bytes.count else { throw error("unterminated escape") }
                let e = bytes[index]
                index += 1
                switch e {
                case UInt8(ascii: "\""): out.append(0x22)
                case UInt8(ascii: "\\"): out.append(0x5C)
                case UInt8(ascii: "/"): out.append(0x2F)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    let scalar = try parseUnicodeEscape()
                    out.append(contentsOf: Array(String(Character(scalar)).utf8))
                default:
                    throw error("invalid escape '\\\(printable(e))'", at: index - 1)
                }
                runStart = index
                continue
            }
            index += 1
        }
        // Decoded once, as a whole: a tour's narrations are most of its bytes.
        return String(decoding: out, as: UTF8.self)
    }

    mutating func parseHex4() throws(JSONSyntaxError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw error("truncated \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let b = bytes[index]
            let digit: UInt32
            switch b {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(b - 0x30)
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(b - 0x61 + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(b - 0x41 + 10)
            default: throw error("invalid hex digit in \\u escape")
            }
            value = value << 4 | digit
            index += 1
        }
        return value
    }

    mutating func parseUnicodeEscape() throws(JSONSyntaxError) -> Unicode.Scalar {
        let start = index - 2
        let first = try parseHex4()
        if (0xD800...0xDBFF).contains(first) {
            guard index + 2 <= bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                throw error("lone surrogate in \\u escape", at: start)
            }
            index += 2
            let second = try parseHex4()
            guard (0xDC00...0xDFFF).contains(second) else { throw error("invalid surrogate pair in \\u escape", at: start) }
            let combined = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
            guard let scalar = Unicode.Scalar(combined) else { throw error("invalid \\u escape", at: start) }
            return scalar
        }
        guard let scalar = Unicode.Scalar(first) else { throw error("lone surrogate in \\u escape", at: start) }
        return scalar
    }

    mutating func parseNumber() throws(JSONSyntaxError) -> Double {
        let start = index
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        func digits() -> Int {
            let s = index
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
            return index - s
        }
        let intStart = index
        let intDigits = digits()
        guard intDigits > 0 else { throw error("invalid number") }
        if intDigits > 1, bytes[intStart] == UInt8(ascii: "0") { throw error("invalid number: leading zero", at: start) }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard digits() > 0 else { throw error("invalid number: no digits after '.'") }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard digits() > 0 else { throw error("invalid number: no digits in exponent") }
        }
        let text = String(decoding: bytes[start..<index], as: UTF8.self)
        guard let value = Double(text), value.isFinite else { throw error("number out of range", at: start) }
        return value
    }
}

private func hex(_ b: UInt8) -> String {
    let digits = Array("0123456789ABCDEF")
    return String([digits[Int(b >> 4)], digits[Int(b & 0x0F)]])
}

private func printable(_ b: UInt8) -> String {
    (0x21...0x7E).contains(b) ? String(UnicodeScalar(b)) : "0x" + hex(b)
}

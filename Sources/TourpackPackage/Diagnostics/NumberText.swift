extension Double {
    /// `5` rather than `5.0` for whole numbers, as messages and reports show values a person wrote.
    package var compactText: String {
        rounded() == self && abs(self) < 1e15 ? String(Int(self)) : String(self)
    }
}

extension Sequence<UInt8> {
    /// Lowercase hex, two digits a byte: how digests are written in
    /// package.json, object keys, cache paths and messages. The one hex
    /// encoder of the package.
    package var lowercaseHex: String {
        // Written straight into the string's storage: a build writes one
        // for every key and digest it checks, thousands on a warm rebuild.
        withContiguousStorageIfAvailable(Self.hex) ?? Self.hex(Array(self))
    }

    private static func hex(_ bytes: UnsafeBufferPointer<UInt8>) -> String {
        String(unsafeUninitializedCapacity: bytes.count * 2) { text in
            for (index, byte) in bytes.enumerated() {
                text[2 * index] = UInt8.hexDigit(byte >> 4)
                text[2 * index + 1] = UInt8.hexDigit(byte & 0x0F)
            }
            return bytes.count * 2
        }
    }

    private static func hex(_ bytes: [UInt8]) -> String {
        bytes.withUnsafeBufferPointer(hex)
    }
}

extension UInt8 {
    /// The lowercase ASCII digit of a value below 16.
    fileprivate static func hexDigit(_ value: UInt8) -> UInt8 {
        value < 10 ? 0x30 + value : 0x57 + value
    }

    /// The value of this ASCII byte as a hex digit, either case; nil when it is not one.
    package var hexDigitValue: UInt8? {
        switch self {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): self - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): self - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): self - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// `0`–`9` or `a`–`f`: a digit of a digest as this package writes one.
    package var isLowercaseHexDigit: Bool {
        switch self {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"): true
        default: false
        }
    }
}

extension StringProtocol {
    /// Whether this is exactly `count` lowercase hex digits: a SHA-256 (64),
    /// a key ID (16) as this package writes them. The one check of a hex
    /// text; a document that writes one otherwise is refused, not read.
    package func isLowercaseHex(count: Int) -> Bool {
        utf8.count == count && utf8.allSatisfy(\.isLowercaseHexDigit)
    }
}

extension Array where Element == UInt8 {
    /// The bytes `text` writes two hex digits a byte, either case: the
    /// inverse of `lowercaseHex`. Nil when `text` is not an even number of
    /// hex digits.
    package init?(hex text: some StringProtocol) {
        let digits = Array(text.utf8)
        guard digits.count.isMultiple(of: 2) else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        for index in stride(from: 0, to: digits.count, by: 2) {
            guard let high = digits[index].hexDigitValue, let low = digits[index + 1].hexDigitValue else { return nil }
            bytes.append(high << 4 | low)
        }
        self = bytes
    }
}

extension Int {
    /// Thousands separated by commas, `4,000,000`: how counts of characters and tiles read in messages and reports.
    package var groupedText: String {
        let digits = String(magnitude)
        var out = ""
        for (index, character) in digits.enumerated() {
            if index > 0, (digits.count - index) % 3 == 0 { out.append(",") }
            out.append(character)
        }
        return self < 0 ? "-" + out : out
    }
}

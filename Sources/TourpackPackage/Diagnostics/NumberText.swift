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
        var text: [UInt8] = []
        text.reserveCapacity(underestimatedCount * 2)
        for byte in self {
            text.append(UInt8.hexDigits[Int(byte >> 4)])
            text.append(UInt8.hexDigits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}

extension UInt8 {
    fileprivate static let hexDigits = Array("0123456789abcdef".utf8)

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
    package var isLowercaseHexDigit: Bool { hexDigitValue != nil && !(UInt8(ascii: "A")...UInt8(ascii: "F")).contains(self) }
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

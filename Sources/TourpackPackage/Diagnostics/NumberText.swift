extension Double {
    /// `5` rather than `5.0` for whole numbers, as messages and reports show values a person wrote.
    package var compactText: String {
        rounded() == self && abs(self) < 1e15 ? String(Int(self)) : String(self)
    }
}

extension Sequence<UInt8> {
    /// Lowercase hex, two digits a byte: how digests are written in package.json and messages.
    package var lowercaseHex: String {
        map { byte in (byte < 16 ? "0" : "") + String(byte, radix: 16) }.joined()
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

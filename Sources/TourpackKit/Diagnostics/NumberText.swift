extension Double {
    /// `5` rather than `5.0` for whole numbers, as messages and reports show values a person wrote.
    var compactText: String {
        rounded() == self && abs(self) < 1e15 ? String(Int(self)) : String(self)
    }
}

extension Sequence<UInt8> {
    /// Lowercase hex, two digits a byte: how digests are written in package.json and messages.
    var lowercaseHex: String {
        map { byte in (byte < 16 ? "0" : "") + String(byte, radix: 16) }.joined()
    }
}

/// Headerless 16-bit little-endian mono PCM at a rate the request chose.
/// A body that ends inside a sample was cut short.
package struct RawPCMDecoder: AnswerDecoder {
    let rate: Int
    private var odd: UInt8?
    private var block: [Int16] = []

    package init(rate: Int) { self.rate = rate }

    package mutating func feed(_ bytes: UnsafeRawBufferPointer, emit: (UnsafeBufferPointer<Int16>, Int) throws -> Void) throws {
        guard !bytes.isEmpty else { return }
        block.removeAll(keepingCapacity: true)
        var index = 0
        if let first = odd {
            block.append(Int16(bitPattern: UInt16(first) | UInt16(bytes[0]) << 8))
            odd = nil
            index = 1
        }
        while index + 1 < bytes.count {
            block.append(Int16(bitPattern: UInt16(bytes[index]) | UInt16(bytes[index + 1]) << 8))
            index += 2
        }
        if index < bytes.count { odd = bytes[index] }
        try block.withUnsafeBufferPointer { try emit($0, rate) }
    }

    package mutating func finish() throws {
        if odd != nil { throw UndecodableBody(reason: "the PCM body ends inside a sample: it was cut short") }
    }

    /// Audio, or no content type at all; not a text, JSON or HTML page.
    static func isAudio(_ contentType: String?) -> Bool {
        guard let type = contentType?.lowercased() else { return true }
        return type.hasPrefix("audio/") || type.hasPrefix("application/octet-stream")
    }
}

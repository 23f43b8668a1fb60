import Foundation

/// The one `Range` a request asks for, as RFC 9110 §14.1.2 spells it:
/// `bytes=a-b`, `bytes=a-` or `bytes=-n`. Several ranges, another unit, or a
/// range that starts past the end are not satisfiable (nil); an end past the
/// last byte is cut to it.
enum ByteRange {
    static func parse(_ header: String, size: Int) -> Range<Int>? {
        let text = header.trimmingCharacters(in: .whitespaces)
        guard text.hasPrefix("bytes="), size > 0 else { return nil }
        let spec = text.dropFirst("bytes=".count)
        guard !spec.contains(","), let dash = spec.firstIndex(of: "-") else { return nil }
        let first = spec[..<dash].trimmingCharacters(in: .whitespaces)
        let last = spec[spec.index(after: dash)...].trimmingCharacters(in: .whitespaces)
        func number(_ text: String) -> Int? {
            guard !text.isEmpty, text.utf8.count <= 18, text.utf8.allSatisfy({ (0x30...0x39).contains($0) }) else { return nil }
            return Int(text)
        }
        if first.isEmpty {
            guard let suffix = number(last), suffix > 0 else { return nil }
            return max(0, size - suffix)..<size
        }
        guard let start = number(first), start < size else { return nil }
        if last.isEmpty { return start..<size }
        guard let end = number(last), end >= start else { return nil }
        return start..<(min(end, size - 1) + 1)
    }
}

/// The few file reads the server makes, each blocking: run them on a thread pool.
enum ReviewFiles {
    /// The size of the regular file `url` leads to (following links), or nil for anything else.
    static func regularFileSize(_ url: URL) -> Int? {
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: url.resolvingSymlinksInPath().path),
            attributes[.type] as? FileAttributeType == .typeRegular
        else { return nil }
        return (attributes[.size] as? NSNumber)?.intValue
    }

    /// The bytes of `span` in the file.
    static func read(_ url: URL, span: Range<Int>) throws -> [UInt8] {
        let handle = try FileHandle(forReadingFrom: url)
        defer { try? handle.close() }
        try handle.seek(toOffset: UInt64(span.lowerBound))
        return Array(try handle.read(upToCount: span.count) ?? Data())
    }
}

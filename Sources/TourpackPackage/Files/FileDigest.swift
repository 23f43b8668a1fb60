import Crypto
public import Foundation

/// SHA-256 of a file, read in 1 MiB blocks so a large file is never held whole.
public enum FileDigest {
    /// The file's size in bytes and its lowercase hex SHA-256.
    public static func sha256(of url: URL) throws -> (size: Int64, hex: String) {
        let handle = try FileHandle(forReadingFrom: url)
        defer { try? handle.close() }
        var hasher = SHA256()
        var size: Int64 = 0
        while let block = try handle.read(upToCount: 1 << 20), !block.isEmpty {
            hasher.update(data: block)
            size += Int64(block.count)
        }
        return (size, hasher.finalize().lowercaseHex)
    }
}

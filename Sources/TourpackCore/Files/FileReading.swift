package import Foundation

/// Reading files with limits, so a huge or special file can't exhaust memory.
package enum FileReading {
    /// The size of a regular file, or nil when it is not one (a FIFO, a
    /// device, a folder, a symlink). One `lstat`: `FileManager`'s attributes
    /// also look up the owner's and group's names, reading `/etc/passwd` and
    /// `/etc/group` for every file. It is asked only when `lstat` fails, for
    /// the error it has always thrown.
    package static func size(of url: URL) throws -> Int? {
        var info = stat()
        guard lstat(url.path, &info) == 0 else {
            let attributes = try FileManager.default.attributesOfItem(atPath: url.path)
            guard (attributes[.type] as? FileAttributeType) == .typeRegular else { return nil }
            return (attributes[.size] as? NSNumber)?.intValue ?? 0
        }
        guard info.st_mode & S_IFMT == S_IFREG else { return nil }
        return Int(info.st_size)
    }

    package static func bytes(of url: URL, limit: Int) throws -> [UInt8] {
        let handle = try FileHandle(forReadingFrom: url)
        defer { try? handle.close() }
        let data = try handle.read(upToCount: limit + 1) ?? Data()
        return [UInt8](data.prefix(limit + 1))
    }
}

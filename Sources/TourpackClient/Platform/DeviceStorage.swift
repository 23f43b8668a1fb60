package import Foundation
import TourpackPackage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// What a phone asks of the files the library keeps: its folders left out
/// of backups, its files protected so that narration plays with the screen
/// locked, and the free space the system would make for important work.
///
/// One seam, called for every folder and file the library creates. On
/// Apple's platforms it does what it says (`Platform/Darwin.swift`); on
/// Linux it does nothing, and the tests hand in one that records each call.
package struct DeviceStorage: Sendable {
    /// Called for `AudioCache/`, `OfflineTours/` and `.tourpack-install/`
    /// when they are made, and again when a library opens: a folder left
    /// out of backups takes everything in it with it.
    package var excludeFromBackup: @Sendable (URL) -> Void
    /// Called for every folder the library makes and every file it writes,
    /// once it exists (a file's hard links share its protection).
    package var protect: @Sendable (URL) -> Void
    /// The bytes the volume of a folder has for the app; nil: unknown.
    package var availableBytes: @Sendable (URL) -> Int64?

    package init(
        excludeFromBackup: @escaping @Sendable (URL) -> Void, protect: @escaping @Sendable (URL) -> Void,
        availableBytes: @escaping @Sendable (URL) -> Int64?
    ) {
        self.excludeFromBackup = excludeFromBackup
        self.protect = protect
        self.availableBytes = availableBytes
    }

    #if !canImport(Darwin)
    /// Linux: nothing to exclude or protect; free space from `statvfs`.
    package static let system = DeviceStorage(
        excludeFromBackup: { _ in }, protect: { _ in },
        availableBytes: { folder in
            var info = statvfs()
            guard statvfs(folder.path, &info) == 0 else { return nil }
            // What an unprivileged process may use, as `df` shows it.
            let (bytes, overflow) = Int64(clamping: info.f_bavail).multipliedReportingOverflow(by: Int64(clamping: info.f_frsize))
            return overflow ? .max : bytes
        })
    #endif

    /// The library's three folders in a Documents root.
    package static func folders(of documents: URL) -> [URL] {
        [Layout.audioCacheFolder, Layout.offlineToursFolder, Layout.installFolder].map {
            documents.appendingPathComponent($0, isDirectory: true)
        }
    }

    /// Makes the library's folders that are missing, and excludes all three
    /// from backup (again, for those that were there): what a library does
    /// when it opens, and an install before it writes.
    package func prepare(documents: URL) throws {
        try AtomicFile.createFolder(documents)
        for folder in Self.folders(of: documents) {
            try AtomicFile.createFolder(folder, under: documents)
            excludeFromBackup(folder)
            protect(folder)
        }
    }
}

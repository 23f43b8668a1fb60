import Foundation
import TourpackPackage

extension OfflineLibrary {
    /// Forgets what the device remembers of the site's trust, so that the
    /// next `refreshCatalog()` takes the site's catalogue as a new device
    /// would: the highest generation verified (rollback protection), the
    /// keys that verified it and the roots walked since the app's own.
    ///
    /// Call it only after the user has confirmed it, and only to recover
    /// from a damaged record: when `.tourpack-install/trust.json` cannot be
    /// read, every refresh and download fails with `integrityFailed` (the
    /// library never takes a damaged record for "none", which would switch
    /// rollback protection off unseen). Until the next refresh verifies a
    /// catalogue, a mirror could serve an older one unnoticed, so the app
    /// should say so ("Reset the record of the tour catalogue's version?").
    /// The installed packages stay, and keep playing. `tourpack install
    /// --reset-trust` does the same.
    ///
    /// - Throws: `OfflineError` `alreadyDownloading` while a download runs on
    ///   the folder (this library's or another process's): nothing is reset;
    ///   `storageFailed` when a file cannot be removed.
    public func resetTrust() async throws {
        let folder = self.folder
        do {
            try await Blocking.run { try folder.resetTrust() }
        } catch {
            throw OfflineError.from(error)
        }
        // The catalogue verified under the old record is verified again before any use.
        verified = nil
    }
}

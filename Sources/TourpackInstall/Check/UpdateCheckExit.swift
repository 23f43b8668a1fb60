package import TourpackClient
import TourpackCore

/// `install --check`'s exit codes beside the usual ones: a script tells
/// from them whether to run `install`. The command line's, not the app's
/// library's: `UpdateCheck` reports, this decides how the process ends.
extension UpdateCheck {
    package static let updateAvailableExit: Int32 = 10
    package static let notDownloadedExit: Int32 = 11
}

extension UpdateCheck.Report {
    /// What `--check` exits with: 10 when any update is available, else
    /// 11 when a tour asked for is not downloaded, else 0.
    package func exitCode(explicit: Bool) -> Int32 {
        if tours.contains(where: { $0.status == .updateAvailable }) { return UpdateCheck.updateAvailableExit }
        if explicit, tours.contains(where: { $0.status == .notDownloaded }) { return UpdateCheck.notDownloadedExit }
        return ExitStatus.ok
    }
}

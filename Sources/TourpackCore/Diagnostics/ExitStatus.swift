/// Exit codes from the contract, plus 130 for a run cancelled by a signal: the
/// one map of codes and what each means. `TourpackError.Kind.exitCode` maps
/// every kind of failure onto these codes, and `tourpack --help` prints
/// `legend`, so the help cannot name a code the program does not use.
///
/// They belong to the command line's layers: the app's library
/// (`TourpackClient`) sits on `TourpackPackage` alone and never exits.
package enum ExitStatus {
    package static let ok: Int32 = 0
    package static let failure: Int32 = 1
    package static let badInput: Int32 = 2
    package static let budget: Int32 = 3
    package static let cancelled: Int32 = 130

    /// Every code and what it means, in order.
    package static let meanings: [(code: Int32, meaning: String)] = [
        (ok, "ok"),
        (failure, "build or validation failure"),
        (badInput, "bad input, config or usage"),
        (budget, "a budget refused the work"),
        (cancelled, "cancelled"),
    ]

    /// `Exit codes: 0 ok · 1 … · 130 cancelled.`: the line `--help` prints.
    package static var legend: String {
        "Exit codes: " + meanings.map { "\($0.code) \($0.meaning)" }.joined(separator: " · ") + "."
    }
}

extension TourpackError.Kind {
    /// The process exit code the contract assigns to this kind: the one place it is decided.
    package var exitCode: Int32 {
        switch self {
        case .invalidInput: return ExitStatus.badInput
        case .budgetExceeded: return ExitStatus.budget
        case .cancelled: return ExitStatus.cancelled
        case .networkUnavailable, .audioGenerationFailed, .storageFailed, .alreadyBuilding, .audioEncodingFailed,
            .stateFailed, .mapDownloadFailed, .objectStorageFailed, .internalInvariant, .alreadyDownloading, .alreadyDownloaded,
            .integrityFailed, .catalogExpired, .rollbackRefused:
            return ExitStatus.failure
        }
    }
}

extension TourpackError {
    package var exitCode: Int32 { kind.exitCode }
}

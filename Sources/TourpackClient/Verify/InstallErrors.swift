import Foundation
package import TourpackPackage

/// What an install's failure says, in the app's names: the package (its ID
/// and tour) as `item`, the file as `path`, the URL without its query or
/// user info. A tile pack that cannot be fetched is `mapDownloadFailed`, an
/// audio file or a manifest `networkUnavailable`, a key the site does not
/// have (though the catalogue names it) an integrity failure, a file that
/// cannot be written `storageFailed`.
extension SiteSourceFailure {
    package func installError(package: String?, file: String, tilePack: Bool = false) -> TourpackError {
        switch kind {
        case .missing:
            return .integrityFailed(
                package: package, file: file, message: "the site has no \(url) (HTTP \(status ?? 404)), though the catalogue names it",
                url: url)
        case .storage(let path, let reason):
            return TourpackError(
                .storageFailed, reason, context: TourpackError.Context(item: package, path: path, operation: "write \(file)"))
        case .unreachable, .refused:
            if tilePack {
                return TourpackError(
                    .mapDownloadFailed, reason, context: TourpackError.Context(item: package, path: file, url: url, status: status))
            }
            return TourpackError(
                .networkUnavailable, "\(reason) (downloading \(file))",
                context: TourpackError.Context(item: package, path: file, url: url, status: status))
        }
    }
}

extension TourpackError {
    /// `package <id> (<tour name>)`: how an install's messages name a package.
    static func packageName(_ id: String, tourName: String?) -> String {
        tourName.map { "package \(id) (\($0))" } ?? "package \(id)"
    }
}

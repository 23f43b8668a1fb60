package import Foundation

/// `publish:` in a pipeline: where `tourpack publish` puts the packages and
/// their catalogue, how it signs the catalogue, and how long it keeps what
/// older catalogues name. Nil in a pipeline without the section.
package struct PublishSettings: Sendable, Hashable {
    /// Where the site lives.
    package enum Target: Sendable, Hashable {
        /// A folder on this machine (a web server's root, a mounted share).
        case folder(URL)
        /// An S3-compatible bucket behind a CDN, reached as `state.objects` is.
        case s3(ObjectStoreSettings)
    }

    package var target: Target
    /// The variable holding the Ed25519 signing key (base64 of its 32 raw
    /// bytes). Nil: the catalogue is published unsigned, and says so.
    package var signingKeyEnv: String?
    /// How many of the newest catalogue generations `--gc` keeps with
    /// everything they name (the one in force is always kept).
    package var keepGenerations: Int
    /// How long an object no kept generation names stays before `--gc`
    /// deletes it, so a device mid-download never loses a file.
    package var graceDays: Int
    /// How long a catalogue stays fresh: its `expiresAt` is this many days
    /// after it is published or refreshed (`publish --refresh`, a daily job).
    /// A device refuses an older one for downloads (`catalogExpired`).
    package var catalogTTLDays: Int

    package static let defaultKeepGenerations = 10
    package static let defaultGraceDays = 7
    package static let defaultCatalogTTLDays = 7

    package init(
        target: Target, signingKeyEnv: String? = nil, keepGenerations: Int = defaultKeepGenerations, graceDays: Int = defaultGraceDays,
        catalogTTLDays: Int = defaultCatalogTTLDays
    ) {
        self.target = target
        self.signingKeyEnv = signingKeyEnv
        self.keepGenerations = keepGenerations
        self.graceDays = graceDays
        self.catalogTTLDays = catalogTTLDays
    }
}

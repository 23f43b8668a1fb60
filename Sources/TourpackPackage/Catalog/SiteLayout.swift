import Crypto
package import Foundation

/// The keys of a published site, and how a CDN may cache each.
///
/// ```
/// catalog.json, catalog.json.sig            the generation in force (short cache), written last
/// generations/<n>.json, <n>.json.sig         every catalogue ever published
/// roots/<n>.json, <n>.json.sig               every root of trust (`RootOfTrust`), 1 first
/// packages/<packageId>/<contentHash>.json    each package.json, as built
/// blobs/sha256/<2 hex>/<sha256>              every audio file, caption file and tile pack, once
/// ```
///
/// Everything but `catalog.json` and its signature is immutable and named
/// by what it holds, so a CDN keeps it forever and a device resuming a
/// download after a week gets the same bytes.
package enum SiteLayout {
    package static let catalog = "catalog.json"
    package static let signatureSuffix = ".sig"
    package static let generationsFolder = "generations/"
    package static let packagesFolder = "packages/"
    package static let blobsFolder = "blobs/sha256/"
    package static let rootsFolder = "roots/"

    /// Immutable objects: a year, and never revalidated.
    package static let immutable = "public, max-age=31536000, immutable"
    /// The catalogue: a minute, so "Update available" shows soon after a publish.
    package static let catalogCacheControl = "public, max-age=60"

    package static func blob(sha256: String) -> String {
        blobsFolder + sha256.prefix(2) + "/" + sha256
    }

    package static func generation(_ number: Int) -> String {
        generationsFolder + "\(number).json"
    }

    /// `roots/<n>.json`: root of trust version `number`.
    package static func root(_ number: Int) -> String {
        rootsFolder + "\(number).json"
    }

    package static func signature(of key: String) -> String { key + signatureSuffix }

    /// The version tag of an object in a folder site (a folder has no
    /// ETags): the SHA-256 of its bytes, as the publisher writes it and a
    /// device reads it, so an unchanged catalogue reads as not modified.
    package static func folderTag(of bytes: some DataProtocol) -> String { SHA256.hash(data: bytes).lowercaseHex }

    /// The generation a key under `generations/` names (`7` for
    /// `generations/7.json`); nil for its signature or anything else.
    package static func generationNumber(_ key: String) -> Int? {
        guard key.hasPrefix(generationsFolder), key.hasSuffix(".json") else { return nil }
        return Int(key.dropFirst(generationsFolder.count).dropLast(".json".count))
    }

    /// What a CDN serves a file of `format` as.
    package static func contentType(for format: AudioFormat) -> String {
        switch format {
        case .aac: "audio/mp4"
        case .mp3: "audio/mpeg"
        case .opus: "audio/ogg"
        }
    }

    package static let jsonContentType = "application/json"
    /// A tile pack (MBTiles) is an SQLite database.
    package static let tilePackContentType = "application/vnd.sqlite3"
    /// A narration's captions (WebVTT is UTF-8 by definition; the charset
    /// keeps a CDN or browser from guessing).
    package static let captionsContentType = "text/vtt; charset=utf-8"

    /// Every file `manifest` names (`PackageFiles.listed(in:)`), with what
    /// a site serves it as: upload, rollback's check and `--gc` read it.
    package static func files(of manifest: PackageManifest) -> [File] {
        let formats = Dictionary(manifest.audio.map { ($0.path, $0.format) }, uniquingKeysWith: { first, _ in first })
        return PackageFiles.listed(in: manifest).map { file in
            let type: String
            switch file.kind {
            case .audio: type = formats[file.path].map(contentType(for:)) ?? "application/octet-stream"
            case .captions: type = captionsContentType
            case .tilePack: type = tilePackContentType
            }
            return File(path: file.path, sha256: file.sha256, sizeBytes: file.sizeBytes, contentType: type)
        }
    }

    /// One file a package.json names, with what the site serves it as.
    package struct File: Sendable, Hashable {
        /// Relative to the root, as package.json names it.
        package var path: String
        package var sha256: String
        package var sizeBytes: Int64
        package var contentType: String
    }
}

extension SiteLayout {
    /// A site's address as a person gives it (`https://host/site/`,
    /// `…/catalog.json`, `…?token=…`): its base, without a trailing slash or
    /// the catalogue's name, and its query, sent with every request (a
    /// signed CDN's token). Both site sources read an address this way.
    package static func address(_ text: String) -> (base: String, query: String?) {
        var base = text
        var query: String?
        if let mark = base.firstIndex(where: { $0 == "?" || $0 == "#" }) {
            if base[mark] == "?" { query = String(base[base.index(after: mark)...].prefix { $0 != "#" }) }
            base = String(base[..<mark])
        }
        while base.hasSuffix("/") { base.removeLast() }
        // The catalogue's own URL names its site too.
        if base.hasSuffix("/" + catalog) { base.removeLast(catalog.count + 1) }
        return (base, query.flatMap { $0.isEmpty ? nil : $0 })
    }
}

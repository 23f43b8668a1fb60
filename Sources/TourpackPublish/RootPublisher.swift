package import Foundation
package import TourpackCore
import TourpackHTTP

/// `tourpack keys root` and `tourpack keys rotate`: the site's roots of
/// trust (`RootOfTrust`), `roots/<n>.json` with their signatures.
///
/// Each root is written signature first, then the root itself with
/// create-if-absent, so a device never finds a root without its signature,
/// and two rotations never both write version n. Before it writes, the
/// publisher checks the new root as a device will (`RootOfTrust.verifyNext`):
/// a root devices would refuse is never published.
package struct RootPublisher: Sendable {
    package let site: any Site
    package var now: @Sendable () -> Date = { Date() }
    package var report: @Sendable (PublishEvent) -> Void = { _ in }

    package init(site: any Site) { self.site = site }

    /// The newest root on the site and its bytes; nil when it has none.
    package func newest() async throws -> (root: RootOfTrust, bytes: [UInt8])? {
        let versions = try await site.list(prefix: SiteLayout.rootsFolder).compactMap { listed -> Int? in
            let key = listed.key
            guard key.hasSuffix(".json") else { return nil }
            return Int(key.dropFirst(SiteLayout.rootsFolder.count).dropLast(".json".count))
        }
        guard let newest = versions.max(), let read = try await site.read(SiteLayout.root(newest)) else { return nil }
        do { return (try RootOfTrust.decode(Data(read.bytes)), read.bytes) } catch {
            throw TourpackError.invalidInput("\(site.locate(SiteLayout.root(newest))): \(error)")
        }
    }

    /// Writes root version 1: `rootKeys` (every one signs it) may sign the
    /// next root, `catalogKeys` the catalogue. Refused when the site has a root already.
    package func create(
        rootKeys: [SigningKey], rootThreshold: Int, catalogKeys: [VerifyingKey], catalogThreshold: Int
    ) async throws -> RootOfTrust {
        try await site.exclusively { [self] in
            if let existing = try await newest() {
                throw TourpackError.invalidInput(
                    "keys root: \(site.locate(SiteLayout.root(existing.root.version))) exists; use `tourpack keys rotate` to change the keys"
                )
            }
            let root = try Self.root(
                version: 1, at: now(), rootKeys: rootKeys.map(\.verifyingKey), rootThreshold: rootThreshold, catalogKeys: catalogKeys,
                catalogThreshold: catalogThreshold)
            let bytes = try root.encoded()
            let signature = try SignatureSet.sign(bytes, with: rootKeys)
            let valid = try root.signers(of: bytes, document: signature, role: root.roles.root)
            guard valid.count >= root.roles.root.threshold else {
                throw TourpackError.internalInvariant("root 1 is not signed by a threshold of its own root keys")
            }
            try await write(version: 1, bytes: bytes, signature: signature)
            return root
        }
    }

    /// Writes root version n+1, signed by `signers`: they must hold a
    /// threshold of root n's root keys and a threshold of the new root's.
    /// `rootKeys` nil keeps root n's root role as it is.
    package func rotate(
        signers: [SigningKey], rootKeys: [VerifyingKey]?, rootThreshold: Int?, catalogKeys: [VerifyingKey], catalogThreshold: Int
    ) async throws -> RootOfTrust {
        try await site.exclusively { [self] in
            guard let current = try await newest() else {
                throw TourpackError.invalidInput(
                    "keys rotate: \(site.locate(SiteLayout.rootsFolder)) holds no root; write version 1 with `tourpack keys root`")
            }
            guard let version = current.root.nextVersion else {
                throw TourpackError.invalidInput(
                    "keys rotate: the site's newest root is version \(current.root.version), the last there can be; no root can follow it")
            }
            let keepRoot = current.root.verifyingKeys(current.root.roles.root)
            let next = try Self.root(
                version: version, at: now(), rootKeys: rootKeys ?? keepRoot,
                rootThreshold: rootThreshold ?? current.root.roles.root.threshold, catalogKeys: catalogKeys,
                catalogThreshold: catalogThreshold)
            let bytes = try next.encoded()
            let signature = try SignatureSet.sign(bytes, with: signers)
            do { _ = try current.root.verifyNext(bytes, signatureDocument: signature) } catch {
                throw TourpackError.invalidInput(
                    "keys rotate: root \(next.version) would not verify on a device holding root \(current.root.version): \(error). "
                        + "Give the private keys of enough root keys (--sign-with-env) of both versions")
            }
            try await write(version: next.version, bytes: bytes, signature: signature)
            return next
        }
    }

    private func write(version: Int, bytes: Data, signature: Data) async throws {
        let key = SiteLayout.root(version)
        try await site.overwrite(
            SiteLayout.signature(of: key), bytes: Array(signature), contentType: SiteLayout.jsonContentType,
            cacheControl: SiteLayout.immutable)
        guard
            try await site.create(key, bytes: Array(bytes), contentType: SiteLayout.jsonContentType, cacheControl: SiteLayout.immutable)
        else {
            throw TourpackError.invalidInput("\(site.locate(key)) appeared meanwhile (another rotation?); run it again")
        }
        report(.uploaded(key: key, bytes: Int64(bytes.count), what: "root version \(version)"))
    }

    private static func root(
        version: Int, at moment: Date, rootKeys: [VerifyingKey], rootThreshold: Int, catalogKeys: [VerifyingKey], catalogThreshold: Int
    ) throws -> RootOfTrust {
        let root = RootOfTrust(
            version: version, publishedAt: moment, rootKeys: rootKeys, rootThreshold: rootThreshold, catalogKeys: catalogKeys,
            catalogThreshold: catalogThreshold)
        // The same checks a device makes on reading it.
        _ = try RootOfTrust.decode(try root.encoded())
        return root
    }
}

import Dispatch
import Foundation
import TourpackClient
import TourpackCore

/// The fuzz target of a device's trust: `trust.json`, the pinned root,
/// the next root and the catalogue's generation from the input, read by
/// the real `CatalogReader` from a folder site, as `tourpack install` and
/// the app's library read a site.
///
/// The input is up to four parts, split at NUL bytes:
///
/// 1. `.tourpack-install/trust.json` (absent when empty; `@SITE@` stands
///    for the site's path, so a record can be the site's own);
/// 2. the pinned `root.json` (when it does not read as a root, a fixed
///    root 1 naming the fixed root and catalogue keys);
/// 3. `roots/<pinned version + 1>.json`, signed by the fixed root key
///    (absent when empty);
/// 4. the catalogue's generation, in decimal (1 when it is not a number);
///    the catalogue is signed by the fixed catalogue key and fresh.
///
/// The property, for any input: nothing traps (a generation near `Int.max`
/// in trust.json, or a root at `Int.max`, once did); a refusal is
/// `integrityFailed`, `rollbackRefused` or `catalogExpired` and leaves
/// trust.json byte for byte; a trust.json `TrustRecord.decode` refuses is
/// `integrityFailed` naming `.tourpack-install/trust.json`, never taken
/// for "no record"; an accepted catalogue leaves a record that reads back
/// with its generation and the key that verified it.
extension FuzzHarness {
    static let trustNow = Date(timeIntervalSince1970: 1_790_000_000)
    static let trustRootKey = fixedKey(1)
    static let trustCatalogKey = fixedKey(2)

    /// A key from 32 fixed bytes, through the one way a key is loaded.
    static func fixedKey(_ byte: UInt8) -> SigningKey {
        let variable = "TOURPACK_FUZZ_KEY"
        guard let key = try? SigningKey.load(variable: variable, from: [variable: Data(repeating: byte, count: 32).base64EncodedString()])
        else { violated("trust-record", "a fixed key does not load") }
        return key
    }

    static func trustRecord(_ bytes: [UInt8]) {
        let parts = bytes.split(separator: 0, maxSplits: 3, omittingEmptySubsequences: false).map(Array.init)
        func part(_ index: Int) -> [UInt8] { index < parts.count ? parts[index] : [] }
        let site = scratch.appendingPathComponent("trust-site", isDirectory: true)
        let documents = scratch.appendingPathComponent("trust-documents", isDirectory: true)
        let folder = InstallFolder(documents: documents)
        for url in [site, documents] { try? FileManager.default.removeItem(at: url) }
        for url in [site.appendingPathComponent(SiteLayout.rootsFolder), folder.url] {
            do { try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true) } catch {
                violated("scratch", "cannot create \(url.path)")
            }
        }
        let trustFile = documents.appendingPathComponent(InstallFolder.trustPath)
        var record = part(0)
        if !record.isEmpty {
            let placeholder = Array("@SITE@".utf8)
            let path = Array(FolderSiteSource(root: site).location.utf8)
            var replaced: [UInt8] = []
            var index = 0
            while index < record.count {
                if record[index...].starts(with: placeholder) {
                    replaced += path
                    index += placeholder.count
                } else {
                    replaced.append(record[index])
                    index += 1
                }
            }
            record = replaced
            _ = file("trust-documents/\(InstallFolder.trustPath)", record)
        }

        let fallback =
            (try? RootOfTrust(
                version: 1, publishedAt: trustNow, rootKeys: [trustRootKey.verifyingKey], rootThreshold: 1,
                catalogKeys: [trustCatalogKey.verifyingKey], catalogThreshold: 1
            ).encoded()).map(Array.init) ?? []
        let pinnedBytes = (try? RootOfTrust.decode(Data(part(1)))) != nil ? part(1) : fallback
        guard let pinned = try? RootOfTrust.decode(Data(pinnedBytes)) else { violated("trust-record", "the fixed root does not read") }
        if !part(2).isEmpty, let version = pinned.nextVersion {
            let key = SiteLayout.root(version)
            _ = file("trust-site/\(key)", part(2))
            guard let signature = try? SignatureSet.sign(Data(part(2)), with: [trustRootKey]) else {
                violated("trust-record", "cannot sign the next root")
            }
            _ = file("trust-site/\(SiteLayout.signature(of: key))", Array(signature))
        }
        let generation = Int(String(decoding: part(3), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)) ?? 1
        var catalog = Catalog(
            generation: 1, previousGeneration: nil, publishedAt: trustNow, expiresAt: trustNow.addingTimeInterval(7 * 86_400), tours: [])
        catalog.sign(by: trustCatalogKey.keyId)
        // The generation goes in as text: canonical JSON would write one past 2^53 as a double, which no reader takes for an Int.
        guard let canonical = try? catalog.encoded(),
            case let text = String(decoding: canonical, as: UTF8.self), let one = text.range(of: "\"generation\": 1"),
            case let catalogBytes = Data(text.replacingCharacters(in: one, with: "\"generation\": \(generation)").utf8),
            let signature = try? trustCatalogKey.sign(catalogBytes)
        else {
            violated("trust-record", "cannot write the catalogue")
        }
        _ = file("trust-site/\(SiteLayout.catalog)", Array(catalogBytes))
        _ = file("trust-site/\(SiteLayout.signature(of: SiteLayout.catalog))", Array(signature))

        let reader = CatalogReader(
            source: FolderSiteSource(root: site), folder: folder, trust: .root(pinned, bytes: pinnedBytes), now: { trustNow })
        let outcome = waitFor { () async -> (any Error)? in
            do {
                _ = try await reader.read()
                return nil
            } catch {
                return error
            }
        }
        let after = FileManager.default.contents(atPath: trustFile.path).map(Array.init)
        let recordReads = record.isEmpty || (try? TrustRecord.decode(record)) != nil
        if let failure = outcome {
            guard let error = failure as? TourpackError, [.integrityFailed, .rollbackRefused, .catalogExpired].contains(error.kind) else {
                violated("trust-record", "refused with something else than a trust refusal: \(failure)")
            }
            if after != (record.isEmpty ? nil : record) { violated("trust-record", "a refusal changed trust.json") }
            if !recordReads, error.kind != .integrityFailed || error.context.path != InstallFolder.trustPath {
                violated("trust-record", "a trust.json that does not read was not refused as damaged: \(error)")
            }
        } else {
            if !recordReads { violated("trust-record", "a trust.json that does not read was taken for a record") }
            guard let written = try? folder.readTrustRecord(), written.generation == generation,
                written.verifiedBy == [trustCatalogKey.keyId], written.schemaVersion == TrustRecord.currentSchemaVersion
            else { violated("trust-record", "the accepted catalogue's record does not read back as it was verified") }
        }
    }

    /// Runs `work` to its end from a thread that is not the cooperative
    /// pool's (libFuzzer's, or the corpus test's, off the pool) and returns its result.
    static func waitFor<T: Sendable>(_ work: @escaping @Sendable () async -> T) -> T {
        let box = Awaited<T>()
        let done = DispatchSemaphore(value: 0)
        Task.detached {
            box.value = await work()
            done.signal()
        }
        done.wait()
        guard let value = box.value else { violated("trust-record", "the read never finished") }
        return value
    }
}

/// What `FuzzHarness.waitFor` hands from the task to the waiting thread;
/// the semaphore orders the write before the read.
private final class Awaited<T: Sendable>: @unchecked Sendable {
    var value: T?
}

import Foundation
import TourpackCore
import TourpackPublish
import TourpackTesting

/// Writes `Tests/Vectors` (run `TOURPACK_WRITE_VECTORS=1 swift test --filter SharedVectorTests`):
/// each site made by the real publisher on a `SiteFixture`, roots by the
/// real `RootPublisher` (`TrustSite`), forgeries as the trust tests make
/// them. Keys are new on every run, so the files change; the verdicts must not.
enum SharedVectorWriter {
    typealias Verdict = SharedVector.Verdict

    static func accepted(_ generation: String) -> Verdict { Verdict(outcome: "accepted", generation: generation) }
    static let installed = Verdict(outcome: "installed")
    static func refused(_ kind: TourpackError.Kind, _ file: String?) -> Verdict {
        Verdict(outcome: "refused", kind: kind.rawValue, file: file)
    }

    /// The site as served: every object but the generations' history;
    /// without `blobs`, the catalogue and roots alone.
    static func site(_ fixture: SiteFixture, blobs: Bool) throws -> [String: Data] {
        var files: [String: Data] = [:]
        for (path, bytes) in SiteFixture.snapshot(fixture.site) where !path.hasPrefix("generations/") {
            if !blobs, path.hasPrefix("blobs/") || path.hasPrefix("packages/") { continue }
            files[path] = bytes
        }
        return files
    }

    /// A moment a minute after now, in whole seconds: the device's clock for a step.
    static func soon(_ seconds: Double = 60) -> Date {
        Date(timeIntervalSince1970: (Date().timeIntervalSince1970 + seconds).rounded(.down))
    }

    static func newFixture() throws -> (SiteFixture, tourId: String) {
        let fixture = try SiteFixture()
        let packages = try fixture.addTour(name: "Vector Tour", formats: [.aac], files: 2, bytes: 1500, captions: true)
        return (fixture, packages[0].tourId)
    }

    /// `bytes` signed by `key`, as the live catalogue and signature.
    static func sign(_ bytes: Data, _ key: SigningKey, into fixture: SiteFixture) throws {
        try fixture.restoreCatalog((bytes, try key.sign(bytes)))
    }

    static func catalogue(_ fixture: SiteFixture) throws -> Data { try fixture.liveCatalog().catalog }

    static func need<T>(_ value: T?, _ what: String = "a value the vector needs") throws -> T {
        guard let value else { throw TourpackError.invalidInput("writing the vectors: no \(what)") }
        return value
    }

    static func writeAll(to folder: URL) async throws {
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        for old in try FileManager.default.contentsOfDirectory(atPath: folder.path) where old.hasSuffix(".json") {
            try FileManager.default.removeItem(at: folder.appendingPathComponent(old))
        }
        var vectors: [SharedVector] = []
        vectors += try await keyVectors()
        vectors += try await rootVectors()
        vectors += try await packageVectors()
        for vector in vectors { try vector.write(to: folder) }
        try Data(readme(vectors.sorted { $0.name < $1.name }).utf8).write(to: folder.appendingPathComponent("README.md"))
    }

    /// `Tests/Vectors/README.md`: the format, then each vector's steps and verdicts, as its file says them.
    static func readme(_ vectors: [SharedVector]) -> String {
        var lines = [
            "# Shared test vectors", "",
            "Signed sites and the verdict a device must give each, so the Swift client",
            "(TourpackClient) and the web client (`clients/web`) cannot drift. Both run",
            "every file here: `SharedVectorTests` (Tests/InstallTests) through the app's",
            "`URLSessionSiteSource`, `CatalogReader` and `Installer`, and",
            "`clients/web/test/vectors.test.ts` under `node --test` (run by `WebClientTests`).", "",
            "Each site was made by the real publisher (`Publisher`, `RootPublisher`) on a",
            "`SiteFixture`, and each forgery as the trust tests make them",
            "(`SharedVectorWriter`). `TOURPACK_WRITE_VECTORS=1 swift test --filter SharedVectorTests`",
            "writes them anew (new keys, so new bytes; the verdicts must stay) with this",
            "README, which `SharedVectorTests` holds to the files.", "",
            "## Format", "",
            "One JSON file per vector: `name`, `attack` (the row of Trust.md's table),",
            "`description`, `anchor` (`publicKey`: the base64 key, or `rootJSON`: the",
            "base64 of the pinned root.json), and `steps`. A device starts with nothing",
            "and keeps its state from step to step. Each step has `now` (the device's",
            "clock), `site` (every object served, key → base64; `filled` makes large",
            "ones: key → `{byte, count}`), `install` (tour ids to install after the",
            "catalogue; absent: read the catalogue alone) and `verdict`: `accepted`",
            "with the `generation`, `installed`, or `refused` with the error `kind` and",
            "the `file` it names (absent when the error names none).", "",
            "## The vectors", "",
        ]
        for vector in vectors {
            let anchor: String
            switch vector.anchor {
            case .publicKey: anchor = "key"
            case .root: anchor = "root"
            }
            lines += ["### \(vector.name)", ""]
            lines.append(
                "\(vector.description) Attack: \(vector.attack.isEmpty ? "none (the honest path)" : vector.attack). Anchor: \(anchor).")
            lines.append("")
            for (index, step) in vector.steps.enumerated() {
                let verdict = step.verdict
                var said = verdict.outcome
                if let generation = verdict.generation { said += " generation \(generation)" }
                if let kind = verdict.kind { said += " `\(kind)`" }
                if let file = verdict.file { said += " (\(file))" }
                lines.append("\(index + 1). \(step.note)\(step.install.isEmpty ? "" : " · install") → \(said)")
            }
            lines.append("")
        }
        return lines.joined(separator: "\n")
    }

    // MARK: One key

    static func keyVectors() async throws -> [SharedVector] {
        var vectors: [SharedVector] = []
        let (fixture, _) = try newFixture()
        try await fixture.publish()
        let anchor = SharedVector.Anchor.publicKey(fixture.publicKeyBase64)
        let live = try fixture.liveCatalog()
        let published = try Catalog.decode(live.catalog)
        let now = soon()
        let first = try site(fixture, blobs: false)

        vectors.append(
            SharedVector(
                name: "wrong-key", attack: "Key compromise", description: "The catalogue is signed by a key the device does not trust.",
                anchor: .publicKey(SigningKey.generate().verifyingKey.base64),
                steps: [
                    .init(
                        note: "signed by the site's key, not the anchor", now: now, files: first,
                        verdict: refused(.integrityFailed, "catalog.json"))
                ]))

        var flipped = live.catalog
        let index = try need(flipped.range(of: Data("Vector Tour".utf8))?.lowerBound, "the tour's name in the catalogue")
        flipped[index] ^= 0x01
        var tampered = first
        tampered["catalog.json"] = flipped
        vectors.append(
            SharedVector(
                name: "flipped-byte", attack: "Tampering",
                description: "One byte of the catalogue flipped after signing; the device refuses it, then takes the real one.",
                anchor: anchor,
                steps: [
                    .init(note: "one flipped byte", now: now, files: tampered, verdict: refused(.integrityFailed, "catalog.json")),
                    .init(note: "the catalogue as signed", now: now, files: first, verdict: accepted("1")),
                ]))

        var unsigned = first
        unsigned["catalog.json.sig"] = nil
        vectors.append(
            SharedVector(
                name: "unsigned", attack: "No key", description: "The site serves no signature.", anchor: anchor,
                steps: [.init(note: "no catalog.json.sig", now: now, files: unsigned, verdict: refused(.integrityFailed, "catalog.json"))]))

        let expiry = try need(published.expiresAt)
        vectors.append(
            SharedVector(
                name: "expired-catalogue", attack: "Indefinite freeze",
                description: "The catalogue is read a second after its expiresAt.", anchor: anchor,
                steps: [
                    .init(
                        note: "a second past expiresAt", now: expiry.addingTimeInterval(1), files: first,
                        verdict: refused(.catalogExpired, "catalog.json"))
                ]))

        // A second generation, then a replay of the first.
        _ = try fixture.changeFile(of: fixture.packages[0])
        try await fixture.publish()
        let second = try site(fixture, blobs: false)
        try fixture.replay(generation: 1)
        let replay = try site(fixture, blobs: false)
        try fixture.replay(generation: 2)
        vectors.append(
            SharedVector(
                name: "rollback", attack: "Rollback", description: "After generation 2, a mirror serves generation 1 (validly signed).",
                anchor: anchor,
                steps: [
                    .init(note: "generation 2", now: now, files: second, verdict: accepted("2")),
                    .init(note: "generation 1 replayed", now: now, files: replay, verdict: refused(.rollbackRefused, "catalog.json")),
                    .init(note: "generation 2 again", now: now, files: second, verdict: accepted("2")),
                ]))

        // The same generation signed again later (a refresh), then the older signing.
        try fixture.replay(generation: 1)
        try fixture.forge(generation: 1, key: fixture.key, signedBy: fixture.key.keyId, now: now)
        let refreshed = try site(fixture, blobs: false)
        vectors.append(
            SharedVector(
                name: "older-signing", attack: "Rollback",
                description: "Generation 1 refreshed to a later expiresAt, then its first signing with the earlier one.", anchor: anchor,
                steps: [
                    .init(note: "generation 1, refreshed", now: now, files: refreshed, verdict: accepted("1")),
                    .init(note: "generation 1 as first signed", now: now, files: first, verdict: refused(.rollbackRefused, "catalog.json")),
                ]))

        var forged: [Int: [String: Data]] = [:]
        for generation in [10_001, 10_002] {
            try fixture.forge(generation: generation, key: fixture.key, signedBy: fixture.key.keyId, now: now)
            forged[generation] = try site(fixture, blobs: false)
        }
        vectors.append(
            SharedVector(
                name: "fast-forward", attack: "Fast-forward",
                description:
                    "After generation 1, a catalogue 10,001 generations ahead (signed by the real key) is refused; 10,000 ahead is taken.",
                anchor: anchor,
                steps: [
                    .init(note: "generation 1", now: now, files: first, verdict: accepted("1")),
                    .init(note: "generation 10002", now: now, files: forged[10_002]!, verdict: refused(.rollbackRefused, "catalog.json")),
                    .init(note: "generation 10001", now: now, files: forged[10_001]!, verdict: accepted("10001")),
                ]))
        vectors.append(
            SharedVector(
                name: "fast-forward-new-device", attack: "Fast-forward",
                description: "A device that verified nothing takes at most generation 10,000.", anchor: anchor,
                steps: [
                    .init(
                        note: "generation 10001 first", now: now, files: forged[10_001]!, verdict: refused(.rollbackRefused, "catalog.json")
                    )
                ]))

        // Numbers that would trap: issue 48's Int.max, a generation past 64 bits, 0, and a size past 1 TiB.
        var numbers: [SharedVector.Step] = []
        for (text, verdict) in [
            ("9223372036854775807", refused(.rollbackRefused, "catalog.json")),
            ("9223372036854775808", refused(.integrityFailed, "catalog.json")),
            ("0", refused(.integrityFailed, "catalog.json")),
            ("-1", refused(.integrityFailed, "catalog.json")),
            ("9007199254740993", refused(.rollbackRefused, "catalog.json")),
        ] {
            try fixture.replay(generation: 1)
            try fixture.forge(generation: 1, key: fixture.key, signedBy: fixture.key.keyId, now: now)
            try sign(try SiteFixture.setting("generation", to: text, in: try catalogue(fixture)), fixture.key, into: fixture)
            numbers.append(.init(note: "generation \(text)", now: now, files: try site(fixture, blobs: false), verdict: verdict))
        }
        try fixture.replay(generation: 1)
        try fixture.forge(generation: 1, key: fixture.key, signedBy: fixture.key.keyId, now: now)
        try sign(try SiteFixture.setting("sizeBytes", to: "9223372036854775807", in: try catalogue(fixture)), fixture.key, into: fixture)
        numbers.append(
            .init(
                note: "a package of Int.max bytes", now: now, files: try site(fixture, blobs: false),
                verdict: refused(.integrityFailed, "catalog.json")))
        numbers.append(.init(note: "generation 1, nothing changed before", now: now, files: first, verdict: accepted("1")))
        vectors.append(
            SharedVector(
                name: "numbers-that-trap", attack: "Numbers that trap",
                description:
                    "Signed catalogues whose numbers are out of range: Int.max, past 64 bits, 0, negative, 2^53 + 1 (which a double cannot hold), a size past 1 TiB.",
                anchor: anchor, steps: numbers))

        try fixture.replay(generation: 1)
        var oversized = first
        oversized["catalog.json"] = nil
        vectors.append(
            SharedVector(
                name: "oversized-catalogue", attack: "Endless data",
                description: "A catalogue of 32 MiB and one byte: the transfer stops at the cap.", anchor: anchor,
                steps: [
                    .init(
                        note: "33554433 spaces", now: now, files: oversized, filled: ["catalog.json": (0x20, 32 * 1024 * 1024 + 1)],
                        verdict: refused(.networkUnavailable, "catalog.json"))
                ]))
        return vectors
    }

    // MARK: Roots of trust

    static func rootVectors() async throws -> [SharedVector] {
        var vectors: [SharedVector] = []
        let now = soon()

        do {
            let (fixture, _) = try newFixture()
            let trust = try await TrustSite(fixture)
            let anchor = SharedVector.Anchor.root(try trust.pinnedBytes)
            try await fixture.publish()
            let first = try site(fixture, blobs: false)
            let newKey = TrustSite.newCatalogKey()
            try await trust.rotate(to: [newKey])
            try await trust.publish(signedWith: newKey)
            let rotated = try site(fixture, blobs: false)
            let live = try trust.live()
            try trust.forge(generation: 3, key: fixture.key, signedBy: fixture.key.keyId, now: now)
            let revoked = try site(fixture, blobs: false)
            try trust.restore(live)
            vectors.append(
                SharedVector(
                    name: "rotation", attack: "Key compromise",
                    description:
                        "Root 1 names key A; root 2 (signed by root 1's root key and its own) names key B. The device walks to root 2, takes B's catalogue, and refuses A's.",
                    anchor: anchor,
                    steps: [
                        .init(note: "root 1, generation 1 by A", now: now, files: first, verdict: accepted("1")),
                        .init(note: "root 2, generation 2 by B", now: now, files: rotated, verdict: accepted("2")),
                        .init(
                            note: "generation 3 by the revoked A", now: now, files: revoked,
                            verdict: refused(.integrityFailed, "catalog.json")),
                        .init(note: "generation 2 by B again", now: now, files: rotated, verdict: accepted("2")),
                    ]))

            var big = rotated
            big["roots/2.json"] = nil
            vectors.append(
                SharedVector(
                    name: "oversized-root", attack: "Endless data", description: "roots/2.json of 64 KiB and one byte.", anchor: anchor,
                    steps: [
                        .init(
                            note: "65537 spaces", now: now, files: big, filled: ["roots/2.json": (0x20, 64 * 1024 + 1)],
                            verdict: refused(.integrityFailed, "roots/2.json"))
                    ]))
        }

        do {
            let (fixture, _) = try newFixture()
            let trust = try await TrustSite(fixture)
            let anchor = SharedVector.Anchor.root(try trust.pinnedBytes)
            try await fixture.publish()
            // A root 2 signed only by an attacker's root key, naming the attacker's catalogue key.
            let attackerRoot = SigningKey.generate()
            let attackerCatalog = SigningKey.generate()
            let forgedRoot = try RootOfTrust(
                version: 2, publishedAt: Date(), rootKeys: [attackerRoot.verifyingKey], rootThreshold: 1,
                catalogKeys: [attackerCatalog.verifyingKey], catalogThreshold: 1
            ).encoded()
            try forgedRoot.write(to: fixture.site.appendingPathComponent("roots/2.json"))
            try SignatureSet.sign(forgedRoot, with: [attackerRoot]).write(to: fixture.site.appendingPathComponent("roots/2.json.sig"))
            try fixture.forge(generation: 2, key: attackerCatalog, signedBy: attackerCatalog.keyId, now: now)
            vectors.append(
                SharedVector(
                    name: "forged-root", attack: "Key compromise",
                    description: "roots/2.json signed by its own new root key only, not by root 1's: the walk refuses it.", anchor: anchor,
                    steps: [
                        .init(
                            note: "a self-signed root 2", now: now, files: try site(fixture, blobs: false),
                            verdict: refused(.integrityFailed, "roots/2.json"))
                    ]))
        }

        // Issue 48: a leaked key pushes the device far ahead; rotating it out forgets what it signed.
        for claimsNewKey in [false, true] {
            let (fixture, _) = try newFixture()
            let trust = try await TrustSite(fixture)
            let anchor = SharedVector.Anchor.root(try trust.pinnedBytes)
            try await fixture.publish()
            let first = try site(fixture, blobs: false)
            let newKey = TrustSite.newCatalogKey()
            var steps: [SharedVector.Step] = [.init(note: "generation 1 by A", now: now, files: first, verdict: accepted("1"))]
            if claimsNewKey {
                try await trust.rotate(to: [newKey])
                try trust.hideRoot(2)
                try trust.forge(generation: 10_001, key: fixture.key, signedBy: newKey.keyId, now: now)
                steps.append(
                    .init(
                        note: "a mirror hides root 2; the leaked A signs generation 10001 claiming signedBy B", now: now,
                        files: try site(fixture, blobs: false), verdict: accepted("10001")))
                try trust.hideRoot(2, hidden: false)
                try fixture.replay(generation: 1)
            } else {
                try trust.forge(generation: 10_001, key: fixture.key, signedBy: nil, now: now)
                steps.append(
                    .init(
                        note: "the leaked A signs generation 10001, no signedBy", now: now, files: try site(fixture, blobs: false),
                        verdict: accepted("10001")))
                try fixture.replay(generation: 1)
                try await trust.rotate(to: [newKey])
            }
            try await trust.publish(signedWith: newKey)
            steps.append(
                .init(
                    note: "root 2 revokes A; the publisher's generation 2 by B", now: now, files: try site(fixture, blobs: false),
                    verdict: accepted("2")))
            vectors.append(
                SharedVector(
                    name: claimsNewKey ? "revoked-key-claims-new-key" : "revoked-key-far-ahead",
                    attack: "Fast-forward",
                    description: claimsNewKey
                        ? "Issue 48: the leaked key's far-ahead catalogue names the new key in signedBy, behind a mirror hiding the rotation; the device judges by the keys that verified it and forgets it."
                        : "Issue 48: a leaked key signs a catalogue 10,000 generations ahead; once a rotation revokes it, the publisher's next generation is taken.",
                    anchor: anchor, steps: steps))
        }
        return vectors
    }

    // MARK: Packages and files

    static func packageVectors() async throws -> [SharedVector] {
        var vectors: [SharedVector] = []
        let now = soon()
        let (fixture, tourId) = try newFixture()
        try await fixture.publish()
        let anchor = SharedVector.Anchor.publicKey(fixture.publicKeyBase64)
        let first = try site(fixture, blobs: true)
        let catalog = try Catalog.decode(try catalogue(fixture))
        let entry = try need(catalog.entries.first)
        let manifestBytes = try need(first[entry.package.manifest.path])
        let manifest = try PackageManifest.decode(Array(manifestBytes))
        let audio = try need(manifest.audio.first)
        let blob = SiteLayout.blob(sha256: audio.sha256)

        _ = try fixture.changeFile(of: fixture.packages[0], index: 1)
        try await fixture.publish()
        let second = try site(fixture, blobs: true)
        let secondEntry = try need(try Catalog.decode(try catalogue(fixture)).entries.first)

        vectors.append(
            SharedVector(
                name: "install-and-update", attack: "",
                description: "The honest path: generation 1 installed, then generation 2's changed file installed as an update.",
                anchor: anchor,
                steps: [
                    .init(note: "install generation 1", now: now, files: first, install: [tourId], verdict: installed),
                    .init(note: "update to generation 2", now: now, files: second, install: [tourId], verdict: installed),
                ]))

        var mixed = second
        mixed[secondEntry.package.manifest.path] = manifestBytes
        vectors.append(
            SharedVector(
                name: "mix-and-match-manifest", attack: "Mix-and-match",
                description: "Generation 2's catalogue, with generation 1's package.json served where generation 2's belongs.",
                anchor: anchor,
                steps: [
                    .init(
                        note: "the old package.json under the new name", now: now, files: mixed, install: [tourId],
                        verdict: refused(.integrityFailed, secondEntry.package.manifest.path)),
                    .init(note: "the site as published", now: now, files: second, install: [tourId], verdict: installed),
                ]))

        var swapped = first
        var other = Data(count: Int(audio.sizeBytes))
        for i in other.indices { other[i] = UInt8(truncatingIfNeeded: i &* 31 &+ 7) }
        swapped[blob] = other
        vectors.append(
            SharedVector(
                name: "mix-and-match-file", attack: "Mix-and-match",
                description: "An audio blob replaced by other bytes of the same size: its SHA-256 is not the one package.json names.",
                anchor: anchor,
                steps: [
                    .init(
                        note: "other bytes, same size", now: now, files: swapped, install: [tourId],
                        verdict: refused(.integrityFailed, audio.path)),
                    .init(note: "the site as published", now: now, files: first, install: [tourId], verdict: installed),
                ]))

        var longer = first
        longer[blob] = try need(first[blob]) + Data([0x0A])
        vectors.append(
            SharedVector(
                name: "oversized-file", attack: "Endless data",
                description: "An audio blob one byte longer than package.json says: the transfer stops at the signed size.", anchor: anchor,
                steps: [
                    .init(
                        note: "one byte more", now: now, files: longer, install: [tourId], verdict: refused(.networkUnavailable, audio.path)
                    )
                ]))

        // A package past its own expiresAt, in a fresh catalogue.
        let late = manifest.expiresAt.addingTimeInterval(3600)
        try fixture.replay(generation: 1)
        try fixture.forge(generation: 3, key: fixture.key, signedBy: fixture.key.keyId, now: late.addingTimeInterval(-60))
        vectors.append(
            SharedVector(
                name: "expired-package", attack: "Indefinite freeze",
                description: "A fresh catalogue that still lists a package past its own expiresAt: it is never installed.",
                anchor: .publicKey(fixture.publicKeyBase64),
                steps: [
                    .init(
                        note: "an hour past the package's expiresAt", now: late, files: try site(fixture, blobs: true), install: [tourId],
                        verdict: refused(.catalogExpired, nil))
                ]))

        // The catalogue names a package.json outside packages/<id>/<contentHash>.json.
        try fixture.replay(generation: 1)
        let text = String(decoding: try catalogue(fixture), as: UTF8.self)
        let outside = "packages/\(entry.package.packageId)/elsewhere.json"
        try sign(Data(text.replacingOccurrences(of: entry.package.manifest.path, with: outside).utf8), fixture.key, into: fixture)
        var elsewhere = try site(fixture, blobs: true)
        elsewhere[outside] = manifestBytes
        vectors.append(
            SharedVector(
                name: "manifest-outside-layout", attack: "Mix-and-match",
                description: "A signed catalogue naming a package.json outside packages/<packageId>/<contentHash>.json.", anchor: anchor,
                steps: [
                    .init(
                        note: "packages/<id>/elsewhere.json", now: now, files: elsewhere, install: [tourId],
                        verdict: refused(.integrityFailed, outside))
                ]))
        return vectors
    }
}

import Foundation
import Testing
import TourpackClient
import TourpackCore
import TourpackHTTP
import TourpackInstall
import TourpackKit
import TourpackPublish
import TourpackTesting

/// Caption files after the build: published with their package as
/// content-addressed blobs (a folder site and a moto bucket), installed at
/// `OfflineTours/<packageId>/captions/` byte for byte, refused when the
/// site's bytes are not package.json's, and gone with their package.
@Suite(.serialized, .offThePool) struct CaptionInstallTests {
    /// The caption entries of `package`'s package.json: path → sha256.
    static func captions(_ package: SiteFixture.Package) -> [String: String] {
        var found: [String: String] = [:]
        for entry in package.json["audio"] as! [[String: Any]] {
            guard let captions = entry["captions"] as? [String: Any] else { continue }
            found[captions["path"] as! String] = (captions["sha256"] as! String)
        }
        return found
    }

    static func blob(_ sha256: String) -> String { "blobs/sha256/\(sha256.prefix(2))/\(sha256)" }

    @Test func captionsArePublishedInstalledUpdatedAndRemovedWithTheirPackage() async throws {
        let fixture = try SiteFixture()
        let alps = try fixture.addTour(name: "Alps", formats: [.aac], files: 4, bytes: 20_000, pack: 30_000, captions: true)[0]
        // A package from before captions publishes and installs beside it.
        let lakes = try fixture.addTour(name: "Lakes", formats: [.mp3], files: 3, bytes: 15_000)[0]
        try #require(Self.captions(alps).count == 4 && Self.captions(lakes).isEmpty)
        try await fixture.publish()
        for (path, sha256) in Self.captions(alps) {
            let published = try? Data(contentsOf: fixture.site.appendingPathComponent(Self.blob(sha256)))
            #expect(published == (try Data(contentsOf: fixture.source.appendingPathComponent(path))), "\(path) is not on the site")
        }

        let server = try SiteServer(root: fixture.site)
        defer { server.stop() }
        let documents = fixture.documents()
        let installer = try InstallTests.installer(fixture, documents, server: server)
        let first = try await installer.install(PackageChoice(all: true))
        #expect(Set(first.installed) == [alps.packageId, lakes.packageId])
        try InstallTests.expectInstalled(fixture, alps, in: documents)
        try InstallTests.expectInstalled(fixture, lakes, in: documents)
        for path in Self.captions(alps).keys {
            #expect(path.hasPrefix("OfflineTours/\(alps.packageId)/captions/") && path.hasSuffix("_Detailed.vtt"))
        }
        #expect(!FileManager.default.fileExists(atPath: documents.appendingPathComponent("OfflineTours/\(lakes.packageId)/captions").path))
        let inventory = InstalledInventory(documents: documents)
        let listed = try inventory.statistics(now: Date()).tours.flatMap(\.packages).first { $0.packageId == alps.packageId }
        #expect(listed?.files == 4 + 4 + 1 && listed?.damagedFiles == 0, "\(String(describing: listed))")

        // One narration's captions change and another narration goes: one blob, and the dropped captions leave.
        let changed = try fixture.changeCaptions(of: alps, index: 1)
        let droppedAudio = try fixture.dropLastFile(of: fixture.package(alps.packageId))
        let droppedCaptions = try #require(
            Self.captions(alps).keys.first { !Self.captions(fixture.package(alps.packageId)).keys.contains($0) })
        try await fixture.publish()
        server.resetLog()
        let update = try await installer.install(PackageChoice(all: true))
        #expect(update.updated == [alps.packageId])
        let newSHA = try #require(Self.captions(fixture.package(alps.packageId))[changed])
        #expect(InstallTests.blobRequests(server).map(\.path) == ["/" + Self.blob(newSHA)])
        try InstallTests.expectInstalled(fixture, fixture.package(alps.packageId), in: documents)
        for dropped in [droppedAudio, droppedCaptions] {
            #expect(!FileManager.default.fileExists(atPath: documents.appendingPathComponent(dropped).path), "\(dropped) stayed")
        }
        #expect(update.removedFiles == 2)

        // A caption file lost on the device is a damaged package file: the next install fetches it again.
        let lost = try #require(Self.captions(fixture.package(alps.packageId)).keys.sorted().first)
        try FileManager.default.removeItem(at: documents.appendingPathComponent(lost))
        let damaged = try inventory.statistics(now: Date()).tours.flatMap(\.packages).first { $0.packageId == alps.packageId }
        #expect(damaged?.damagedFiles == 1)
        let repair = try await installer.install(PackageChoice(all: true))
        #expect(repair.downloadedFiles == 1)
        try InstallTests.expectInstalled(fixture, fixture.package(alps.packageId), in: documents)

        // --gc with nothing kept but the generation in force keeps its caption blobs.
        let publisher = Publisher(
            site: FolderSite(root: fixture.site), signingKey: fixture.key,
            settings: PublishSettings(target: .folder(fixture.site), keepGenerations: 1, graceDays: 0))
        let collected = try await publisher.collectGarbage()
        #expect(collected.deleted.contains(Self.blob(try #require(Self.captions(alps)[changed]))), "the replaced captions' blob goes")
        for sha256 in Self.captions(fixture.package(alps.packageId)).values {
            #expect(
                FileManager.default.fileExists(atPath: fixture.site.appendingPathComponent(Self.blob(sha256)).path), "--gc took \(sha256)")
        }
        let current = try #require(try await publisher.readCatalog())
        #expect(try await publisher.missingObjects(of: current.catalog).isEmpty)

        // Removing the package removes its captions and its folder.
        let removal = try inventory.remove(alps.packageId)
        #expect(removal.packages == [alps.packageId])
        #expect(removal.files == 3 + 3 + 1, "audio, captions and the tile pack")
        #expect(!FileManager.default.fileExists(atPath: documents.appendingPathComponent("OfflineTours/\(alps.packageId)").path))
        try InstallTests.expectInstalled(fixture, lakes, in: documents)
    }

    @Test(arguments: ["AudioCache/%@/x_Detailed.vtt", "OfflineTours/%@/captions/../package.json", "OfflineTours/other/captions/%@"])
    func aCaptionPathOutsideItsPackageIsRefused(_ pattern: String) throws {
        let fixture = try SiteFixture()
        let package = try fixture.addTour(name: "Alps", formats: [.aac], files: 2, bytes: 1_000, captions: true)[0]
        var json = package.json
        var audio = json["audio"] as! [[String: Any]]
        var captions = audio[1]["captions"] as! [String: Any]
        captions["path"] = pattern.replacingOccurrences(of: "%@", with: package.packageId)
        audio[1]["captions"] = captions
        json["audio"] = audio
        let manifest = try PackageManifest.decode(Array(try JSONSerialization.data(withJSONObject: json)))
        #expect(throws: TourpackError.self) { try PackageFiles.of(manifest, file: "package.json") }
        #expect(
            try PackageFiles.of(
                PackageManifest.decode(Array(try JSONSerialization.data(withJSONObject: package.json))), file: "package.json"
            ).filter { $0.kind == .captions }.count == 2)
    }

    @Test func rollbackRefusesAGenerationWhoseCaptionBlobIsGone() async throws {
        let fixture = try SiteFixture()
        let package = try fixture.addTour(name: "Alps", formats: [.aac], files: 2, bytes: 8_000, captions: true)[0]
        try await fixture.publish()
        let first = Self.captions(package)
        try fixture.changeCaptions(of: package, index: 0)
        try await fixture.publish()
        let publisher = Publisher(
            site: FolderSite(root: fixture.site), signingKey: fixture.key, settings: PublishSettings(target: .folder(fixture.site)))
        try await publisher.rollback(to: 1, dryRun: true)
        let gone = try #require(first.values.first { !Self.captions(fixture.package(package.packageId)).values.contains($0) })
        try FileManager.default.removeItem(at: fixture.site.appendingPathComponent(Self.blob(gone)))
        await #expect {
            try await publisher.rollback(to: 1, dryRun: true)
        } throws: { error in
            "\(error)".contains(Self.blob(gone))
        }
    }

    @Test func aDamagedCaptionFileOnTheSiteIsRefusedAndTheInstalledPackageStays() async throws {
        let fixture = try SiteFixture()
        let package = try fixture.addTour(name: "Alps", formats: [.aac], files: 3, bytes: 20_000, pack: 30_000, captions: true)[0]
        try await fixture.publish()
        let server = try SiteServer(root: fixture.site)
        defer { server.stop() }
        let documents = fixture.documents()
        let installer = try InstallTests.installer(fixture, documents, server: server)
        _ = try await installer.install(PackageChoice(all: true))
        let before = SiteFixture.snapshot(documents)
        #expect(before.keys.filter { $0.contains("/captions/") }.count == 3)

        let changed = try fixture.changeCaptions(of: package, index: 0)
        try fixture.changeFile(of: fixture.package(package.packageId), index: 2)
        try await fixture.publish()
        let sha256 = try #require(Self.captions(fixture.package(package.packageId))[changed])
        let blob = fixture.site.appendingPathComponent(Self.blob(sha256))
        var bytes = try Data(contentsOf: blob)
        bytes[bytes.count / 2] ^= 0x01  // the size the same: only the digest can tell
        try bytes.write(to: blob)
        await #expect {
            try await installer.install(PackageChoice(all: true))
        } throws: { error in
            (error as? TourpackError)?.kind == .integrityFailed && "\(error)".contains(changed)
        }
        #expect(SiteFixture.snapshot(documents) == before, "the installed package changed")
        // A fresh device refuses it too, and installs nothing.
        let fresh = fixture.documents("Fresh")
        await #expect(throws: TourpackError.self) {
            try await InstallTests.installer(fixture, fresh, server: server).install(PackageChoice(all: true))
        }
        #expect(SiteFixture.snapshot(fresh).isEmpty)
    }

    @Test func captionsArePublishedToABucketAsVTTAndInstallFromIt() async throws {
        let fixture = try SiteFixture()
        let package = try fixture.addTour(name: "Alps", formats: [.opus], files: 3, bytes: 12_000, pack: 20_000, captions: true)[0]
        let moto = try MotoTestServer()
        defer { moto.stop() }
        let bucket = "tourpack-captions"
        try moto.createBucket(bucket)
        let settings = ObjectStoreSettings(endpoint: moto.endpoint, bucket: bucket, prefix: "v1/")
        let store = try ObjectStore(settings: settings, environment: [settings.accessKeyEnv: "x", settings.secretKeyEnv: "x"])
        let publisher = Publisher(site: BucketSite(store: store), signingKey: fixture.key, settings: PublishSettings(target: .s3(settings)))
        let outcome = try await publisher.publish(root: fixture.source)
        #expect(outcome.published)
        let captions = Self.captions(package)
        for sha256 in captions.values { #expect(outcome.uploads.contains(Self.blob(sha256))) }
        // What the bucket serves each caption blob as, read back with boto3.
        let served = try moto.boto(
            """
            for key in sys.argv[2:]:
                head = s3.head_object(Bucket=sys.argv[1], Key=key)
                print(head["ContentType"] + "|" + head["CacheControl"] + "|" + str(head["ContentLength"]))
            """, [bucket] + captions.values.sorted().map { "v1/" + Self.blob($0) }
        ).split(separator: "\n").map(String.init)
        let sizes = try captions.sorted { $0.value < $1.value }.map {
            try Data(contentsOf: fixture.source.appendingPathComponent($0.key)).count
        }
        #expect(served == sizes.map { "text/vtt; charset=utf-8|public, max-age=31536000, immutable|\($0)" }, "\(served)")

        // A CDN in front of the bucket reads it anonymously; so does this device.
        _ = try moto.boto(
            """
            import json
            statement = {"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::" + sys.argv[1] + "/*"}
            s3.put_bucket_policy(Bucket=sys.argv[1], Policy=json.dumps({"Version": "2012-10-17", "Statement": [statement]}))
            """, [bucket])
        let documents = fixture.documents()
        let source = try HTTPSiteSource(base: "\(moto.endpoint)/\(bucket)/v1/")
        let installed = try await Installer(documents: documents, source: source, publicKey: fixture.key.verifyingKey)
            .install(PackageChoice(all: true))
        #expect(installed.installed == [package.packageId])
        try InstallTests.expectInstalled(fixture, package, in: documents)
    }
}

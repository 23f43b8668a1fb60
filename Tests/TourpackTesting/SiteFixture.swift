import Crypto
package import Foundation
package import TourpackCore
import TourpackKit
package import TourpackPublish

/// A small published site made without a build: a synthetic Documents
/// root (random bytes for "audio" and tile packs, package.json files made
/// from the store's golden one, as `PublishBench.makeRoot` makes them),
/// published with `Publisher` into a `FolderSite`, signed.
package final class SiteFixture: @unchecked Sendable {
    package static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    package static let golden = packageRoot.appendingPathComponent("Tests/TourpackKitTests/Resources/store/package.golden.json")

    /// One package of the source root.
    package struct Package {
        package var packageId: String
        package var tourId: String
        package var format: AudioFormat
        package var json: [String: Any]

        /// The POIs of its audio entries, in order.
        package var poiIds: [String] { (json["audio"] as? [[String: Any]] ?? []).compactMap { $0["poiId"] as? String } }
        /// The audio files' paths, relative to Documents, in order.
        package var audioPaths: [String] { (json["audio"] as? [[String: Any]] ?? []).compactMap { $0["path"] as? String } }
    }

    package let work: URL
    /// The root that is published.
    package let source: URL
    /// The site folder.
    package let site: URL
    package let key: SigningKey
    /// The public key's base64, as a device is given it (`--public-key`, `TrustAnchor.publicKey(base64:)`).
    package var publicKeyBase64: String { key.verifyingKey.base64 }
    package private(set) var packages: [Package] = []
    private var generator = SystemRandomNumberGenerator()

    package init() throws {
        work = TemporaryFolder.path("tourpack-install")
        source = work.appendingPathComponent("built")
        site = work.appendingPathComponent("site")
        key = SigningKey.generate()
        try FileManager.default.createDirectory(at: source, withIntermediateDirectories: true)
    }

    deinit { TemporaryFolder.remove(work) }

    /// A fresh Documents folder for a device (not created).
    package func documents(_ name: String = "Documents") -> URL { work.appendingPathComponent(name) }

    /// Adds a tour with a package per format, each of `files` audio files of
    /// `bytes` random bytes (give or take), with `captions` a WebVTT file
    /// per narration (`WebVTT.encode`, listed in its audio entry as the
    /// build lists it) and, with `pack`, a tile pack.
    @discardableResult
    package func addTour(
        name: String, formats: [AudioFormat], files: Int, bytes: Int, pack: Int? = nil, captions: Bool = false, bodies: [Data]? = nil
    ) throws -> [Package] {
        let tourId = UUID().uuidString.lowercased()
        let pois = (0..<files).map { _ in UUID().uuidString.lowercased() }
        var added: [Package] = []
        for format in formats {
            var json = try Self.template()
            let packageId = UUID().uuidString.lowercased()
            json["packageId"] = packageId
            json["tourId"] = tourId
            json["tourName"] = name
            var template = (json["audio"] as! [[String: Any]])[0]
            template["format"] = format.rawValue
            template["codec"] = format.codecName
            template["bitrateKbps"] = format.bitrateKbps
            var entries: [[String: Any]] = []
            for (index, poi) in pois.enumerated() {
                let path = "AudioCache/\(tourId)/\(poi)_Detailed.\(format.fileExtension)"
                let body = bodies?[index] ?? random(bytes + index * 997)
                try write(body, to: path)
                template["path"] = path
                template["poiId"] = poi
                template["phase"] = "detailed"
                template["sha256"] = Self.sha256(body)
                template["sizeBytes"] = body.count
                template["captions"] = nil
                if captions {
                    let cues = (0...(index % 3)).map {
                        CaptionCue(start: Double($0) * 2.5, end: Double($0) * 2.5 + 2.4, text: "\(name) <\(index)> & sentence \($0 + 1).")
                    }
                    template["captions"] = try writeCaptions(cues, packageId: packageId, poi: poi)
                }
                entries.append(template)
            }
            json["audio"] = entries
            var map = json["mapTiles"] as! [String: Any]
            if let pack {
                let body = random(pack)
                let path = "OfflineTours/\(packageId)/tiles.mbtiles"
                try write(body, to: path)
                map["file"] = path
                map["format"] = "png"
                map["storedTiles"] = 10
                map["emptyTiles"] = 0
                map["sizeBytes"] = body.count
                map["sha256"] = Self.sha256(body)
                map["attribution"] = "© test"
            }
            json["mapTiles"] = map
            let package = Package(packageId: packageId, tourId: tourId, format: format, json: json)
            try writeManifest(package)
            packages.append(package)
            added.append(package)
        }
        return added
    }

    /// Gives one audio file of `package` new random bytes (and its manifest a new digest and contentHash).
    /// Two tours (AAC, one package each) whose narrations are the same
    /// bytes, audio and captions alike: their packages name the same blobs.
    package func addTwinTours(files: Int, bytes: Int) throws -> [Package] {
        let bodies = (0..<files).map { random(bytes + $0 * 997) }
        return try (0..<2).flatMap { _ in
            try addTour(name: "Twin", formats: [.aac], files: files, bytes: bytes, captions: true, bodies: bodies)
        }
    }

    @discardableResult
    package func changeFile(of package: Package, index: Int = 0, body given: Data? = nil) throws -> String {
        var json = package.json
        var audio = json["audio"] as! [[String: Any]]
        let body = given ?? random((audio[index]["sizeBytes"] as! Int) + 13)
        let path = audio[index]["path"] as! String
        try write(body, to: path)
        audio[index]["sha256"] = Self.sha256(body)
        audio[index]["sizeBytes"] = body.count
        json["audio"] = audio
        try replace(package, json: json)
        return path
    }

    /// Gives the captions of one narration of `package` new cues (and its
    /// manifest a new digest and contentHash); the caption file's path.
    @discardableResult
    package func changeCaptions(of package: Package, index: Int = 0, text: String? = nil) throws -> String {
        var json = package.json
        var audio = json["audio"] as! [[String: Any]]
        let poi = audio[index]["poiId"] as! String
        let cues = [CaptionCue(start: 0, end: 3.25, text: text ?? "Rewritten \(UUID().uuidString).")]
        let entry = try writeCaptions(cues, packageId: package.packageId, poi: poi)
        audio[index]["captions"] = entry
        json["audio"] = audio
        try replace(package, json: json)
        return entry["path"] as! String
    }

    /// Drops the last audio file of `package` from its manifest.
    package func dropLastFile(of package: Package) throws -> String {
        var json = package.json
        var audio = json["audio"] as! [[String: Any]]
        let dropped = audio.removeLast()["path"] as! String
        json["audio"] = audio
        try replace(package, json: json)
        return dropped
    }

    /// A rebuild of the same content with new bytes (a second later, so
    /// another expiry): the same `contentHash`, another package.json.
    package func rebuildUnchanged(_ package: Package) throws { try replace(package, json: package.json) }

    /// `replace(_:json:)` for a test that edits the manifest itself.
    package func replaceForTests(_ package: Package, json: [String: Any]) throws { try replace(package, json: json) }

    /// A new build of the package: built a second later, so a publisher takes it over the old one.
    private func replace(_ package: Package, json: [String: Any]) throws {
        var json = json
        let formatter = ISO8601DateFormatter()
        for key in ["createdAt", "expiresAt"] {
            json[key] = formatter.string(from: formatter.date(from: json[key] as! String)!.addingTimeInterval(1))
        }
        let updated = Package(packageId: package.packageId, tourId: package.tourId, format: package.format, json: json)
        try writeManifest(updated)
        packages = packages.map { $0.packageId == package.packageId ? updated : $0 }
    }

    /// Publishes the source root into the site folder, signed with `key`.
    @discardableResult
    package func publish() async throws -> Publisher.Outcome {
        try await publisher().publish(root: source)
    }

    /// Publishes as `publish()` does, on the clock `now` (the catalogue expires `catalogTTLDays` after it).
    @discardableResult
    package func publish(now: Date) async throws -> Publisher.Outcome {
        try await publisher(now: now).publish(root: source)
    }

    /// A publisher of the source root into the site folder, signed with
    /// `signingKey` (the fixture's key by default), on the clock `now`.
    package func publisher(signingKey: SigningKey? = nil, now: Date? = nil) -> Publisher {
        var publisher = Publisher(
            site: FolderSite(root: site), signingKey: signingKey ?? key, settings: PublishSettings(target: .folder(site)))
        if let now { publisher.now = { now } }
        return publisher
    }

    package func package(_ id: String) -> Package { packages.first { $0.packageId == id }! }

    /// Every file a package.json of the source lists, and the package.json itself: root-relative path → bytes.
    package func files(of package: Package) throws -> [String: Data] {
        var files: [String: Data] = [:]
        let manifestPath = "OfflineTours/\(package.packageId)/package.json"
        files[manifestPath] = try Data(contentsOf: source.appendingPathComponent(manifestPath))
        for entry in package.json["audio"] as! [[String: Any]] {
            let path = entry["path"] as! String
            files[path] = try Data(contentsOf: source.appendingPathComponent(path))
            if let captions = (entry["captions"] as? [String: Any])?["path"] as? String {
                files[captions] = try Data(contentsOf: source.appendingPathComponent(captions))
            }
        }
        if let path = (package.json["mapTiles"] as! [String: Any])["file"] as? String {
            files[path] = try Data(contentsOf: source.appendingPathComponent(path))
        }
        return files
    }

    /// The bytes of the files (not package.json) of `package`.
    package func payloadBytes(of package: Package) throws -> Int {
        try files(of: package).filter { !$0.key.hasSuffix("package.json") }.values.reduce(0) { $0 + $1.count }
    }

    // MARK: Files

    private func writeManifest(_ package: Package) throws {
        var json = package.json
        let audio = json["audio"] as! [[String: Any]]
        json["sizeBytes"] = audio.reduce(0) { $0 + ($1["sizeBytes"] as! Int) }
        var manifest = try PackageManifest.decode(Array(try JSONSerialization.data(withJSONObject: json, options: [.sortedKeys])))
        manifest.contentHash = manifest.computeContentHash()
        try write(Data(manifest.encoded()), to: "OfflineTours/\(package.packageId)/package.json")
    }

    /// Writes a narration's caption file; its package.json entry.
    private func writeCaptions(_ cues: [CaptionCue], packageId: String, poi: String) throws -> [String: Any] {
        let bytes = Data(WebVTT.encode(cues))
        let path = Layout.captionsRelativePath(
            packageID: SafeID(validating: packageId)!, poiID: SafeID(validating: poi)!, phase: .detailed)
        try write(bytes, to: path)
        return ["path": path, "sha256": Self.sha256(bytes), "sizeBytes": bytes.count, "cues": cues.count, "timing": "estimated"]
    }

    private func write(_ bytes: Data, to path: String) throws {
        let url = source.appendingPathComponent(path)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try bytes.write(to: url)
    }

    /// `count` random bytes, eight from each draw.
    private func random(_ count: Int) -> Data {
        var words = (0..<(count + 7) / 8).map { _ in generator.next() as UInt64 }
        return Data(bytes: &words, count: count)
    }

    private static func template() throws -> [String: Any] {
        var json = try JSONSerialization.jsonObject(with: Data(contentsOf: golden)) as! [String: Any]
        let formatter = ISO8601DateFormatter()
        let now = Date()
        json["createdAt"] = formatter.string(from: Date(timeIntervalSince1970: now.timeIntervalSince1970.rounded(.down)))
        json["expiresAt"] = formatter.string(from: Date(timeIntervalSince1970: now.timeIntervalSince1970.rounded(.down) + 90 * 86_400))
        return json
    }

    package static func sha256(_ data: Data) -> String {
        SHA256.hash(data: data).map { String(format: "%02x", $0) }.joined()
    }

    /// Everything under `root` but the install folder: root-relative path → bytes.
    package static func snapshot(_ root: URL) -> [String: Data] {
        var files: [String: Data] = [:]
        guard let walker = FileManager.default.enumerator(at: root, includingPropertiesForKeys: [.isRegularFileKey]) else { return [:] }
        let prefix = root.standardizedFileURL.path + "/"
        for case let url as URL in walker {
            let path = String(url.standardizedFileURL.path.dropFirst(prefix.count))
            if path.hasPrefix(Layout.installFolder) { continue }
            if (try? url.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true { files[path] = try? Data(contentsOf: url) }
        }
        return files
    }

    /// What the app reads: the package.json in force and every file it lists, by path.
    package static func appView(_ documents: URL, manifestPath: String) -> [String: Data] {
        guard let manifest = FileManager.default.contents(atPath: documents.appendingPathComponent(manifestPath).path),
            let json = try? JSONSerialization.jsonObject(with: manifest) as? [String: Any]
        else { return [:] }
        var view = [manifestPath: manifest]
        let audio = (json["audio"] as? [[String: Any]]) ?? []
        var paths = audio.compactMap { $0["path"] as? String }
        paths += audio.compactMap { ($0["captions"] as? [String: Any])?["path"] as? String }
        if let pack = (json["mapTiles"] as? [String: Any])?["file"] as? String { paths.append(pack) }
        for path in paths { view[path] = FileManager.default.contents(atPath: documents.appendingPathComponent(path).path) ?? Data() }
        return view
    }
}

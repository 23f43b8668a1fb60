// `tourpack-bench publish [--packages 100] [--files 4] [--kb 256] [--republish 1000]`
//
// Publishing to S3 (moto's server on loopback, the same as the tests use),
// through `Publisher` and the project's libcurl client, as `tourpack publish`
// does after its validate step:
//
// - throughput: a cold publish of `--packages` packages of `--files` files of
//   `--kb` KiB each (random bytes, so no two blobs are alike): objects and
//   MB per second, every object checked afterwards by its SHA-256;
// - a no-change republish of `--republish` packages (4 KiB files), which must
//   upload nothing: the time it takes, the part a scheduled job pays every night.
//
// moto keeps objects in memory in one Python process, so the figures are the
// client's and moto's together; against AWS the round trip dominates instead.
import Crypto
import Foundation
import TourpackCore
import TourpackHTTP
import TourpackKit
import TourpackPublish
import TourpackTesting

enum PublishBench {
    static func run(_ arguments: [String]) async throws {
        let options = try IntegerOptions(
            arguments, ["--packages": (100, 1), "--files": (4, 1), "--kb": (256, 1), "--republish": (1000, 1)])
        let (packages, files, kb, republish) = (options["--packages"], options["--files"], options["--kb"], options["--republish"])
        let work = TemporaryFolder.path("tourpack-bench-publish")
        defer { TemporaryFolder.remove(work) }
        let moto = try await MotoTestServer.start()
        defer { moto.stop() }
        print("publish: moto on \(moto.endpoint), \(ProcessInfo.processInfo.activeProcessorCount) cores")

        // Throughput.
        let big = work.appendingPathComponent("big")
        let bytes = try makeRoot(at: big, packages: packages, files: files, bytes: kb * 1024)
        try moto.createBucket("bench-big")
        let bigPublisher = try publisher(moto, bucket: "bench-big")
        let started = ContinuousClock.now
        let cold = try await bigPublisher.publish(root: big)
        let seconds = (ContinuousClock.now - started).seconds
        let objects = cold.uploads.count
        print(
            String(
                format: "  cold publish: %d packages, %d objects, %.1f MB in %.2f s: %.0f objects/s, %.1f MB/s", packages, objects,
                Double(cold.uploadedBytes) / 1e6, seconds, Double(objects) / seconds, Double(cold.uploadedBytes) / 1e6 / seconds))
        guard cold.uploadedBytes >= bytes else { throw BenchError("uploaded \(cold.uploadedBytes) bytes, the root holds \(bytes)") }
        try await check(bigPublisher, moto: moto, bucket: "bench-big")

        // No-change republish of many packages.
        let many = work.appendingPathComponent("many")
        _ = try makeRoot(at: many, packages: republish, files: files, bytes: 4096)
        try moto.createBucket("bench-many")
        let manyPublisher = try publisher(moto, bucket: "bench-many")
        let first = ContinuousClock.now
        _ = try await manyPublisher.publish(root: many)
        let firstSeconds = (ContinuousClock.now - first).seconds
        var times: [Double] = []
        for _ in 0..<3 {
            let again = ContinuousClock.now
            let outcome = try await manyPublisher.publish(root: many)
            times.append((ContinuousClock.now - again).seconds)
            guard !outcome.published, outcome.uploads.isEmpty else {
                throw BenchError("a republish with no change uploaded \(outcome.uploads)")
            }
        }
        print(
            String(
                format: "  no-change republish of %d packages: %.2f s (median of 3; the first publish took %.1f s); 0 uploads", republish,
                times.sorted()[1], firstSeconds))
    }

    static func publisher(_ moto: MotoTestServer, bucket: String) throws -> Publisher {
        let settings = ObjectStoreSettings(endpoint: moto.endpoint, bucket: bucket, prefix: "v1/")
        let store = try ObjectStore(
            settings: settings, environment: [settings.accessKeyEnv: "bench-access", settings.secretKeyEnv: "bench-secret"])
        return Publisher(
            site: BucketSite(store: store), signingKey: SigningKey.generate(), settings: PublishSettings(target: .s3(settings)))
    }

    /// Every object the catalogue in force names is there with its SHA-256.
    static func check(_ publisher: Publisher, moto: MotoTestServer, bucket: String) async throws {
        guard let current = try await publisher.readCatalog() else { throw BenchError("no catalogue after publishing") }
        let missing = try await publisher.missingObjects(of: current.catalog)
        guard missing.isEmpty else { throw BenchError("\(missing.count) objects missing, first \(missing[0])") }
        let keys = try moto.keys(bucket)
        let damaged = try moto.boto(
            """
            import hashlib
            for key in sys.argv[2:]:
                body = s3.get_object(Bucket=sys.argv[1], Key=key)["Body"].read()
                if hashlib.sha256(body).hexdigest() != key.rsplit("/", 1)[1]: print(key)
            """, [bucket] + keys.filter { $0.hasPrefix("v1/blobs/") })
        guard damaged.isEmpty else { throw BenchError("blobs that do not match their names: \(damaged)") }
    }

    /// A Documents root of `packages` packages of `files` files of random
    /// bytes each, with package.json files made from the store's golden one,
    /// and with `tilePack` bytes, a tile pack of random bytes per package too.
    /// Returns the bytes of all the files.
    static func makeRoot(at root: URL, packages: Int, files: Int, bytes: Int, tilePack: Int = 0) throws -> Int64 {
        let golden = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Tests/TourpackKitTests/Resources/store/package.golden.json")
        guard var template = try JSONSerialization.jsonObject(with: Data(contentsOf: golden)) as? [String: Any],
            var audio = (template["audio"] as? [[String: Any]])?.first, var map = template["mapTiles"] as? [String: Any]
        else { throw BenchError("cannot read \(golden.path)") }
        for key in ["file", "format", "storedTiles", "emptyTiles", "sizeBytes", "sha256", "attribution"] { map[key] = nil }
        template["mapTiles"] = map
        let formatter = ISO8601DateFormatter()
        template["createdAt"] = formatter.string(from: Date())
        template["expiresAt"] = formatter.string(from: Date().addingTimeInterval(90 * 86_400))
        var total: Int64 = 0
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<packages {
            let packageId = UUID().uuidString.lowercased(), tourId = UUID().uuidString.lowercased()
            var entries: [[String: Any]] = []
            for _ in 0..<files {
                let body = random(bytes, using: &generator)
                // A POI of its own, so the path is one an install accepts: AudioCache/<tourId>/<poiId>_<Phase>.<ext>.
                let poiId = UUID().uuidString.lowercased()
                let path = "AudioCache/\(tourId)/\(poiId)_Approaching.m4a"
                let url = root.appendingPathComponent(path)
                try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
                try body.write(to: url)
                audio["path"] = path
                audio["poiId"] = poiId
                audio["sha256"] = SHA256.hash(data: body).lowercaseHex
                audio["sizeBytes"] = bytes
                entries.append(audio)
                total += Int64(bytes)
            }
            var manifest = template
            manifest["packageId"] = packageId
            manifest["tourId"] = tourId
            manifest["audio"] = entries
            manifest["sizeBytes"] = files * bytes
            manifest["contentHash"] = SHA256.hash(data: Data(packageId.utf8)).lowercaseHex
            let folder = root.appendingPathComponent("OfflineTours/\(packageId)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            if tilePack > 0 {
                let body = random(tilePack, using: &generator)
                let path = "OfflineTours/\(packageId)/tiles.mbtiles"
                try body.write(to: root.appendingPathComponent(path))
                var tiles = map
                tiles["file"] = path
                tiles["format"] = "png"
                tiles["storedTiles"] = 10
                tiles["emptyTiles"] = 0
                tiles["sizeBytes"] = tilePack
                tiles["sha256"] = SHA256.hash(data: body).lowercaseHex
                tiles["attribution"] = "© bench"
                manifest["mapTiles"] = tiles
                total += Int64(tilePack)
            }
            try JSONSerialization.data(withJSONObject: manifest, options: [.sortedKeys]).write(
                to: folder.appendingPathComponent("package.json"))
        }
        return total
    }

    /// `count` random bytes, eight from each draw.
    static func random(_ count: Int, using generator: inout SystemRandomNumberGenerator) -> Data {
        var words = (0..<(count + 7) / 8).map { _ in generator.next() as UInt64 }
        return Data(bytes: &words, count: count)
    }
}

extension Duration {
    fileprivate var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

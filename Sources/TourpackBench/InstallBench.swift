// `tourpack-bench install [--packages 100] [--files 4] [--kb 256] [--check-packages 1000]`
//
// Installing a published site over HTTP, through `Installer` and the
// project's libcurl client as `tourpack install SITE --into DOCUMENTS --all`
// makes them, from TourpackTesting's loopback site server (the one
// InstallTests use: a thread per connection, each file read and hashed for
// its ETag per request, so the figures are the client's and the server's):
//
// - throughput: `--packages` packages of `--files` files of `--kb` KiB and a
//   tile pack of `--kb` KiB each (random bytes, so no two blobs are alike),
//   published into a folder site and installed into a fresh Documents: MB per
//   second, median of 3, every installed file checked by its SHA-256;
// - the same install with one blob request in ten cut at a random share of
//   its body (a fixed seed): the body bytes the server sent against the
//   packages' bytes. A cut download resumes with Range, so the goal is at
//   most 1.1×, and the bench exits 1 above it;
// - `install --check` (`UpdateCheck`, the library call the command makes)
//   against a catalogue of `--check-packages` packages of 2 files of 4 KiB,
//   a tenth of them installed: with nothing new (catalog.json answers 304),
//   and the first check after a republish that changed 10 installed ones.
import Crypto
import Foundation
import TourpackClient
import TourpackCore
import TourpackHTTP
import TourpackInstall
import TourpackKit
import TourpackPublish
import TourpackTesting

enum InstallBench {
    /// Bytes sent for the packages' bytes through 10% cut connections: issue 24's goal.
    static let faultGoal = 1.1

    static func run(_ arguments: [String]) async throws {
        let options = try IntegerOptions(
            arguments, ["--packages": (100, 1), "--files": (4, 1), "--kb": (256, 1), "--check-packages": (1000, 10)])
        let (packages, files, kb, checkPackages) = (options["--packages"], options["--files"], options["--kb"], options["--check-packages"])
        let work = TemporaryFolder.path("tourpack-bench-install")
        defer { TemporaryFolder.remove(work) }
        print("install: a folder site on a loopback site server, \(ProcessInfo.processInfo.activeProcessorCount) cores")
        try await throughput(work.appendingPathComponent("big"), packages: packages, files: files, bytes: kb * 1024)
        try await library(work.appendingPathComponent("library"), packages: packages, files: files, bytes: kb * 1024)
        try await check(work.appendingPathComponent("many"), packages: checkPackages)
    }

    // MARK: Throughput, clean and through faults

    static func throughput(_ work: URL, packages: Int, files: Int, bytes: Int) async throws {
        let source = work.appendingPathComponent("built"), site = work.appendingPathComponent("site")
        let payload = try PublishBench.makeRoot(at: source, packages: packages, files: files, bytes: bytes, tilePack: bytes)
        let key = try await publish(source, to: site)
        let server = try SiteServer(root: site)
        defer { server.stop() }

        var times: [Double] = []
        var downloaded: Int64 = 0
        for run in 0..<3 {
            let documents = work.appendingPathComponent("Documents-\(run)")
            let started = ContinuousClock.now
            let outcome = try await installer(documents, server, key).install(PackageChoice(all: true))
            times.append((ContinuousClock.now - started).seconds)
            guard outcome.installed.count == packages else {
                throw BenchError("installed \(outcome.installed.count) packages of \(packages)")
            }
            downloaded = outcome.downloadedBytes
            try verify(documents, against: source)
            try FileManager.default.removeItem(at: documents)
        }
        let median = times.sorted()[1]
        print(
            String(
                format:
                    "  install --all: %d packages, %d files, %.1f MB in %.2f s: %.1f MB/s (median of 3; %.2f–%.2f s), every file's SHA-256 checked",
                packages, packages * (files + 1), Double(downloaded) / 1e6, median, Double(downloaded) / 1e6 / median, times.min()!,
                times.max()!))

        // One blob request in ten cut at a random share of its body; the draws are seeded.
        let draws = SeededDraws(seed: 24)
        server.inject { _, _, path, _ in
            guard path.hasPrefix("/blobs/"), draws.next() < 0.10 else { return nil }
            return .cut(fraction: draws.next())
        }
        server.resetLog()
        let documents = work.appendingPathComponent("Documents-faults")
        let started = ContinuousClock.now
        let outcome = try await installer(documents, server, key).install(PackageChoice(all: true))
        let seconds = (ContinuousClock.now - started).seconds
        guard outcome.installed.count == packages else { throw BenchError("installed \(outcome.installed.count) packages of \(packages)") }
        try verify(documents, against: source)
        let blobs = server.requests.filter { $0.path.hasPrefix("/blobs/") }
        let cut = blobs.filter { $0.fault != nil }.count
        let sent = server.bodyBytesSent, blobBytes = blobs.reduce(0) { $0 + $1.bodyBytes }
        let ratio = Double(sent) / Double(payload)
        print(
            String(
                format:
                    "  through cut connections: %d of %d blob requests cut; the server sent %.2f MB for %.2f MB of packages: %.3f× (blobs alone %.3f×; goal ≤ %.1f×) in %.2f s, every file's SHA-256 checked",
                cut, blobs.count, Double(sent) / 1e6, Double(payload) / 1e6, ratio, Double(blobBytes) / Double(payload), faultGoal, seconds)
        )
        guard cut > 0 else { throw BenchError("the draw cut no blob request") }
        guard ratio <= faultGoal else { throw BenchError(String(format: "%.3f× the packages' bytes sent, above %.1f×", ratio, faultGoal)) }
    }

    // MARK: The app's library

    /// The same site installed through `TourpackClient` as an app does it
    /// (`OfflineLibrary.download`, one tour after another, URLSession), and
    /// the peak RSS of the article's example app installing one package of
    /// 300 MB: a child process, measured by `wait4`.
    static func library(_ work: URL, packages: Int, files: Int, bytes: Int) async throws {
        let source = work.appendingPathComponent("built"), site = work.appendingPathComponent("site")
        _ = try PublishBench.makeRoot(at: source, packages: packages, files: files, bytes: bytes, tilePack: bytes)
        let key = try await publish(source, to: site)
        let server = try SiteServer(root: site)
        defer { server.stop() }
        var times: [Double] = []
        var downloaded: Int64 = 0
        for run in 0..<3 {
            let documents = work.appendingPathComponent("Documents-\(run)")
            let library = OfflineLibrary(
                documents: documents, site: URL(string: server.base)!, trust: try .publicKey(base64: key.verifyingKey.base64),
                policy: DownloadPolicy(maxStorageBytes: .max))
            let started = ContinuousClock.now
            let catalog = try await library.refreshCatalog()
            downloaded = 0
            for tour in catalog.tours {
                var last: DownloadJob?
                for try await job in library.download(tourId: tour.id) { last = job }
                guard let last, last.status == .completed else { throw BenchError("\(tour.name): \(String(describing: last))") }
                downloaded += last.totalBytes
            }
            times.append((ContinuousClock.now - started).seconds)
            try verify(documents, against: source)
            try FileManager.default.removeItem(at: documents)
        }
        let median = times.sorted()[1]
        print(
            String(
                format: "  TourpackClient (URLSession), tour by tour: %.1f MB in %.2f s: %.1f MB/s (median of 3; %.2f–%.2f s)",
                Double(downloaded) / 1e6, median, Double(downloaded) / 1e6 / median, times.min()!, times.max()!))

        // Peak memory of an app installing 300 MB: the example on TourpackClient alone.
        let example = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent(
            "OfflineTourExample")
        guard FileManager.default.isExecutableFile(atPath: example.path) else {
            print("  peak RSS: skipped, \(example.path) is not built (make bench builds it)")
            return
        }
        let big = work.appendingPathComponent("big"), bigSite = work.appendingPathComponent("big-site")
        _ = try PublishBench.makeRoot(at: big, packages: 1, files: 12, bytes: 25_000_000, tilePack: 1_000_000)
        let bigKey = try await publish(big, to: bigSite)
        let bigServer = try SiteServer(root: bigSite)
        defer { bigServer.stop() }
        let tour = try manifests(in: big)[0].tourId
        let started = ContinuousClock.now
        let (status, peakKB) = try await Task.detached {
            try Child.run(
                example.path, [bigServer.base, work.appendingPathComponent("Documents-big").path, bigKey.verifyingKey.base64, tour],
                stdout: "/dev/null")
        }.value
        guard status == 0 else { throw BenchError("the example app exited \(status)") }
        print(
            String(
                format: "  peak RSS of an app installing one 301 MB package through TourpackClient: %.0f MB (%.1f s)",
                Double(peakKB) / 1024, (ContinuousClock.now - started).seconds))
    }

    // MARK: --check against a large catalogue

    static func check(_ work: URL, packages: Int) async throws {
        let source = work.appendingPathComponent("built"), site = work.appendingPathComponent("site")
        _ = try PublishBench.makeRoot(at: source, packages: packages, files: 2, bytes: 4096)
        let started = ContinuousClock.now
        let key = try await publish(source, to: site)
        let publishSeconds = (ContinuousClock.now - started).seconds
        let server = try SiteServer(root: site)
        defer { server.stop() }

        // A tenth of the tours installed.
        let manifests = try self.manifests(in: source).sorted { $0.packageId < $1.packageId }
        let chosen = Array(manifests.prefix(packages / 10))
        let documents = work.appendingPathComponent("Documents")
        let installer = try installer(documents, server, key)
        let installed = try await installer.install(PackageChoice(tours: chosen.map(\.tourId)))
        guard installed.installed.count == chosen.count else {
            throw BenchError("installed \(installed.installed.count) of \(chosen.count)")
        }
        let check = UpdateCheck(installer: installer)

        var quiet: [Double] = []
        for _ in 0..<3 {
            let started = ContinuousClock.now
            let report = try await check.check(PackageChoice())
            quiet.append((ContinuousClock.now - started).seconds)
            let current = report.tours.filter { $0.status == .upToDate }.count
            guard report.catalog.notModified, report.tours.count == packages, current == chosen.count,
                report.exitCode(explicit: false) == ExitStatus.ok
            else { throw BenchError("check with nothing new: \(report.tours.count) tours, \(current) up to date") }
        }

        // 10 installed packages rebuilt with one file changed, republished.
        let changed = Array(chosen.prefix(10))
        for manifest in changed { try rebuild(manifest, in: source) }
        _ = try await publish(source, to: site, key: key)
        var fresh: [Double] = []
        for _ in 0..<3 {
            // Forget the remembered catalogue, so each run is the first check after the publish.
            try FileManager.default.removeItem(at: InstallFolder(documents: documents).url.appendingPathComponent("site.json"))
            server.resetLog()
            let started = ContinuousClock.now
            let report = try await check.check(PackageChoice())
            fresh.append((ContinuousClock.now - started).seconds)
            let updates = report.tours.filter { $0.status == .updateAvailable }
            guard !report.catalog.notModified, updates.count == changed.count,
                updates.allSatisfy({ $0.installed.first?.updateFiles == 1 }),
                report.exitCode(explicit: false) == UpdateCheck.updateAvailableExit
            else { throw BenchError("check after a republish: \(updates.count) updates available, \(changed.count) expected") }
        }
        let requests = server.requests.count, manifestRequests = server.requests.filter { $0.path.hasPrefix("/packages/") }.count
        print(
            String(
                format:
                    "  install --check, %d packages in the catalogue, %d installed: %.3f s with nothing new (catalog.json 304), median of 3",
                packages, chosen.count, quiet.sorted()[1]))
        print(
            String(
                format:
                    "  install --check after a republish that changed %d of them: %.3f s (median of 3; %d requests, %d of them package.json); the first publish took %.1f s",
                changed.count, fresh.sorted()[1], requests, manifestRequests, publishSeconds))
    }

    // MARK: Parts

    /// Publishes `source` into the folder `site`, signed with `key` (a new one when nil); returns the key.
    @discardableResult
    static func publish(_ source: URL, to site: URL, key: SigningKey? = nil) async throws -> SigningKey {
        let key = key ?? SigningKey.generate()
        let publisher = Publisher(site: FolderSite(root: site), signingKey: key, settings: PublishSettings(target: .folder(site)))
        let outcome = try await publisher.publish(root: source)
        guard outcome.published else { throw BenchError("publishing \(source.path) put no generation in force") }
        return key
    }

    /// An installer as `tourpack install http://… --public-key …` makes one: the default retries, 4 connections.
    static func installer(_ documents: URL, _ server: SiteServer, _ key: SigningKey) throws -> Installer {
        Installer(documents: documents, source: try HTTPSiteSource(base: server.base), publicKey: key.verifyingKey)
    }

    struct Manifest {
        var url: URL
        var packageId: String
        var tourId: String
        var json: [String: Any]
    }

    static func manifests(in root: URL) throws -> [Manifest] {
        let folder = root.appendingPathComponent("OfflineTours")
        return try FileManager.default.contentsOfDirectory(atPath: folder.path).map { name in
            let url = folder.appendingPathComponent("\(name)/package.json")
            guard let json = try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any],
                let packageId = json["packageId"] as? String, let tourId = json["tourId"] as? String
            else { throw BenchError("cannot read \(url.path)") }
            return Manifest(url: url, packageId: packageId, tourId: tourId, json: json)
        }
    }

    /// Every file each package.json of `source` lists is installed with its
    /// SHA-256, and every package.json byte for byte.
    static func verify(_ documents: URL, against source: URL, packages only: Set<String>? = nil) throws {
        var damaged: [String] = []
        for manifest in try manifests(in: source) where only?.contains(manifest.packageId) ?? true {
            let path = "OfflineTours/\(manifest.packageId)/package.json"
            if (try? Data(contentsOf: documents.appendingPathComponent(path))) != (try Data(contentsOf: manifest.url)) {
                damaged.append(path)
            }
            var files = (manifest.json["audio"] as? [[String: Any]]) ?? []
            if let tiles = manifest.json["mapTiles"] as? [String: Any], tiles["file"] != nil { files.append(tiles) }
            for file in files {
                guard let path = file["path"] as? String ?? file["file"] as? String, let sha256 = file["sha256"] as? String else {
                    throw BenchError("\(manifest.url.path) lists a file without a path or a sha256")
                }
                let bytes = try? Data(contentsOf: documents.appendingPathComponent(path))
                if bytes.map(hex) != sha256 { damaged.append(path) }
            }
        }
        guard damaged.isEmpty else {
            throw BenchError("\(damaged.count) installed files differ from the published ones, first \(damaged[0])")
        }
    }

    /// A new build of the package: its first file new random bytes, a new
    /// contentHash, built a second later, so the publisher takes it over the old one.
    static func rebuild(_ manifest: Manifest, in source: URL) throws {
        var json = manifest.json
        guard var audio = json["audio"] as? [[String: Any]], let path = audio.first?["path"] as? String,
            let size = audio.first?["sizeBytes"] as? Int
        else { throw BenchError("\(manifest.url.path) lists no audio") }
        var generator = SystemRandomNumberGenerator()
        let body = PublishBench.random(size, using: &generator)
        try body.write(to: source.appendingPathComponent(path))
        audio[0]["sha256"] = hex(body)
        json["audio"] = audio
        json["contentHash"] = hex(Data("\(manifest.packageId) rebuilt".utf8))
        let formatter = ISO8601DateFormatter()
        for key in ["createdAt", "expiresAt"] {
            guard let date = (json[key] as? String).flatMap(formatter.date(from:)) else {
                throw BenchError("\(manifest.url.path): no \(key)")
            }
            json[key] = formatter.string(from: date.addingTimeInterval(1))
        }
        try JSONSerialization.data(withJSONObject: json, options: [.sortedKeys]).write(to: manifest.url)
    }

    static func hex(_ data: Data) -> String { SHA256.hash(data: data).lowercaseHex }
}

extension Duration {
    fileprivate var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

import Foundation
import Testing
import TourpackCore
import TourpackTesting

/// The web client (clients/web, the WebClient article): built with Debian's
/// tsc and esbuild by `clients/web/build.sh`; its core and the shared vectors
/// under `node --test`; then the demo app over a site the real `tourpack
/// build` and `tourpack publish` made, served by the real `tourpack web`, in
/// Debian's Chromium through Selenium (`Browser/web_client.py`) with DevTools
/// network emulation. Every server it starts is stopped whatever happens.
@Suite(.serialized, .offThePool) struct WebClientTests {
    static let client = Executable.packageRoot.appendingPathComponent("clients/web")
    static let script = Executable.packageRoot.appendingPathComponent("Tests/CLITests/Browser/web_client.py")
    static let article = Executable.packageRoot.appendingPathComponent("Sources/TourpackKit/TourpackKit.docc/Articles/WebClient.md")
    static let vectors = Executable.packageRoot.appendingPathComponent("Tests/Vectors")

    /// The client built once per run where `make web` puts it (build/web: `node/` and `app/`),
    /// so `tourpack web` finds the app after a `make test` too.
    static let built: Result<URL, any Error> = Result {
        let out = Executable.packageRoot.appendingPathComponent("build/web")
        let run = try Tool.run("env", ["TOURPACK_WEB_BUILD=\(out.path)", client.appendingPathComponent("build.sh").path])
        guard run.status == 0 else { throw SetupFailure("clients/web/build.sh failed (\(run.status)): \(run.stdout)\n\(run.stderr)") }
        return out
    }

    @Test func theCoreAndEverySharedVectorPassUnderNode() throws {
        let out = try Self.built.get()
        let tests = out.appendingPathComponent("node/test")
        let files = try FileManager.default.contentsOfDirectory(atPath: tests.path).filter { $0.hasSuffix(".test.js") }.sorted()
        #expect(files == ["library.test.js", "vectors.test.js"])
        let run = try Tool.run(
            "env", ["TOURPACK_VECTORS=\(Self.vectors.path)", "node", "--test"] + files.map { tests.appendingPathComponent($0).path })
        #expect(run.status == 0, "node --test failed:\n\(run.stdout.suffix(6000))\n\(run.stderr.suffix(2000))")
        // Both test files ran: the core's and the vectors'.
        #expect(run.stdout.contains("every shared vector gets the Swift client's verdict"), "\(run.stdout.suffix(2000))")
        #expect(run.stdout.contains("a tab closed mid-download resumes from the last byte stored"))
        #expect(run.stdout.contains("# fail 0"))
    }

    @Test func theDemoAppThroughEveryCellOfTheMatrixInChromium() throws {
        let app = try Self.built.get().appendingPathComponent("app")
        let voice = try LocalVoiceServer()
        defer { voice.stop() }
        let workspace = try BuildWorkspace(formats: ["aac"])
        let key = try SigningPair.generate()
        try workspace.setPublish(PublishSection.folder())
        let build = try workspace.build(voice)
        try #require(build.status == 0, "the build failed: \(build.stderr)")
        let publish = try workspace.publish(environment: key.environment)
        try #require(publish.status == 0, "publish failed: \(publish.stderr)")

        let server = try WebProcess(site: workspace.site, publicKey: key.publicKey, app: app)
        defer { server.stop() }
        #expect(server.url.hasPrefix("http://127.0.0.1:"))

        let edit =
            "import pathlib; p = pathlib.Path('tours/alps.json'); "
            + "p.write_text(p.read_text().replace('Ahead is the first hairpin.', 'Ahead is the first sharp hairpin.'))"
        let config: [String: Any] = [
            "url": server.url, "site": workspace.site.path, "article": Self.article.path, "cwd": workspace.root.path,
            "env": key.environment,
            "republish": [
                ["python3", "-c", edit],
                [Executable.tourpack.path, "build", workspace.pipeline.path, "--endpoint", voice.endpoint],
                [Executable.tourpack.path, "publish", workspace.pipeline.path],
            ],
        ]
        let folder = try TemporaryFolder.make("tourpack-web-browser")
        defer { TemporaryFolder.remove(folder) }
        let configFile = folder.appendingPathComponent("config.json")
        let reportFile = folder.appendingPathComponent("report.json")
        try JSONSerialization.data(withJSONObject: config).write(to: configFile)
        let run = try Tool.run("python3", [Self.script.path, configFile.path, reportFile.path])
        try #require(run.status == 0, "web_client.py failed (\(run.status)): \(run.stderr.suffix(3000))")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: reportFile)) as? [String: Any])
        let failure = report["error"] as? String
        #expect(
            failure == nil,
            "the browser stopped: \(failure ?? "") \(report["lastTours"] ?? "") \(report["body"] ?? "") \(report["console"] ?? "")")
        #expect(report["webCrypto"] as? String == "Ed25519", "Chromium's WebCrypto verifies Ed25519 itself")

        // Every cell of the matrix, with the article's copy and buttons, word for word.
        #expect(report["matrixRows"] as? Int == 12, "the article's table has the 12 cells")
        let cells = report["cells"] as? [String: [String: Any]] ?? [:]
        for state in ["none", "downloading", "cached", "update_available"] {
            for connectivity in ["online", "poor", "offline"] {
                let cell = cells["\(state)/\(connectivity)"]
                #expect(cell?["copyMatches"] as? Bool == true, "\(state)/\(connectivity): \(cell ?? [:])")
                #expect(
                    (cell?["actions"] as? [String]) == (cell?["expectedActions"] as? [String]),
                    "\(state)/\(connectivity)'s buttons: \(cell ?? [:])")
            }
        }
        let steps = report["steps"] as? [[String: Any]] ?? []
        #expect(steps.first { $0["step"] as? String == "offline" }?["onLine"] as? Bool == false, "DevTools' offline is the browser's")
        let reload = steps.first { $0["step"] as? String == "offline reload" }
        #expect(reload?["connectivity"] as? String == "offline" && reload?["onLine"] as? Bool == false, "\(reload ?? [:])")

        // With the network off, the reloaded page plays every narration to its end, its captions showing.
        let before = report["siteBefore"] as? [String: [String: Any]] ?? [:]
        let tour = try #require(before.first { ($0.value["audio"] as? [Any])?.count == 3 })
        let narrations = (tour.value["audio"] as? [[String: Any]]) ?? []
        for name in ["offlinePlay", "tamperedPlay", "rollbackPlay"] {
            let played = report[name] as? [[String: Any]] ?? []
            #expect(played.count == narrations.count, "\(name): \(played)")
            for narration in played {
                #expect((narration["duration"] as? Double ?? 0) > 0 && narration["ended"] as? Bool == true, "\(name): \(narration)")
                #expect((narration["cues"] as? Int ?? 0) > 0 && (narration["shown"] as? Int ?? 0) > 0, "\(name): captions \(narration)")
            }
        }

        // What the page plays is the site's, byte for byte: before the update, and the republished edit's after it.
        func digests(_ manifest: [String: Any]?) -> [String: String] {
            Dictionary(
                uniqueKeysWithValues: ((manifest?["audio"] as? [[String: Any]]) ?? []).map {
                    ($0["path"] as! String, $0["sha256"] as! String)
                })
        }
        let after = (report["siteAfter"] as? [String: [String: Any]])?[tour.key]
        #expect(report["installedBefore"] as? [String: String] == digests(tour.value))
        #expect(report["installedAfter"] as? [String: String] == digests(after))
        #expect(digests(after) != digests(tour.value), "the edit changed a narration")

        // A flipped byte, then a replayed generation: refused with the article's copy; the pack stayed.
        let tampered = report["tampered"] as? [String: String] ?? [:]
        #expect(tampered["kind"] == "integrityFailed" && tampered["text"] == report["tamperedExpected"] as? String, "\(tampered)")
        #expect(tampered["title"]?.contains("catalog.json") == true, "the error names the file: \(tampered)")
        #expect((report["tamperedState"] as? [String: Any])?["state"] as? String == "cached")
        let rollback = report["rollback"] as? [String: String] ?? [:]
        #expect(rollback["kind"] == "rollbackRefused" && rollback["state"] == "refused", "\(rollback)")

        // The tab closed mid-download: after it, no file it had whole was asked for again, and the
        // one it was downloading was asked for from the bytes it had stored, with If-Range.
        let requests = report["afterResume"] as? [[String: Any]] ?? []
        let closedAt = report["requestsBeforeClose"] as? Int ?? 0
        let target = report["resumeTarget"] as? [String: Any] ?? [:]
        let stored = target["bytes"] as? Int ?? 0
        let resuming = SiteLayout.blob(sha256: target["sha256"] as? String ?? "")
        let whole = Set((report["filesAtClose"] as? [String] ?? []).map { SiteLayout.blob(sha256: $0) })
        let afterClose = requests.dropFirst(closedAt).filter { ($0["path"] as? String)?.hasPrefix("blobs/") == true }
        for request in afterClose {
            #expect(!whole.contains(request["path"] as? String ?? ""), "a file held whole was fetched again: \(request)")
        }
        let resumes = afterClose.filter { $0["path"] as? String == resuming }
        let resumed = try #require(resumes.first, "the interrupted file \(target) was asked for: \(afterClose)")
        let starts = resumes.map { ($0["range"] as? String).flatMap { Int($0.dropFirst("bytes=".count).dropLast()) } ?? 0 }
        #expect(stored >= 8192 && starts[0] >= stored, "resumed from byte \(starts[0]); \(stored) were stored: \(resumed)")
        #expect(resumed["ifRange"] is String && resumed["status"] as? Int == 206, "\(resumed)")
        #expect(starts == starts.sorted() && Set(starts).count == starts.count, "never from a byte it had: \(resumes)")

        // Queued behind another download; failed on a file that is not its SHA-256, with the article's line and a retry; retried.
        let queued = report["queued"] as? [String: Any] ?? [:]
        #expect(queued["job"] as? String == "queued" && queued["state"] as? String == "downloading", "\(queued)")
        let failed = report["failed"] as? [String: Any] ?? [:]
        #expect(failed["job"] as? String == "failed" && failed["state"] as? String == "none", "\(failed)")
        #expect(failed["failureKind"] as? String == "integrityFailed" && report["failedMatches"] as? Bool == true, "\(failed)")
        #expect((failed["failure"] as? String)?.contains("AudioCache/") == true, "the failure names the file: \(failed)")
        #expect((failed["actions"] as? [String])?.contains("download") == true, "a retry: \(failed)")
        #expect((report["retried"] as? [String: Any])?["state"] as? String == "cached")

        // Storage use comes from navigator.storage.estimate().
        let storage = report["storage"] as? [String: String] ?? [:]
        #expect(Int(storage["quota"] ?? "") ?? 0 > 0, "\(storage)")
    }
}

extension WebClientTests {
    /// What a raw request to `tourpack web` got: status, headers (lowercased) and body length.
    struct Answer: Decodable {
        var status: Int
        var headers: [String: String]
        var length: Int
        var sha256: String
    }

    /// Sends each `(path, headers)` as written, with Python's http.client (no normalisation of the path).
    static func requests(_ url: String, _ asked: [(String, [String: String])]) throws -> [Answer] {
        let script = """
            import hashlib, http.client, json, sys
            port = int(sys.argv[1]); out = []
            for path, headers in json.loads(sys.argv[2]):
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                connection.putrequest("GET", path, skip_accept_encoding=True)
                for name, value in headers.items(): connection.putheader(name, value)
                connection.endheaders()
                answer = connection.getresponse(); body = answer.read()
                out.append({"status": answer.status, "headers": {k.lower(): v for k, v in answer.getheaders()}, "length": len(body),
                            "sha256": hashlib.sha256(body).hexdigest()})
            print(json.dumps(out))
            """
        let port = String(url.split(separator: ":").last?.prefix { $0.isNumber } ?? "")
        let list = try JSONSerialization.data(withJSONObject: asked.map { [$0.0, $0.1] as [Any] })
        let run = try Tool.run("python3", ["-c", script, port, String(decoding: list, as: UTF8.self)])
        guard run.status == 0 else { throw SetupFailure("raw HTTP failed: \(run.stderr)") }
        return try JSONDecoder().decode([Answer].self, from: Data(run.stdout.utf8))
    }

    /// A site given as a URL is passed on: the answer's status, validators and ranges come back as
    /// the site sent them. The upstream here is another `tourpack web` serving the folder. Paths
    /// that leave the site, in any spelling, are refused.
    @Test func aSiteURLIsPassedOnWithItsValidatorsAndRanges() async throws {
        let app = try Self.built.get().appendingPathComponent("app")
        let fixture = try SiteFixture()
        try fixture.addTour(name: "Proxied", formats: [.aac], files: 2, bytes: 40_000)
        try await fixture.publish()
        let catalog = try Data(contentsOf: fixture.site.appendingPathComponent("catalog.json"))
        let blob = try #require(SiteFixture.snapshot(fixture.site).first { $0.key.hasPrefix("blobs/") && $0.value.count > 30_000 })
        let key = fixture.publicKeyBase64

        // The servers and the requests block: on a thread of their own.
        let (whole, answers, requests) = try await OffThePool.run { () throws -> (Answer, [Answer], [[String: String]]) in
            let upstream = try WebProcess(site: fixture.site, publicKey: key, app: app)
            defer { upstream.stop() }
            let proxy = try WebProcess(site: URL(string: upstream.url + "site/")!, publicKey: key, app: app)
            defer { proxy.stop() }
            let whole = try Self.requests(proxy.url, [("/site/catalog.json", [:])])[0]
            let answers = try Self.requests(
                proxy.url,
                [
                    ("/site/catalog.json", ["If-None-Match": whole.headers["etag"] ?? "none"]),
                    ("/site/\(blob.key)", ["Range": "bytes=1000-"]),
                    ("/site/\(blob.key)", ["Range": "bytes=1000-", "If-Range": "\"another\""]),
                    ("/site/blobs/sha256/00/missing", [:]),
                    ("/config.json", [:]),
                    ("/site/../catalog.json", [:]),
                    ("/site/%2e%2e/%2e%2e/etc/passwd", [:]),
                    ("/probe", [:]),
                ])
            // What the upstream saw of the proxy's requests.
            let seen =
                try JSONSerialization.jsonObject(with: Data(contentsOf: URL(string: upstream.url + "debug/stats")!)) as? [String: Any]
            let requests = (seen?["requests"] as? [[String: Any]] ?? []).map { request in
                request.compactMapValues { value in (value as? String) ?? (value as? Int).map(String.init) }
            }
            return (whole, answers, requests)
        }
        #expect(whole.status == 200 && whole.length == catalog.count && whole.sha256 == SiteFixture.sha256(catalog), "\(whole)")
        let tag = try #require(whole.headers["etag"])
        #expect(answers[0].status == 304, "If-None-Match on the upstream's ETag: \(answers[0])")
        #expect(answers[1].status == 206 && answers[1].length == blob.value.count - 1000, "\(answers[1])")
        #expect(answers[1].headers["content-range"] == "bytes 1000-\(blob.value.count - 1)/\(blob.value.count)")
        #expect(answers[1].sha256 == SiteFixture.sha256(blob.value.dropFirst(1000)))
        #expect(answers[2].status == 200 && answers[2].length == blob.value.count, "If-Range on another version: the whole file")
        #expect(answers[3].status == 404)
        #expect(answers[4].status == 200 && answers[4].headers["content-type"] == "application/json")
        #expect(answers[5].status == 400 && answers[6].status == 400, "\(answers[5]) \(answers[6])")
        #expect(answers[7].status == 200 && answers[7].headers["cache-control"] == "no-store")
        #expect(requests.contains { $0["ifNoneMatch"] == tag && $0["status"] == "304" }, "\(requests)")
        #expect(requests.contains { $0["range"] == "bytes=1000-" && $0["status"] == "206" }, "\(requests)")
    }
}

extension WebClientTests {
    /// Run from a folder with no build/web of its own and no `--app`, `tourpack web` serves the app
    /// built in the checkout it was built in (where `make web` and this suite put it); usage errors exit 2
    /// and name what is missing.
    @Test func theBuiltAppIsFoundAndUsageIsChecked() async throws {
        let app = try Self.built.get().appendingPathComponent("app")
        let fixture = try SiteFixture()
        try fixture.addTour(name: "Found", formats: [.aac], files: 1, bytes: 1_000)
        try await fixture.publish()
        let (site, key) = (fixture.site, fixture.publicKeyBase64)
        let elsewhere = try TemporaryFolder.make("tourpack-web-cwd")
        defer { TemporaryFolder.remove(elsewhere) }
        let (page, noAnchor, noSite) = try await OffThePool.run { () throws -> (Data, Executable.Result, Executable.Result) in
            let server = try WebProcess(site: site, anchor: ["--public-key", key], app: nil, folder: elsewhere)
            defer { server.stop() }
            let page = try Data(contentsOf: URL(string: server.url)!)
            let noAnchor = try Executable.run(["web", site.path, "--port", "0"])
            let noSite = try Executable.run(["web", elsewhere.path, "--public-key", key, "--port", "0"])
            return (page, noAnchor, noSite)
        }
        #expect(page == (try Data(contentsOf: app.appendingPathComponent("index.html"))))
        #expect(noAnchor.status == 2 && noAnchor.stderr.contains("--public-key KEY or --root FILE"), "\(noAnchor.stderr)")
        #expect(noSite.status == 2 && noSite.stderr.contains("no catalog.json"), "\(noSite.stderr)")
    }

    static let rootScript = Executable.packageRoot.appendingPathComponent("Tests/CLITests/Browser/web_root.py")

    /// The page with a root of trust (`--root`): Chromium walks root 1 to root 2 with WebCrypto,
    /// takes the catalogue the rotated key signed, then refuses one the revoked key signs.
    @Test func aRootOfTrustIsWalkedInChromium() async throws {
        let app = try Self.built.get().appendingPathComponent("app")
        let fixture = try SiteFixture()
        try fixture.addTour(name: "Rooted", formats: [.aac], files: 1, bytes: 2_000)
        let trust = try await TrustSite(fixture)
        try await fixture.publish()
        let rotated = TrustSite.newCatalogKey()
        try await trust.rotate(to: [rotated])
        try await trust.publish(signedWith: rotated)
        let pinned = trust.pinned
        // What the leaked (revoked) key will sign: made now, served once the page has verified.
        let live = try trust.live()
        try trust.forge(generation: 3, key: fixture.key, signedBy: fixture.key.keyId)
        let forged = try trust.live()
        try trust.restore(live)
        let site = fixture.site
        let work = try TemporaryFolder.make("tourpack-web-root")
        defer { TemporaryFolder.remove(work) }
        let (out, signal) = (work.appendingPathComponent("seen.json"), work.appendingPathComponent("forged"))

        try await OffThePool.run {
            let server = try WebProcess(site: site, anchor: ["--root", pinned.path], app: app)
            defer { server.stop() }
            let browser = Process()
            browser.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            browser.arguments = ["python3", Self.rootScript.path, server.url, out.path, signal.path]
            try browser.run()
            defer { if browser.isRunning { browser.terminate() } }
            let deadline = Date().addingTimeInterval(60)
            while browser.isRunning, Date() < deadline, !FileManager.default.fileExists(atPath: out.path + ".first") {
                Thread.sleep(forTimeInterval: 0.1)
            }
            try forged.catalog.write(to: site.appendingPathComponent("catalog.json"))
            try forged.signature.write(to: site.appendingPathComponent("catalog.json.sig"))
            _ = FileManager.default.createFile(atPath: signal.path, contents: Data())
            browser.waitUntilExit()
        }
        let report = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: out)) as? [String: Any])
        #expect(report["error"] is NSNull, "\(report)")
        let seen = report["seen"] as? [[String: Any]] ?? []
        try #require(seen.count == 2, "\(report)")
        #expect(seen[0]["catalog"] as? String == "verified" && seen[0]["tours"] as? [String] == ["none/online"], "\(seen[0])")
        #expect(seen[1]["catalog"] as? String == "refused" && seen[1]["kind"] as? String == "integrityFailed", "\(seen[1])")
        #expect((seen[1]["message"] as? String)?.contains("root version 2") == true, "the refusal names the root: \(seen[1])")
        #expect(seen[1]["tours"] as? [String] == ["none/online"], "the verified catalogue stays: \(seen[1])")
    }
}

/// `tourpack web SITE --public-key KEY --port 0`, stopped by `stop()` or when released.
final class WebProcess {
    let process = Process()
    let url: String

    convenience init(site: URL, publicKey: String, app: URL) throws {
        try self.init(site: site, anchor: ["--public-key", publicKey], app: app)
    }

    /// - Parameters:
    ///   - app: `--app`; nil lets `tourpack web` find the built app itself.
    ///   - folder: the working folder it runs in.
    init(site: URL, anchor: [String], app: URL?, folder: URL? = nil) throws {
        let given = site.isFileURL ? site.path : site.absoluteString
        if let folder { process.currentDirectoryURL = folder }
        let first = try ServerProcess.firstLine(
            process, arguments: ["web", given] + anchor + ["--port", "0"] + (app.map { ["--app", $0.path] } ?? []), timeout: 60)
        guard first.hasPrefix("http://") else {
            if process.isRunning { process.terminate() }
            throw SetupFailure("tourpack web printed no URL")
        }
        url = first
    }

    func stop() {
        guard process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
    }

    deinit { stop() }
}

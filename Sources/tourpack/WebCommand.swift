import ArgumentParser
import Foundation
import TourpackClient
import TourpackCore
import TourpackReview

/// `tourpack web SITE`: the web client's demo app in a browser, over a
/// published site, from one loopback origin.
struct Web: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "web",
        abstract: "Serve the web client's demo app over a published site: tours to download, play offline and update.",
        discussion: """
            Serves on loopback the demo app clients/web builds (clients/web/build.sh, or `make web`, \
            writes it to build/web/app) and the site: a folder (`tourpack publish --site`) is served \
            from the same origin under site/, with ETags, If-None-Match and Range with If-Range; a \
            URL's requests are passed on to it. The page verifies the catalogue with --public-key \
            (the base64, or a file holding it) or --root (root.json), as the app's library does, and \
            keeps what it installs in the browser's IndexedDB and Cache Storage; its service worker \
            plays installed narrations with no network.

            Prints the URL as the first line of stdout (with --port 0 it names the port it took); \
            the access log goes to stderr. Stops cleanly on SIGINT or SIGTERM. Exit codes: \
            \(ExitStatus.ok) ok · \(ExitStatus.badInput) bad usage, no such SITE, no key, or no built app.
            """
    )

    @Argument(help: "The published site: a folder, or its http(s) URL.", completion: .directory)
    var site: String

    @Option(help: "The catalogue's Ed25519 public key: its base64, or a file holding it (build/demo-signing.pub).")
    var publicKey: String?

    @Option(
        help: "The root of trust (root.json, as `tourpack keys root` wrote it) the page walks the site's roots from.", completion: .file())
    var root: String?

    @Option(help: "Address to bind; loopback unless you mean to share the page.") var host = "127.0.0.1"
    @Option(help: "Port to bind; 0 picks a free one.") var port = 8791

    @Option(
        help:
            "The built demo app (index.html, app.js, sw.js). Default: TOURPACK_WEB_APP, else build/web/app here or in the checkout tourpack was built in.",
        completion: .directory)
    var app: String?

    func validate() throws {
        guard (0...65535).contains(port) else { throw ValidationError("--port must be within 0...65535") }
        if publicKey != nil, root != nil { throw ValidationError("--public-key and --root: give one trust anchor") }
        if publicKey == nil, root == nil { throw ValidationError("web: give the site's trust anchor, --public-key KEY or --root FILE") }
    }

    func run() async throws {
        let (publicKey, root, site, given) = (
            self.publicKey, self.root, self.site, app ?? ProcessInfo.processInfo.environment["TOURPACK_WEB_APP"]
        )
        let executable = Bundle.main.executableURL ?? URL(fileURLWithPath: CommandLine.arguments[0])
        // The key, the root, the site and the app are files: read off the cooperative pool.
        let (config, served, app) = try await WebAppServer.onThePool { () throws -> ([String: String], WebAppServer.Site, URL) in
            var config: [String: String] = ["site": "site/"]
            if let key = try Install.verifyingKey(publicKey) { config["publicKey"] = key.base64 }
            if let root {
                guard let bytes = FileManager.default.contents(atPath: root) else {
                    throw TourpackError.invalidInput("--root \(root): no such file (the root.json `tourpack keys root` wrote)")
                }
                do { _ = try CatalogTrust.root(bytes: Array(bytes)) } catch { throw TourpackError.invalidInput("--root \(root): \(error)") }
                config["rootJSON"] = bytes.base64EncodedString()
            }
            let served: WebAppServer.Site
            if site.hasPrefix("http://") || site.hasPrefix("https://") {
                guard let url = URL(string: site) else { throw TourpackError.invalidInput("\(site): not a URL") }
                served = .url(url)
            } else {
                let folder = URL(fileURLWithPath: site).standardizedFileURL
                guard FileManager.default.fileExists(atPath: folder.appendingPathComponent("catalog.json").path) else {
                    throw TourpackError.invalidInput("\(site): no catalog.json; is this a site `tourpack publish` wrote?")
                }
                served = .folder(folder)
            }
            guard let app = WebAppServer.findApp(given: given, executable: executable) else {
                throw TourpackError.invalidInput(
                    "no built demo app (build/web/app, here or in the checkout tourpack was built in): build it with `make web` "
                        + "(clients/web/build.sh), or give --app DIR")
            }
            for file in ["index.html", "app.js", "sw.js"]
            where !FileManager.default.fileExists(atPath: app.appendingPathComponent(file).path) {
                throw TourpackError.invalidInput("\(app.path): no \(file); build the demo app first (make web, or clients/web/build.sh)")
            }
            return (config, served, app)
        }
        let bytes = try JSONSerialization.data(withJSONObject: config, options: [.sortedKeys, .withoutEscapingSlashes])
        if !(host.hasPrefix("127.") || host == "::1" || host == "localhost") {
            Console.error("web: --host \(host) is not loopback: anyone who can reach it can use the page")
        }
        let server = WebAppServer(
            app: app, site: served, config: Array(bytes), configuration: WebAppServer.Configuration(host: host, port: port))
        let shownHost = host.contains(":") ? "[\(host)]" : host
        try await server.runUntilSignalled { port in
            // The URL alone on the first line, unbuffered: scripts and tests read it.
            FileHandle.standardOutput.write(Data("http://\(shownHost):\(port)/\n".utf8))
        }
    }
}

import ArgumentParser
import Foundation
import TourpackCore
import TourpackHTTP
import TourpackKit
import TourpackPublish

struct Publish: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "publish",
        abstract: "Put the built packages where a CDN can serve them, with a signed catalogue the app reads.",
        discussion: """
            Validates the output root (with a quality ladder, each quality's root), then uploads to the pipeline's publish.target (a folder, \
            or an S3-compatible bucket): every audio file and tile pack once, as \
            blobs/sha256/<2 hex>/<sha256>; each package.json as packages/<packageId>/<contentHash>.json; \
            then the new catalogue as generations/<n>.json and, last, catalog.json. Each catalogue is \
            signed (catalog.json.sig) with the Ed25519 key in the variable publish.signingKeyEnv names. \
            Nothing the catalogue in force names is ever overwritten or removed, so a publish killed \
            at any instant leaves the previous catalogue in force. Expired packages are left out.

            Each catalogue carries expiresAt, publish.catalogTTLDays (default 7) after it is \
            published; devices refuse an expired one for downloads (catalogExpired). --refresh \
            signs the catalogue in force again with a new expiresAt and changes nothing else: run it \
            daily. A publish with nothing new uploads nothing and keeps the generation. --rollback N \
            publishes generation N's packages as a new, higher generation (devices refuse a lower \
            one); --gc deletes what no kept generation names, after publish.graceDays. When the site \
            has roots of trust (roots/<n>.json, `tourpack keys root`), the signing key must be one \
            the newest root authorises.

            Exit codes: \(ExitStatus.ok) published (or nothing to publish) · \(ExitStatus.failure) the \
            root has validate errors, or the site refused · \(ExitStatus.badInput) bad usage, pipeline \
            or key.
            """
    )

    @Argument(help: "The pipeline file (pipelines/*.yaml) with a publish: section.", completion: .file(extensions: ["yaml", "yml"]))
    var pipeline: String

    @Option(help: "Override the output root (the Documents folder to publish).")
    var output: String?

    @Option(help: "Override the state folder (its lock keeps a build of the root out while publishing).")
    var state: String?

    @Option(help: "Publish into this folder instead of publish.target.", completion: .directory)
    var site: String?

    @Flag(help: "List what would be uploaded (or deleted, with --gc) and change nothing.")
    var dryRun = false

    @Option(help: "Publish generation N's packages again, as a new generation.")
    var rollback: Int?

    @Flag(help: "Sign the catalogue in force again with a new expiresAt (now + publish.catalogTTLDays); change nothing else.")
    var refresh = false

    @Flag(help: "Delete the blobs, manifests and generations no kept generation names, once publish.graceDays have passed.")
    var gc = false

    @Flag(help: "Print one JSON object per event on stdout.")
    var json = false

    @Flag(help: "Print a line per object uploaded or deleted (on stderr).")
    var verbose = false

    func validate() throws {
        if [rollback != nil, gc, refresh].filter({ $0 }).count > 1 {
            throw ValidationError("--rollback, --refresh and --gc are separate runs; give one")
        }
        if let rollback, rollback < 1 { throw ValidationError("--rollback takes a generation number, 1 or more") }
    }

    func run() async throws {
        var overrides = PipelineOverrides()
        overrides.output = output
        overrides.state = state
        let config = try PipelineLoader.load(URL(fileURLWithPath: pipeline), overrides: overrides)
        var settings = config.publish
        if let site {
            let folder = URL(fileURLWithPath: site).standardizedFileURL
            settings = PublishSettings(
                target: .folder(folder), signingKeyEnv: settings?.signingKeyEnv,
                keepGenerations: settings?.keepGenerations ?? PublishSettings.defaultKeepGenerations,
                graceDays: settings?.graceDays ?? PublishSettings.defaultGraceDays,
                catalogTTLDays: settings?.catalogTTLDays ?? PublishSettings.defaultCatalogTTLDays)
        }
        guard let settings else {
            throw TourpackError.invalidInput(
                "\(pipeline): publish: the pipeline has no publish section; add publish.target ({folder: PATH} or {s3: …}) or pass --site FOLDER"
            )
        }
        let display = PublishDisplay(json: json, verbose: verbose)
        var publisher = Publisher(site: try Self.site(for: settings.target), signingKey: try Self.signingKey(settings), settings: settings)
        publisher.report = { display.show($0) }
        publisher.now = CommandClock.now

        if let rollback {
            let generation = try await publisher.rollback(to: rollback, dryRun: dryRun)
            display.finish(
                dryRun
                    ? "would publish generation \(rollback)'s packages as generation \(generation) at \(publisher.site.location)"
                    : "generation \(rollback)'s packages are in force as generation \(generation) at \(publisher.site.location)")
            return
        }
        if refresh {
            let (generation, expiresAt) = try await publisher.refresh(dryRun: dryRun)
            display.finish(
                "\(dryRun ? "would refresh" : "refreshed") generation \(generation) at \(publisher.site.location): "
                    + "expires at \(PackageManifest.timestamp(expiresAt))")
            return
        }
        if gc {
            let collected = try await publisher.collectGarbage(dryRun: dryRun)
            if dryRun { for key in collected.deleted { display.line("would delete \(key)") } }
            display.finish(
                "\(dryRun ? "would delete" : "deleted") \(collected.deleted.count) object(s), \(PlanReport.bytes(Int(collected.deletedBytes))); "
                    + "kept generations \(collected.keptGenerations.map(String.init).joined(separator: ", "))")
            return
        }

        // Every Documents root of the pipeline: one per quality of its ladder.
        let roots = config.qualityRoots().map(\.output)
        // A build of a root waits until the publish is done, and the publish for a build.
        let lock = try await BuildLock.acquire(stateFolder: config.state, roots: roots, wait: true)
        defer { lock.release() }
        let now = CommandClock.now()
        for root in roots {
            let report = try await BundleValidator(
                options: ValidationOptions(now: now, strict: false, limits: ValidationLimits(pipeline: config))
            )
            .validate(root: root)
            // An expired package is left out of the catalogue (with a warning), not a reason to publish nothing.
            let expired = Set(try LocalPackage.read(root: root).filter { $0.manifest.isExpired(at: now) }.map(\.manifest.packageId))
            let blocking = report.findings.filter { finding in
                finding.severity == .error && !(finding.check == .expiry && expired.contains(finding.package ?? ""))
            }
            guard blocking.isEmpty else {
                Console.error(report.text())
                Console.error("publish: \(root.path) has validate errors; nothing was uploaded")
                throw ExitCode(ExitStatus.failure)
            }
        }
        let outcome = try await publisher.publish(roots: roots, dryRun: dryRun)
        if dryRun { for key in outcome.uploads { display.line("would upload \(key)") } }
        let signed = publisher.signingKey.map { "signed by key \($0.keyId)" } ?? "unsigned (no publish.signingKeyEnv)"
        let what =
            dryRun
            ? (outcome.published
                ? "would publish generation \(outcome.generation)" : "nothing to publish; generation \(outcome.generation) stays")
            : (outcome.published
                ? "published generation \(outcome.generation)" : "nothing changed; generation \(outcome.generation) stays in force")
                + (outcome.renewedUntil.map { " (\(dryRun ? "would be " : "")renewed until \(PackageManifest.timestamp($0)))" } ?? "")
        display.finish(
            "\(what) at \(publisher.site.location): \(outcome.packages) package(s), \(outcome.uploads.count) object(s) "
                + "\(dryRun ? "to upload" : "uploaded") (\(PlanReport.bytes(Int(outcome.uploadedBytes)))), \(outcome.reused) blob(s) already there; \(signed)"
        )
    }

    static func site(for target: PublishSettings.Target) throws -> any Site {
        switch target {
        case .folder(let folder): return FolderSite(root: folder)
        case .s3(let settings): return BucketSite(store: try ObjectStore(settings: settings, section: "publish.target.s3"))
        }
    }

    static func signingKey(_ settings: PublishSettings) throws -> SigningKey? {
        guard let name = settings.signingKeyEnv else { return nil }
        do { return try SigningKey.load(variable: name) } catch {
            throw TourpackError.invalidInput("publish.signingKeyEnv: \(error)")
        }
    }
}

/// What `publish` shows, through the `Display` build and install use: a
/// progress line on stderr when it is a terminal (objects and bytes uploaded
/// so far), a line per object with `--verbose`, or one JSON object per event
/// on stdout (`--json`); the summary last.
final class PublishDisplay: @unchecked Sendable {
    let verbose: Bool
    private let lock = NSLock()
    private var display: Display
    private var uploadedObjects = 0
    private var uploadedBytes: Int64 = 0

    init(json: Bool, verbose: Bool = false) {
        display = Display(mode: Display.mode(json: json))
        self.verbose = verbose
    }

    func show(_ event: PublishEvent) {
        lock.withLock {
            let json = display.mode == .json
            switch event {
            case .uploaded(let key, let bytes, let what):
                uploadedObjects += 1
                uploadedBytes += bytes
                if json {
                    display.emit(Uploaded(key: key, bytes: bytes, file: what), name: "uploaded")
                } else if verbose {
                    Console.error("uploaded \(what) → \(key) (\(PlanReport.bytes(Int(bytes))))")
                } else if display.mode == .bar, display.dueForRedraw(force: false) {
                    display.drawBar(fraction: nil, "uploading: \(uploadedObjects) object(s), \(PlanReport.bytes(Int(uploadedBytes)))")
                }
            case .published(let generation, let packages):
                if json { display.emit(["generation": generation, "packages": packages], name: "published") }
            case .unchanged(let generation): if json { display.emit(["generation": generation], name: "unchanged") }
            case .raced:
                if json {
                    display.emit([String: Int](), name: "raced")
                } else {
                    display.clearBar()
                    Console.error("another publisher put a catalogue in force first; merging and trying again")
                }
            case .rolledBack(let from, let generation):
                if json { display.emit(["from": from, "generation": generation], name: "rolledBack") }
            case .refreshed(let generation, let expiresAt):
                if json {
                    display.emit(Refreshed(generation: generation, expiresAt: PackageManifest.timestamp(expiresAt)), name: "refreshed")
                }
            case .deleted(let key):
                if json { display.emit(["key": key], name: "deleted") } else if verbose { Console.error("deleted \(key)") }
            case .warning(let message):
                if json {
                    display.emit(Display.Message(message: message), name: "warning")
                } else {
                    display.clearBar()
                    Console.error("warning: \(message)")
                }
            }
        }
    }

    /// A line of a dry run's plan (`would upload …`): stdout, or a `planned` event.
    func line(_ text: String) {
        lock.withLock { display.mode == .json ? display.emit(Display.Message(message: text), name: "planned") : print(text) }
    }

    func finish(_ summary: String) {
        lock.withLock {
            display.mode == .json ? display.emit(Display.Message(message: summary), name: "finished") : display.summary(summary)
        }
    }

    private struct Uploaded: Encodable {
        var key: String
        var bytes: Int64
        var file: String
    }

    private struct Refreshed: Encodable {
        var generation: Int
        var expiresAt: String
    }
}

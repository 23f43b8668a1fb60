import ArgumentParser
import Foundation
import TourpackClient
import TourpackCore
import TourpackInstall
import TourpackKit
import TourpackPublish

struct Install: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "install",
        abstract: "Download published packages into a Documents root, as the app does.",
        discussion: """
            Reads SITE's catalog.json (an http(s):// base URL, or a folder that `publish` wrote) \
            conditionally: its ETag is remembered in DOCUMENTS/.tourpack-install, so a catalogue \
            that did not change costs one 304 and nothing else. The catalogue must be signed \
            (catalog.json.sig) by the --public-key, or by a catalogue key the --root of trust \
            (root.json; newer roots are walked on the site as roots/<n>.json) authorises; it must \
            not be older than one this DOCUMENTS verified (rollbackRefused) nor past its expiresAt \
            (catalogExpired: installed packages keep playing); each package.json and file must have \
            the SHA-256 that names it. Anything else is refused and nothing is installed. The \
            anchor DOCUMENTS was first installed with is remembered in it, so later installs need \
            neither option. With no anchor at all, install refuses unless --insecure-unsigned, which \
            checks no signature and warns on every run. DOCUMENTS/.tourpack-install/trust.json keeps the \
            highest generation verified and the keys whose signatures verified it; one that cannot be \
            read refuses every install (integrityFailed), until --reset-trust forgets it deliberately: \
            the site's catalogue is then taken as a new device takes it, with the --public-key or \
            --root given.

            Files download into DOCUMENTS/.tourpack-install (which `validate` skips), resume with \
            Range and If-Range, are retried with backoff on 429, 5xx, timeouts, cut connections and \
            a wrong Content-Range (honouring Retry-After), and are verified by size and SHA-256. Each \
            file is bounded: no answer passes the size its package.json names, a try slower than \
            --min-rate over --rate-window is abandoned, the file fails after --attempts tries without \
            new bytes or after --file-deadline, whichever comes first (networkUnavailable). Files in \
            the downloads folder that no package of this install names are removed when it starts. Then each package moves \
            into AudioCache/<tourId> and OfflineTours/<packageId> with its package.json last, so the \
            app never sees half a package; files the new version no longer lists are removed. An \
            update downloads only the files whose SHA-256 changed. On any failure the installed \
            packages stay as they were, byte for byte. One install per DOCUMENTS at a time \
            (alreadyDownloading); SIGINT or SIGTERM, once or several times, cancels, removes the \
            partial downloads and exits 130.

            Output: a progress bar on a terminal (audio 70%, maps 25%, bundling 5%), one line per \
            job change otherwise, or NDJSON with --json: catalog, job (packageId, status \
            queued|downloading|paused|completed|failed|cancelled, progress, currentStep, \
            totalBytes, downloadedBytes, errorMessage), retrying, upToDate, warning, finished, error.

            Errors, as the app names them: networkUnavailable, mapDownloadFailed (the tile pack), \
            storageFailed (names the path), alreadyDownloaded (--no-reinstall), alreadyDownloading, \
            integrityFailed, catalogExpired, rollbackRefused. Exit codes: \(ExitStatus.ok) installed or up to date · \
            \(ExitStatus.failure) a failure above · \(ExitStatus.badInput) bad usage, SITE, key or \
            tour · \(ExitStatus.cancelled) cancelled.

            --check changes nothing and reports, per tour, not downloaded (with each offered \
            package's size), up to date, or update available (with what it would download). Its \
            exit codes: \(ExitStatus.ok) every installed package is up to date · \
            \(UpdateCheck.updateAvailableExit) an update is available · \
            \(UpdateCheck.notDownloadedExit) none, but a tour named by --tour or --all is not \
            downloaded · \(ExitStatus.failure) or \(ExitStatus.badInput) as above.
            """
    )

    @Argument(help: "The site: an http(s):// base URL (the folder catalog.json is in), or a folder.", completion: .directory)
    var site: String

    @Option(name: .customLong("into"), help: "The Documents root to install into (created when missing).", completion: .directory)
    var documents: String

    @Option(name: .customLong("tour"), help: "A tour to install (its id); repeat for several.")
    var tours: [String] = []

    @Flag(help: "Install every tour of the catalogue.")
    var all = false

    @Option(help: "The format to take where a tour offers several (default: the installed one, else aac if offered, else the first).")
    var format: AudioFormat?

    @Option(
        help:
            "The quality to take where a tour offers several (high, medium, low; default: the installed one, else high, else the best offered)."
    )
    var quality: AudioQuality?

    @Option(
        help: ArgumentHelp(
            "Refuse a catalogue this Ed25519 public key did not sign: the base64 of its 32 raw bytes, or a file holding it.",
            valueName: "KEY"))
    var publicKey: String?

    @Option(
        help: ArgumentHelp(
            "Refuse a catalogue the keys of this root of trust (root.json, as `tourpack keys root` wrote it) do not authorise.",
            valueName: "FILE"),
        completion: .file(extensions: ["json"]))
    var root: String?

    @Flag(help: "Install from a site with no trust anchor, checking no signature (not recommended; warns on every run).")
    var insecureUnsigned = false

    @Flag(
        help: ArgumentHelp(
            "Forget what DOCUMENTS remembers of the site's trust (the generation verified, the anchor, the roots walked) and take the site's catalogue as a new device would, with --public-key or --root: only after deciding to (rollback protection is off for this install)."
        ))
    var resetTrust = false

    @Flag(help: "Print NDJSON events on stdout instead of a progress display.")
    var json = false

    @Flag(help: "Fail with alreadyDownloaded, rather than do nothing, when a chosen package is installed at the catalogue's version.")
    var noReinstall = false

    @Flag(help: "Report what is downloaded, up to date or has an update, and change nothing (see the exit codes).")
    var check = false

    @Option(help: "Tries of one file without new bytes before the install fails with networkUnavailable.")
    var attempts = TransferPolicy().maximumAttempts

    @Option(help: ArgumentHelp("A try slower than this, over --rate-window, is abandoned as a failed try.", valueName: "BYTES/S"))
    var minRate = TransferPolicy().minimumBytesPerSecond

    @Option(help: ArgumentHelp("The window --min-rate is measured over.", valueName: "SECONDS"))
    var rateWindow = TransferPolicy().rateWindowSeconds

    @Option(help: ArgumentHelp("How long one file may take, every try and wait included.", valueName: "SECONDS"))
    var fileDeadline = TransferPolicy().fileDeadlineSeconds

    /// The bounds on each file's download, from the options.
    var transferPolicy: TransferPolicy {
        TransferPolicy(
            maximumAttempts: attempts, minimumBytesPerSecond: minRate, rateWindowSeconds: rateWindow, fileDeadlineSeconds: fileDeadline)
    }

    func validate() throws {
        if all, !tours.isEmpty { throw ValidationError("--tour and --all: give one") }
        if !check, !all, tours.isEmpty { throw ValidationError("choose what to install: --tour ID (repeatable) or --all") }
        if check, noReinstall { throw ValidationError("--no-reinstall has no meaning with --check") }
        if attempts < 1 { throw ValidationError("--attempts: at least 1") }
        if minRate < 0 { throw ValidationError("--min-rate: 0 or more bytes a second") }
        if !(rateWindow >= 1) || !rateWindow.isFinite { throw ValidationError("--rate-window: at least 1 second") }
        if !(fileDeadline >= 1) || !fileDeadline.isFinite { throw ValidationError("--file-deadline: at least 1 second") }
        if publicKey != nil, root != nil { throw ValidationError("--public-key and --root: give one trust anchor") }
        if resetTrust, check { throw ValidationError("--reset-trust changes what DOCUMENTS trusts; --check changes nothing: give one") }
        if resetTrust, publicKey == nil, root == nil {
            throw ValidationError(
                "--reset-trust forgets the remembered anchor too: give the one to start over with, --public-key KEY or --root FILE")
        }
    }

    /// The warning `--reset-trust` prints.
    static let resetWarning =
        "--reset-trust: what this Documents folder remembered of the site's trust is forgotten; the site's catalogue is taken as a new device takes it"

    /// The warning `--insecure-unsigned` prints on every run.
    static let insecureWarning =
        "--insecure-unsigned: the catalogue's signature is not checked; whoever controls the site or the network can install anything"

    /// The anchor: --public-key or --root, else the one DOCUMENTS remembers;
    /// nil (unchecked) only with --insecure-unsigned, else refused.
    func trust() throws -> CatalogTrust? {
        if let key = try Self.verifyingKey(publicKey) { return .key(key) }
        if let root {
            guard let bytes = FileManager.default.contents(atPath: root) else {
                throw TourpackError.invalidInput("--root \(root): no such file (the root.json `tourpack keys root` wrote)")
            }
            do { return try CatalogTrust.root(bytes: Array(bytes)) } catch { throw TourpackError.invalidInput("--root \(root): \(error)") }
        }
        if let remembered = try InstallFolder(documents: URL(fileURLWithPath: documents)).rememberedAnchor() { return remembered }
        guard insecureUnsigned else {
            throw TourpackError.invalidInput(
                "install: no trust anchor: give --public-key KEY or --root FILE (\(documents) remembers none), "
                    + "or --insecure-unsigned to install without checking the catalogue's signature")
        }
        return nil
    }

    func run() async throws {
        let choice = PackageChoice(tours: tours, all: all, format: format, quality: quality)
        if resetTrust {
            try InstallFolder(documents: URL(fileURLWithPath: documents)).resetTrust()
            if !json { Console.error("warning: \(Self.resetWarning)") }
        }
        let trust = try trust()
        var installer = Installer(
            documents: URL(fileURLWithPath: documents), source: try Self.source(site, policy: transferPolicy), trust: trust)
        installer.now = CommandClock.now
        if trust == nil, !json || check { Console.error("warning: \(Self.insecureWarning)") }
        if check {
            let report = try await UpdateCheck(installer: installer).check(choice)
            CheckReportText.print(report, json: json)
            let code = report.exitCode(explicit: choice.isExplicit)
            if code != ExitStatus.ok { throw ExitCode(code) }
            return
        }
        let display = InstallDisplay(mode: Display.mode(json: json))
        installer.report = { display.show($0) }
        if trust == nil, json { display.show(.warning(Self.insecureWarning)) }
        if resetTrust, json { display.show(.warning(Self.resetWarning)) }
        do {
            let outcome = try await SignalCancellation.run(laterSignalsExit: false) { [installer, noReinstall] in
                try await installer.install(choice, noReinstall: noReinstall)
            }
            display.finish(outcome)
        } catch {
            display.showError(error, exitCode: (error as? TourpackError)?.exitCode ?? ExitStatus.failure)
            throw error
        }
    }

    /// An http(s) URL, a `file://` URL or a folder; anything else is bad usage.
    static func source(_ site: String, policy: TransferPolicy = TransferPolicy()) throws -> any SiteSource {
        let lowered = site.lowercased()
        if lowered.hasPrefix("http://") || lowered.hasPrefix("https://") { return try HTTPSiteSource(base: site, policy: policy) }
        var path = site
        if lowered.hasPrefix("file://") {
            guard let url = URL(string: site), url.isFileURL else { throw TourpackError.invalidInput("SITE \(site): not a file URL") }
            path = url.path
        } else if site.contains("://") {
            throw TourpackError.invalidInput("SITE: only http://, https:// and folders are sites")
        }
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isFolder), isFolder.boolValue else {
            throw TourpackError.invalidInput("SITE \(path): no such folder (a site is an http(s):// URL or the folder `publish` wrote)")
        }
        return FolderSiteSource(root: URL(fileURLWithPath: path, isDirectory: true))
    }

    /// `--public-key`: the base64 itself, or a file holding it (`build/demo-signing.pub`).
    static func verifyingKey(_ value: String?) throws -> VerifyingKey? {
        guard let value else { return nil }
        var text = value
        if FileManager.default.fileExists(atPath: value), let contents = FileManager.default.contents(atPath: value) {
            text = String(decoding: contents, as: UTF8.self)
        }
        do { return try VerifyingKey(base64: text) } catch {
            throw TourpackError.invalidInput("--public-key: \(error)")
        }
    }
}

/// `install --check`'s report: a line per tour, or one JSON document.
enum CheckReportText {
    static func print(_ report: UpdateCheck.Report, json: Bool) {
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
            if let data = try? encoder.encode(report) { FileHandle.standardOutput.write(data + Data("\n".utf8)) }
            return
        }
        let catalog = report.catalog
        var lines = [
            "catalogue generation \(catalog.generation) of \(catalog.site)\(catalog.notModified ? " (unchanged, 304)" : ""): \(report.tours.count) tour(s)"
        ]
        for tour in report.tours {
            let name = "\(tour.tourName) (\(tour.tourId))"
            switch tour.status {
            case .notDownloaded:
                let offers = tour.offers.map {
                    "\($0.format.rawValue) \($0.bitrateKbps) kbps \($0.quality.rawValue) \($0.voice) \(PlanReport.bytes(Int($0.sizeBytes)))"
                }
                lines.append("not downloaded    \(name): \(offers.joined(separator: " · "))")
            case .upToDate:
                lines.append("up to date        \(name): \(tour.installed.map(\.format.rawValue).joined(separator: ", "))")
            case .updateAvailable:
                let updates = tour.installed.filter { $0.status == .updateAvailable }.map {
                    "\($0.format.rawValue): \($0.updateFiles) file(s), \(PlanReport.bytes(Int($0.updateBytes)))"
                }
                lines.append("update available  \(name): \(updates.joined(separator: " · "))")
            }
        }
        Swift.print(lines.joined(separator: "\n"))
    }
}

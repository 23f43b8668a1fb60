import ArgumentParser
import Foundation
import TourpackCore
import TourpackLoad
import TourpackValidate

struct Validate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "validate",
        abstract: "Check a generated bundle before it ships: every defect, each with its path.",
        discussion: """
            For each OfflineTours/*/package.json under ROOT: the JSON Schema, safe IDs and \
            paths, the audio list, expiry, map tiles, contentHash and sizeBytes. For each \
            audio file: present, size and sha256, a full decode, codec, sample rate, \
            channels and bit rate, duration, moov before mdat (m4a), the Xing/Info \
            header (mp3), pre-skip and end granule (opus). For each caption file: its \
            path, size and sha256, valid WebVTT, the cue count, cues in order, apart and \
            within the audio, and (when --pipeline's tours load) the narration's sentences. \
            For the bundle: stray files (warnings; errors with --strict), leftover temp \
            files, and the cache budget when --pipeline names one.

            Every problem is reported, then the run fails once. Exit codes: \(ExitStatus.ok) clean · \
            \(ExitStatus.failure) problems found · \(ExitStatus.badInput) bad usage or no such ROOT.
            """
    )

    /// The report formats, as `--format` spells them.
    enum ReportFormat: String, ExpressibleByArgument, CaseIterable {
        case text, json, junit
    }

    @Argument(help: "The Documents root: the folder holding AudioCache and OfflineTours.", completion: .directory)
    var root: String

    @Option(
        help:
            "A pipeline file whose budgets (cacheMaxMB, packageMaxAgeDays) and map tile size the bundle must meet, and whose tours the captions must say.",
        completion: .file(extensions: ["yaml", "yml"]))
    var pipeline: String?

    @Option(help: "The report format.")
    var format: ReportFormat = .text

    @Option(help: "Write the report to this file instead of stdout (the summary line still goes to stderr).", completion: .file())
    var output: String?

    @Flag(help: "Treat warnings (stray files, package folders without package.json, hand-edited package.json) as errors.")
    var strict = false

    func run() async throws {
        let config = try pipeline.map { try PipelineLoader.load(URL(fileURLWithPath: $0), overrides: PipelineOverrides()) }
        var options = ValidationOptions(now: CommandClock.now(), strict: strict, limits: config.map(ValidationLimits.init(pipeline:)))
        if let config, let pipeline {
            // The captions' texts are checked against the tours when they load; a bundle can be validated without them.
            do {
                options.tours = try TourLoader().loadAll(
                    globs: config.tourGlobs, relativeTo: URL(fileURLWithPath: FileManager.default.currentDirectoryPath),
                    pipelineFile: pipeline)
            } catch {
                Console.error("note: the pipeline's tours do not load, so caption texts are not compared: \(error)")
            }
        }
        let report = try await BundleValidator(options: options).validate(root: URL(fileURLWithPath: root))
        let rendered: String
        switch format {
        case .text:
            // As every command does, the text output starts with the configuration it settled on.
            rendered = config.map { $0.settledDescription() + "\n\n" + report.text() } ?? report.text()
        case .json: rendered = try report.json()
        case .junit: rendered = report.junit()
        }
        if let output {
            let url = URL(fileURLWithPath: output)
            try AtomicFile.write(Array((rendered.hasSuffix("\n") ? rendered : rendered + "\n").utf8), to: url)
            Console.error(report.summaryLine)
        } else {
            print(rendered, terminator: rendered.hasSuffix("\n") ? "" : "\n")
        }
        if !report.passed { throw ExitCode(ExitStatus.failure) }
    }
}

import Foundation
import Testing
import TourpackAudio
import TourpackCore
import TourpackKit
import TourpackState
import TourpackTesting

#if canImport(Glibc)
import Glibc
#endif

/// The real `tourpack serve-tts`, spawned on a free loopback port.
final class LocalVoiceServer {
    let process = Process()
    let port: Int
    var endpoint: String { "http://127.0.0.1:\(port)" }

    /// - Parameter faults: extra serve-tts flags, e.g. `["--latency-ms", "400"]`.
    /// - Parameter environment: added to the server's, e.g. the variable `--api-key-env` names.
    init(faults: [String] = [], environment: [String: String] = [:]) throws {
        port = try ServerProcess.start(process, arguments: ["serve-tts", "--port", "0"] + faults, environment: environment)
    }

    /// The server's `/debug/stats` counters.
    func stats() throws -> [String: Any] {
        let data = try Data(contentsOf: URL(string: "\(endpoint)/debug/stats")!)
        return try JSONSerialization.jsonObject(with: data) as? [String: Any] ?? [:]
    }

    func stop() {
        guard process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
    }

    deinit { stop() }
}

/// Starts one of tourpack's embedded servers (`serve-tts`, `serve-tiles`)
/// on `--port 0` and reads the port it prints alone on its first line.
enum ServerProcess {
    /// - Parameters:
    ///   - environment: added to the server's environment.
    ///   - stderr: where its access log goes; discarded when nil.
    static func start(_ process: Process, arguments: [String], environment: [String: String] = [:], stderr: FileHandle? = nil) throws -> Int
    {
        let line = try firstLine(process, arguments: arguments, environment: environment, stderr: stderr, timeout: 20)
        guard let port = Int(line) else {
            if process.isRunning { process.terminate() }
            throw SetupFailure("tourpack \(arguments.joined(separator: " ")) printed no port")
        }
        return port
    }

    /// Starts `tourpack` with `arguments` and returns the first line it
    /// prints (empty when it prints none within `timeout` seconds).
    static func firstLine(
        _ process: Process, arguments: [String], environment: [String: String] = [:], stderr: FileHandle? = nil, timeout: TimeInterval
    ) throws -> String {
        OffThePool.checkNotOnThePool("ServerProcess.start(\(arguments.first ?? ""))")
        process.executableURL = Executable.tourpack
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let out = Pipe()
        process.standardOutput = out
        process.standardError = stderr ?? FileHandle(forWritingAtPath: "/dev/null")
        try process.run()
        var line = Data()
        let deadline = Date().addingTimeInterval(timeout)
        while !line.contains(0x0A), Date() < deadline {
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            line += chunk
        }
        return String(decoding: line, as: UTF8.self).split(separator: "\n").first.map(String.init) ?? ""
    }
}

struct SetupFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// A scratch folder holding tours, a pipeline, and the build's output and state.
final class BuildWorkspace {
    private(set) var root: URL
    var output: URL { root.appendingPathComponent("Documents") }
    var state: URL { root.appendingPathComponent("state") }
    /// This output root's folder in the state: its lock, staging and journals.
    var rootState: URL { StateLayout(state: state, output: output).rootFolder }
    var pipeline: URL { root.appendingPathComponent("pipeline.yaml") }

    static let alpsID = "6f2d1c3e-8a41-4b7e-9c55-1d2e3f4a5b60"
    static let lakesID = "7a3e2d4f-9b52-4c8f-8d66-2e3f4a5b6c71"
    static let alpsPOIs = ["6f2d1c3e-8a41-4b7e-9c55-1d2e3f4a5b61", "6f2d1c3e-8a41-4b7e-9c55-1d2e3f4a5b62"]
    static let lakesPOI = "7a3e2d4f-9b52-4c8f-8d66-2e3f4a5b6c72"

    /// - Parameter extraYAML: more top-level pipeline keys, e.g. a `budgets:` block.
    init(formats: [String] = ["aac"], extraYAML: String = "") throws {
        root = TemporaryFolder.path("tourpack-build")
        try FileManager.default.createDirectory(at: root.appendingPathComponent("tours"), withIntermediateDirectories: true)
        try writeTours(alps: "The road climbs in thirty-six hairpins.", lakes: "The lake lies still below the pass.")
        let voice = Executable.packageRoot.appendingPathComponent("voices/local-en-us.yaml").path
        try """
        version: 1
        tours: ["tours/*.json"]
        voice: \(voice)
        formats: [\(formats.joined(separator: ", "))]
        tts:
          api: google
          endpoint: http://127.0.0.1:9
          concurrency: 4
          requestsPerMinute: 6000
          timeoutSeconds: 30
        output: Documents
        state: state
        \(extraYAML)
        """.write(to: pipeline, atomically: true, encoding: .utf8)
    }

    /// Two small tours; `alps` and `lakes` are added to every narration, so a
    /// test can change what one tour says.
    func writeTours(alps: String, lakes: String) throws {
        try Self.tour(
            id: Self.alpsID, name: "Alpine Test Road",
            pois: [
                (
                    Self.alpsPOIs[0], "Hairpin Höhe",
                    [
                        "approaching": "Ahead is the first hairpin. \(alps)",
                        "guidedTour": "Look left at the glacier. \(alps) It is retreating every year.",
                    ]
                ),
                (Self.alpsPOIs[1], "Summit Hut", ["detailed": "The hut was built in 1899. \(alps)"]),
            ]
        ).write(to: root.appendingPathComponent("tours/alps.json"), atomically: true, encoding: .utf8)
        try Self.tour(
            id: Self.lakesID, name: "Lake Test Loop",
            pois: [
                (
                    Self.lakesPOI, "Blue Lake",
                    ["approaching": "Soon you will see the lake. \(lakes)", "detailed": "The lake is 40 metres deep. \(lakes)"]
                )
            ]
        ).write(to: root.appendingPathComponent("tours/lakes.json"), atomically: true, encoding: .utf8)
    }

    static func tour(id: String, name: String, pois: [(String, String, [String: String])]) -> String {
        let poiJSON = pois.enumerated().map { index, poi in
            let narrations = poi.2.sorted { $0.key < $1.key }.map { "\"\($0.key)\": \"\($0.value)\"" }.joined(separator: ", ")
            return """
                    {"id": "\(poi.0)", "name": "\(poi.1)", "location": {"latitude": \(47.0 + Double(index) * 0.01), "longitude": 12.7},
                     "triggerRadiusMeters": 500, "narrations": {\(narrations)}}
                """
        }.joined(separator: ",\n")
        return """
            {"id": "\(id)", "name": "\(name)", "language": "en-US", "version": 1,
             "route": {"waypoints": [{"latitude": 47.0, "longitude": 12.69, "name": "Start"}, {"latitude": 47.05, "longitude": 12.72}],
                       "segments": [{"from": 0, "to": 1, "distanceMeters": 6000, "durationSeconds": 600}]},
             "pois": [
            \(poiJSON)
             ]}
            """
    }

    /// `tourpack build` on this workspace's pipeline, against `server`.
    func build(_ server: LocalVoiceServer, _ extra: [String] = []) throws -> Executable.Result {
        try Executable.run(["build", pipeline.path, "--endpoint", server.endpoint] + extra, in: root)
    }

    /// Starts a build in the background with `--json`, for tests that signal it.
    func startBuild(_ server: LocalVoiceServer, _ extra: [String] = []) throws -> RunningBuild {
        try RunningBuild(arguments: ["build", pipeline.path, "--endpoint", server.endpoint, "--json"] + extra, in: root)
    }

    /// Moves the whole folder (tours, pipeline, output and state) to
    /// `destination` with one `rename(2)`, as `mv` does on one file system.
    func move(to destination: URL) throws {
        try FileManager.default.createDirectory(at: destination.deletingLastPathComponent(), withIntermediateDirectories: true)
        guard rename(root.path, destination.path) == 0 else {
            throw SetupFailure("cannot move \(root.path) to \(destination.path): errno \(errno)")
        }
        root = destination
    }

    func remove() { TemporaryFolder.remove(root) }

    deinit { remove() }
}

/// A `tourpack build --json` running in the background; its NDJSON events are read as they come.
final class RunningBuild {
    let process = Process()
    private let out = Pipe()
    private var buffer = Data()
    private(set) var events: [[String: Any]] = []
    /// Everything read from its stdout so far, events or not.
    private(set) var transcript = ""

    /// - Parameters:
    ///   - environment: added to the build's environment.
    ///   - stderr: a file its stderr goes to; discarded when nil.
    init(arguments: [String], in directory: URL, environment: [String: String] = [:], stderr: URL? = nil) throws {
        process.executableURL = Executable.tourpack
        process.arguments = arguments
        process.currentDirectoryURL = directory
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        process.standardOutput = out
        if let stderr {
            guard FileManager.default.createFile(atPath: stderr.path, contents: nil), let log = FileHandle(forWritingAtPath: stderr.path)
            else {
                throw SetupFailure("cannot write \(stderr.path)")
            }
            process.standardError = log
        } else {
            process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        }
        try process.run()
    }

    /// Reads events until one named `name` arrives (or the output ends); returns it.
    @discardableResult
    func waitForEvent(_ name: String, timeout: TimeInterval = 60, sourceLocation: SourceLocation = #_sourceLocation) -> [String: Any]? {
        OffThePool.checkNotOnThePool("RunningBuild.waitForEvent", sourceLocation: sourceLocation)
        let deadline = Date().addingTimeInterval(timeout)
        var seen = events.count
        while Date() < deadline {
            while seen < events.count {
                if events[seen]["event"] as? String == name { return events[seen] }
                seen += 1
            }
            // Read only what is there by the deadline: a build that prints
            // nothing (waiting on a lock) must not hold the test past it.
            var ready = pollfd(fd: out.fileHandleForReading.fileDescriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&ready, 1, Int32(max(0, deadline.timeIntervalSinceNow) * 1000)) > 0 else { return nil }
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { return nil }
            buffer += chunk
            transcript += String(decoding: chunk, as: UTF8.self)
            while let newline = buffer.firstIndex(of: 0x0A) {
                let line = buffer[buffer.startIndex..<newline]
                buffer = Data(buffer[buffer.index(after: newline)...])
                if let object = try? JSONSerialization.jsonObject(with: line) as? [String: Any] { events.append(object) }
            }
        }
        return nil
    }

    func signal(_ number: Int32) { kill(process.processIdentifier, number) }

    /// Waits for the exit, reading the rest of the events; returns the exit status.
    func finish() -> Int32 {
        _ = waitForEvent("never-sent", timeout: 120)
        process.waitUntilExit()
        return process.terminationReason == .uncaughtSignal ? -process.terminationStatus : process.terminationStatus
    }
}

/// What a consumer of the root would check: every package matches its files,
/// and nothing half-written is anywhere.
enum RootCheck {
    /// Problems found; empty when the root is complete and consistent.
    static func problems(in root: URL) -> [String] {
        var problems: [String] = []
        let layout = Layout(root: root)
        let fm = FileManager.default
        var listed: Set<String> = []
        let packages = root.appendingPathComponent(Layout.offlineToursFolder)
        for name in ((try? fm.contentsOfDirectory(atPath: packages.path)) ?? []).sorted() {
            let url = packages.appendingPathComponent(name).appendingPathComponent(Layout.manifestFileName)
            guard let manifest = try? PackageManifest.read(from: url) else {
                problems.append("\(name): unreadable package.json")
                continue
            }
            if manifest.packageId != name { problems.append("\(name): packageId \(manifest.packageId)") }
            if manifest.contentHash != manifest.computeContentHash() { problems.append("\(name): contentHash") }
            for entry in manifest.audio {
                listed.insert(entry.path)
                guard let file = try? layout.resolve(relativePath: entry.path), let digest = try? FileDigest.sha256(of: file) else {
                    problems.append("\(entry.path): missing")
                    continue
                }
                if digest.size != entry.sizeBytes { problems.append("\(entry.path): size \(digest.size), listed \(entry.sizeBytes)") }
                if digest.hex != entry.sha256 { problems.append("\(entry.path): sha256 differs from package \(name)") }
                guard let captions = entry.captions else { continue }
                guard let file = try? layout.resolve(relativePath: captions.path), let digest = try? FileDigest.sha256(of: file) else {
                    problems.append("\(captions.path): missing")
                    continue
                }
                if digest.size != captions.sizeBytes || digest.hex != captions.sha256 {
                    problems.append("\(captions.path): differs from package \(name)")
                }
            }
        }
        for path in allFiles(under: root) {
            let name = (path as NSString).lastPathComponent
            if AtomicFile.isTemporaryName(name) { problems.append("\(path): leftover temp") }
        }
        return problems
    }

    /// Root-relative paths of every file under `root`, hidden ones included.
    static func allFiles(under root: URL) -> [String] {
        guard let walker = FileManager.default.enumerator(atPath: root.path) else { return [] }
        var files: [String] = []
        while let path = walker.nextObject() as? String {
            var isFolder: ObjCBool = false
            if FileManager.default.fileExists(atPath: root.appendingPathComponent(path).path, isDirectory: &isFolder), !isFolder.boolValue {
                files.append(path)
            }
        }
        return files.sorted()
    }

    /// The bytes of every file under `root`, by relative path.
    static func snapshot(_ root: URL) throws -> [String: Data] {
        var files: [String: Data] = [:]
        for path in allFiles(under: root) { files[path] = try Data(contentsOf: root.appendingPathComponent(path)) }
        return files
    }
}

/// ffprobe's view of a file: codec, sample rate, channels and duration.
enum FFprobe {
    struct Stream {
        var codec: String
        var sampleRate: Int
        var channels: Int
        var duration: Double
    }

    static func probe(_ url: URL) throws -> Stream {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "ffprobe", "-v", "error", "-select_streams", "a:0", "-show_entries",
            "stream=codec_name,sample_rate,channels:format=duration", "-of", "json", url.path,
        ]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0,
            let object = try JSONSerialization.jsonObject(with: data) as? [String: Any],
            let stream = (object["streams"] as? [[String: Any]])?.first,
            let format = object["format"] as? [String: Any]
        else { throw SetupFailure("ffprobe could not read \(url.lastPathComponent)") }
        return Stream(
            codec: stream["codec_name"] as? String ?? "", sampleRate: Int(stream["sample_rate"] as? String ?? "") ?? 0,
            channels: stream["channels"] as? Int ?? 0, duration: Double(format["duration"] as? String ?? "") ?? 0)
    }
}

import Foundation
import Testing
import TourpackClient
import TourpackClientTesting
import TourpackCore
import TourpackPublish
import TourpackTesting

/// The shared vectors (`Tests/Vectors`, described in its README): signed
/// sites and the verdict a device must give each, run here through the
/// Swift client (the app's `URLSessionSiteSource`, `CatalogReader` and
/// `Installer`) and by `node --test` through the web client, so the two
/// clients cannot drift. `TOURPACK_WRITE_VECTORS=1` writes them anew with
/// the real publisher, `keys root`'s `RootPublisher` and the trust tests'
/// forgeries (`SharedVectorWriter`); the verdicts are then checked here.
@Suite(.serialized, .offThePool) struct SharedVectorTests {
    static let folder = Executable.packageRoot.appendingPathComponent("Tests/Vectors")

    static func vectors() throws -> [(name: String, vector: SharedVector)] {
        let names = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".json") }.sorted()
        return try names.map { ($0, try SharedVector.read(folder.appendingPathComponent($0))) }
    }

    @Test func everyVectorGetsItsVerdictFromTheSwiftClient() async throws {
        let vectors = try Self.vectors()
        #expect(vectors.count >= 15, "the shared vectors are in \(Self.folder.path)")
        var kinds: Set<String> = []
        for (name, vector) in vectors {
            let outcomes = try await SharedVectorRunner(vector).run()
            for (index, (step, outcome)) in zip(vector.steps, outcomes).enumerated() {
                #expect(outcome == step.verdict, "\(name) step \(index + 1) (\(step.note)): expected \(step.verdict), got \(outcome)")
                if let kind = step.verdict.kind { kinds.insert(kind) }
            }
        }
        // The README says what the files say.
        let readme = try String(contentsOf: Self.folder.appendingPathComponent("README.md"), encoding: .utf8)
        #expect(
            readme == SharedVectorWriter.readme(vectors.map(\.vector).sorted { $0.name < $1.name }),
            "Tests/Vectors/README.md is not the files'")
        // The hostile cases reach every refusal a catalogue, a root, a manifest or a file can get.
        #expect(kinds.isSuperset(of: ["integrityFailed", "rollbackRefused", "catalogExpired", "networkUnavailable"]), "\(kinds)")
    }

    @Test(.enabled(if: ProcessInfo.processInfo.environment["TOURPACK_WRITE_VECTORS"] == "1"))
    func writeTheVectors() async throws {
        try await SharedVectorWriter.writeAll(to: Self.folder)
    }
}

/// One vector: a trust anchor, then steps, each a site as served, the
/// device's clock, what it does (read the catalogue, or install tours) and
/// the verdict. The device's state carries from one step to the next.
struct SharedVector: Sendable {
    enum Anchor: Sendable {
        case publicKey(String)
        case root(Data)
    }

    struct Verdict: Sendable, Equatable, CustomStringConvertible {
        /// `accepted` (the catalogue), `installed` (the tours) or `refused`.
        var outcome: String
        var generation: String?
        var kind: String?
        var file: String?

        var description: String {
            [outcome, generation.map { "generation \($0)" }, kind, file].compactMap { $0 }.joined(separator: " ")
        }

        var json: [String: Any] {
            var value: [String: Any] = ["outcome": outcome]
            if let generation { value["generation"] = generation }
            if let kind { value["kind"] = kind }
            if let file { value["file"] = file }
            return value
        }
    }

    struct Step: Sendable {
        var note: String
        var now: Date
        /// Site key → bytes.
        var files: [String: Data]
        /// Site key → (byte, count): files too large to commit, made by the runner.
        var filled: [String: (byte: UInt8, count: Int)] = [:]
        /// Tours to install after the catalogue; empty: the catalogue alone.
        var install: [String] = []
        var verdict: Verdict
    }

    var name: String
    var attack: String
    var description: String
    var anchor: Anchor
    var steps: [Step]

    static func need<T>(_ value: T?) throws -> T { try SharedVectorWriter.need(value, "field a vector must have") }

    static func read(_ url: URL) throws -> SharedVector {
        let json = try need(try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
        let anchorJSON = try need(json["anchor"] as? [String: String])
        let anchor: Anchor
        if let key = anchorJSON["publicKey"] {
            anchor = .publicKey(key)
        } else {
            anchor = .root(try need(Data(base64Encoded: try need(anchorJSON["rootJSON"]))))
        }
        let steps = try (try need(json["steps"] as? [[String: Any]])).map { step in
            let verdict = try need(step["verdict"] as? [String: String])
            var files: [String: Data] = [:]
            for (key, text) in try need(step["site"] as? [String: String]) { files[key] = try need(Data(base64Encoded: text)) }
            var filled: [String: (byte: UInt8, count: Int)] = [:]
            for (key, fill) in (step["filled"] as? [String: [String: Int]]) ?? [:] {
                filled[key] = (UInt8(try need(fill["byte"])), try need(fill["count"]))
            }
            return Step(
                note: step["note"] as? String ?? "", now: try need(PackageManifest.parseTimestamp(try need(step["now"] as? String))),
                files: files, filled: filled, install: step["install"] as? [String] ?? [],
                verdict: Verdict(
                    outcome: try need(verdict["outcome"]), generation: verdict["generation"], kind: verdict["kind"], file: verdict["file"]))
        }
        return SharedVector(
            name: try need(json["name"] as? String), attack: json["attack"] as? String ?? "",
            description: json["description"] as? String ?? "",
            anchor: anchor, steps: steps)
    }

    func write(to folder: URL) throws {
        let anchorJSON: [String: String]
        switch anchor {
        case .publicKey(let key): anchorJSON = ["publicKey": key]
        case .root(let bytes): anchorJSON = ["rootJSON": bytes.base64EncodedString()]
        }
        let stepsJSON: [[String: Any]] = steps.map { step in
            var value: [String: Any] = [
                "note": step.note, "now": PackageManifest.timestamp(step.now),
                "site": step.files.mapValues { $0.base64EncodedString() }, "verdict": step.verdict.json,
            ]
            if !step.install.isEmpty { value["install"] = step.install }
            if !step.filled.isEmpty { value["filled"] = step.filled.mapValues { ["byte": Int($0.byte), "count": $0.count] } }
            return value
        }
        let json: [String: Any] = ["name": name, "attack": attack, "description": description, "anchor": anchorJSON, "steps": stepsJSON]
        let data = try JSONSerialization.data(withJSONObject: json, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
        try (data + Data("\n".utf8)).write(to: folder.appendingPathComponent("\(name).json"))
    }
}

/// Runs a vector through the Swift client: one Documents folder for every
/// step, the site served in process to the app's own `URLSessionSiteSource`.
struct SharedVectorRunner {
    let vector: SharedVector

    init(_ vector: SharedVector) { self.vector = vector }

    func run() async throws -> [SharedVector.Verdict] {
        let work = try TemporaryFolder.make("tourpack-vector")
        defer { TemporaryFolder.remove(work) }
        let site = work.appendingPathComponent("site")
        let documents = work.appendingPathComponent("Documents")
        try FileManager.default.createDirectory(at: documents, withIntermediateDirectories: true)
        let server = InProcessSite(folder: site)
        let trust: CatalogTrust
        switch vector.anchor {
        case .publicKey(let key): trust = .key(try VerifyingKey(base64: key))
        case .root(let bytes): trust = try CatalogTrust.root(bytes: Array(bytes))
        }
        var outcomes: [SharedVector.Verdict] = []
        for step in vector.steps {
            try? FileManager.default.removeItem(at: site)
            for (key, bytes) in step.files {
                let url = site.appendingPathComponent(key)
                try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
                try bytes.write(to: url)
            }
            for (key, fill) in step.filled {
                let url = site.appendingPathComponent(key)
                try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
                try Data(repeating: fill.byte, count: fill.count).write(to: url)
            }
            let source = URLSessionSiteSource(base: server.url, configuration: server.configuration)
            let now = step.now
            do {
                if step.install.isEmpty {
                    let (catalog, _) = try await CatalogReader(
                        source: source, folder: InstallFolder(documents: documents), trust: trust, now: { now }
                    )
                    .read()
                    outcomes.append(.init(outcome: "accepted", generation: "\(catalog.generation)"))
                } else {
                    var installer = Installer(documents: documents, source: source, trust: trust)
                    installer.now = { now }
                    _ = try await installer.install(PackageChoice(tours: step.install))
                    outcomes.append(.init(outcome: "installed"))
                }
            } catch let error as TourpackError {
                outcomes.append(.init(outcome: "refused", kind: error.kind.rawValue, file: error.context.path))
            }
        }
        return outcomes
    }
}

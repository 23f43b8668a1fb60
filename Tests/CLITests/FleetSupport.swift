import Foundation
import Testing
import TourpackCore
import TourpackKit
import TourpackTesting

#if canImport(Glibc)
import Glibc
#endif

/// The fleet's tours, its four "machines" and what they share.
final class Fleet {
    static let workers = 4
    /// The worker killed mid-run.
    static let victim = 1
    static let bucket = "tourpack-fleet"
    /// Every worker sends all of its shard's chunks at once: at most 6
    /// distinct texts a shard, and 7 items fit the window of 6 requests
    /// plus the encode threads.
    static let concurrency = 6
    static let accessKey = SharedCacheBuildTests.accessKey
    static let secretKey = SharedCacheBuildTests.secretKey
    static let secrets = [PostgresTestServer.password, accessKey, secretKey]

    /// One tour: its ID, the shard it hashes to, and its narrations.
    struct Tour {
        var id: String
        var name: String
        var shard: Int
        /// POI → phase → text.
        var narrations: [[String: String]]
    }

    /// Spoken on every tour: the four workers race for it.
    static let everywhere = "Welcome aboard. This greeting is the same on every tour of the fleet."
    /// Spoken on one tour of each shard: another race.
    static let onePerShard = "Fasten your seatbelt: the next stretch is steep and winding."

    let root: URL
    var output: URL { root.appendingPathComponent("Documents") }
    let tours: [Tour]
    let database: String
    let environment: [String: String]

    init(server: LocalVoiceServer, database: String, objects: String) throws {
        root = TemporaryFolder.path("tourpack-fleet")
        self.database = database
        environment = [
            "TP_TEST_PG_PASSWORD": PostgresTestServer.password, "TP_S3_ACCESS": Self.accessKey, "TP_S3_SECRET": Self.secretKey,
        ]
        tours = Self.makeTours()
        let fm = FileManager.default
        try fm.createDirectory(at: root.appendingPathComponent("tours"), withIntermediateDirectories: true)
        try fm.createDirectory(at: root.appendingPathComponent("logs"), withIntermediateDirectories: true)
        for (number, tour) in tours.enumerated() {
            try Self.json(tour).write(to: root.appendingPathComponent("tours/tour-\(number).json"), atomically: true, encoding: .utf8)
        }
        // One pipeline, as a ConfigMap would give it, copied to each machine:
        // `state.path` and `state.scratch` resolve against the copy's folder
        // (its local disk), the rest names what the fleet shares.
        let voice = Executable.packageRoot.appendingPathComponent("voices/local-en-us.yaml").path
        let pipeline = """
            version: 1
            tours: ["../tours/*.json"]
            voice: \(voice)
            formats: [aac]
            tts:
              api: google
              endpoint: \(server.endpoint)
              concurrency: \(Self.concurrency)
              requestsPerMinute: 6000
              timeoutSeconds: 30
            output: ../Documents
            state:
              path: state
              scratch: scratch
              postgres: '\(database)'
              passwordEnv: TP_TEST_PG_PASSWORD
              objects:
                endpoint: \(objects)
                bucket: \(Self.bucket)
                prefix: synthesis/
                region: us-east-1
                accessKeyEnv: TP_S3_ACCESS
                secretKeyEnv: TP_S3_SECRET

            """
        for index in 0..<Self.workers {
            try fm.createDirectory(at: pipelineURL(index).deletingLastPathComponent(), withIntermediateDirectories: true)
            try pipeline.write(to: pipelineURL(index), atomically: true, encoding: .utf8)
        }
    }

    deinit { TemporaryFolder.remove(root) }

    func pipelineURL(_ index: Int) -> URL { root.appendingPathComponent("worker-\(index)/pipeline.yaml") }

    func tourIDs(inShard shard: Int) -> Set<String> { Set(tours.filter { $0.shard == shard }.map(\.id)) }

    var distinctTexts: Set<String> { Set(tours.flatMap { $0.narrations.flatMap(\.values) }) }

    /// Starts worker `index` as its pod would run: `--shards 4`, the shard
    /// from `JOB_COMPLETION_INDEX`, in its own folder. `run` names its stderr log.
    func start(_ index: Int, run: String) throws -> RunningBuild {
        let build = try RunningBuild(
            arguments: ["build", pipelineURL(index).path, "--shards", String(Self.workers), "--json"],
            in: pipelineURL(index).deletingLastPathComponent(),
            environment: environment.merging(["JOB_COMPLETION_INDEX": String(index)]) { $1 },
            stderr: stderrURL(index, run: run))
        // A worker that hangs (waiting on a claim forever, say) fails the
        // test instead of stalling the suite: far past any honest run.
        let process = build.process
        DispatchQueue.global().asyncAfter(deadline: .now() + 300) {
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        }
        return build
    }

    private func stderrURL(_ index: Int, run: String) -> URL { root.appendingPathComponent("logs/worker-\(index)-\(run).stderr") }

    func stderr(_ index: Int, run: String) -> String {
        (try? String(contentsOf: stderrURL(index, run: run), encoding: .utf8)) ?? ""
    }

    /// serve-tts bills a request once it has spoken it, even when its
    /// client is gone: wait until it holds none.
    func waitUntilIdle(_ server: LocalVoiceServer) throws {
        let deadline = Date().addingTimeInterval(120)
        while try server.stats()["inFlight"] as? Int != 0 {
            guard Date() < deadline else { throw SetupFailure("serve-tts still has requests in flight") }
            Thread.sleep(forTimeInterval: 0.05)
        }
    }

    /// `tourpack quota` of the fleet's account (any worker's pipeline: they are one), local tier.
    func quota() throws -> (used: Int, reserved: Int, output: String) {
        let result = try Executable.run(
            ["quota", pipelineURL(0).path, "--json"], in: pipelineURL(0).deletingLastPathComponent(), environment: environment)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any], "\(result.stderr)")
        let local = try #require((object["tiers"] as? [[String: Any]])?.first { $0["tier"] as? String == "local" }, "\(result.stdout)")
        return (local["used"] as? Int ?? -1, local["reserved"] as? Int ?? -1, result.stdout + result.stderr)
    }

    // MARK: The shared database, read as an operator would

    private var databaseName: String { String(database.split(separator: "/").last!.split(separator: "?").first!) }

    /// Open quota reservations of the process `pid` (owners are `host:pid:start`).
    func openReservations(ownedBy pid: Int32) throws -> (sent: Int, sentCharacters: Int, unsent: Int) {
        let row = try PostgresTestServer.shared().psql(
            databaseName,
            """
            SELECT count(*) FILTER (WHERE sent_at IS NOT NULL), COALESCE(sum(characters) FILTER (WHERE sent_at IS NOT NULL), 0),
                   count(*) FILTER (WHERE sent_at IS NULL)
            FROM quota_reservation WHERE owner ~ ':\(pid):[0-9]+$'
            """)
        let fields = row.split(separator: "|").compactMap { Int($0) }
        guard fields.count == 3 else { throw SetupFailure("unexpected psql answer: \(row)") }
        return (fields[0], fields[1], fields[2])
    }

    /// Build records with outcome `packaged`, by tour.
    func packagedRecords() throws -> [String: Int] {
        let rows = try PostgresTestServer.shared().psql(
            databaseName, "SELECT tour_id, count(*) FROM build_tour WHERE outcome = 'packaged' GROUP BY tour_id")
        var counts: [String: Int] = [:]
        for row in rows.split(separator: "\n") {
            let fields = row.split(separator: "|")
            if fields.count == 2, let count = Int(fields[1]) { counts[String(fields[0])] = count }
        }
        return counts
    }

    /// Tables of the shared database with a row whose text (as JSON) holds one of `texts`.
    func tablesHolding(_ texts: [String]) throws -> [String] {
        let server = try PostgresTestServer.shared()
        let tables = try server.psql(databaseName, "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename")
            .split(separator: "\n").map(String.init)
        precondition(texts.allSatisfy { !$0.contains("'") })
        let condition = texts.map { "strpos(row_to_json(t)::text, '\($0)') > 0" }.joined(separator: " OR ")
        return try tables.filter { table in
            try server.psql(databaseName, "SELECT count(*) FROM \"\(table)\" t WHERE \(condition)") != "0"
        }
    }

    /// Every package.json in the output.
    func manifests() throws -> [PackageManifest] {
        try RootCheck.allFiles(under: output).filter { $0.hasSuffix(Layout.manifestFileName) }.map {
            try PackageManifest.read(from: output.appendingPathComponent($0))
        }
    }

    // MARK: Tours

    /// Eight tours, two per shard of four (IDs chosen by the shard hash).
    /// Every tour opens with `everywhere`; the first tour of each shard
    /// also says `onePerShard`; every other narration is its own.
    static func makeTours() -> [Tour] {
        let names = ["Amber", "Birch", "Cedar", "Dune", "Elm", "Fern", "Granite", "Heath"]
        var chosen: [(id: String, shard: Int)] = []
        var perShard = [Int](repeating: 0, count: workers)
        var candidate = 0
        while chosen.count < 2 * workers {
            let id = String(format: "f1ee7000-0000-4000-8000-%012d", candidate)
            candidate += 1
            let shard = Shard.index(of: SafeID(validating: id)!, count: workers)
            guard perShard[shard] < 2 else { continue }
            perShard[shard] += 1
            chosen.append((id, shard))
        }
        return chosen.enumerated().map { number, tour in
            let name = names[number]
            let firstOfShard = !chosen[..<number].contains { $0.shard == tour.shard }
            let own = "At the \(name) viewpoint the valley opens towards the glacier."
            return Tour(
                id: tour.id, name: "\(name) Road", shard: tour.shard,
                narrations: [
                    ["approaching": everywhere, "guidedTour": "This is the \(name) road. Its first chapel stands by the river."],
                    firstOfShard ? ["approaching": own, "detailed": onePerShard] : ["detailed": own],
                ])
        }
    }

    static func json(_ tour: Tour) -> String {
        let pois = tour.narrations.enumerated().map { index, narrations in
            let texts = narrations.sorted { $0.key < $1.key }.map { "\"\($0.key)\": \"\($0.value)\"" }.joined(separator: ", ")
            return """
                    {"id": "f1ee70\(String(format: "%02d", index + 1))\(tour.id.dropFirst(8))", "name": "Stop \(index + 1)",
                     "location": {"latitude": \(46.5 + Double(index) * 0.01), "longitude": 11.3}, "triggerRadiusMeters": 400,
                     "narrations": {\(texts)}}
                """
        }.joined(separator: ",\n")
        return """
            {"id": "\(tour.id)", "name": "\(tour.name)", "language": "en-US", "version": 1,
             "route": {"waypoints": [{"latitude": 46.5, "longitude": 11.29}, {"latitude": 46.53, "longitude": 11.32}],
                       "segments": [{"from": 0, "to": 1, "distanceMeters": 4000, "durationSeconds": 420}]},
             "pois": [
            \(pois)
             ]}
            """
    }
}

import Foundation
import PostgresTestServer
import Testing
import TourpackKit

#if canImport(Glibc)
import Glibc
#endif

/// Issue 14's end-to-end test: a fleet of four `tourpack build --shards 4`
/// workers, started as a Kubernetes Indexed Job starts its pods
/// (`JOB_COMPLETION_INDEX` 0–3), each on a "machine" of its own: its own
/// copy of the pipeline, its own local state folder and scratch. They share
/// what a fleet shares: one PostgreSQL database (ledger, indexes, records),
/// one S3 bucket (moto), one output folder, and the real serve-tts, whose
/// counters say what was spoken and billed. One worker is killed with
/// SIGKILL mid-run and restarted with its index, as Kubernetes restarts a
/// failed index.
@Suite(.serialized) struct FleetBuildTests {
    /// serve-tts holds every answer this long from its arrival. Each worker
    /// sends its whole shard at once (see `Fleet.concurrency`), so every
    /// request of the killed worker has reached the endpoint long before
    /// its first answer, hence before the kill; see the ledger check.
    static let latencyMilliseconds = 2000

    @Test func fourWorkersOneKilledAndRestartedPublishEveryTourOnceAndPayForEveryChunkOnce() throws {
        let database = try PostgresTestServer.shared().createDatabase()
        let moto = try MotoProcess()
        try moto.createBucket(Fleet.bucket)
        let server = try LocalVoiceServer(faults: ["--latency-ms", String(Self.latencyMilliseconds)])
        let fleet = try Fleet(server: server, database: database, objects: moto.endpoint)
        var outputs: [String] = []

        // Round 1: four workers at once. Every one has planned (and
        // reconciled the ledger, which a build does before `started`)
        // before the victim dies, so nobody closes its reservations before
        // they are read below.
        let first = try (0..<Fleet.workers).map { try fleet.start($0, run: "first") }
        for (index, worker) in first.enumerated() {
            try #require(worker.waitForEvent("started") != nil, "worker \(index) did not start: \(fleet.stderr(index, run: "first"))")
        }
        let victim = first[Fleet.victim]
        try #require(victim.waitForEvent("itemDone") != nil, "the victim finished no item: \(fleet.stderr(Fleet.victim, run: "first"))")
        victim.signal(SIGKILL)
        #expect(victim.finish() == -SIGKILL)
        #expect(!victim.events.contains { $0["event"] as? String == "finished" }, "the kill came after the end: not mid-run")
        // What it had in flight: reservations it had marked sent and not
        // settled. The endpoint heard (and billed) each of them, and the
        // restart may have to ask for each again: the only repeats allowed.
        let inFlight = try fleet.openReservations(ownedBy: victim.process.processIdentifier)
        let restarted = try fleet.start(Fleet.victim, run: "restarted")
        let survivors = first.indices.filter { $0 != Fleet.victim }
        for index in survivors {
            #expect(first[index].finish() == 0, "worker \(index): \(fleet.stderr(index, run: "first"))")
        }
        #expect(restarted.finish() == 0, "restarted worker: \(fleet.stderr(Fleet.victim, run: "restarted"))")
        try fleet.waitUntilIdle(server)
        let round1 = survivors.map { first[$0] } + [victim, restarted]
        let ranBy = survivors + [Fleet.victim, Fleet.victim]
        outputs += round1.map(\.transcript)

        // Each worker packaged its own shard's tours, and only those.
        for (index, run) in zip(ranBy, round1) {
            let strays = Self.packagedTours(run, writtenOnly: false).subtracting(fleet.tourIDs(inShard: index))
            #expect(strays.isEmpty, "worker \(index) packaged tours of another shard: \(strays)")
        }
        // Every tour is published once. "Published" means a build wrote its
        // package.json: a `packaged` build record (written right after the
        // commit, before the `tourPackaged` event), or that event with a
        // package in `packages`. Each tour is published by exactly one build
        // of this round: its shard's worker; for the victim's shard, the
        // killed run or the restart, never both. The restart may find a tour
        // the killed run had already committed (whole, or with its journal
        // finished at the restart) and must then leave it as it is, reporting
        // it unchanged. Only there may a tour have no publishing build on
        // record: the kill landed between its commit and its record, and
        // the restart's `unchanged` is the proof it was complete.
        let records = try fleet.packagedRecords()
        let events = round1.reduce(into: [String: Int]()) { counts, run in
            for id in Self.packagedTours(run, writtenOnly: true) { counts[id, default: 0] += 1 }
        }
        let unchangedOnRestart = Self.packagedTours(restarted, writtenOnly: false).subtracting(Self.packagedTours(restarted, writtenOnly: true))
        for tour in fleet.tours {
            let published = records[tour.id] ?? 0
            #expect(published <= 1, "\(tour.name) was published \(published) times")
            #expect((events[tour.id] ?? 0) <= published, "\(tour.name): a tourPackaged event without its build record")
            if published == 0 {
                #expect(tour.shard == Fleet.victim && unchangedOnRestart.contains(tour.id),
                        "\(tour.name) (shard \(tour.shard)) was never published, or not found complete by the restart")
            }
        }
        let manifests = try fleet.manifests()
        #expect(manifests.map(\.tourId).sorted() == fleet.tours.map(\.id).sorted(), "one package per tour: \(manifests.map(\.tourId))")
        #expect(RootCheck.problems(in: fleet.output).isEmpty, "\(RootCheck.problems(in: fleet.output))")
        let validate = try Executable.run(["validate", fleet.output.path, "--strict"], in: fleet.root)
        #expect(validate.status == 0, "\(validate.stdout)\n\(validate.stderr)")
        outputs += [validate.stdout, validate.stderr]

        // The ledger holds exactly what the endpoint billed, nothing reserved.
        //
        // A worker marks a reservation sent (in PostgreSQL) just before its
        // request goes out; a dead worker's sent reservations are settled
        // in full by the next reconcile, since the endpoint may have billed
        // them (and serve-tts finishes, and bills, a request whose client
        // died). So a SIGKILL between that mark and the request reaching the
        // endpoint leaves the ledger over by that chunk: a genuine window,
        // by design (never under, possibly over). This test keeps the kill
        // out of it: each worker sends its whole shard in one wave, and the
        // victim dies only after an answer, which comes `latency` after its
        // request; so every request it marked sent had long arrived. A
        // mismatch here is a lost or doubled settlement, or a kill in that
        // window, which could leave the ledger over by at most the victim's
        // sent characters (the message gives them).
        let stats = try server.stats()
        let billed = try #require(stats["characters"] as? Int)
        let ledger = try fleet.quota()
        outputs += [ledger.output]
        #expect(ledger.used == billed && ledger.reserved == 0,
                "ledger \(ledger.used) used + \(ledger.reserved) reserved, endpoint billed \(billed); the victim had \(inFlight.sent) reservation(s) sent (\(inFlight.sentCharacters) characters) and \(inFlight.unsent) unsent at the kill")

        // Each distinct chunk was requested once, but for what the victim
        // had in flight. Every narration is one chunk (checked here), so the
        // chunks are the tours' distinct narration texts.
        for (index, run) in zip(ranBy, round1) {
            let started = run.events.first { $0["event"] as? String == "started" }
            #expect(started?["chunks"] as? Int == started?["items"] as? Int, "worker \(index): one chunk per narration: \(String(describing: started))")
        }
        let requests = try #require(stats["synthesizeRequests"] as? Int)
        let distinct = try #require(stats["distinctTexts"] as? Int)
        let repeated = try #require(stats["repeatedRequests"] as? Int)
        #expect(stats["untrackedTexts"] as? Int == 0)
        #expect(distinct == fleet.distinctTexts.count, "every chunk was spoken: \(distinct) of \(fleet.distinctTexts.count) texts")
        #expect(requests == distinct + repeated)
        #expect(repeated <= inFlight.sent,
                "\(repeated) of \(requests) requests repeated a text already spoken; only the \(inFlight.sent) the victim had in flight at the kill may be asked for again")

        // Round 2: the whole fleet again, warm. No request, nothing published.
        let before = try RootCheck.snapshot(fleet.output)
        let second = try (0..<Fleet.workers).map { try fleet.start($0, run: "second") }
        for (index, run) in second.enumerated() {
            #expect(run.finish() == 0, "worker \(index), second run: \(fleet.stderr(index, run: "second"))")
            let summary = run.events.last { $0["event"] as? String == "finished" }
            #expect(summary?["requests"] as? Int == 0 && summary?["toursBuilt"] as? Int == 0, "worker \(index): \(String(describing: summary))")
            #expect(summary?["toursUnchanged"] as? Int == fleet.tourIDs(inShard: index).count)
            #expect(Self.packagedTours(run, writtenOnly: true).isEmpty, "worker \(index) published again")
        }
        outputs += second.map(\.transcript)
        try fleet.waitUntilIdle(server)
        #expect(try server.stats()["synthesizeRequests"] as? Int == requests, "the warm fleet sent a request")
        #expect(try RootCheck.snapshot(fleet.output) == before, "the warm fleet changed the output")
        let after = try fleet.quota()
        outputs += [after.output]
        #expect(after.used == billed && after.reserved == 0)

        // No password and no S3 key anywhere: not in what any run printed,
        // nor in any file a worker wrote (output, state folders, scratch),
        // nor in any row of the shared database.
        outputs += (0..<Fleet.workers).flatMap { index in ["first", "restarted", "second"].map { fleet.stderr(index, run: $0) } }
        for secret in Fleet.secrets {
            #expect(!outputs.contains { $0.contains(secret) }, "a secret appeared in the output")
            for path in RootCheck.allFiles(under: fleet.root) {
                let bytes = try Data(contentsOf: fleet.root.appendingPathComponent(path))
                #expect(bytes.range(of: Data(secret.utf8)) == nil, "a secret is in \(path)")
            }
        }
        #expect(try fleet.tablesHolding(Fleet.secrets).isEmpty, "a secret is in the database")
        #expect(try fleet.tablesHolding([fleet.tours[0].id]).contains("build_tour"), "the database search finds what is there")
    }

    /// The tours a build's `tourPackaged` events name: all of them, or only
    /// those whose package.json it wrote (not the ones it found unchanged).
    static func packagedTours(_ run: RunningBuild, writtenOnly: Bool) -> Set<String> {
        Set(run.events.filter { event in
            event["event"] as? String == "tourPackaged" && (!writtenOnly || !((event["packages"] as? [Any])?.isEmpty ?? true))
        }.compactMap { $0["tourId"] as? String })
    }
}

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
        root = FileManager.default.temporaryDirectory.appendingPathComponent("tourpack-fleet-\(UUID().uuidString)")
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

    deinit { try? FileManager.default.removeItem(at: root) }

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
        nonisolated(unsafe) let process = build.process
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
        let result = try Executable.run(["quota", pipelineURL(0).path, "--json"], in: pipelineURL(0).deletingLastPathComponent(), environment: environment)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any], "\(result.stderr)")
        let local = try #require((object["tiers"] as? [[String: Any]])?.first { $0["tier"] as? String == "local" }, "\(result.stdout)")
        return (local["used"] as? Int ?? -1, local["reserved"] as? Int ?? -1, result.stdout + result.stderr)
    }

    // MARK: The shared database, read as an operator would

    private var databaseName: String { String(database.split(separator: "/").last!.split(separator: "?").first!) }

    /// Open quota reservations of the process `pid` (owners are `host:pid:start`).
    func openReservations(ownedBy pid: Int32) throws -> (sent: Int, sentCharacters: Int, unsent: Int) {
        let row = try PostgresTestServer.shared().psql(databaseName, """
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
            return Tour(id: tour.id, name: "\(name) Road", shard: tour.shard, narrations: [
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

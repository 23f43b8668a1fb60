import Foundation
import Logging
import TourpackCore
import TourpackKit
import TourpackServer
import TourpackTesting

#if canImport(Glibc)
import Glibc
#endif

/// `tourpack-bench fleet [--tours 32] [--pois 2] [--characters 200] [--workers 4] [--concurrency 4] [--runs 3] [--latency-ms 0,1000]`
///
/// The wall time of a cold build of the same tours by `--workers` worker
/// processes (`tourpack build --shards N --shard I`, each with a local
/// state folder of its own, as on separate machines) against one worker
/// (no shards), both with the fleet's kind of state: one PostgreSQL
/// (`state.postgres`, a throwaway local server whose commits wait for the
/// disk) and one S3 bucket (`state.objects`, moto). Every build starts
/// from a fresh database, bucket, output and local state, after `tourpack
/// state migrate` (untimed), as a deployment runs it once before the Job.
///
/// The voice is the embedded serve-tts, in this process, with the local
/// voice at the `standard` tier, so every request goes through the
/// ledger's limit. Each `--latency-ms` value (comma-separated) is a set of
/// runs with serve-tts answering each request that long after it arrived
/// (synthesis inside that time), as a remote endpoint would; 0 is the
/// local voice as fast as it speaks. The two sides alternate order, and
/// the medians of `--runs` are compared.
///
/// Each build checks itself: every worker exits 0, every tour is built
/// once, the requests serve-tts saw equal the distinct chunks of the plan
/// (each chunk spoken once) and the workers' own count, `tourpack quota`
/// on a fresh local folder shows used = the characters serve-tts billed
/// with 0 reserved, and `tourpack validate --strict` passes on the output.
/// Exit 1 when a check fails.
///
/// Each build line also says how busy the machine was: the user and
/// system CPU of the workers and of this process (serve-tts: espeak-ng is
/// about a tenth of it; PostgreSQL and moto are not counted) over the wall
/// time. On a 2-core machine one worker already keeps both cores busy
/// when the voice answers at once, so the fleet has no spare CPU to gain
/// from; with latency one worker waits on the endpoint (at most
/// `tts.concurrency` requests in flight) and the fleet overlaps those
/// waits until the cores are full again. That is what the fleet buys on
/// machines of their own, where each worker brings its own cores.
enum FleetBench {
    static let passwordVariable = "TOURPACK_BENCH_PG_PASSWORD"
    static let accessVariable = "TOURPACK_BENCH_S3_ACCESS"
    static let secretVariable = "TOURPACK_BENCH_S3_SECRET"

    struct Options: Sendable {
        var tours = 32, pois = 2, characters = 200, workers = 4, concurrency = 4, runs = 3
        var latencies = [0, 1000]

        init(_ arguments: [String]) {
            func value(_ name: String) -> String? {
                guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
                return arguments[index + 1]
            }
            func int(_ name: String, _ fallback: Int, minimum: Int) -> Int { max(minimum, value(name).flatMap { Int($0) } ?? fallback) }
            tours = int("--tours", tours, minimum: 1)
            pois = int("--pois", pois, minimum: 1)
            characters = int("--characters", characters, minimum: 50)
            workers = int("--workers", workers, minimum: 2)
            concurrency = int("--concurrency", concurrency, minimum: 1)
            runs = int("--runs", runs, minimum: 1)
            if let list = value("--latency-ms") { latencies = list.split(separator: ",").compactMap { Int($0) }.map { max(0, $0) } }
        }
    }

    static func run(_ arguments: [String]) async -> Int32 {
        let options = Options(arguments)
        let executable = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
            .appendingPathComponent("tourpack")
        let scratch = TemporaryFolder.path("tourpack-bench-fleet")
        defer { TemporaryFolder.remove(scratch) }
        // Throwaway credentials for the children, which read them from these variables.
        setenv(passwordVariable, PostgresTestServer.password, 1)
        setenv(accessVariable, "tourpack-bench-access", 1)
        setenv(secretVariable, "tourpack-bench-secret", 1)
        do {
            let tours = try writeTours(options, into: scratch.appendingPathComponent("input"))
            let voice = scratch.appendingPathComponent("input/standard-voice.yaml")
            // The local voice, billed at the standard tier: every request is reserved against a limit.
            try "version: 1\nprovider: local\nlanguageCode: en-US\nname: en-us\ntier: standard\nspeakingRate: 1.0\npitch: 0\n"
                .write(to: voice, atomically: true, encoding: .utf8)
            let counted = try plan(tours: tours, voice: voice, options: options, in: scratch.appendingPathComponent("input"))
            let server = try PostgresTestServer.start(durable: true)
            defer { server.stop() }
            let moto = try MotoTestServer()
            defer { moto.stop() }
            print(
                "fleet: \(options.tours) generated tours × \(options.pois) POIs (\(counted.items) items, \(counted.chunks) distinct chunks, "
                    + "\(PlanReport.grouped(counted.characters)) characters), aac, tts.concurrency \(options.concurrency) per worker; "
                    + "\(options.workers) workers (--shards \(options.workers) --shard I) against 1 (no shards), each build from a fresh PostgreSQL database "
                    + "(durable commits), moto bucket, output and local state folders; serve-tts in this process (espeak-ng on one synthesis thread); "
                    + "\(ProcessInfo.processInfo.activeProcessorCount) cores; median of \(options.runs); load average \(BenchLoad.text)")
            print(
                "fleet shards: \(counted.shardTours.map(String.init).joined(separator: ", ")) tours in shards 0–\(options.workers - 1) "
                    + "(SHA-256 of each tour's ID, as Kubernetes would hand them out)")
            var failed = false
            var lines: [String] = []
            for latency in options.latencies {
                var configuration = TTSServerConfiguration(port: 0, faults: FaultInjection(latencyMilliseconds: latency))
                configuration.logger = Logger(label: "bench", factory: { _ in SwiftLogNoOpLogHandler() })
                let tts = try TTSServer(configuration)
                var single: [Double] = [], fleet: [Double] = [], requests: [Int: Set<Int>] = [1: [], options.workers: []]
                try await tts.withRunning { port in
                    for run in 0..<options.runs {
                        for workers in run % 2 == 0 ? [1, options.workers] : [options.workers, 1] {
                            let folder = scratch.appendingPathComponent("latency\(latency)-run\(run)-\(workers)")
                            let before = tts.stats.snapshot
                            let serverCPUBefore = cpuSeconds(RUSAGE_SELF.rawValue)
                            let result = try await OffPool.run {
                                try build(
                                    executable, tours: tours, voice: voice, workers: workers, options: options, folder: folder,
                                    port: port, postgres: server, moto: moto)
                            }
                            let after = tts.stats.snapshot
                            let serverCPU = cpuSeconds(RUSAGE_SELF.rawValue) - serverCPUBefore
                            let served = after.synthesizeRequests - before.synthesizeRequests
                            let billed = after.characters - before.characters
                            let check = try await OffPool.run {
                                try verify(
                                    executable, result, folder: folder, port: port, served: served, billed: billed, counted: counted,
                                    tours: options.tours)
                            }
                            failed = failed || !check.passed
                            if workers == 1 { single.append(result.wallSeconds) } else { fleet.append(result.wallSeconds) }
                            requests[workers, default: []].insert(served)
                            let cpu = result.workersCPUSeconds + serverCPU
                            let speech = LongTour.speechSeconds(in: folder.appendingPathComponent("Documents"), format: "aac")
                            print(
                                String(
                                    format:
                                        "fleet %d ms run %d, %d worker%@: %.2f s wall%@, %d requests, %@ characters billed, %.1f min of speech, "
                                        + "CPU %.1f s (workers %.1f, serve-tts %.1f) = %.2f cores busy; %@; load %@",
                                    latency, run + 1, workers, workers == 1 ? "" : "s", result.wallSeconds,
                                    workers == 1
                                        ? ""
                                        : " (workers "
                                            + result.workers.map { String(format: "%.1f", $0.wallSeconds) }.joined(separator: ", ") + " s)",
                                    served, PlanReport.grouped(billed), speech / 60, cpu, result.workersCPUSeconds, serverCPU,
                                    cpu / result.wallSeconds,
                                    check.text, BenchLoad.text))
                            try? FileManager.default.removeItem(at: folder)
                        }
                    }
                }
                let one = EncodeBench.median(single), many = EncodeBench.median(fleet)
                let sameRequests = requests[1] == requests[options.workers] && requests[1]?.count == 1
                lines.append(
                    String(
                        format:
                            "fleet %d ms latency: 1 worker median %.2f s, %d workers median %.2f s: speed-up %.2f×; requests %@ vs %@ (%@)",
                        latency, one, options.workers, many, one / many,
                        (requests[1] ?? []).sorted().map(String.init).joined(separator: "/"),
                        (requests[options.workers] ?? []).sorted().map(String.init).joined(separator: "/"),
                        sameRequests ? "equal: each chunk once" : "DIFFERENT"))
                failed = failed || !sameRequests
            }
            for line in lines { print(line) }
            return failed ? 1 : 0
        } catch {
            print("fleet bench failed: \(error)")
            return 1
        }
    }

    // MARK: Input

    /// `tours/tourN.json`: `pois` POIs each, a short approach, a detail of
    /// three sentences and a guided tour of about `characters` characters,
    /// all of varied prose, so no chunk is spoken for two tours.
    static func writeTours(_ options: Options, into folder: URL) throws -> URL {
        let tours = folder.appendingPathComponent("tours")
        try FileManager.default.createDirectory(at: tours, withIntermediateDirectories: true)
        for tour in 0..<options.tours {
            var pois: [[String: Any]] = []
            for poi in 0..<options.pois {
                let name = "Stop \(poi + 1) of Tour \(tour + 1)"
                var prose = NarrationProse(seed: UInt64(0x666C_6565_7400 + tour * 1_000 + poi))
                pois.append([
                    "id": String(format: "00000000-0000-4000-8%03x-%012x", tour, poi + 1),
                    "name": name,
                    "location": ["latitude": 46.5 + Double(poi) * 0.002, "longitude": 10.4 + Double(tour) * 0.01],
                    "triggerRadiusMeters": 300,
                    "narrations": [
                        "approaching": prose.short(name: name, sentences: 1),
                        "detailed": prose.short(name: name, sentences: 3),
                        "guidedTour": prose.guidedTour(name: name, characters: options.characters),
                    ],
                ])
            }
            let object: [String: Any] = [
                "id": String(format: "00000000-0000-4000-9000-%012x", 0xF1EE7000 + tour), "name": "Fleet Tour \(tour + 1)",
                "language": "en-US",
                "version": 1,
                "route": [
                    "waypoints": [
                        ["latitude": 46.5, "longitude": 10.39 + Double(tour) * 0.01],
                        ["latitude": 46.56, "longitude": 10.41 + Double(tour) * 0.01],
                    ]
                ],
                "pois": pois,
            ]
            try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .prettyPrinted])
                .write(to: tours.appendingPathComponent("tour\(tour + 1).json"))
        }
        return tours
    }

    /// The pipeline of one build: the fleet's state, with this build's database and bucket.
    static func pipeline(tours: URL, voice: URL, options: Options, state: String, in folder: URL) throws -> URL {
        let url = folder.appendingPathComponent("pipeline.yaml")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try """
        version: 1
        tours: ["\(tours.path)/*.json"]
        voice: \(voice.path)
        formats: [aac]
        tts: {api: google, endpoint: "http://127.0.0.1:9", concurrency: \(options.concurrency), requestsPerMinute: 100000}
        output: Documents
        budgets: {cacheMaxMB: 4000}
        \(state)
        """.write(to: url, atomically: true, encoding: .utf8)
        return url
    }

    struct Counted: Sendable {
        var items: Int
        var chunks: Int
        var characters: Int
        var shardTours: [Int]
    }

    /// What the plan holds: items, distinct chunks (what a cold build requests), and each shard's tours.
    static func plan(tours: URL, voice: URL, options: Options, in folder: URL) throws -> Counted {
        let pipeline = try pipeline(tours: tours, voice: voice, options: options, state: "state: state", in: folder)
        let config = try PipelineLoader.load(pipeline)
        let loaded = try TourLoader().loadAll(globs: config.tourGlobs)
        let plan = try Planner(config: config).plan(loaded)
        var seen: Set<Chunk> = []
        let chunks = plan.tours.flatMap { $0.items.flatMap(\.chunks) }.filter { seen.insert($0).inserted }
        var shardTours = Array(repeating: 0, count: options.workers)
        for tour in loaded { shardTours[Shard.index(of: tour.id, count: options.workers)] += 1 }
        return Counted(
            items: plan.phases, chunks: chunks.count, characters: chunks.reduce(0) { $0 + $1.characters }, shardTours: shardTours)
    }

    // MARK: One build

    struct WorkerResult: Sendable {
        var status: Int32
        var wallSeconds: Double
        var toursBuilt: Int
        var requests: Int
        var charactersBilled: Int
        var error: String
    }

    struct BuildResult: Sendable {
        var wallSeconds: Double
        /// User and system CPU of the worker processes.
        var workersCPUSeconds: Double
        var workers: [WorkerResult]
        var pipeline: URL
    }

    /// One cold build by `workers` processes (1: no shards) from a fresh
    /// database, bucket, output and local state folders. Blocks until the last exits.
    static func build(
        _ executable: URL, tours: URL, voice: URL, workers: Int, options: Options, folder: URL, port: Int, postgres: PostgresTestServer,
        moto: MotoTestServer
    ) throws -> BuildResult {
        let bucket = "fleet-" + UUID().uuidString.lowercased().prefix(13)
        try moto.createBucket(bucket)
        let database = try postgres.createDatabase()
        let pipeline = try pipeline(
            tours: tours, voice: voice, options: options,
            state: """
                state:
                  path: state
                  postgres: '\(database)'
                  passwordEnv: \(passwordVariable)
                  objects:
                    endpoint: \(moto.endpoint)
                    bucket: \(bucket)
                    prefix: synthesis/
                    region: us-east-1
                    accessKeyEnv: \(accessVariable)
                    secretKeyEnv: \(secretVariable)
                """, in: folder)
        // Once, before the workers, as a deployment runs it before the Job.
        let migrated = try Child.run(
            executable.path, ["state", "migrate", pipeline.path], stdout: folder.appendingPathComponent("migrate.txt").path)
        guard migrated.status == 0 else { throw BenchFailure("tourpack state migrate exited \(migrated.status)") }
        let output = folder.appendingPathComponent("Documents")
        let cpuBefore = cpuSeconds(RUSAGE_CHILDREN.rawValue)
        let started = ContinuousClock.now
        let pids = try (0..<workers).map { index in
            try Child.launch(
                executable.path,
                [
                    "build", pipeline.path, "--endpoint", "http://127.0.0.1:\(port)", "--json", "--output", output.path,
                    "--state", folder.appendingPathComponent("worker-\(index)").path,
                ] + (workers == 1 ? [] : ["--shards", String(workers), "--shard", String(index)]),
                stdout: folder.appendingPathComponent("events-\(index).ndjson").path,
                stderr: folder.appendingPathComponent("events-\(index).ndjson.err").path)
        }
        let statuses = try pids.map { try Child.wait($0).status }
        let wall = started.duration(to: .now).seconds
        let workersCPU = cpuSeconds(RUSAGE_CHILDREN.rawValue) - cpuBefore
        let results = statuses.enumerated().map { index, status in
            let events = (try? String(contentsOf: folder.appendingPathComponent("events-\(index).ndjson"), encoding: .utf8)) ?? ""
            let finished =
                events.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
                .last { $0["event"] as? String == "finished" } ?? [:]
            let errorText = (try? String(contentsOf: folder.appendingPathComponent("events-\(index).ndjson.err"), encoding: .utf8)) ?? ""
            return WorkerResult(
                status: status, wallSeconds: finished["wallSeconds"] as? Double ?? 0, toursBuilt: finished["toursBuilt"] as? Int ?? 0,
                requests: finished["requests"] as? Int ?? 0, charactersBilled: finished["charactersBilled"] as? Int ?? 0,
                error: String(errorText.suffix(400)))
        }
        return BuildResult(wallSeconds: wall, workersCPUSeconds: workersCPU, workers: results, pipeline: pipeline)
    }

    /// The build's own checks; the text says what held.
    static func verify(
        _ executable: URL, _ result: BuildResult, folder: URL, port: Int, served: Int, billed: Int, counted: Counted, tours: Int
    ) throws -> (passed: Bool, text: String) {
        var problems: [String] = []
        for (index, worker) in result.workers.enumerated() where worker.status != 0 {
            problems.append("worker \(index) exited \(worker.status): \(worker.error)")
        }
        let built = result.workers.reduce(0) { $0 + $1.toursBuilt }
        if built != tours { problems.append("\(built) of \(tours) tours built") }
        let requests = result.workers.reduce(0) { $0 + $1.requests }
        if served != counted.chunks || requests != served {
            problems.append("\(served) requests served, \(requests) sent, \(counted.chunks) chunks planned")
        }
        let charged = result.workers.reduce(0) { $0 + $1.charactersBilled }
        if charged != billed { problems.append("the workers billed \(charged) characters, serve-tts \(billed)") }

        // The ledger, as another machine sees it: a fresh local folder, the same database.
        let quotaFile = folder.appendingPathComponent("quota.json")
        let quota = try Child.run(
            executable.path,
            [
                "quota", result.pipeline.path, "--json", "--state", folder.appendingPathComponent("checker").path, "--endpoint",
                "http://127.0.0.1:\(port)",
            ], stdout: quotaFile.path)
        let object = (try? JSONSerialization.jsonObject(with: Data(contentsOf: quotaFile))) as? [String: Any]
        let standard = (object?["tiers"] as? [[String: Any]])?.first { $0["tier"] as? String == "standard" }
        let used = standard?["used"] as? Int ?? -1, reserved = standard?["reserved"] as? Int ?? -1
        if quota.status != 0 || used != billed || reserved != 0 {
            problems.append("quota exit \(quota.status): used \(used), reserved \(reserved), billed \(billed)")
        }

        let validate = try Child.run(
            executable.path, ["validate", folder.appendingPathComponent("Documents").path, "--strict"],
            stdout: folder.appendingPathComponent("validate.txt").path)
        if validate.status != 0 { problems.append("validate --strict exited \(validate.status)") }
        guard problems.isEmpty else { return (false, "FAIL: " + problems.joined(separator: "; ")) }
        return (
            true, "\(built) tours built, each chunk once (\(served) = planned), quota used = billed, 0 reserved, validate --strict ok: PASS"
        )
    }

    /// User plus system CPU seconds of this process (`RUSAGE_SELF`: serve-tts
    /// and its espeak-ng thread) or of its waited-for children (`RUSAGE_CHILDREN`).
    static func cpuSeconds(_ who: Int32) -> Double {
        var usage = rusage()
        getrusage(who, &usage)
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1_000_000
    }
}

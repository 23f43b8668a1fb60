import Foundation
import Testing
import TourpackCore
import TourpackKit
import TourpackTesting

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
@Suite(.serialized, .offThePool) struct FleetBuildTests {
    /// serve-tts holds every answer this long from its arrival. Each worker
    /// sends its whole shard at once (see `Fleet.concurrency`), so every
    /// request of the killed worker has reached the endpoint long before
    /// its first answer, hence before the kill; see the ledger check.
    static let latencyMilliseconds = 2000

    @Test func fourWorkersOneKilledAndRestartedPublishEveryTourOnceAndPayForEveryChunkOnce() throws {
        let database = try PostgresTestServer.shared().createDatabase()
        let moto = try MotoTestServer()
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
        let unchangedOnRestart = Self.packagedTours(restarted, writtenOnly: false).subtracting(
            Self.packagedTours(restarted, writtenOnly: true))
        for tour in fleet.tours {
            let published = records[tour.id] ?? 0
            #expect(published <= 1, "\(tour.name) was published \(published) times")
            #expect((events[tour.id] ?? 0) <= published, "\(tour.name): a tourPackaged event without its build record")
            if published == 0 {
                #expect(
                    tour.shard == Fleet.victim && unchangedOnRestart.contains(tour.id),
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
        #expect(
            ledger.used == billed && ledger.reserved == 0,
            "ledger \(ledger.used) used + \(ledger.reserved) reserved, endpoint billed \(billed); the victim had \(inFlight.sent) reservation(s) sent (\(inFlight.sentCharacters) characters) and \(inFlight.unsent) unsent at the kill"
        )

        // Each distinct chunk was requested once, but for what the victim
        // had in flight. Every narration is one chunk (checked here), so the
        // chunks are the tours' distinct narration texts.
        for (index, run) in zip(ranBy, round1) {
            let started = run.events.first { $0["event"] as? String == "started" }
            #expect(
                started?["chunks"] as? Int == started?["items"] as? Int,
                "worker \(index): one chunk per narration: \(String(describing: started))")
        }
        let requests = try #require(stats["synthesizeRequests"] as? Int)
        let distinct = try #require(stats["distinctTexts"] as? Int)
        let repeated = try #require(stats["repeatedRequests"] as? Int)
        #expect(stats["untrackedTexts"] as? Int == 0)
        #expect(distinct == fleet.distinctTexts.count, "every chunk was spoken: \(distinct) of \(fleet.distinctTexts.count) texts")
        #expect(requests == distinct + repeated)
        #expect(
            repeated <= inFlight.sent,
            "\(repeated) of \(requests) requests repeated a text already spoken; only the \(inFlight.sent) the victim had in flight at the kill may be asked for again"
        )

        // Round 2: the whole fleet again, warm. No request, nothing published.
        let before = try RootCheck.snapshot(fleet.output)
        let second = try (0..<Fleet.workers).map { try fleet.start($0, run: "second") }
        for (index, run) in second.enumerated() {
            #expect(run.finish() == 0, "worker \(index), second run: \(fleet.stderr(index, run: "second"))")
            let summary = run.events.last { $0["event"] as? String == "finished" }
            #expect(
                summary?["requests"] as? Int == 0 && summary?["toursBuilt"] as? Int == 0, "worker \(index): \(String(describing: summary))")
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
        Set(
            run.events.filter { event in
                event["event"] as? String == "tourPackaged" && (!writtenOnly || !((event["packages"] as? [Any])?.isEmpty ?? true))
            }.compactMap { $0["tourId"] as? String })
    }
}

import Foundation
import Testing
import TourpackCore
import TourpackKit
import TourpackServer
import TourpackState
import TourpackTesting

/// One count of billed characters: against an endpoint that cuts 30% of its
/// answers short (in the WAV, in the JSON, or on the wire with the
/// connection dropped mid-body) and garbles 10%, every 2xx answer is billed
/// once, and the endpoint, the summary, the ledger and the build record
/// read the same number, with nothing left reserved.
@Suite struct BillingAgreementTests {
    @Test func theEndpointTheSummaryTheLedgerAndTheRecordAgree() async throws {
        let folder = TemporaryFolder.path("billing")
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("tours"), withIntermediateDirectories: true)
        defer { TemporaryFolder.remove(folder) }
        let sentences = [
            "The road climbs in tight hairpins above the valley.", "On a clear day you can see the glacier to the west.",
            "Marmots often sit on the rocks near the parking area.", "The pass was first crossed by a paved road in 1935.",
            "Keep to the right and watch for cyclists on the descent.", "The hut ahead serves soup and strudel until dusk.",
        ]
        let pois = (0..<6).map { index in
            """
            {"id": "00000000-0000-4000-8000-00000000000\(index + 1)", "name": "Stop \(index + 1)", "location": {"latitude": \(46.5 + Double(index) * 0.01), "longitude": 10.4},
             "triggerRadiusMeters": 300, "narrations": {"approaching": "Stop \(index + 1). \(sentences[index])", "detailed": "\(sentences[(index + 1) % 6]) Number \(index + 1)."}}
            """
        }.joined(separator: ",\n")
        try """
        {"id": "00000000-0000-4000-9000-000000000002", "name": "Billing Road", "language": "en-US", "version": 1,
         "route": {"waypoints": [{"latitude": 46.5, "longitude": 10.39}, {"latitude": 46.56, "longitude": 10.41}]},
         "pois": [\(pois)]}
        """.write(to: folder.appendingPathComponent("tours/road.json"), atomically: true, encoding: .utf8)

        let faults = FaultInjection(truncateRate: 0.3, garbageRate: 0.1, seed: 0x5EED_B111)
        try await withServer(faults: faults) { port, server in
            try """
            version: 1
            tours: ["tours/*.json"]
            formats: [aac]
            tts: {api: google, endpoint: "http://127.0.0.1:\(port)", concurrency: 4, requestsPerMinute: 100000,
                  maxAttempts: 20, initialBackoffMs: 1, maxBackoffMs: 5}
            output: Documents
            state: state
            """.write(to: folder.appendingPathComponent("pipeline.yaml"), atomically: true, encoding: .utf8)
            let config = try PipelineLoader.load(folder.appendingPathComponent("pipeline.yaml"), workingDirectory: folder)
            let tours = try TourLoader().loadAll(globs: config.tourGlobs, relativeTo: folder)
            let plan = try Planner(config: config).plan(tours)
            let synthesizer = try HTTPSpeechSynthesizer(settings: config.tts, apiKey: nil)
            let account = QuotaAccount(endpoint: config.tts.endpoint, apiKey: nil)
            var options = Builder.Options()
            options.account = account
            let summary = try await Builder(config: config, synthesizer: synthesizer, options: options).build(plan) { _ in }

            #expect(summary.exitCode == 0, "\(summary.failures) \(summary.stoppedEarly ?? "")")
            let endpoint = server.stats.snapshot
            #expect(endpoint.totalFaults > 0 && summary.retries > 0, "the faults must have happened: \(endpoint.faultsInjected)")
            #expect((endpoint.faultsInjected["truncated"] ?? 0) > 0)
            #expect(summary.charactersBilled > plan.characters, "retried 2xx answers are billed again")
            #expect(summary.charactersBilled == endpoint.characters, "summary \(summary.charactersBilled), endpoint \(endpoint.characters)")

            let state = try #require(try BuildState.existing(config: config, account: account))
            let usage = try state.ledger.usage(of: config.voice.tier)
            #expect(usage.used == endpoint.characters && usage.reserved == 0, "ledger \(usage), endpoint \(endpoint.characters)")
            let record = try #require(try state.records.recent(limit: 1).first)
            #expect(record.characters == endpoint.characters, "build record \(record.characters), endpoint \(endpoint.characters)")
        }
    }
}

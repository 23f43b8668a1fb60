import Foundation
import Testing
import TourpackClient
import TourpackTesting

/// A tour built and published for real (serve-tts's voice, AAC), downloaded
/// through the app's library over a link held to 1 MB/s, as at a trailhead
/// with one bar of signal: its first narration plays long before the
/// download ends, and is the file the signed package.json names.
@Suite(.serialized, .offThePool) struct PlayWhileDownloadingTests {
    /// Ten POIs, three narrations each (a short approach, two longer ones).
    static func tenPOITour(_ workspace: BuildWorkspace) throws -> [String] {
        let pois = (0..<10).map { String(format: "6f2d1c3e-8a41-4b7e-9c55-1d2e3f4a%04x", 0x6000 + $0) }
        let sentence = "The valley opens to the north, and the river turns below the old stone bridge."
        let text = Array(repeating: sentence, count: 4).joined(separator: " ")
        let tour = BuildWorkspace.tour(
            id: BuildWorkspace.alpsID, name: "Ten Stops",
            pois: pois.enumerated().map { index, poi in
                (poi, "Stop \(index + 1)", ["approaching": "Stop \(index + 1) is ahead.", "detailed": text, "guidedTour": text])
            })
        try FileManager.default.removeItem(at: workspace.root.appendingPathComponent("tours/lakes.json"))
        try tour.write(to: workspace.root.appendingPathComponent("tours/alps.json"), atomically: true, encoding: .utf8)
        return pois
    }

    static func sha256(_ url: URL) throws -> String {
        SiteFixture.sha256(try Data(contentsOf: url))
    }

    @Test func theFirstNarrationPlaysWithinATenthOfTheDownloadOnA1MBpsLink() async throws {
        let workspace = try BuildWorkspace()
        let pois = try Self.tenPOITour(workspace)
        let key = try SigningPair.generate()
        try workspace.setPublish(PublishSection.folder())
        let voice = try LocalVoiceServer()
        defer { voice.stop() }
        let built = try workspace.build(voice)
        try #require(built.status == 0, "\(built.stderr)")
        let published = try workspace.publish(environment: key.environment)
        try #require(published.status == 0, "\(published.stderr)")
        let (_, manifest) = try #require(try workspace.localPackages().first?.value)
        let audio = try #require(manifest["audio"] as? [[String: Any]])
        let first = try #require(audio.first { $0["poiId"] as? String == pois[0] && $0["phase"] as? String == "approaching" })
        let firstSHA = try #require(first["sha256"] as? String)

        let server = try SiteServer(root: workspace.site)
        defer { server.stop() }
        server.inject { _, _, _, _ in .link(bytesPerSecond: 1_000_000) }
        let device = workspace.root.appendingPathComponent("Device")
        let library = OfflineLibrary(
            documents: device, site: try #require(URL(string: server.base)), trust: try .publicKey(base64: key.publicKey))
        let tour = try #require(UUID(uuidString: BuildWorkspace.alpsID))
        let firstPOI = try #require(UUID(uuidString: pois[0]))
        _ = try await library.refreshCatalog()

        // Streaming before any download: the site's blob, as curl fetches it, is the package.json's file.
        let remote = try await library.remoteAudioURL(tourId: tour, poiId: firstPOI, phase: .approaching)
        let fetched = workspace.root.appendingPathComponent("streamed")
        let curl = try Tool.run("curl", ["-sS", "--fail", "-o", fetched.path, remote.absoluteString])
        #expect(curl.status == 0, "\(curl.stderr)")
        #expect(try Self.sha256(fetched) == firstSHA, "\(remote)")

        let started = ContinuousClock.now
        let download = Task {
            var last: DownloadJob?
            for try await job in library.download(tourId: tour) { last = job }
            return (ContinuousClock.now, last)
        }
        var playable: Duration?
        while playable == nil {
            if let url = await library.audioFile(tourId: tour, poiId: firstPOI, phase: .approaching) {
                playable = started.duration(to: .now)
                #expect(try Self.sha256(url) == firstSHA, "the first narration is not the package.json's file")
            }
            try await Task.sleep(for: .milliseconds(50))
            if playable == nil, started.duration(to: .now) > .seconds(120) { break }
        }
        let (ended, last) = try await download.value
        #expect(last?.status == .completed)
        #expect(last?.playable.contains(NarrationID(poiId: firstPOI, phase: .approaching)) == true, "\(String(describing: last))")
        let whole = started.duration(to: ended)
        let firstPlayable = try #require(playable, "the first narration never became playable")
        let share = firstPlayable / whole
        print(
            "PlayWhileDownloadingTests: first narration playable after \(firstPlayable) of a \(whole) download at 1 MB/s (\(Int(share * 100))%)"
        )
        #expect(share <= 0.10, "first narration after \(firstPlayable) of \(whole)")

        // Every file the package names is there, right; and `validate` passes on the device's Documents.
        for entry in audio {
            let path = try #require(entry["path"] as? String)
            #expect(try Self.sha256(device.appendingPathComponent(path)) == entry["sha256"] as? String, "\(path)")
        }
        let validated = try Executable.run(["validate", device.path])
        #expect(validated.status == 0, "\(validated.stdout)\n\(validated.stderr)")
    }
}

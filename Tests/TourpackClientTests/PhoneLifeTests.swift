import Foundation
import Testing
import TourpackClient
import TourpackClientTesting
import TourpackTesting

/// The library as a phone lives it, through the public API and a network
/// set by hand (`ManualNetworkMonitor`): Wi-Fi only by default, a network
/// that comes and goes, a queue that outlives the process, failures that
/// are kept, and states that never wait on the network.
@Suite(.offThePool) struct PhoneLifeTests {
    static func library(
        _ fixture: SiteFixture, _ server: SiteServer, network: ManualNetworkMonitor, policy: DownloadPolicy = DownloadPolicy()
    ) throws -> OfflineLibrary {
        OfflineLibrary(
            documents: fixture.documents(), site: URL(string: server.base)!, trust: try .publicKey(base64: fixture.publicKeyBase64),
            policy: policy, network: network)
    }

    static func blobRequests(_ server: SiteServer) -> Int { server.requests.filter { $0.path.hasPrefix("/blobs/") }.count }

    /// Waits (up to 20 s) until the tour's state passes `check`.
    static func until(_ library: OfflineLibrary, _ tour: UUID, _ check: (PackState) -> Bool) async throws -> PackState {
        var state = await library.state(of: tour)
        for _ in 0..<400 where !check(state) {
            try await Task.sleep(for: .milliseconds(50))
            state = await library.state(of: tour)
        }
        return state
    }

    @Test func onCellularADownloadWaitsForWiFiAndStartsByItselfOnWiFi() async throws {
        let (fixture, server, lakes) = try await OfflineLibraryTests.served {
            try $0.addTour(name: "Lakes", formats: [.opus], files: 3, bytes: 20_000)[0]
        }
        defer { server.stop() }
        let network = ManualNetworkMonitor(.cellular)
        let library = try Self.library(fixture, server, network: network)
        let tour = OfflineLibraryTests.tourId(lakes)
        // The catalogue may be read on cellular: it is small and conditional.
        _ = try await library.refreshCatalog()
        let updates = library.jobs
        let observed = Task {
            var seen: [DownloadJob.Status] = []
            for await job in updates where job.tourId == tour {
                seen.append(job.status)
                if job.status == .completed { break }
            }
            return seen
        }
        let stream = library.download(tourId: tour)
        let state = try await Self.until(library, tour) { if case .waiting = $0 { return true } else { return false } }
        guard case .waiting(let job, let reason) = state else { Issue.record("not waiting: \(state)"); return }
        #expect(reason == .forWiFi && job.waitReason == .forWiFi && job.status == .waiting)
        try await Task.sleep(for: .milliseconds(300))
        #expect(Self.blobRequests(server) == 0, "a download fetched a blob on cellular")

        // Wi-Fi: it starts by itself; the app makes no new call.
        network.path = .wifi
        var last: DownloadJob?
        for try await job in stream { last = job }
        #expect(last?.status == .completed)
        guard case .downloaded = await library.state(of: tour) else { Issue.record("not downloaded on Wi-Fi"); return }
        let statuses = await observed.value
        #expect(statuses.contains(.waiting) && statuses.last == .completed, "\(statuses)")
    }

    @Test func downloadAnywayUsesCellularAndAPolicyChangeStopsIt() async throws {
        let (fixture, server, tours) = try await OfflineLibraryTests.served { fixture in
            try ["A", "B"].map { try fixture.addTour(name: $0, formats: [.opus], files: 3, bytes: 200_000)[0] }
        }
        defer { server.stop() }
        let network = ManualNetworkMonitor(.cellular)
        let library = try Self.library(fixture, server, network: network)
        _ = try await library.refreshCatalog()
        // "Download anyway": this download alone may use cellular.
        var last: DownloadJob?
        for try await job in library.download(tourId: OfflineLibraryTests.tourId(tours[0]), allowsCellular: true) { last = job }
        #expect(last?.status == .completed)

        // With the policy allowing cellular, a slow download runs; turning it off stops it for Wi-Fi.
        server.inject { _, _, path, _ in path.hasPrefix("/blobs/") ? .throttle(bytesPerSecond: 100_000) : nil }
        await library.update(policy: DownloadPolicy(allowsCellular: true))
        let b = OfflineLibraryTests.tourId(tours[1])
        let stream = library.download(tourId: b)
        _ = try await Self.until(library, b) { if case .downloading = $0 { return true } else { return false } }
        await library.update(policy: DownloadPolicy(allowsCellular: false))
        let state = try await Self.until(library, b) { if case .waiting = $0 { return true } else { return false } }
        guard case .waiting(_, reason: .forWiFi) = state else { Issue.record("not waiting for Wi-Fi: \(state)"); return }
        server.inject { _, _, _, _ in nil }
        network.path = .wifi
        var end: DownloadJob?
        for try await job in stream { end = job }
        #expect(end?.status == .completed)
    }

    @Test func aNetworkLostMidDownloadIsWaitedForAndResumedFromTheLastByte() async throws {
        let (fixture, server, alps) = try await OfflineLibraryTests.served {
            try $0.addTour(name: "Alps", formats: [.aac], files: 4, bytes: 300_000)[0]
        }
        defer { server.stop() }
        let network = ManualNetworkMonitor(.wifi)
        let library = try Self.library(fixture, server, network: network, policy: DownloadPolicy(maximumAttempts: 1))
        let tour = OfflineLibraryTests.tourId(alps)
        _ = try await library.refreshCatalog()
        server.resetLog()
        server.inject { _, _, path, _ in path.hasPrefix("/blobs/") ? .throttle(bytesPerSecond: 600_000) : nil }
        let stream = library.download(tourId: tour)
        for lost in 1...1 {
            let before = server.bodyBytesDelivered
            for _ in 0..<200 where server.bodyBytesDelivered < before + 150_000 { try await Task.sleep(for: .milliseconds(10)) }
            network.path = .unsatisfied
            let state = try await Self.until(library, tour) { if case .waiting = $0 { return true } else { return false } }
            guard case .waiting(_, reason: .forNetwork) = state else {
                Issue.record("loss \(lost): not waiting for a network: \(state)"); return
            }
            let stopped = server.bodyBytesDelivered
            try await Task.sleep(for: .milliseconds(300))
            #expect(server.bodyBytesDelivered - stopped < 40_000, "loss \(lost): bytes kept coming with no network")
            network.path = .wifi
        }
        var last: DownloadJob?
        for try await job in stream { last = job }
        #expect(last?.status == .completed)
        let whole = try fixture.payloadBytes(of: alps)
        let fetched = server.bodyBytesDelivered
        #expect(Double(fetched) <= 1.05 * Double(whole), "fetched \(fetched) bytes for a package of \(whole)")
    }

    @Test func aBlobThatStays404IsKeptAsFailedWithWhatToDo() async throws {
        let (fixture, server, lakes) = try await OfflineLibraryTests.served {
            try $0.addTour(name: "Lakes", formats: [.opus], files: 2, bytes: 10_000)[0]
        }
        defer { server.stop() }
        let network = ManualNetworkMonitor(.wifi)
        let library = try Self.library(fixture, server, network: network)
        let tour = OfflineLibraryTests.tourId(lakes)
        _ = try await library.refreshCatalog()
        server.inject { _, _, path, _ in path.hasPrefix("/blobs/") ? .status(404) : nil }
        do {
            for try await _ in library.download(tourId: tour) {}
            Issue.record("a download with a missing blob completed")
        } catch let error as OfflineError {
            #expect(error.recoverySuggestion?.isEmpty == false)
            #expect(!error.message.contains(" --"), "\(error)")
        }
        let state = await library.state(of: tour)
        guard case .failed(let job, let error) = state else { Issue.record("not failed: \(state)"); return }
        #expect(job.status == .failed && error.errorDescription?.isEmpty == false)

        // Kept across a relaunch, until dismissed.
        let relaunched = try Self.library(fixture, server, network: network)
        guard case .failed = await relaunched.state(of: tour) else { Issue.record("the failure was forgotten on relaunch"); return }
        await relaunched.dismissFailure(tourId: tour)
        guard case .notDownloaded = await relaunched.state(of: tour) else { Issue.record("not dismissed"); return }
    }

    @Test func theQueueOutlivesTheLibraryAndResumeDownloadsContinuesIt() async throws {
        let (fixture, server, tours) = try await OfflineLibraryTests.served { fixture in
            try ["A", "B"].map { try fixture.addTour(name: $0, formats: [.opus], files: 2, bytes: 20_000)[0] }
        }
        defer { server.stop() }
        let network = ManualNetworkMonitor(.unsatisfied)
        let ids = tours.map(OfflineLibraryTests.tourId)
        do {
            let library = try Self.library(fixture, server, network: ManualNetworkMonitor(.wifi))
            _ = try await library.refreshCatalog()
        }
        let first = try Self.library(fixture, server, network: network)
        for id in ids { _ = first.download(tourId: id, format: .opus) }
        for id in ids {
            let state = try await Self.until(first, id) { if case .waiting = $0 { return true } else { return false } }
            guard case .waiting(_, reason: .forNetwork) = state else { Issue.record("\(id) not waiting: \(state)"); return }
        }
        // The app is killed; a new process's library finds both.
        let second = try Self.library(fixture, server, network: ManualNetworkMonitor(.wifi))
        guard case .queued = await second.state(of: ids[0]) else { Issue.record("the queue was not restored"); return }
        #expect(Set(await second.resumeDownloads()) == Set(ids))
        for id in ids {
            let state = try await Self.until(second, id) { if case .downloaded = $0 { return true } else { return false } }
            guard case .downloaded = state else { Issue.record("\(id) not downloaded after resumeDownloads: \(state)"); return }
        }
    }

    /// A process killed after its download's commit, before the record left
    /// queue.json: the next process resumes it, finds the package installed,
    /// and the download it follows ends completed, not as a second ask.
    @Test func aQueuedDownloadWhosePackageAKilledProcessCommittedEndsCompleted() async throws {
        let (fixture, server, package) = try await OfflineLibraryTests.served {
            try $0.addTour(name: "Lakes", formats: [.opus], files: 2, bytes: 20_000)[0]
        }
        defer { server.stop() }
        let tour = OfflineLibraryTests.tourId(package)
        let queue = fixture.documents().appendingPathComponent(".tourpack-install/queue.json")
        let network = ManualNetworkMonitor(.unsatisfied)
        let first = try Self.library(fixture, server, network: network)
        let stream = first.download(tourId: tour, format: .opus)
        _ = try await Self.until(first, tour) { if case .waiting = $0 { return true } else { return false } }
        var kept = try Data(contentsOf: queue)
        for _ in 0..<100 where !String(decoding: kept, as: UTF8.self).lowercased().contains(tour.uuidString.lowercased()) {
            try await Task.sleep(for: .milliseconds(20))
            kept = try Data(contentsOf: queue)
        }
        network.path = .wifi
        for try await _ in stream {}
        // What a kill between the commit and the record's removal leaves.
        try kept.write(to: queue)
        let fetched = Self.blobRequests(server)

        let second = try Self.library(fixture, server, network: ManualNetworkMonitor(.wifi))
        guard case .queued = await second.state(of: tour) else { Issue.record("the kept record was not restored"); return }
        #expect(await second.resumeDownloads() == [tour])
        var last: DownloadJob?
        for try await job in second.download(tourId: tour) { last = job }
        #expect(last?.status == .completed)
        guard case .downloaded = await second.state(of: tour) else { Issue.record("not downloaded"); return }
        #expect(Self.blobRequests(server) == fetched, "the installed package was fetched again")
        // Asked for again in this process, it is a second ask.
        do {
            for try await _ in second.download(tourId: tour) {}
            Issue.record("a second ask for an installed package was not refused")
        } catch let error as OfflineError {
            #expect(error.kind == .alreadyDownloaded)
        }
    }

    /// The POIs the app asked for first stay with its queued download
    /// through a relaunch: the next process fetches them first.
    @Test func prioritizedPOIsAreKeptAcrossARelaunch() async throws {
        let (fixture, server, package) = try await OfflineLibraryTests.served {
            // Narrations of 140 kB or more: large enough that the first goes alone.
            try $0.addTour(name: "Coast", formats: [.opus], files: 10, bytes: 140_000)[0]
        }
        defer { server.stop() }
        let tour = OfflineLibraryTests.tourId(package)
        let narrations = EarlyPlayTests.narrations(package)
        do {
            let library = try Self.library(fixture, server, network: ManualNetworkMonitor(.wifi))
            _ = try await library.refreshCatalog()
        }
        let first = try Self.library(fixture, server, network: ManualNetworkMonitor(.unsatisfied))
        _ = first.download(tourId: tour, format: .opus)
        _ = try await Self.until(first, tour) { if case .waiting = $0 { return true } else { return false } }
        await first.prioritize(tourId: tour, poiIds: [narrations[8].poi])
        // The choice reaches queue.json within a moment (it is posted, not waited for).
        let queue = fixture.documents().appendingPathComponent(".tourpack-install/queue.json")
        for _ in 0..<100 {
            if let text = try? String(contentsOf: queue, encoding: .utf8), text.contains(narrations[8].poi.uuidString.lowercased()) {
                break
            }
            try await Task.sleep(for: .milliseconds(20))
        }

        // The app is killed; the next process resumes the download, the ninth POI first.
        server.inject { _, _, path, _ in path.hasPrefix("/blobs/") ? .link(bytesPerSecond: 1_000_000) : nil }
        server.resetLog()
        let relaunched = try Self.library(fixture, server, network: ManualNetworkMonitor(.wifi))
        #expect(await relaunched.resumeDownloads() == [tour])
        let state = try await Self.until(relaunched, tour) { if case .downloaded = $0 { return true } else { return false } }
        guard case .downloaded = state else { Issue.record("not downloaded after the relaunch: \(state)"); return }
        let blobs = server.requests.filter { $0.path.hasPrefix("/blobs/") }.map { String($0.path.split(separator: "/").last ?? "") }
        #expect(blobs.first == narrations[8].sha256, "the relaunched download began with \(blobs.prefix(3)), not the ninth POI's narration")
    }

    /// queue.json grows by a line per change (no new file each time), is
    /// written anew past its bound, and reads past a last line a kill cut
    /// short, and from the whole-file form an earlier version wrote.
    @Test func theQueueIsAppendedAndReadsPastACutLineAndAnEarlierVersionsFile() async throws {
        let (fixture, server, tours) = try await OfflineLibraryTests.served { fixture in
            try ["A", "B", "C"].map { try fixture.addTour(name: $0, formats: [.opus], files: 1, bytes: 2_000)[0] }
        }
        defer { server.stop() }
        let ids = tours.map(OfflineLibraryTests.tourId)
        do {
            let library = try Self.library(fixture, server, network: ManualNetworkMonitor(.wifi))
            _ = try await library.refreshCatalog()
        }
        let queue = fixture.documents().appendingPathComponent(".tourpack-install/queue.json")
        func file() throws -> (inode: Int, size: Int, lines: [Data]) {
            let attributes = try FileManager.default.attributesOfItem(atPath: queue.path)
            let data = try Data(contentsOf: queue)
            return (
                (attributes[.systemFileNumber] as? Int) ?? -1, (attributes[.size] as? Int) ?? -1,
                data.split(separator: UInt8(ascii: "\n")).map { Data($0) }
            )
        }
        func states(_ library: OfflineLibrary) async -> [String] {
            var names: [String] = []
            for id in ids {
                switch await library.state(of: id) {
                case .paused: names.append("paused")
                case .queued, .waiting: names.append("queued")
                case let other: names.append("\(other)")
                }
            }
            return names
        }

        let first = try Self.library(fixture, server, network: ManualNetworkMonitor(.unsatisfied))
        for id in ids { _ = first.download(tourId: id, format: .opus) }
        for id in ids { _ = try await Self.until(first, id) { if case .waiting = $0 { return true } else { return false } } }
        await first.pauseDownload(tourId: ids[0])
        let before = try file()
        await first.pauseDownload(tourId: ids[1])
        let after = try file()
        #expect(after.inode == before.inode, "a change made a new file")
        #expect(after.size > before.size && after.lines.count == before.lines.count + 1, "\(before.size) → \(after.size) bytes")

        // A kill cut the last write short: the line before it is the queue.
        let whole = try #require(after.lines.last)
        let handle = try FileHandle(forWritingTo: queue)
        try handle.seekToEnd()
        try handle.write(contentsOf: whole.prefix(whole.count / 2))
        try handle.close()
        let relaunched = try Self.library(fixture, server, network: ManualNetworkMonitor(.unsatisfied))
        #expect(await states(relaunched) == ["paused", "paused", "queued"])
        #expect(!FileManager.default.fileExists(atPath: queue.path + ".damaged"))

        // A file this library did not write is written anew at its first change.
        await relaunched.resumeDownload(tourId: ids[1])
        let rewritten = try file()
        #expect(rewritten.inode != after.inode && rewritten.lines.count == 1, "\(rewritten.lines.count) lines")

        // Past the bound, the file is written anew with its last line alone.
        let changes = 64 * 1024 / whole.count + 20
        for _ in 0..<changes / 2 {
            await relaunched.pauseDownload(tourId: ids[2])
            await relaunched.resumeDownload(tourId: ids[2])
        }
        let bounded = try file()
        #expect(
            bounded.size <= 64 * 1024 && bounded.lines.count < changes,
            "\(bounded.size) bytes in \(bounded.lines.count) lines after \(changes) changes")
        #expect(await states(relaunched) == ["paused", "queued", "queued"])

        // An earlier version wrote the queue as one pretty-printed document.
        let object = try JSONSerialization.jsonObject(with: try #require(bounded.lines.last))
        try JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys]).write(to: queue)
        let upgraded = try Self.library(fixture, server, network: ManualNetworkMonitor(.unsatisfied))
        #expect(await states(upgraded) == ["paused", "queued", "queued"])
    }

    @Test func statesReadTheDeviceAloneAndADeleteGoesOnBesideADownload() async throws {
        let (fixture, server, tours) = try await OfflineLibraryTests.served { fixture in
            try ["A", "B"].map { try fixture.addTour(name: $0, formats: [.opus], files: 3, bytes: 200_000)[0] }
        }
        defer { server.stop() }
        let network = ManualNetworkMonitor(.wifi)
        let library = try Self.library(fixture, server, network: network)
        let (a, b) = (OfflineLibraryTests.tourId(tours[0]), OfflineLibraryTests.tourId(tours[1]))
        _ = try await library.refreshCatalog()
        for try await _ in library.download(tourId: a) {}
        // Every state from the device: not one request.
        server.resetLog()
        for _ in 0..<50 {
            _ = await library.state(of: a)
            _ = await library.state(of: b)
        }
        #expect(server.requests.isEmpty, "state(of:) asked the site: \(server.requests.map(\.path))")

        // Tour A is deleted while tour B downloads.
        server.inject { _, _, path, _ in path.hasPrefix("/blobs/") ? .throttle(bytesPerSecond: 200_000) : nil }
        let stream = library.download(tourId: b)
        _ = try await Self.until(library, b) { if case .downloading = $0 { return true } else { return false } }
        try await library.delete(tourId: a)
        guard case .notDownloaded = await library.state(of: a) else { Issue.record("A not deleted"); return }
        server.inject { _, _, _, _ in nil }
        var last: DownloadJob?
        for try await job in stream { last = job }
        #expect(last?.status == .completed)
    }

    @Test func aPausedDownloadResumesFromTheLastByte() async throws {
        let (fixture, server, alps) = try await OfflineLibraryTests.served {
            try $0.addTour(name: "Alps", formats: [.aac], files: 2, bytes: 400_000)[0]
        }
        defer { server.stop() }
        let library = try Self.library(fixture, server, network: ManualNetworkMonitor(.wifi))
        let tour = OfflineLibraryTests.tourId(alps)
        _ = try await library.refreshCatalog()
        server.resetLog()
        server.inject { _, _, path, _ in path.hasPrefix("/blobs/") ? .throttle(bytesPerSecond: 500_000) : nil }
        let stream = library.download(tourId: tour)
        for _ in 0..<300 where server.bodyBytesDelivered < 200_000 { try await Task.sleep(for: .milliseconds(10)) }
        await library.pauseDownload(tourId: tour)
        guard case .paused = await library.state(of: tour) else { Issue.record("not paused"); return }
        let paused = server.bodyBytesDelivered
        try await Task.sleep(for: .milliseconds(300))
        #expect(server.bodyBytesDelivered - paused < 40_000, "a paused download kept fetching")
        await library.resumeDownload(tourId: tour)
        var last: DownloadJob?
        for try await job in stream { last = job }
        #expect(last?.status == .completed)
        #expect(Double(server.bodyBytesDelivered) <= 1.05 * Double(try fixture.payloadBytes(of: alps)))
    }
}

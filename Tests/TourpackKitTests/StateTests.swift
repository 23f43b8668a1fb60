import Dispatch
import Foundation
import GRDB
import Testing
@testable import TourpackKit

/// A clock that moves only when told: expiry, LRU order and the ledger's
/// month without a single sleep.
final class ManualClock: @unchecked Sendable {
    private let lock = NSLock()
    private var current: Date

    init(_ start: String = "2026-11-20T12:00:00Z") { current = PackageManifest.parseTimestamp(start)! }

    var now: @Sendable () -> Date { { [self] in lock.withLock { current } } }
    func advance(days: Double = 0, seconds: Double = 0) { lock.withLock { current += days * 86_400 + seconds } }
}

/// A state folder that is removed afterwards.
struct StateScratch {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("tourpack-state-\(UUID().uuidString)")
    var state: URL { root.appendingPathComponent("state") }
    var output: URL { root.appendingPathComponent("Documents") }
    func remove() { try? FileManager.default.removeItem(at: root) }
}

@Suite struct StateDatabaseTests {
    @Test func opensInWALModeWithTheMigrationsApplied() throws {
        let scratch = StateScratch()
        defer { scratch.remove() }
        let database = try StateDatabase(folder: scratch.state)
        #expect(try database.read { db in try String.fetchOne(db, sql: "PRAGMA journal_mode") } == "wal")
        #expect(try database.appliedMigrations() == ["v1 caches, ledger and build records", "v2 indexes for build records", "v3 map tile cache and tile packs", "v4 chunk shapes", "v5 sent reservations", "v6 loudness"])
        // Opening again migrates nothing and keeps the data.
        try database.write { db in try db.execute(sql: "INSERT INTO quotaUsage (account, month, tier, used) VALUES ('a', '2026-11', 'standard', 5)") }
        let again = try StateDatabase(folder: scratch.state)
        #expect(try again.read { db in try Int.fetchOne(db, sql: "SELECT used FROM quotaUsage") } == 5)
    }

    /// Jobs that start together on a new state folder: one creates and
    /// migrates the database, the others wait their turn, none fails.
    @Test func manyOpeningANewDatabaseAtOnceAllSucceed() throws {
        let scratch = StateScratch()
        defer { scratch.remove() }
        let failures = NSLock()
        nonisolated(unsafe) var errors: [String] = []
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            do { _ = try StateDatabase(folder: scratch.state) } catch { failures.withLock { errors.append("\(error)") } }
        }
        #expect(errors.isEmpty, "\(errors)")
        #expect(try StateDatabase(folder: scratch.state).appliedMigrations().count == StateDatabase.migrator.migrations.count)
    }

    @Test func aDatabaseFromANewerTourpackIsRefusedNotGuessedAt() throws {
        let scratch = StateScratch()
        defer { scratch.remove() }
        let database = try StateDatabase(folder: scratch.state)
        try database.write { db in try db.execute(sql: "INSERT INTO grdb_migrations (identifier) VALUES ('v9 from the future')") }
        #expect {
            _ = try StateDatabase(folder: scratch.state)
        } throws: { error in
            guard let error = error as? TourpackError, error.kind == .stateFailed, let path = error.context.path else { return false }
            return path.hasSuffix("state.sqlite") && error.message.contains("newer")
        }
    }
}

@Suite struct QuotaLedgerTests {
    static func ledger(_ scratch: StateScratch, clock: ManualClock, standard: Int = 1000, key: String? = "k-123") throws -> QuotaLedger {
        let budgets = Budgets(monthlyCharacters: [.standard: standard, .wavenet: 50])
        return QuotaLedger(
            database: try StateDatabase(folder: scratch.state), account: QuotaAccount(endpoint: "http://tts.test", apiKey: key),
            budgets: budgets, clock: clock.now)
    }

    @Test func reserveSettleAndReleaseMoveTheNumbers() throws {
        let scratch = StateScratch()
        defer { scratch.remove() }
        let ledger = try Self.ledger(scratch, clock: ManualClock())
        let first = try ledger.reserve(300, tier: .standard)
        let second = try ledger.reserve(200, tier: .standard)
        #expect(try ledger.usage(of: .standard) == TierUsage(tier: .standard, used: 0, reserved: 500, limit: 1000))
        try ledger.settle(first)
        try ledger.release(second)
        let usage = try ledger.usage(of: .standard)
        #expect(usage.used == 300 && usage.reserved == 0 && usage.left == 700)
    }

    @Test func aReservationPastTheLimitIsRefusedWithTheNumbersAndLeavesNothing() throws {
        let scratch = StateScratch()
        defer { scratch.remove() }
        let ledger = try Self.ledger(scratch, clock: ManualClock())
        try ledger.settle(try ledger.reserve(900, tier: .standard))
        let pending = try ledger.reserve(60, tier: .standard)
        #expect {
            _ = try ledger.reserve(41, tier: .standard)
        } throws: { error in
            guard let error = error as? TourpackError, error.kind == .budgetExceeded else { return false }
            let message = error.message
            return error.exitCode == 3 && message.contains("standard") && message.contains("2026-11")
                && message.contains("41") && message.contains("900 used") && message.contains("60 reserved") && message.contains("1,000")
        }
        #expect(try ledger.usage(of: .standard).reserved == 60)
        _ = try ledger.reserve(40, tier: .standard)  // exactly to the limit is fine
        try ledger.release(pending)
    }

    @Test func theLocalTierIsCountedButNeverRefused() throws {
        let scratch = StateScratch()
        defer { scratch.remove() }
        let ledger = try Self.ledger(scratch, clock: ManualClock())
        try ledger.settle(try ledger.reserve(50_000_000, tier: .local))
        let usage = try ledger.usage(of: .local)
        #expect(usage.used == 50_000_000 && usage.limit == nil && usage.left == nil)
    }

    @Test func monthsAreCalendarMonthsInUTC() throws {
        let scratch = StateScratch()
        defer { scratch.remove() }
        let clock = ManualClock("2026-11-30T23:59:00Z")
        let ledger = try Self.ledger(scratch, clock: clock)
        try ledger.settle(try ledger.reserve(1000, tier: .standard))
        #expect(throws: TourpackError.self) { _ = try ledger.reserve(1, tier: .standard) }
        clock.advance(seconds: 60)
        #expect(ledger.currentMonth == "2026-12")
        #expect(try ledger.usage(of: .standard).used == 0)
        _ = try ledger.reserve(1000, tier: .standard)
    }

    @Test func theAccountIsTheEndpointAndAFingerprintNeverTheKey() {
        let key = "test-secret-key-0123456789"
        let account = QuotaAccount(endpoint: "https://user:pw@texttospeech.googleapis.com/?key=\(key)", apiKey: key)
        #expect(!account.id.contains(key) && !account.id.contains("secret") && !account.id.contains("pw"))
        #expect(account.id.hasPrefix("https://texttospeech.googleapis.com/#"))
        #expect(account == QuotaAccount(endpoint: "https://texttospeech.googleapis.com/", apiKey: key))
        #expect(account != QuotaAccount(endpoint: "https://texttospeech.googleapis.com/", apiKey: key + "x"))
        #expect(QuotaAccount(endpoint: "http://127.0.0.1:8787", apiKey: nil).id == "http://127.0.0.1:8787#no-key")
    }

    /// Two connections (as two processes have) hammer one month: the
    /// IMMEDIATE transactions never let them pass the limit together.
    @Test func twoConnectionsReservingAtOnceNeverPassTheLimit() throws {
        let scratch = StateScratch()
        defer { scratch.remove() }
        let clock = ManualClock()
        let ledgers = [try Self.ledger(scratch, clock: clock, standard: 300), try Self.ledger(scratch, clock: clock, standard: 300)]
        let granted = NSLock()
        nonisolated(unsafe) var total = 0
        DispatchQueue.concurrentPerform(iterations: 120) { index in
            guard let reservation = try? ledgers[index % 2].reserve(7, tier: .standard) else { return }
            try? ledgers[index % 2].settle(reservation)
            granted.withLock { total += 7 }
        }
        #expect(total == 294, "42 reservations of 7 fit in 300")
        #expect(try ledgers[0].usage(of: .standard).used == 294)
    }

    @Test func staleReservationsAreReleasedDeadOwnersAtOnceOthersAfterTheTimeout() throws {
        let scratch = StateScratch()
        defer { scratch.remove() }
        let clock = ManualClock()
        var ledger = try Self.ledger(scratch, clock: clock)
        let live = try ledger.reserve(100, tier: .standard)
        // A process of this host that is gone: no such PID.
        ledger.owner = ProcessOwner(host: ProcessOwner.current.host, pid: 999_999_999, startTicks: 1)
        _ = try ledger.reserve(200, tier: .standard)
        // A process on another host: cannot be checked, so only its age counts.
        ledger.owner = ProcessOwner(host: "elsewhere.example", pid: 42, startTicks: 7)
        _ = try ledger.reserve(300, tier: .standard)

        #expect(try ledger.reconcile() == QuotaLedger.Reconciliation(released: 1, releasedCharacters: 200))
        #expect(try ledger.usage(of: .standard).reserved == 400)
        clock.advance(seconds: ledger.staleAfter + 1)
        // The other host's is too old now; this process's own is as old, but it is alive here, so it stays.
        #expect(try ledger.reconcile() == QuotaLedger.Reconciliation(released: 1, releasedCharacters: 300))
        #expect(try ledger.usage(of: .standard) == TierUsage(tier: .standard, used: 0, reserved: 100, limit: 1000))
        try ledger.settle(live, characters: 150)
        #expect(try ledger.usage(of: .standard) == TierUsage(tier: .standard, used: 150, reserved: 0, limit: 1000), "settled for what was billed")
    }

    /// reserved → sent → settled: a dead owner's reservation that was never
    /// sent cost nothing and is released; one that was sent may have been
    /// billed, so it is settled in full. A crash may over-count, never under.
    @Test func aDeadOwnersSentReservationsAreSettledAndItsUnsentOnesReleased() throws {
        let scratch = StateScratch()
        defer { scratch.remove() }
        let clock = ManualClock()
        var ledger = try Self.ledger(scratch, clock: clock)
        ledger.owner = ProcessOwner(host: ProcessOwner.current.host, pid: 999_999_999, startTicks: 1)
        let sent = try ledger.reserve(120, tier: .standard)
        try ledger.markSent(sent)
        try ledger.markSent(sent)  // once is enough; again changes nothing
        _ = try ledger.reserve(80, tier: .standard)
        ledger.owner = ProcessOwner(host: "elsewhere.example", pid: 42, startTicks: 7)
        let remote = try ledger.reserve(30, tier: .standard)
        try ledger.markSent(remote)

        #expect(try ledger.reconcile() == QuotaLedger.Reconciliation(released: 1, releasedCharacters: 80, settled: 1, settledCharacters: 120))
        #expect(try ledger.usage(of: .standard) == TierUsage(tier: .standard, used: 120, reserved: 30, limit: 1000))
        clock.advance(seconds: ledger.staleAfter + 1)
        #expect(try ledger.reconcile() == QuotaLedger.Reconciliation(settled: 1, settledCharacters: 30))
        #expect(try ledger.usage(of: .standard) == TierUsage(tier: .standard, used: 150, reserved: 0, limit: 1000))
    }

    @Test func aProcessOwnerRoundTripsAndKnowsThisProcessIsAlive() {
        let me = ProcessOwner.current
        #expect(ProcessOwner(me.description) == me)
        #expect(me.mightBeAlive)
        #expect(ProcessOwner(host: "h:with:colons", pid: 5, startTicks: 9).description == "h:with:colons:5:9")
        #expect(ProcessOwner("h:with:colons:5:9")?.host == "h:with:colons")
        #expect(!ProcessOwner(host: me.host, pid: me.pid, startTicks: me.startTicks + 1).mightBeAlive, "a reused PID is not the owner")
    }
}

@Suite struct SynthesisCacheTests {
    static func cache(_ scratch: StateScratch, clock: ManualClock) throws -> SynthesisCache {
        SynthesisCache(
            database: try StateDatabase(folder: scratch.state), folder: scratch.state.appendingPathComponent("synthesis"),
            maxAgeDays: 30, clock: clock.now)
    }

    static func key(_ text: String) -> SynthesisKey {
        SynthesisKey(chunk: Chunk(text: text, isSSML: false), voice: StoreManifestFixture.voice, sampleRateHz: 24_000)
    }

    static func pcm(_ seed: Int, count: Int = 24_000) -> PCMAudio {
        PCMAudio(samples: (0..<count).map { Int16(truncatingIfNeeded: ($0 * (seed + 3)) % 20_000 - 10_000) }, sampleRate: 24_000)
    }

    @Test func theKeyCoversTheTextAndEveryVoiceSettingThatChangesTheSound() {
        let voice = StoreManifestFixture.voice
        let base = SynthesisKey(chunk: Chunk(text: "Hello.", isSSML: false), voice: voice, sampleRateHz: 24_000)
        var variants: [SynthesisKey] = [
            SynthesisKey(chunk: Chunk(text: "Hello!", isSSML: false), voice: voice, sampleRateHz: 24_000),
            SynthesisKey(chunk: Chunk(text: "Hello.", isSSML: true), voice: voice, sampleRateHz: 24_000),
            SynthesisKey(chunk: Chunk(text: "Hello.", isSSML: false), voice: voice, sampleRateHz: 22_050),
        ]
        for change in [\VoicePreset.provider, \.name, \.languageCode] as [WritableKeyPath<VoicePreset, String>] {
            var other = voice
            other[keyPath: change] += "x"
            variants.append(SynthesisKey(chunk: Chunk(text: "Hello.", isSSML: false), voice: other, sampleRateHz: 24_000))
        }
        for change in [\VoicePreset.speakingRate, \.pitch] as [WritableKeyPath<VoicePreset, Double>] {
            var other = voice
            other[keyPath: change] += 0.5
            variants.append(SynthesisKey(chunk: Chunk(text: "Hello.", isSSML: false), voice: other, sampleRateHz: 24_000))
        }
        #expect(Set(variants + [base]).count == variants.count + 1)
        var pricier = voice
        pricier.tier = .wavenet
        #expect(SynthesisKey(chunk: Chunk(text: "Hello.", isSSML: false), voice: pricier, sampleRateHz: 24_000) == base, "the tier is only the price")
    }

    @Test func aStoredChunkComesBackBitExactUntilItIsTooOld() throws {
        let scratch = StateScratch()
        defer { scratch.remove() }
        let clock = ManualClock()
        let cache = try Self.cache(scratch, clock: clock)
        let key = Self.key("Hello there.")
        try cache.store(Self.pcm(1), for: key, characters: 12)
        #expect(try cache.load(key) == Self.pcm(1))
        #expect(try cache.freshKeys(among: [key, Self.key("other")]) == [key])
        #expect(try cache.totals().entries == 1)
        clock.advance(days: 30, seconds: 1)
        #expect(try cache.load(key) == nil, "audio older than audioMaxAgeDays is not reused")
        #expect(try cache.freshKeys(among: [key]).isEmpty)
    }

    @Test func aDamagedFileIsAMissAndItsEntryIsDropped() throws {
        let scratch = StateScratch()
        defer { scratch.remove() }
        let cache = try Self.cache(scratch, clock: ManualClock())
        let key = Self.key("Damaged.")
        try cache.store(Self.pcm(2), for: key, characters: 8)
        let url = cache.fileURL(for: key)
        let bytes = try Data(contentsOf: url)
        try bytes.prefix(bytes.count / 2).write(to: url)
        #expect(try cache.load(key) == nil)
        #expect(try cache.totals().entries == 0)
        #expect(!FileManager.default.fileExists(atPath: url.path))
    }

    @Test func evictionDropsTheLeastRecentlyUsedUntilTheFilesFit() throws {
        let scratch = StateScratch()
        defer { scratch.remove() }
        let clock = ManualClock()
        let cache = try Self.cache(scratch, clock: clock)
        let keys = ["one.", "two.", "three."].map(Self.key)
        for (index, key) in keys.enumerated() {
            try cache.store(Self.pcm(index, count: 48_000), for: key, characters: 4)
            clock.advance(seconds: 60)
        }
        _ = try cache.load(keys[0])  // "one." is now the most recently used
        let sizes = keys.map { SynthesisCache.fileSize(cache.fileURL(for: $0)) }
        let removed = try cache.evict(toFit: sizes[0] + sizes[2])
        #expect(removed.files == 1 && removed.bytes == sizes[1])
        #expect(try cache.freshKeys(among: keys) == [keys[0], keys[2]])
        #expect(!FileManager.default.fileExists(atPath: cache.fileURL(for: keys[1]).path))

        // A file with no entry (a crash between rename and insert) goes once it is an hour old.
        let stray = cache.folder.appendingPathComponent("ab/\(String(repeating: "ab", count: 32)).flac")
        let fresh = cache.folder.appendingPathComponent("cd/\(String(repeating: "cd", count: 32)).flac")
        try AtomicFile.write(Data(count: 100), to: stray)
        try AtomicFile.write(Data(count: 100), to: fresh)
        try FileManager.default.setAttributes([.modificationDate: Date().addingTimeInterval(-7200)], ofItemAtPath: stray.path)
        #expect(try cache.evict(toFit: .max) == (files: 1, bytes: 100))
        #expect(!FileManager.default.fileExists(atPath: stray.path) && FileManager.default.fileExists(atPath: fresh.path))
        #expect(try cache.freshKeys(among: keys) == [keys[0], keys[2]])
    }
}

@Suite struct OutputCacheAndEvictionTests {
    @Test func aFileIsReusedOnlyWhenItsKeyAgeSizeAndHashAllHold() throws {
        let scratch = StateScratch()
        defer { scratch.remove() }
        let clock = ManualClock()
        let outputs = OutputCache(database: try StateDatabase(folder: scratch.state), maxAgeDays: 30, clock: clock.now)
        let url = scratch.output.appendingPathComponent("AudioCache/t/p_Detailed.m4a")
        let bytes = Data((0..<4096).map { UInt8($0 % 251) })
        try AtomicFile.write(bytes, to: url)
        var audio = StoreManifestFixture.encoded(1, duration: 3)
        audio.sizeBytes = Int64(bytes.count)
        audio.sha256 = try FileDigest.sha256(of: url).hex
        let key = OutputKey(chunks: [SynthesisCacheTests.key("a")], format: .aac, encoder: "e1", sampleRateHz: 24_000, pauseMilliseconds: 350, loudness: nil,
                            metadata: AudioMetadata(title: "P – Detailed", album: "T", language: "en-US"))
        try outputs.record([(url: url, key: key, audio: audio)])

        #expect(try outputs.reusable(url, key: key, check: .sizeAndHash) == audio)
        let otherEncoder = OutputKey(chunks: [SynthesisCacheTests.key("a")], format: .aac, encoder: "e2", sampleRateHz: 24_000, pauseMilliseconds: 350, loudness: nil,
                                     metadata: AudioMetadata(title: "P – Detailed", album: "T", language: "en-US"))
        #expect(try outputs.reusable(url, key: otherEncoder, check: .sizeAndHash) == nil)

        var flipped = bytes
        flipped[2000] ^= 0x40
        try flipped.write(to: url)
        #expect(try outputs.reusable(url, key: key, check: .size) != nil, "a plan looks at the size only")
        #expect(try outputs.reusable(url, key: key, check: .sizeAndHash) == nil, "a tampered file is made again")
        try bytes.prefix(1000).write(to: url)
        #expect(try outputs.reusable(url, key: key, check: .size) == nil, "a truncated file is made again")
        try bytes.write(to: url)
        clock.advance(days: 31)
        #expect(try outputs.reusable(url, key: key, check: .sizeAndHash) == nil, "audio older than audioMaxAgeDays is not reused")
    }

    /// One live package pins its four files; three unlisted files compete
    /// for the rest of a 1 MB budget by when a build last used them, not by
    /// their modification times.
    @Test func evictionAfterABuildTakesTheLeastRecentlyUsedAndNeverAPinnedFile() throws {
        let scratch = StateScratch()
        defer { scratch.remove() }
        let clock = ManualClock()
        let layout = Layout(root: scratch.output)
        let outputs = OutputCache(database: try StateDatabase(folder: scratch.state), maxAgeDays: 30, clock: clock.now)
        let manifest = try StoreManifestFixture.manifest(createdAt: clock.now())
        _ = try manifest.write(into: layout)
        for entry in manifest.audio {
            try AtomicFile.write(Data(count: 200_000), to: layout.root.appendingPathComponent(entry.path))
        }
        // Unlisted: old.m4a was used longest ago but written last.
        let unlisted = ["old", "middle", "recent"].map { layout.root.appendingPathComponent("AudioCache/\(StoreManifestFixture.tourID)/\($0).m4a") }
        for (index, url) in unlisted.enumerated() {
            try AtomicFile.write(Data(count: 150_000), to: url)
            try outputs.record([(url: url, key: OutputKey(chunks: [], format: .aac, encoder: "e", sampleRateHz: 24_000, pauseMilliseconds: 0, loudness: nil,
                                                          metadata: AudioMetadata(title: "\(index)", album: "", language: "")),
                                 audio: StoreManifestFixture.encoded(index, duration: 1))])
            clock.advance(seconds: 60)
        }
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSince1970: 0)], ofItemAtPath: unlisted[2].path)
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSince1970: 0)], ofItemAtPath: unlisted[1].path)

        // 4 × 200,000 pinned + 3 × 150,000 = 1,250,000 bytes; the budget is 1,048,576.
        let evicted = try CacheMaintenance.run(layout: layout, budgets: Budgets(cacheMaxMB: 1), outputs: outputs, now: clock.now(), overBudgetOnly: true)
        #expect(evicted.removals.count == 2 && evicted.freedBytes == 300_000)
        #expect(!FileManager.default.fileExists(atPath: unlisted[0].path))
        #expect(!FileManager.default.fileExists(atPath: unlisted[1].path))
        #expect(FileManager.default.fileExists(atPath: unlisted[2].path))
        for entry in manifest.audio {
            #expect(FileManager.default.fileExists(atPath: layout.root.appendingPathComponent(entry.path).path), "pinned: \(entry.path)")
        }
        #expect(try outputs.lastUsed(relativeTo: layout.root).count == 1, "evicted files are forgotten")

        // A budget below the live packages alone: nothing pinned goes, and that is not an error.
        let again = try CacheMaintenance.run(layout: layout, budgets: Budgets(cacheMaxMB: 0), outputs: outputs, now: clock.now(), overBudgetOnly: true)
        #expect(again.removals.count == 1)
        for entry in manifest.audio {
            #expect(FileManager.default.fileExists(atPath: layout.root.appendingPathComponent(entry.path).path))
        }
    }
}

@Suite struct BuildRecordsTests {
    @Test func aBuildGoesQueuedRunningCompletedWithItsTimes() throws {
        let scratch = StateScratch()
        defer { scratch.remove() }
        let clock = ManualClock()
        let records = BuildRecords(database: try StateDatabase(folder: scratch.state), clock: clock.now)
        let id = try records.queue(pipeline: URL(fileURLWithPath: "/p/demo.yaml"), output: scratch.output)
        #expect(try records.recent(output: scratch.output).first?.status == .queued)
        clock.advance(seconds: 5)
        try records.start(id)
        #expect(try records.recent().first?.status == .running)
        try records.recordTour(id, tourId: "t1", outcome: "packaged")
        try records.recordTour(id, tourId: "t2", outcome: "failed", message: "t2: HTTP 400: refused")
        clock.advance(seconds: 10)
        var summary = BuildSummary()
        summary.toursBuilt = 1
        summary.toursFailed = 1
        summary.requests = 9
        try records.finish(id, status: .failed, summary: summary, error: "1 tour failed")
        let record = try #require(try records.recent(output: scratch.output).first)
        #expect(record.status == .failed && record.requests == 9 && record.toursBuilt == 1 && record.error == "1 tour failed")
        #expect(record.finishedAt!.timeIntervalSince(record.startedAt!) == 10)
        #expect(record.startedAt!.timeIntervalSince(record.queuedAt) == 5)
        #expect(try records.failedTours(output: scratch.output).map(\.tourId) == ["t2"])

        // The next build packages t2: it is no longer failed.
        let next = try records.queue(pipeline: URL(fileURLWithPath: "/p/demo.yaml"), output: scratch.output)
        try records.recordTour(next, tourId: "t2", outcome: "packaged")
        try records.finish(next, status: .completed, summary: nil, error: nil)
        #expect(try records.failedTours(output: scratch.output).isEmpty)
        #expect(try records.counts(output: scratch.output) == [.failed: 1, .completed: 1])
    }

    @Test func aBuildWhoseProcessIsGoneIsMarkedInterrupted() throws {
        let scratch = StateScratch()
        defer { scratch.remove() }
        var records = BuildRecords(database: try StateDatabase(folder: scratch.state))
        let mine = try records.queue(pipeline: URL(fileURLWithPath: "/p.yaml"), output: scratch.output)
        records.owner = ProcessOwner(host: ProcessOwner.current.host, pid: 999_999_999, startTicks: 3)
        let dead = try records.queue(pipeline: URL(fileURLWithPath: "/p.yaml"), output: scratch.output)
        try records.start(dead)
        #expect(try records.reconcile() == 1)
        let byID = Dictionary(uniqueKeysWithValues: try records.recent().map { ($0.id, $0) })
        #expect(byID[dead]?.status == .failed)
        #expect(byID[dead]?.error?.contains("interrupted") == true)
        #expect(byID[mine]?.status == .queued, "a live build is left alone")
    }
}

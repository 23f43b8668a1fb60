import Foundation
import Testing
import TourpackAudio
import TourpackCore
import TourpackHTTP
import TourpackKit
import TourpackServer
import TourpackTesting

/// Final errors, Retry-After, splitting, and the concurrency and rate limits.
@Suite struct PolicyTests {
    @Test func tooLongWithoutSplitterIsFinalAndNotRetried() async throws {
        try await withServer(configure: { $0.googleInputLimitBytes = 120 }) { port, server in
            let synthesizer = try HTTPSpeechSynthesizer(settings: fastSettings(port: port), apiKey: nil)
            let text = String(repeating: "A long sentence about the pass. ", count: 6)
            do {
                _ = try await synthesizer.synthesize(speechRequest(text, label: "alps/poi-3/Detailed"))
                Issue.record("expected a 400")
            } catch let error as TourpackError where error.kind == .audioGenerationFailed {
                #expect(error.context.item == "alps/poi-3/Detailed")
                #expect(error.context.status == 400)
                #expect(error.message.contains("longer than the limit of 120 bytes"))
            }
            #expect(server.stats.snapshot.synthesizeRequests == 1)
            #expect(synthesizer.stats.retries == 0)
        }
    }

    @Test func otherClientErrorsAreFinalWithTheServersMessage() async throws {
        try await withServer { port, server in
            let synthesizer = try HTTPSpeechSynthesizer(settings: fastSettings(port: port), apiKey: nil)
            var shrill = englishVoice
            shrill.pitch = 30
            do {
                _ = try await synthesizer.synthesize(speechRequest("Too high.", voice: shrill))
                Issue.record("expected a 400")
            } catch let error as TourpackError where error.kind == .audioGenerationFailed {
                #expect(error.context.status == 400)
                #expect(error.message.contains("pitch 30.0 is out of range"))
                #expect(error.message.contains("INVALID_ARGUMENT"))
            }
            #expect(server.stats.snapshot.synthesizeRequests == 1)
            #expect(synthesizer.stats.failures == 1)
        }
    }

    @Test func chunkIsSplitOnLongerThanTheLimit() async throws {
        try await withServer(configure: { $0.googleInputLimitBytes = 120 }) { port, server in
            let sentences = [
                "The road opened in nineteen thirty five.", "It climbs to two thousand five hundred metres.",
                "Marmots live beside the car park.",
            ]
            let splitter: HTTPSpeechSynthesizer.Splitter = { chunk in
                let parts = chunk.text.split(separator: ".").map {
                    Chunk(text: $0.trimmingCharacters(in: .whitespaces) + ".", isSSML: false)
                }
                return parts.count > 1 ? parts : nil
            }
            let synthesizer = try HTTPSpeechSynthesizer(settings: fastSettings(port: port), apiKey: nil, splitter: splitter)
            let whole = try await synthesizer.synthesize(speechRequest(sentences.joined(separator: " ")))
            #expect(server.stats.snapshot.synthesizeRequests == 4)  // the refused one, then three parts
            #expect(server.stats.snapshot.responsesByStatus["400"] == 1)
            #expect(synthesizer.stats.splits == 1)
            var parts = 0.0
            for sentence in sentences { parts += try await synthesizer.synthesize(speechRequest(sentence)).durationSeconds }
            #expect(abs(whole.durationSeconds - parts) < 0.15, "the parts' PCM, concatenated")
        }
    }

    @Test func retryAfterIsHonoured() async throws {
        let faults = FaultInjection(rateLimitRate: 1, retryAfterSeconds: 2)
        try await withServer(faults: faults) { port, server in
            let recorder = SleepRecorder()
            var options = HTTPSpeechSynthesizer.Options(
                retry: RetryPolicy(maxAttempts: 3, initialBackoffSeconds: 0.001, maxBackoffSeconds: 0.001, deadlineSeconds: 60))
            options.sleep = recorder.sleep
            let synthesizer = try HTTPSpeechSynthesizer(settings: fastSettings(port: port), apiKey: nil, options: options)
            do {
                _ = try await synthesizer.synthesize(speechRequest("Slow down."))
                Issue.record("expected a 429 in the end")
            } catch let error as TourpackError where error.kind == .audioGenerationFailed {
                #expect(error.context.status == 429)
                #expect(error.message.contains("gave up after 3 tries"))
            }
            #expect(recorder.waits == [2, 2], "backoff alone would wait ≤ 1 ms")
            #expect(server.stats.snapshot.synthesizeRequests == 3)
        }
    }

    /// The status is said once: the 429's final message used to read
    /// "HTTP 429: HTTP 429: slow down".
    @Test func aRateLimitThatNeverClearsSaysItsStatusOnce() async throws {
        let faults = FaultInjection(rateLimitRate: 1, retryAfterSeconds: 0)
        try await withServer(faults: faults) { port, _ in
            let options = HTTPSpeechSynthesizer.Options(
                retry: RetryPolicy(maxAttempts: 2, initialBackoffSeconds: 0.001, maxBackoffSeconds: 0.001, deadlineSeconds: 60))
            let synthesizer = try HTTPSpeechSynthesizer(settings: fastSettings(port: port), apiKey: nil, options: options)
            do {
                _ = try await synthesizer.synthesize(speechRequest("Slow down.", label: "alps/poi-1/Detailed"))
                Issue.record("expected a 429 in the end")
            } catch let error as TourpackError {
                let text = "\(error)"
                #expect(text.hasPrefix("alps/poi-1/Detailed: audio generation failed: HTTP 429: "), "\(text)")
                #expect(text.components(separatedBy: "HTTP 429").count == 2, "\(text)")
                #expect(text.contains("gave up after 2 tries"), "\(text)")
            }
        }
    }

    @Test func deadlineStopsRetriesThatWouldOutlastIt() async throws {
        let faults = FaultInjection(rateLimitRate: 1, retryAfterSeconds: 30)
        try await withServer(faults: faults) { port, server in
            let options = HTTPSpeechSynthesizer.Options(
                // 5 s, not 1: on a loaded CI machine the first answer alone once took longer than 1 s.
                retry: RetryPolicy(maxAttempts: 5, initialBackoffSeconds: 0.001, maxBackoffSeconds: 0.001, deadlineSeconds: 5))
            let synthesizer = try HTTPSpeechSynthesizer(settings: fastSettings(port: port), apiKey: nil, options: options)
            await #expect(throws: TourpackError.self) { try await synthesizer.synthesize(speechRequest("Later.")) }
            #expect(server.stats.snapshot.synthesizeRequests == 1)
        }
    }

    @Test func backoffIsExponentialWithFullJitter() {
        let top = RetryPolicy(maxAttempts: 9, initialBackoffSeconds: 0.1, maxBackoffSeconds: 1, deadlineSeconds: 60, random: { 0.999_999 })
        let waits = (1...6).map { top.delay(afterFailedAttempts: $0, retryAfter: nil) }
        #expect(zip(waits, [0.1, 0.2, 0.4, 0.8, 1, 1]).allSatisfy { abs($0 - $1) < 0.001 })
        let bottom = RetryPolicy(maxAttempts: 9, initialBackoffSeconds: 0.1, maxBackoffSeconds: 1, deadlineSeconds: 60, random: { 0 })
        #expect(bottom.delay(afterFailedAttempts: 4, retryAfter: nil) == 0)
        #expect(bottom.delay(afterFailedAttempts: 4, retryAfter: 3) == 3)
        #expect(RetryPolicy.retryAfterSeconds("7") == 7)
        let now = Date(timeIntervalSince1970: 1_700_000_000)
        #expect(RetryPolicy.retryAfterSeconds("Tue, 14 Nov 2023 22:13:40 GMT", now: now) == 20)
        #expect(RetryPolicy.retryAfterSeconds("soon") == nil)
    }

    @Test func concurrencyCapHolds() async throws {
        try await withServer(faults: FaultInjection(latencyMilliseconds: 150)) { port, server in
            let synthesizer = try HTTPSpeechSynthesizer(settings: fastSettings(port: port, concurrency: 3), apiKey: nil)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<12 {
                    group.addTask { _ = try await synthesizer.synthesize(speechRequest("Item \(index).")) }
                }
                try await group.waitForAll()
            }
            let stats = server.stats.snapshot
            #expect(stats.synthesizeRequests == 12)
            #expect(stats.maxInFlight <= 3)
            #expect(stats.maxInFlight >= 2, "requests did overlap")
            #expect(stats.inFlight == 0)
        }
    }

    @Test func rateLimitHoldsAcrossConcurrentRequests() async throws {
        try await withServer { port, server in
            var settings = fastSettings(port: port, concurrency: 2)
            settings.requestsPerMinute = 1200  // 20 per second; bucket of 2
            let synthesizer = try HTTPSpeechSynthesizer(settings: settings, apiKey: nil)
            let started = ContinuousClock.now
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<12 {
                    group.addTask { _ = try await synthesizer.synthesize(speechRequest("Tick \(index).")) }
                }
                try await group.waitForAll()
            }
            let elapsed = started.duration(to: .now)
            // 2 at once, then 10 more at (1200 - 2 + 1) / 60 per second: at least 0.5 s.
            #expect(elapsed >= .milliseconds(495), "took \(elapsed)")
            #expect(server.stats.snapshot.synthesizeRequests == 12)
        }
    }

    @Test func tokenBucketOnAManualClock() async throws {
        let clock = ManualClock()
        let limiter = RequestRateLimiter(requestsPerMinute: 60, burst: 2, clock: clock)
        try await limiter.acquire()
        try await limiter.acquire()  // the burst
        let third = Task { try await limiter.acquire() }
        while clock.sleeperCount == 0 { await Task.yield() }
        // Refill is (60 - 2 + 1) / 60 per second, so the next token is ~1.017 s away.
        clock.advance(by: .milliseconds(1000))
        try await Task.sleep(for: .milliseconds(20))
        #expect(clock.sleeperCount == 1, "not yet")
        clock.advance(by: .milliseconds(20))
        try await third.value
        #expect(clock.sleeperCount == 0)
        // Over many windows: no 60-second window ever holds more than 60 starts.
        let strictClock = ManualClock()
        let strict = RequestRateLimiter(requestsPerMinute: 60, burst: 10, clock: strictClock)
        var starts: [Duration] = []
        for _ in 0..<130 {
            let done = DoneFlag()
            let attempt = Task {
                try await strict.acquire()
                done.set()
            }
            while !done.isSet {
                if strictClock.sleeperCount > 0 { strictClock.advanceToNextDeadline() }
                await Task.yield()
            }
            try await attempt.value
            starts.append(strictClock.now.offset)
        }
        for index in 0..<(starts.count - 60) {
            #expect(starts[index + 60] - starts[index] >= .seconds(60) - .milliseconds(1), "61 starts within a minute at \(index)")
        }
        // After the burst of 10, (60 - 10 + 1) per minute: 120 more starts take 141.2 s, no longer.
        #expect(starts[129] < .seconds(142), "the limit is not stricter than its refill rate")
    }
}

final class DoneFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    var isSet: Bool {
        lock.lock()
        defer { lock.unlock() }
        return value
    }
    func set() {
        lock.lock()
        value = true
        lock.unlock()
    }
}

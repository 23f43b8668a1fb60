import Foundation
import TourpackAudio

/// Faults `serve-tts` can inject, all off by default.
///
/// Tests and `tourpack-bench` use them to prove the client survives a bad
/// day: slow answers, 5xx, 429 with `Retry-After`, truncated and garbled
/// bodies, and stalls longer than the client's timeout. Draws come from a
/// seeded generator in arrival order, so a sequential run is reproducible.
package struct FaultInjection: Sendable, Hashable {
    /// Every synthesize answer (errors included) takes at least this long from arrival.
    package var latencyMilliseconds: Int = 0
    /// Share of requests answered 500, 503 or 504.
    package var failureRate: Double = 0
    /// Share of requests answered 429 with `Retry-After`.
    package var rateLimitRate: Double = 0
    package var retryAfterSeconds: Int = 1
    /// Share of 200 answers whose body is cut short.
    package var truncateRate: Double = 0
    /// Share of 200 answers whose audio is garbage (not base64, or not WAV).
    package var garbageRate: Double = 0
    /// Share of requests held for `stallMilliseconds` before an answer.
    package var stallRate: Double = 0
    package var stallMilliseconds: Int = 5000
    /// Requests whose input contains this text are refused with a 400, every
    /// time: a permanent failure, like a provider's content policy. Lets a
    /// test fail one tour for good while the others succeed.
    package var refuseText: String?
    /// The first request whose input contains this text is held for
    /// `stallMilliseconds`, then answered 503 without being spoken or
    /// counted; later ones are served. Lets a test kill a client while the
    /// server holds a request it will never bill.
    package var holdText: String?
    /// Each answer's audio is attenuated by up to this many dB, by an amount
    /// drawn from its input text (so the same text always comes back at the
    /// same level): an endpoint whose voices and sentences come back at
    /// levels far apart, for the loudness tests.
    package var levelSpreadDB: Double = 0
    package var seed: UInt64 = 0x7075_7270_6c65

    /// Every fault off unless named.
    package init(
        latencyMilliseconds: Int = 0, failureRate: Double = 0, rateLimitRate: Double = 0, retryAfterSeconds: Int = 1,
        truncateRate: Double = 0, garbageRate: Double = 0, stallRate: Double = 0, stallMilliseconds: Int = 5000,
        refuseText: String? = nil, holdText: String? = nil, levelSpreadDB: Double = 0, seed: UInt64 = 0x7075_7270_6c65
    ) {
        self.holdText = holdText
        self.levelSpreadDB = levelSpreadDB
        self.latencyMilliseconds = latencyMilliseconds
        self.failureRate = failureRate
        self.rateLimitRate = rateLimitRate
        self.retryAfterSeconds = retryAfterSeconds
        self.truncateRate = truncateRate
        self.garbageRate = garbageRate
        self.stallRate = stallRate
        self.stallMilliseconds = stallMilliseconds
        self.refuseText = refuseText
        self.seed = seed
    }

    /// Rates must lie in 0...1 and add up to 1 at most.
    package func validated() throws -> FaultInjection {
        let rates = [failureRate, rateLimitRate, truncateRate, garbageRate, stallRate]
        guard rates.allSatisfy({ (0...1).contains($0) }), rates.reduce(0, +) <= 1.000_001 else {
            throw FaultConfigurationError(message: "fault rates must each be within 0...1 and add up to 1 at most")
        }
        guard refuseText.map({ !$0.isEmpty }) ?? true, holdText.map({ !$0.isEmpty }) ?? true else {
            throw FaultConfigurationError(message: "the refused or held text must not be empty")
        }
        guard latencyMilliseconds >= 0, stallMilliseconds >= 0, retryAfterSeconds >= 0 else {
            throw FaultConfigurationError(message: "latency, stall and Retry-After must not be negative")
        }
        guard (0...60).contains(levelSpreadDB) else {
            throw FaultConfigurationError(message: "the level spread must be within 0...60 dB")
        }
        return self
    }

    /// True when any fault can fire; `serve-tts` is honest otherwise.
    package var isActive: Bool {
        latencyMilliseconds > 0 || refuseText != nil || holdText != nil || levelSpreadDB > 0
            || failureRate + rateLimitRate + truncateRate + garbageRate + stallRate > 0
    }
}

/// Fault flags out of range: `serve-tts` refuses to start with them.
package struct FaultConfigurationError: Error, CustomStringConvertible {
    package var message: String
    package var description: String { message }
}

/// The fault one request gets.
enum Fault: String, Sendable, CaseIterable {
    case failure
    case rateLimited
    case truncated
    case garbage
    case stalled
}

/// Draws faults for requests in arrival order from a seeded `SplitMix64`.
final class FaultDice: @unchecked Sendable {
    let plan: FaultInjection
    private let lock = NSLock()
    private var generator: SplitMix64

    private var held = false

    init(_ plan: FaultInjection) {
        self.plan = plan
        self.generator = SplitMix64(seed: plan.seed)
    }

    /// True for the first request whose input contains `holdText`, once.
    func holds(_ input: String) -> Bool {
        guard let text = plan.holdText, input.contains(text) else { return false }
        lock.lock()
        defer { lock.unlock() }
        if held { return false }
        held = true
        return true
    }

    /// The next 64 random bits.
    func next() -> UInt64 {
        lock.lock()
        defer { lock.unlock() }
        return generator.next()
    }

    /// A value in [0, 1).
    func unit() -> Double { Double(next() >> 11) / Double(1 << 53) }

    /// The fault for the next request, or nil for an honest answer.
    func draw() -> Fault? {
        guard plan.failureRate + plan.rateLimitRate + plan.truncateRate + plan.garbageRate + plan.stallRate > 0 else { return nil }
        var roll = unit()
        let table: [(Fault, Double)] = [
            (.failure, plan.failureRate), (.rateLimited, plan.rateLimitRate), (.truncated, plan.truncateRate),
            (.garbage, plan.garbageRate), (.stalled, plan.stallRate),
        ]
        for (fault, rate) in table {
            if roll < rate { return fault }
            roll -= rate
        }
        return nil
    }

    /// `count` bytes of noise.
    func noise(_ count: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count + 8)
        while bytes.count < count {
            withUnsafeBytes(of: next()) { bytes.append(contentsOf: $0) }
        }
        return Array(bytes.prefix(count))
    }
}

extension FaultInjection {
    /// The attenuation `levelSpreadDB` gives the answer for `text`: 0 to
    /// the spread, from an FNV-1a hash of the text.
    package func attenuationDB(for text: String) -> Double {
        guard levelSpreadDB > 0 else { return 0 }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        return levelSpreadDB * Double(hash >> 11) / Double(1 << 53)
    }

    /// `pcm` attenuated as `attenuationDB(for:)` says.
    func leveled(_ pcm: PCMAudio, for text: String) -> PCMAudio {
        let decibels = attenuationDB(for: text)
        guard decibels > 0 else { return pcm }
        let scale = pow(10, -decibels / 20)
        return PCMAudio(samples: pcm.samples.map { Int16((Double($0) * scale).rounded()) }, sampleRate: pcm.sampleRate)
    }
}

import Crypto
package import Foundation
package import TourpackCore
package import TourpackState

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// What a narration's chunks count, counted once when they were cut: the
/// characters billed and sent, the letters and digits a voice speaks
/// (`SpeechLength`, the bound a reused file is held to), the characters a
/// listener hears (the plan's duration estimate), and each chunk's billing
/// units. A warm rebuild reads them from the kept plan instead of counting
/// every sentence again.
package struct ChunkCounts: Sendable, Hashable {
    package var characters: Int
    package var spoken: Int
    package var heard: Int
    /// `BillingRule.units(for:)` of each chunk, in order.
    package var billingUnits: [Int]

    package init(chunks: [Chunk], billing: BillingRule) {
        characters = chunks.reduce(0) { $0 + $1.characters }
        spoken = chunks.reduce(0) { $0 + SpeechLength.spokenCharacters($1.text, isSSML: $1.isSSML) }
        heard = chunks.reduce(0) { $0 + Planner.spokenCharacters($1) }
        billingUnits = chunks.map { billing.units(for: $0) }
    }

    package init(characters: Int, spoken: Int, heard: Int, billingUnits: [Int]) {
        self.characters = characters
        self.spoken = spoken
        self.heard = heard
        self.billingUnits = billingUnits
    }
}

/// The key of one narration's kept plan: a SHA-256 of everything its
/// chunks, keys and counts follow from (`PlanInputs`).
package struct KeptPlanKey: Sendable, Hashable {
    package let words: (UInt64, UInt64, UInt64, UInt64)

    init(_ digest: SHA256.Digest) {
        words = digest.withUnsafeBytes { raw in
            (
                raw.loadUnaligned(as: UInt64.self), raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self),
                raw.loadUnaligned(fromByteOffset: 16, as: UInt64.self), raw.loadUnaligned(fromByteOffset: 24, as: UInt64.self)
            )
        }
    }

    init(words: (UInt64, UInt64, UInt64, UInt64)) { self.words = words }

    package static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.words.0 == rhs.words.0 && lhs.words.1 == rhs.words.1 && lhs.words.2 == rhs.words.2 && lhs.words.3 == rhs.words.3
    }

    package func hash(into hasher: inout Hasher) {
        hasher.combine(words.0)
        hasher.combine(words.1)
    }
}

/// Where a plan item's chunks came from, and under which keys they are kept.
package struct PlanOrigin: Sendable, Hashable {
    /// The key of the narration as the chunker cuts it (`PlanInputs.key`).
    package var key: KeptPlanKey
    /// The day the kept plan was last used (days since 1970); nil when this
    /// plan cut the narration.
    package var keptDay: UInt32?
    /// With lexicons, the key of the narration as written
    /// (`PlanInputs.writtenKey`), which names `key` so that an unchanged
    /// narration is not even rewritten; and the day that was last used, nil
    /// when it is new.
    package var alias: KeptPlanKey? = nil
    package var aliasDay: UInt32? = nil

    /// Whether this plan cut the narration.
    package var isPlanned: Bool { keptDay == nil }
}

/// Everything a narration's plan reads besides the narration, made once
/// per plan: a kept plan is keyed by these and by the narration as it is
/// chunked, so a change to any of them plans it again, and nothing else does.
///
/// - The way plans are made: `revision`, and the running executable itself
///   (its size, change time and inode), so a tourpack built from other code
///   trusts no plan this one kept.
/// - The chunker: the endpoint's limit less the headroom, the sentence
///   marks' cost (captions) and whether each sentence is sent alone.
/// - The provider, whose markup rules refuse a narration, and the billing
///   rule each chunk's units follow from (provider, tier, rate, pitch,
///   timings).
/// - The voice and rate each chunk's `SynthesisKey` is made with: a key of
///   an empty chunk stands for them, so every field the keys read is in.
/// - The lexicons and the pronunciation dialect: through the narration as
///   rewritten (`LexiconRewriter.rewrite`), which is what the chunker cuts.
///   Editing a lexeme changes the key of just the narrations it rewrites.
///
/// With lexicons, the narration as written has a key of its own
/// (`writtenKey`: these inputs, every lexicon in full, and the text), kept
/// as an alias of the rewritten one, so a rebuild with nothing changed
/// does not rewrite a narration either. A lexicon edit changes every
/// written key: each narration is rewritten once, and only those whose
/// rewritten key changed are cut again.
package struct PlanInputs: Sendable {
    /// Changes when the chunker, the lexicon rewriter, the counts or this
    /// format change what a plan holds.
    static let revision = "tourpack plan v1"

    private let framed: [UInt8]
    /// `framed`, the lexicons and the dialect, for `writtenKey`.
    private let written: [UInt8]

    package init(config: PipelineConfig, chunker: Chunker) {
        let voice = SynthesisKey(chunk: Chunk(text: "", isSSML: false), voice: config.voice, sampleRateHz: config.tts.sampleRateHz)
        let fields = [
            Self.revision, Self.executable,
            "limit \(chunker.limit) marks \(chunker.sentenceMarkCost) sentence per chunk \(chunker.sentencePerChunk)",
            "provider \(config.tts.api.rawValue)", "billing \(String(describing: config.billing))", "voice \(voice.hex)",
            "dialect \(config.pronunciationDialect.rawValue)", "captions \(config.audio.captions.rawValue)",
        ]
        var framed: [UInt8] = []
        for field in fields { Self.frame(field, into: &framed) }
        self.framed = framed
        var written = framed
        Self.frame("as written, lexicons \(String(describing: config.lexicons))", into: &written)
        self.written = written
    }

    /// The key of a narration as rewritten by the lexicons (`wrapped`: plain
    /// text put in `<speak>` to carry them).
    package func key(_ rewritten: (narration: Narration, wrapped: Bool)) -> KeptPlanKey {
        Self.digest(framed, rewritten.narration, "\(rewritten.wrapped ? "wrapped" : "as written")")
    }

    /// The key of a narration as written, before the lexicons.
    package func writtenKey(_ narration: Narration) -> KeptPlanKey {
        Self.digest(written, narration, "before the lexicons")
    }

    private static func digest(_ prefix: [UInt8], _ narration: Narration, _ form: String) -> KeptPlanKey {
        var hasher = SHA256()
        hasher.update(data: prefix)
        var text = narration.text
        hasher.update(data: Array("\(narration.isSSML ? "ssml" : "text") \(form) \(text.utf8.count):".utf8))
        text.withUTF8 { hasher.update(bufferPointer: UnsafeRawBufferPointer($0)) }
        return KeptPlanKey(hasher.finalize())
    }

    private static func frame(_ field: String, into bytes: inout [UInt8]) {
        bytes.append(contentsOf: String(field.utf8.count).utf8)
        bytes.append(UInt8(ascii: ":"))
        bytes.append(contentsOf: field.utf8)
        bytes.append(UInt8(ascii: "\n"))
    }

    /// The running executable as `stat` finds it; "unknown" where there is no `/proc/self/exe`.
    static let executable: String = {
        #if os(Linux)
        var info = stat()
        guard stat("/proc/self/exe", &info) == 0 else { return "executable unknown" }
        return "executable \(info.st_size) \(info.st_ctim.tv_sec).\(info.st_ctim.tv_nsec) \(info.st_ino)"
        #else
        return "executable unknown"
        #endif
    }()
}

/// One narration's plan as kept: its chunks, their keys and their counts.
package struct KeptPlan: Sendable, Hashable {
    package var chunks: [Chunk]
    package var keys: [SynthesisKey]
    package var counts: ChunkCounts
}

/// Each narration's plan, kept between builds in one file beside the
/// state, `<state>/plans.kept` (`StateLayout.keptPlansFile`), so a warm
/// rebuild reads every plan at once and cuts no narration it cut before.
///
/// A file and not a table: the plan is made before the state is opened
/// (by `plan` and `build --dry-run` too, which create nothing), a warm
/// rebuild needs every entry at once, and one read of one file, indexed
/// in memory, costs less than opening the database and decoding a row per
/// narration. A plan is the machine's own work, made again from the
/// narration for nothing but CPU, so with `state.postgres` each worker
/// keeps its own, like its tile cache: no worker waits on the network for
/// what it can work out faster.
///
/// The file is only written when a plan cut a narration anew, or used an
/// entry last stamped more than a day ago; a warm rebuild with nothing
/// changed does not write it. Writers take turns under an `flock` and
/// merge what the file holds, so builds that share the state (shards, or
/// pipelines naming one state folder) keep each other's entries. An entry
/// unused for `keptDays` days goes at the next write. A file that cannot
/// be read, or that another version wrote, counts as empty: the plans are
/// made again.
package struct KeptPlans: Sendable {
    /// Days an entry is kept after its last use.
    static let keptDays: UInt32 = 30
    static let magic: [UInt8] = Array("tourpack kept plans 2\n".utf8)
    /// A payload's first byte: a plan, or the key of the plan it names.
    static let planTag: UInt8 = 0
    static let aliasTag: UInt8 = 1

    private let bytes: [UInt8]
    /// Each entry's payload in `bytes`, and the day it was last used.
    private let entries: [KeptPlanKey: (offset: Int, count: Int, day: UInt32)]

    /// No plan kept.
    package static let empty = KeptPlans(bytes: [], entries: [:])

    private init(bytes: [UInt8], entries: [KeptPlanKey: (offset: Int, count: Int, day: UInt32)]) {
        self.bytes = bytes
        self.entries = entries
    }

    /// Plans kept.
    package var count: Int { entries.count }

    /// The plans kept in `file`: empty when it is missing or unreadable.
    package static func load(_ file: URL) -> KeptPlans {
        guard let data = FileManager.default.contents(atPath: file.path) else { return .empty }
        return parse([UInt8](data)) ?? .empty
    }

    /// The plans of the state folder `config` names.
    package static func load(for config: PipelineConfig) -> KeptPlans {
        load(StateLayout(config).keptPlansFile)
    }

    /// The plan kept under `key`, and the day it was last used.
    package func plan(_ key: KeptPlanKey) -> (plan: KeptPlan, day: UInt32)? {
        guard let entry = entries[key], entry.count > 0, bytes[entry.offset] == Self.planTag else { return nil }
        var reader = Reader(bytes: bytes, offset: entry.offset + 1, end: entry.offset + entry.count)
        guard let plan = reader.plan() else { return nil }
        return (plan, entry.day)
    }

    /// The key a narration's written key names (`PlanInputs.writtenKey`),
    /// and the day that was last used.
    package func alias(_ key: KeptPlanKey) -> (key: KeptPlanKey, day: UInt32)? {
        guard let entry = entries[key], entry.count == 33, bytes[entry.offset] == Self.aliasTag else { return nil }
        var reader = Reader(bytes: bytes, offset: entry.offset + 1, end: entry.offset + entry.count)
        return reader.key().map { ($0, entry.day) }
    }

    // MARK: Writing

    /// Keeps the plans of `plan`'s items in `file`: the ones cut anew, and
    /// a new day on the ones used that were stamped more than a day before.
    /// Writes nothing when there is neither. Returns whether it wrote.
    @discardableResult
    package static func keep(_ plan: BuildPlan, in file: URL, now: Date) throws -> Bool {
        let today = day(now)
        var fresh: [KeptPlanKey: [UInt8]] = [:]
        var used: Set<KeptPlanKey> = []
        for item in plan.tours.lazy.flatMap(\.items) {
            guard let origin = item.origin else { continue }
            if let day = origin.keptDay {
                if day + 1 < today { used.insert(origin.key) }
            } else if let counts = item.counts {
                fresh[origin.key] = [planTag] + encode(KeptPlan(chunks: item.chunks, keys: item.keys, counts: counts))
            }
            guard let alias = origin.alias else { continue }
            if let day = origin.aliasDay {
                if day + 1 < today { used.insert(alias) }
            } else {
                var payload = [aliasTag]
                Writer.key(origin.key, into: &payload)
                fresh[alias] = payload
            }
        }
        guard !fresh.isEmpty || !used.isEmpty else { return false }
        try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
        let lock = open(file.path + ".lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard lock >= 0 else { throw TourpackError.storageFailed(path: file.path + ".lock", errno: errno, operation: "open lock") }
        defer { _ = close(lock) }
        while flock(lock, LOCK_EX) != 0 {
            guard errno == EINTR else { throw TourpackError.storageFailed(path: file.path + ".lock", errno: errno, operation: "flock") }
        }
        // What the file holds now, under the lock: other builds' entries are kept.
        let current = load(file)
        var out = magic
        var written: Set<KeptPlanKey> = []
        func append(_ key: KeptPlanKey, day: UInt32, payload: ArraySlice<UInt8>) {
            guard written.insert(key).inserted else { return }
            Writer.key(key, into: &out)
            Writer.u32(day, into: &out)
            Writer.u32(UInt32(payload.count), into: &out)
            out.append(contentsOf: payload)
        }
        for (key, payload) in fresh.sorted(by: { $0.key.words < $1.key.words }) { append(key, day: today, payload: payload[...]) }
        for (key, entry) in current.entries.sorted(by: { $0.key.words < $1.key.words }) {
            let day = used.contains(key) ? today : entry.day
            guard day + keptDays >= today else { continue }
            append(key, day: day, payload: current.bytes[entry.offset..<entry.offset + entry.count])
        }
        let temporary = file.deletingLastPathComponent().appendingPathComponent(".\(file.lastPathComponent).\(getpid()).tmp")
        do {
            try Data(out).write(to: temporary)
            guard rename(temporary.path, file.path) == 0 else {
                throw TourpackError.storageFailed(path: file.path, errno: errno, operation: "rename")
            }
        } catch {
            try? FileManager.default.removeItem(at: temporary)
            throw error
        }
        return true
    }

    static func day(_ date: Date) -> UInt32 { UInt32(clamping: max(0, Int(date.timeIntervalSince1970 / 86_400))) }

    // MARK: The file
    //
    // The magic line, then one entry after another: the key's 32 bytes,
    // the day last used and the payload's length (UInt32 each, little
    // endian), and the payload. A plan's (tag 0): the counts (characters,
    // spoken, heard, chunks), then per chunk its billing units, whether it
    // is SSML, its key's 64 hex digits, and its text's length and UTF-8
    // bytes. An alias's (tag 1): the 32 bytes of the key it names.

    static func encode(_ plan: KeptPlan) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(16 + plan.chunks.reduce(0) { $0 + $1.text.utf8.count + 80 })
        for value in [plan.counts.characters, plan.counts.spoken, plan.counts.heard, plan.chunks.count] {
            Writer.u32(UInt32(clamping: value), into: &out)
        }
        for (index, chunk) in plan.chunks.enumerated() {
            Writer.u32(UInt32(clamping: plan.counts.billingUnits[index]), into: &out)
            out.append(chunk.isSSML ? 1 : 0)
            out.append(contentsOf: plan.keys[index].hex.utf8)
            Writer.u32(UInt32(clamping: chunk.text.utf8.count), into: &out)
            out.append(contentsOf: chunk.text.utf8)
        }
        return out
    }

    private static func parse(_ bytes: [UInt8]) -> KeptPlans? {
        guard bytes.count >= magic.count, bytes[0..<magic.count].elementsEqual(magic) else { return nil }
        var entries: [KeptPlanKey: (offset: Int, count: Int, day: UInt32)] = [:]
        var reader = Reader(bytes: bytes, offset: magic.count, end: bytes.count)
        while !reader.atEnd {
            guard let key = reader.key(), let day = reader.u32(), let count = reader.u32().map(Int.init), reader.skip(count) else {
                return nil
            }
            entries[key] = (reader.offset - count, count, day)
        }
        return KeptPlans(bytes: bytes, entries: entries)
    }

    private enum Writer {
        static func u32(_ value: UInt32, into out: inout [UInt8]) {
            withUnsafeBytes(of: value.littleEndian) { out.append(contentsOf: $0) }
        }

        static func key(_ key: KeptPlanKey, into out: inout [UInt8]) {
            for word in [key.words.0, key.words.1, key.words.2, key.words.3] {
                withUnsafeBytes(of: word) { out.append(contentsOf: $0) }
            }
        }
    }

    private struct Reader {
        let bytes: [UInt8]
        var offset: Int
        let end: Int

        var atEnd: Bool { offset >= end }

        mutating func skip(_ count: Int) -> Bool {
            guard count >= 0, end - offset >= count else { return false }
            offset += count
            return true
        }

        mutating func u32() -> UInt32? {
            guard end - offset >= 4 else { return nil }
            let value = bytes.withUnsafeBytes { UInt32(littleEndian: $0.loadUnaligned(fromByteOffset: offset, as: UInt32.self)) }
            offset += 4
            return value
        }

        mutating func key() -> KeptPlanKey? {
            guard end - offset >= 32 else { return nil }
            let words = bytes.withUnsafeBytes { raw in
                (
                    raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self),
                    raw.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self),
                    raw.loadUnaligned(fromByteOffset: offset + 16, as: UInt64.self),
                    raw.loadUnaligned(fromByteOffset: offset + 24, as: UInt64.self)
                )
            }
            offset += 32
            return KeptPlanKey(words: words)
        }

        mutating func string(_ count: Int) -> String? {
            guard count >= 0, end - offset >= count else { return nil }
            let text = bytes.withUnsafeBufferPointer {
                String(decoding: UnsafeBufferPointer(rebasing: $0[offset..<offset + count]), as: UTF8.self)
            }
            offset += count
            return text
        }

        mutating func plan() -> KeptPlan? {
            guard let characters = u32(), let spoken = u32(), let heard = u32(), let count = u32().map(Int.init) else { return nil }
            var chunks: [Chunk] = []
            var keys: [SynthesisKey] = []
            var units: [Int] = []
            chunks.reserveCapacity(count)
            keys.reserveCapacity(count)
            units.reserveCapacity(count)
            for _ in 0..<count {
                guard let unit = u32(), end - offset >= 1 else { return nil }
                let isSSML = bytes[offset] == 1
                offset += 1
                guard let hex = string(64), let length = u32().map(Int.init), let text = string(length) else { return nil }
                units.append(Int(unit))
                keys.append(SynthesisKey(hex: hex))
                chunks.append(Chunk(text: text, isSSML: isSSML))
            }
            guard offset == end else { return nil }
            return KeptPlan(
                chunks: chunks, keys: keys,
                counts: ChunkCounts(characters: Int(characters), spoken: Int(spoken), heard: Int(heard), billingUnits: units))
        }
    }
}

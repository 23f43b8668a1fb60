import Crypto
import Foundation
package import TourpackCore

/// One worker's part of a pipeline's tours (`build --shards N --shard I`):
/// the tours whose ID hashes to shard `index` of `count` (the contract's "Beyond one
/// machine").
///
/// The hash is the first 8 bytes of the SHA-256 of the tour's lowercase ID,
/// read big-endian, modulo `count`. It must be the same on every machine and
/// in every release, or two workers of one fleet would both build a tour
/// (or neither would): Swift's `hashValue` is seeded per process, so it is
/// never used. A tour stays in its shard when other tours are added or
/// removed; only a change of `count` moves tours.
package struct Shard: Sendable, Hashable, Codable, CustomStringConvertible {
    /// 0-based, below `count`.
    package let index: Int
    package let count: Int

    /// The variable a Kubernetes Indexed Job sets to each pod's index.
    package static let indexVariable = "JOB_COMPLETION_INDEX"

    /// - Throws: `ShardError` when `count` < 1 or `index` is outside 0..<count.
    package init(index: Int, count: Int) throws(ShardError) {
        guard count >= 1 else { throw ShardError("--shards must be 1 or more, not \(count)") }
        guard (0..<count).contains(index) else {
            throw ShardError("--shard \(index) is out of range for --shards \(count): shards are numbered 0 to \(count - 1)")
        }
        self.index = index
        self.count = count
    }

    /// The shard of `count` that `tourID` falls in.
    package static func index(of tourID: SafeID, count: Int) -> Int {
        precondition(count >= 1, "a shard count is 1 or more")
        let digest = SHA256.hash(data: Array(tourID.value.utf8))
        let prefix = digest.prefix(8).reduce(UInt64(0)) { ($0 << 8) | UInt64($1) }
        return Int(prefix % UInt64(count))
    }

    package func contains(_ tourID: SafeID) -> Bool { Self.index(of: tourID, count: count) == index }

    /// `shard 2 of 4`, as the build and the plan say it.
    package var description: String { "shard \(index) of \(count)" }

    /// The shard the command line asks for, or nil when it asks for none.
    ///
    /// `--shard` beats the environment's `JOB_COMPLETION_INDEX`, which is
    /// read only with `--shards`: a variable left over in a shell never
    /// splits a build nobody asked to split.
    /// - Throws: `ShardError` with a message that names the flag or the
    ///   variable at fault.
    package static func resolve(count: Int?, index: Int?, environment: [String: String]) throws(ShardError) -> Shard? {
        guard let count else {
            if let index { throw ShardError("--shard \(index) needs --shards N, the number of shards the tours are split into") }
            return nil
        }
        guard count >= 1 else { throw ShardError("--shards must be 1 or more, not \(count)") }
        if let index { return try Shard(index: index, count: count) }
        guard let raw = environment[indexVariable] else {
            throw ShardError(
                "--shards \(count) needs --shard I (0 to \(count - 1)) or the \(indexVariable) variable that a Kubernetes Indexed Job sets")
        }
        let text = raw.trimmingCharacters(in: .whitespaces)
        guard let parsed = Int(text), text.allSatisfy({ $0.isASCII && $0.isNumber }) else {
            throw ShardError("\(indexVariable)='\(raw.prefix(40))' is not a shard number: it must be an integer from 0 to \(count - 1)")
        }
        guard parsed < count else {
            throw ShardError("\(indexVariable)=\(parsed) is out of range for --shards \(count): shards are numbered 0 to \(count - 1)")
        }
        return try Shard(index: parsed, count: count)
    }

    /// This shard's tours out of `tours`, in their order, and what a plan records of the choice.
    package func select(_ tours: [Tour]) -> (tours: [Tour], slice: ShardSlice) {
        let chosen = tours.filter { contains($0.id) }
        return (chosen, ShardSlice(shard: self, tours: chosen.count, toursInPipeline: tours.count))
    }
}

/// What a sharded plan covers: its shard, and how many of the pipeline's tours fell in it.
package struct ShardSlice: Sendable, Hashable, Codable, CustomStringConvertible {
    package var shard: Shard
    /// Tours in this shard.
    package var tours: Int
    /// Tours the pipeline's globs found, across every shard.
    package var toursInPipeline: Int

    package init(shard: Shard, tours: Int, toursInPipeline: Int) {
        self.shard = shard
        self.tours = tours
        self.toursInPipeline = toursInPipeline
    }

    /// `shard 2 of 4: 3 of 11 tours`.
    package var description: String {
        "\(shard): \(tours) of \(toursInPipeline) tour\(toursInPipeline == 1 ? "" : "s")"
    }

    enum CodingKeys: String, CodingKey { case index, count, tours, toursInPipeline }

    package init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        shard = try Shard(index: try c.decode(Int.self, forKey: .index), count: try c.decode(Int.self, forKey: .count))
        tours = try c.decode(Int.self, forKey: .tours)
        toursInPipeline = try c.decode(Int.self, forKey: .toursInPipeline)
    }

    /// Flat (`{"index", "count", "tours", "toursInPipeline"}`), as a job reads it.
    package func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(shard.index, forKey: .index)
        try c.encode(shard.count, forKey: .count)
        try c.encode(tours, forKey: .tours)
        try c.encode(toursInPipeline, forKey: .toursInPipeline)
    }
}

/// A shard that cannot be: a usage error (exit 2) whose message names the flag or variable.
package struct ShardError: Error, Sendable, Hashable, CustomStringConvertible {
    package var message: String
    package init(_ message: String) { self.message = message }
    package var description: String { message }
}

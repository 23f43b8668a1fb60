// TEMPORARY until the chunker branch lands: the real Chunker replaces this file.
public struct ChunkingError: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}
public struct Chunker: Sendable {
    public var limit: ChunkLimit
    public init(limit: ChunkLimit) { self.limit = limit }
    public func chunks(for narration: Narration) throws(ChunkingError) -> [Chunk] {
        [Chunk(text: narration.text, isSSML: narration.isSSML)]
    }
    public func split(_ chunk: Chunk) -> [Chunk]? { nil }
}

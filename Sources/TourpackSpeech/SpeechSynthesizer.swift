package import Foundation
package import TourpackAudio
package import TourpackCore

/// One chunk to speak, with the voice to speak it in.
package struct SynthesisRequest: Sendable, Hashable {
    package var chunk: Chunk
    package var voice: VoicePreset
    /// The LINEAR16 sample rate asked of the endpoint.
    package var sampleRateHz: Int
    /// Names the item (tour, POI, phase) for error messages.
    package var itemLabel: String
    /// The plain text of the phase's chunk before and after this one, for
    /// dialects that carry it for prosody across seams (ElevenLabs). Not
    /// part of the chunk's cache key: the words spoken are the chunk's.
    package var previousText: String?
    package var nextText: String?
    /// Where sentences start inside `chunk.text` after its own start, as
    /// UTF-8 byte offsets, always between two of the chunker's units
    /// (never inside a tag or an entity); nil: no timings are asked for
    /// (captions off). With them, a dialect that can asks the provider
    /// when each is spoken and reports it in `ChunkShape.sentenceTimes`.
    /// Not part of the cache key: they follow from the chunk's text.
    package var sentenceBoundaries: [Int]?
    /// Which of the item's chunks this is (0-based) and how many it has,
    /// for error messages ("chunk 2 of 3"); nil outside a build.
    package var chunkIndex: Int?
    package var chunkCount: Int?

    package init(
        chunk: Chunk, voice: VoicePreset, sampleRateHz: Int, itemLabel: String, previousText: String? = nil, nextText: String? = nil,
        sentenceBoundaries: [Int]? = nil, chunkIndex: Int? = nil, chunkCount: Int? = nil
    ) {
        self.sentenceBoundaries = sentenceBoundaries
        self.chunkIndex = chunkIndex
        self.chunkCount = chunkCount
        self.chunk = chunk
        self.voice = voice
        self.sampleRateHz = sampleRateHz
        self.itemLabel = itemLabel
        self.previousText = previousText
        self.nextText = nextText
    }

    /// "chunk 2 of 3", or "the chunk" when the request does not know its place.
    package var chunkLabel: String {
        guard let chunkIndex, let chunkCount else { return "the chunk" }
        return "chunk \(chunkIndex + 1) of \(chunkCount)"
    }

    /// Why `shape` is too little audio for this request's text
    /// (`SpeechLength`); nil when it is enough.
    package func shortfall(of shape: ChunkShape) -> String? {
        guard sampleRateHz > 0 else { return nil }
        return SpeechLength.shortfall(
            seconds: Double(shape.samples) / Double(sampleRateHz),
            spokenCharacters: SpeechLength.spokenCharacters(chunk.text, isSSML: chunk.isSSML), speakingRate: voice.speakingRate)
    }
}

/// The synthesize stage: text in, a FLAC file of the chunk's audio out.
///
/// The default is `HTTPSpeechSynthesizer` over libcurl. The answer is
/// decoded as it is read and written straight to the file, so a long chunk
/// is never held whole in memory; the build keeps that file as the chunk's
/// entry in the synthesis cache. Errors are `TourpackError`s.
package protocol SpeechSynthesizer: Sendable {
    /// Speaks one chunk into a mono 16-bit FLAC file at `destination`, at the
    /// request's rate, and returns its shape. Writes nothing there when the
    /// chunk came back empty (`shape.samples == 0`).
    func synthesize(_ request: SynthesisRequest, to destination: URL) async throws -> ChunkShape
    /// Requests, retries and characters so far, for the build's summary.
    var stats: SynthesisStats { get }
}

extension SpeechSynthesizer {
    /// A synthesizer that counts nothing reports zeros.
    package var stats: SynthesisStats { SynthesisStats() }

    /// One chunk's audio in memory, for tools and tests; the build streams instead.
    package func synthesize(_ request: SynthesisRequest) async throws -> PCMAudio {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "tourpack-speech-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let file = folder.appendingPathComponent("chunk.flac")
        let shape = try await synthesize(request, to: file)
        guard shape.samples > 0 else { return PCMAudio(samples: [], sampleRate: request.sampleRateHz) }
        return try FLACFile.read(file)
    }
}

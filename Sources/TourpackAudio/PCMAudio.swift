/// Uncompressed mono audio: signed 16-bit samples at `sampleRate`.
///
/// This is what the TTS endpoint returns (LINEAR16) and what the encoder
/// takes. Chunks are joined as PCM and encoded once; encoded files are never
/// concatenated.
package struct PCMAudio: Sendable, Hashable {
    package var samples: [Int16]
    package var sampleRate: Int

    package init(samples: [Int16], sampleRate: Int) {
        self.samples = samples
        self.sampleRate = sampleRate
    }

    package var durationSeconds: Double {
        sampleRate > 0 ? Double(samples.count) / Double(sampleRate) : 0
    }
}

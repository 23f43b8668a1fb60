package import Foundation
package import TourpackCore

extension EncodedAudio {
    /// Measures a written file: codec, rate, channels, duration and bit rate
    /// from its packets (`AudioFileInspector.measure`), size and SHA-256 from
    /// its bytes. What package.json records is what the app will get.
    package init(measuring url: URL, as format: AudioFormat) throws {
        let inspection = try AudioFileInspector().measure(url)
        let (size, digest) = try FileDigest.sha256(of: url)
        self.init(
            format: format, codec: inspection.codecName, sampleRateHz: inspection.encodedSampleRateHz,
            channels: inspection.channels, bitrateKbps: inspection.bitRateKbps,
            durationSeconds: inspection.durationSeconds, sizeBytes: size, sha256: digest)
    }
}

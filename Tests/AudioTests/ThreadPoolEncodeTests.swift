import Foundation
import NIOPosix
import Testing
import TourpackAudio
import TourpackCore
import TourpackKit
import TourpackTesting

/// The build joins and encodes inside `NIOThreadPool.runIfActive` (see
/// `ItemMaker`), so FFmpeg's blocking work stays off Swift's cooperative
/// pool. This makes the same call the same way, with real FFmpeg.
@Suite(.offThePool) struct ThreadPoolEncodeTests {
    @Test func encodesEveryFormatOnTheThreadPool() async throws {
        let directory = try TemporaryFolder.make("tourpack-audio")
        defer { TemporaryFolder.remove(directory) }
        let pcm = try PCMJoiner().joinInMemory(Fixtures.chunks(rate: 24_000, in: directory))
        let pool = NIOThreadPool(numberOfThreads: 2)
        pool.start()

        var urls: [AudioFormat: URL] = [:]
        for format in AudioFormat.allCases { urls[format] = directory.appendingPathComponent("pool.\(format.fileExtension)") }
        let metadata = AudioMetadata(title: "Pool – Detailed", album: "Test Road", language: "en-US")
        let results: [AudioFormat: EncodedAudio]
        do {
            let encoder = FFmpegAudioEncoder()
            let targets = urls.map {
                EncodeTarget(format: $0.key, sampleRateHz: $0.key.defaultSampleRate(endpointRate: 24_000), url: $0.value)
            }
            results = try await pool.runIfActive {
                let session = try encoder.open(targets, inputRate: pcm.sampleRate, metadata: metadata)
                try pcm.samples.withUnsafeBufferPointer { try session.write($0) }
                return try session.finish()
            }
            try await pool.shutdownGracefully()
        } catch {
            try? await pool.shutdownGracefully()
            throw error
        }

        #expect(Set(results.keys) == Set(AudioFormat.allCases))
        for (format, encoded) in results {
            let url = try #require(urls[format])
            #expect(encoded.codec == format.codecName)
            #expect(encoded.sampleRateHz == format.defaultSampleRate(endpointRate: 24_000))
            #expect(encoded.sizeBytes == (try FileManager.default.attributesOfItem(atPath: url.path)[.size] as? NSNumber)?.int64Value)
            #expect(
                abs(encoded.durationSeconds - pcm.durationSeconds) < 0.1, "\(format): \(encoded.durationSeconds) vs \(pcm.durationSeconds)")
            let inspection = try AudioFileInspector().inspect(url)
            #expect(inspection.isClean)
        }
    }
}

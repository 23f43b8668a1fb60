import Foundation
import Testing
import TourpackAudio
import TourpackCore
import TourpackKit
import TourpackTesting

@Suite("AudioFileInspector", .offThePool)
struct InspectorTests {
    /// Damage in the middle of the audio must show up as decode errors, the
    /// way `validate` will meet a corrupted download or a bad disk.
    @Test("reports damage that a decoder only logs", arguments: AudioFormat.allCases)
    func corruptedFile(format: AudioFormat) throws {
        let directory = try TemporaryFolder.make("tourpack-audio")
        defer { TemporaryFolder.remove(directory) }
        let pcm = try Fixtures.speech(Fixtures.sentences[2], in: directory).resampled(to: 24_000)
        let url = directory.appendingPathComponent("damaged.\(format.fileExtension)")
        _ = try FFmpegAudioEncoder().encodeInMemory(pcm, as: format, metadata: Fixtures.metadata, to: url)
        #expect(try AudioFileInspector().inspect(url).isClean)

        var bytes = [UInt8](try Data(contentsOf: url))
        var generator = SystemRandomNumberGenerator()
        let start = bytes.count * 3 / 5
        for index in start..<(start + 4_000) { bytes[index] = UInt8.random(in: 0...255, using: &generator) }
        try Data(bytes).write(to: url)

        let inspection = try AudioFileInspector().inspect(url)
        #expect(!inspection.isClean)
        #expect(inspection.errorCount > 0 && !inspection.errors.isEmpty)
    }

    @Test("a file that is not audio cannot be opened")
    func notAudio() throws {
        let directory = try TemporaryFolder.make("tourpack-audio")
        defer { TemporaryFolder.remove(directory) }
        let url = directory.appendingPathComponent("notes.m4a")
        try Data("this is not audio at all".utf8).write(to: url)
        #expect(throws: FFmpegError.self) { try AudioFileInspector().inspect(url) }
    }

    @Test("measuring without decoding agrees with decoding", arguments: AudioFormat.allCases)
    func measureMatchesDecode(format: AudioFormat) throws {
        let directory = try TemporaryFolder.make("tourpack-audio")
        defer { TemporaryFolder.remove(directory) }
        let pcm = try Fixtures.speech(Fixtures.sentences[0], in: directory)
        let url = directory.appendingPathComponent("m.\(format.fileExtension)")
        _ = try FFmpegAudioEncoder().encodeInMemory(pcm, as: format, metadata: Fixtures.metadata, to: url)
        let measured = try AudioFileInspector().measure(url)
        let decoded = try AudioFileInspector().inspect(url)
        #expect(!measured.decoded && decoded.decoded)
        #expect(measured.sampleCount == decoded.sampleCount)
        #expect(measured.bitRate == decoded.bitRate)
        let decodedRate = format == .opus ? 48_000 : format.defaultSampleRate(endpointRate: pcm.sampleRate)
        let expected = Int64((Double(pcm.samples.count) * Double(decodedRate) / Double(pcm.sampleRate)).rounded())
        #expect(abs(decoded.sampleCount - expected) <= 16, "\(decoded.sampleCount) samples, expected \(expected)")
    }
}

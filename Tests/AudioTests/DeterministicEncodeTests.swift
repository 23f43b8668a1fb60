import Foundation
import Testing
import TourpackAudio
import TourpackCore
import TourpackKit
import TourpackTesting

/// The same PCM encodes to the same bytes, in every format: published audio
/// is stored by its SHA-256, so a file that changed with every encode would
/// upload a new blob on every republish and reach every device as an update.
@Suite("The same PCM encodes to the same bytes", .offThePool)
struct DeterministicEncodeTests {
    /// Where two byte strings first differ, for the failure message.
    static func firstDifference(_ a: Data, _ b: Data) -> String {
        let index = zip(a, b).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? min(a.count, b.count)
        return "sizes \(a.count) and \(b.count), first difference at byte \(index)"
    }

    @Test("two encodes of the same PCM, to files of different names, are identical", arguments: AudioFormat.allCases)
    func twice(format: AudioFormat) throws {
        let directory = try TemporaryFolder.make("tourpack-audio")
        defer { TemporaryFolder.remove(directory) }
        let pcm = try PCMJoiner().joinInMemory(Fixtures.chunks(rate: 24_000, in: directory))
        let first = directory.appendingPathComponent("first.\(format.fileExtension)")
        let second = directory.appendingPathComponent("a-temporary-name.\(format.fileExtension)")
        let a = try FFmpegAudioEncoder().encodeInMemory(pcm, as: format, metadata: Fixtures.metadata, to: first)
        let b = try FFmpegAudioEncoder().encodeInMemory(pcm, as: format, metadata: Fixtures.metadata, to: second)
        let (bytesA, bytesB) = (try Data(contentsOf: first), try Data(contentsOf: second))
        #expect(bytesA == bytesB, "\(format): \(Self.firstDifference(bytesA, bytesB))")
        #expect(a.sha256 == b.sha256)
    }

    /// A build encodes a phase's formats in one session; a repair re-encodes one.
    @Test("a format encoded alone is identical to the same format encoded beside the others")
    func aloneOrTogether() throws {
        let directory = try TemporaryFolder.make("tourpack-audio")
        defer { TemporaryFolder.remove(directory) }
        let pcm = try PCMJoiner().joinInMemory(Fixtures.chunks(rate: 24_000, in: directory))
        let targets = AudioFormat.allCases.map { format in
            EncodeTarget(
                format: format, sampleRateHz: format.defaultSampleRate(endpointRate: pcm.sampleRate),
                url: directory.appendingPathComponent("together.\(format.fileExtension)"))
        }
        let session = try FFmpegAudioEncoder().open(targets, inputRate: pcm.sampleRate, metadata: Fixtures.metadata)
        try pcm.samples.withUnsafeBufferPointer { try session.write($0) }
        _ = try session.finish()
        for target in targets {
            let alone = directory.appendingPathComponent("alone.\(target.format.fileExtension)")
            _ = try FFmpegAudioEncoder().encodeInMemory(pcm, as: target.format, metadata: Fixtures.metadata, to: alone)
            let (together, single) = (try Data(contentsOf: target.url), try Data(contentsOf: alone))
            #expect(together == single, "\(target.format): \(Self.firstDifference(together, single))")
        }
    }

    /// The Ogg page header's stream serial number (bytes 14–17, little-endian) of the file's first page.
    static func oggSerial(_ url: URL) throws -> UInt32 {
        let bytes = [UInt8](try Data(contentsOf: url).prefix(18))
        try #require(bytes.count == 18 && bytes.prefix(4) == [0x4F, 0x67, 0x67, 0x53], "not an Ogg page")
        return bytes[14..<18].reversed().reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
    }

    @Test("an Opus file's Ogg serial number comes from its tags: the same for one file, different between files")
    func oggSerialFromTags() throws {
        let directory = try TemporaryFolder.make("tourpack-audio")
        defer { TemporaryFolder.remove(directory) }
        let pcm = try Fixtures.speech(Fixtures.sentences[0], in: directory).resampled(to: 24_000)
        let other = AudioMetadata(title: "Kaiser-Franz-Josefs-Höhe – Approaching", album: Fixtures.metadata.album, language: "en-US")
        var serials: [UInt32] = []
        for (name, metadata) in [("a", Fixtures.metadata), ("b", Fixtures.metadata), ("c", other)] {
            let url = directory.appendingPathComponent("\(name).opus")
            _ = try FFmpegAudioEncoder().encodeInMemory(pcm, as: .opus, metadata: metadata, to: url)
            serials.append(try Self.oggSerial(url))
        }
        #expect(serials[0] == serials[1] && serials[0] != serials[2], "\(serials)")
        #expect(!serials.contains(0))
    }
}

import CFFmpeg
import CFFmpegShims
import Foundation
import Testing
import TourpackAudio
import TourpackCore
import TourpackKit
import TourpackTesting

/// The frame size libavcodec's flac encoder picks for `rate` (set on open).
private func flacFrameSize(rate: Int) throws -> Int {
    let codec = try #require(avcodec_find_encoder_by_name("flac"))
    var context = avcodec_alloc_context3(codec)
    defer { avcodec_free_context(&context) }
    let c = try #require(context)
    c.pointee.sample_fmt = AV_SAMPLE_FMT_S16
    c.pointee.sample_rate = Int32(rate)
    tp_channel_layout_mono(&c.pointee.ch_layout)
    c.pointee.time_base = AVRational(num: 1, den: Int32(rate))
    #expect(avcodec_open2(c, codec, nil) == 0)
    return Int(c.pointee.frame_size)
}

/// A sine with a little deterministic noise, the full Int16 range touched
/// once at each end so the extremes go through the round trip too.
private func sineWithNoise(count: Int, rate: Int, noise: Double = 0.01) -> PCMAudio {
    var generator = SeededGenerator(seed: 0x9E37_79B9_7F4A_7C15)
    var samples = (0..<count).map { index -> Int16 in
        let random = generator.unit() - 0.5
        let t = Double(index) / Double(rate)
        let value = 0.4 * sin(2 * .pi * 220 * t) + 0.2 * sin(2 * .pi * 1_330 * t) + noise * random
        return Int16(max(-1, min(1, value)) * 32_000)
    }
    if count >= 4 {
        samples[1] = .min
        samples[count - 2] = .max
    }
    return PCMAudio(samples: samples, sampleRate: rate)
}

private func number(_ value: Any?) -> Double? {
    if let text = value as? String { return Double(text) }
    return (value as? NSNumber)?.doubleValue
}

/// Where the audio frames start: after "fLaC" and the metadata blocks.
private func audioOffset(_ bytes: [UInt8]) throws -> Int {
    #expect(bytes.starts(with: Array("fLaC".utf8)))
    var offset = 4
    while offset + 4 <= bytes.count {
        let last = bytes[offset] & 0x80 != 0
        let length = bytes[offset + 1..<offset + 4].reduce(0) { $0 << 8 | Int($1) }
        offset += 4 + length
        if last { return offset }
    }
    Issue.record("no last metadata block")
    return bytes.count
}

@Suite("FLACFile, the synthesis cache's lossless form", .offThePool)
struct FLACFileTests {
    enum Length: String, CaseIterable, CustomTestStringConvertible {
        case oneSample, frameSizeMinusOne, frameSizePlusOne, threeSeconds
        var testDescription: String { rawValue }

        func count(rate: Int) throws -> Int {
            switch self {
            case .oneSample: return 1
            case .frameSizeMinusOne: return try flacFrameSize(rate: rate) - 1
            case .frameSizePlusOne: return try flacFrameSize(rate: rate) + 1
            case .threeSeconds: return 3 * rate + 17
            }
        }
    }

    @Test("the round trip is bit-exact", arguments: [16_000, 22_050, 24_000, 48_000], Length.allCases)
    func roundTrip(rate: Int, length: Length) throws {
        let directory = try TemporaryFolder.make("tourpack-audio")
        defer { TemporaryFolder.remove(directory) }
        let pcm = sineWithNoise(count: try length.count(rate: rate), rate: rate)
        let url = directory.appendingPathComponent("chunk.flac")
        try FLACFile.write(pcm, to: url)
        let back = try FLACFile.read(url)
        #expect(back.sampleRate == rate)
        #expect(back.samples.count == pcm.samples.count)
        #expect(back.samples == pcm.samples)
    }

    @Test("espeak-ng speech comes back bit-exact in under 70% of the PCM's bytes")
    func speech() throws {
        let directory = try TemporaryFolder.make("tourpack-audio")
        defer { TemporaryFolder.remove(directory) }
        let pcm = try Fixtures.speech(Fixtures.sentences.joined(separator: " "), in: directory)
        let url = directory.appendingPathComponent("speech.flac")
        try FLACFile.write(pcm, to: url)
        #expect(try FLACFile.read(url) == pcm)
        let size = try #require(try FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int)
        #expect(Double(size) < 0.7 * Double(2 * pcm.samples.count), "\(size) bytes for \(pcm.samples.count) samples")
    }

    @Test("the file is real FLAC, and much smaller than the PCM", arguments: [16_000, 24_000, 48_000])
    func probedByFFprobe(rate: Int) throws {
        let directory = try TemporaryFolder.make("tourpack-audio")
        defer { TemporaryFolder.remove(directory) }
        let pcm = sineWithNoise(count: 5 * rate + 123, rate: rate)
        let url = directory.appendingPathComponent("sine.flac")
        try FLACFile.write(pcm, to: url)

        let bytes = [UInt8](try Data(contentsOf: url))
        #expect(bytes.starts(with: Array("fLaC".utf8)))
        #expect(Double(bytes.count) < 0.7 * Double(2 * pcm.samples.count), "\(bytes.count) bytes for \(pcm.samples.count) samples")

        let probe = try Fixtures.probe(url)
        let stream = try #require((probe["streams"] as? [[String: Any]])?.first)
        let container = try #require(probe["format"] as? [String: Any])
        #expect(container["format_name"] as? String == "flac")
        #expect(stream["codec_name"] as? String == "flac")
        #expect(number(stream["sample_rate"]) == Double(rate))
        #expect(stream["channels"] as? Int == 1)
        #expect(number(stream["bits_per_raw_sample"]) == 16)
        #expect(number(stream["duration_ts"]) == Double(pcm.samples.count))
        let duration = try #require(number(stream["duration"]))
        #expect(abs(duration - pcm.durationSeconds) < 0.000_01, "ffprobe \(duration) s for \(pcm.durationSeconds) s")
    }

    @Test("writing replaces an existing file")
    func replaces() throws {
        let directory = try TemporaryFolder.make("tourpack-audio")
        defer { TemporaryFolder.remove(directory) }
        let url = directory.appendingPathComponent("chunk.flac")
        try Data(repeating: 0xAB, count: 500_000).write(to: url)
        let pcm = sineWithNoise(count: 2_000, rate: 24_000)
        try FLACFile.write(pcm, to: url)
        #expect(try FLACFile.read(url) == pcm)
    }

    enum Damage: String, CaseIterable, CustomTestStringConvertible {
        case cutInHalf, lastByteMissing, onlyHeader
        var testDescription: String { rawValue }
    }

    @Test("a truncated file throws", arguments: Damage.allCases)
    func truncated(_ damage: Damage) throws {
        let directory = try TemporaryFolder.make("tourpack-audio")
        defer { TemporaryFolder.remove(directory) }
        let url = directory.appendingPathComponent("chunk.flac")
        try FLACFile.write(sineWithNoise(count: 2 * 24_000, rate: 24_000), to: url)
        let bytes = [UInt8](try Data(contentsOf: url))
        let kept: Int
        switch damage {
        case .cutInHalf: kept = bytes.count / 2
        case .lastByteMissing: kept = bytes.count - 1
        case .onlyHeader: kept = try audioOffset(bytes)
        }
        try Data(bytes.prefix(kept)).write(to: url)
        #expect(throws: (any Error).self) { _ = try FLACFile.read(url) }
    }

    @Test("one flipped byte anywhere in the audio frames throws")
    func flippedByte() throws {
        let directory = try TemporaryFolder.make("tourpack-audio")
        defer { TemporaryFolder.remove(directory) }
        let url = directory.appendingPathComponent("chunk.flac")
        let pcm = sineWithNoise(count: 3 * 22_050, rate: 22_050)
        try FLACFile.write(pcm, to: url)
        let original = [UInt8](try Data(contentsOf: url))
        let start = try audioOffset(original)
        // The middle of the audio, then a spread of places including frame headers and the last CRC.
        let places =
            [start + (original.count - start) / 2, start, start + 5, original.count - 1]
            + stride(from: start + 97, to: original.count, by: (original.count - start) / 12)
        for place in places {
            var bytes = original
            bytes[place] ^= 0x5A
            try Data(bytes).write(to: url)
            #expect(throws: (any Error).self, "byte \(place) of \(bytes.count) flipped") { _ = try FLACFile.read(url) }
        }
        try Data(original).write(to: url)
        #expect(try FLACFile.read(url) == pcm)
    }

    @Test("damaged STREAMINFO (sample count, MD5) throws")
    func damagedStreamInfo() throws {
        let directory = try TemporaryFolder.make("tourpack-audio")
        defer { TemporaryFolder.remove(directory) }
        let url = directory.appendingPathComponent("chunk.flac")
        try FLACFile.write(sineWithNoise(count: 10_000, rate: 16_000), to: url)
        let original = [UInt8](try Data(contentsOf: url))
        // "fLaC", the 4-byte block header, then STREAMINFO: total samples end at 8+18, MD5 is 8+18..<8+34.
        for place in [8 + 17, 8 + 20, 8 + 33] {
            var bytes = original
            bytes[place] ^= 0x01
            try Data(bytes).write(to: url)
            #expect(throws: (any Error).self, "STREAMINFO byte \(place - 8) flipped") { _ = try FLACFile.read(url) }
        }
    }

    @Test("a file that is not FLAC throws")
    func notFLAC() throws {
        let directory = try TemporaryFolder.make("tourpack-audio")
        defer { TemporaryFolder.remove(directory) }
        let text = directory.appendingPathComponent("notes.flac")
        try Data("this is not audio at all".utf8).write(to: text)
        #expect(throws: FFmpegError.self) { _ = try FLACFile.read(text) }

        let empty = directory.appendingPathComponent("empty.flac")
        try Data().write(to: empty)
        #expect(throws: FFmpegError.self) { _ = try FLACFile.read(empty) }

        let wav = directory.appendingPathComponent("chunk.flac")
        try Data(WAV.encode(sineWithNoise(count: 4_000, rate: 24_000))).write(to: wav)
        #expect(throws: FFmpegError.self) { _ = try FLACFile.read(wav) }

        #expect(throws: (any Error).self) { _ = try FLACFile.read(directory.appendingPathComponent("missing.flac")) }
    }

    @Test("empty PCM is refused and leaves no file")
    func emptyPCM() throws {
        let directory = try TemporaryFolder.make("tourpack-audio")
        defer { TemporaryFolder.remove(directory) }
        let url = directory.appendingPathComponent("empty.flac")
        #expect(throws: TourpackError.self) { try FLACFile.write(PCMAudio(samples: [], sampleRate: 24_000), to: url) }
        #expect(!FileManager.default.fileExists(atPath: url.path))
    }
}

import CFFmpeg
import CFFmpegShims
import Foundation
import Testing
import TourpackAudio
import TourpackCore
import TourpackKit
import TourpackTesting

/// The encoder's own figures for a format, read from a freshly opened FFmpeg
/// encoder with the contract's settings: frame size and delay (priming).
private func encoderFigures(_ format: AudioFormat, rate: Int) throws -> (frameSize: Int, delay: Int) {
    let name = ["aac": "aac", "mp3": "libmp3lame", "opus": "libopus"][format.rawValue]!
    let codec = try #require(avcodec_find_encoder_by_name(name))
    var context = avcodec_alloc_context3(codec)
    defer { avcodec_free_context(&context) }
    let c = try #require(context)
    c.pointee.sample_fmt = codec.pointee.sample_fmts[0]
    c.pointee.sample_rate = Int32(rate)
    tp_channel_layout_mono(&c.pointee.ch_layout)
    c.pointee.bit_rate = Int64(format.bitrateKbps * 1000)
    c.pointee.time_base = AVRational(num: 1, den: Int32(rate))
    #expect(avcodec_open2(c, codec, nil) == 0)
    return (Int(c.pointee.frame_size), Int(c.pointee.initial_padding))
}

private func number(_ value: Any?) -> Double? {
    if let text = value as? String { return Double(text) }
    return (value as? NSNumber)?.doubleValue
}

@Suite("FFmpegAudioEncoder on espeak-ng speech", .offThePool)
struct EncoderTests {
    static let cases: [(AudioFormat, Int)] = AudioFormat.allCases.flatMap { format in [(format, 24_000), (format, 22_050)] }

    @Test("files pass ffprobe, a full decode and the format's own validator", arguments: cases)
    func encodeJoinedSpeech(format: AudioFormat, inputRate: Int) throws {
        let directory = try TemporaryFolder.make("tourpack-audio")
        defer { TemporaryFolder.remove(directory) }
        let joined = try PCMJoiner().joinInMemory(Fixtures.chunks(rate: inputRate, in: directory))
        let url = directory.appendingPathComponent("poi_Detailed.\(format.fileExtension)")
        let encoded = try FFmpegAudioEncoder().encodeInMemory(joined, as: format, metadata: Fixtures.metadata, to: url)
        // AAC and Opus at the input's rate (Opus: the next it supports), MP3 at 44.1 kHz;
        // an Opus decoder always puts out 48 kHz, and the OpusHead records the input's rate.
        let rate = format.defaultSampleRate(endpointRate: inputRate)
        let decodedRate = format == .opus ? 48_000 : rate
        #expect(rate == (format == .mp3 ? 44_100 : format == .opus ? 24_000 : inputRate))

        // ffprobe: codec, rate, channels, bit rate.
        let probe = try Fixtures.probe(url)
        let stream = try #require((probe["streams"] as? [[String: Any]])?.first)
        let container = try #require(probe["format"] as? [String: Any])
        #expect(stream["codec_name"] as? String == format.codecName)
        #expect(number(stream["sample_rate"]) == Double(decodedRate))
        #expect(stream["channels"] as? Int == 1)
        let bitRate = try #require(number(stream["bit_rate"]) ?? number(container["bit_rate"]))
        let nominal = Double(format.bitrateKbps * 1000)
        // MP3 is constant; AAC and Opus spend what the speech needs, up to a little over the nominal rate.
        if format == .mp3 {
            #expect(abs(bitRate - nominal) <= nominal * 0.10, "ffprobe bit rate \(bitRate)")
        } else {
            #expect(bitRate <= nominal * 1.15 && bitRate >= nominal * 0.5, "ffprobe bit rate \(bitRate)")
        }

        // What the encoder reported matches the file.
        #expect(encoded.format == format && encoded.codec == format.codecName)
        #expect(encoded.sampleRateHz == rate && encoded.channels == 1)
        #expect(encoded.bitrateKbps <= format.bitrateKbps * 115 / 100, "reported \(encoded.bitrateKbps) kbps")
        let bytes = try Data(contentsOf: url)
        #expect(encoded.sizeBytes == Int64(bytes.count))
        let digest = try FileDigest.sha256(of: url).hex
        #expect(encoded.sha256.count == 64 && encoded.sha256 == digest)

        // Duration within one frame plus the encoder delay of the joined PCM.
        let figures = try encoderFigures(format, rate: rate)
        let tolerance = Double(figures.frameSize + figures.delay) / Double(rate)
        let probed = try #require(number(container["duration"]))
        #expect(abs(probed - joined.durationSeconds) <= tolerance, "ffprobe \(probed) s for \(joined.durationSeconds) s of PCM")
        #expect(abs(encoded.durationSeconds - joined.durationSeconds) <= tolerance, "reported \(encoded.durationSeconds) s")

        // A full decode: ffmpeg's, then ours. Ours counts the playable samples exactly.
        let decode = try Tool.run("ffmpeg", ["-nostdin", "-v", "error", "-i", url.path, "-f", "null", "-"])
        #expect(decode.status == 0 && decode.stderr.isEmpty, "ffmpeg decode: \(decode.stderr)")
        let inspection = try AudioFileInspector().inspect(url)
        #expect(inspection.isClean, "\(inspection.errors)")
        #expect(inspection.codecName == format.codecName && inspection.channels == 1 && inspection.sampleRateHz == decodedRate)
        #expect(inspection.encodedSampleRateHz == rate)
        #expect(abs(inspection.durationSeconds - joined.durationSeconds) <= 0.005, "decoded \(inspection.durationSeconds) s")
        #expect(abs(inspection.durationSeconds - encoded.durationSeconds) <= 0.001)

        // Tags: title and album on the container (mp3, m4a) or on the stream (Ogg).
        let formatTags = container["tags"] as? [String: String] ?? [:]
        let streamTags = stream["tags"] as? [String: String] ?? [:]
        let tags = (format == .opus ? streamTags : formatTags).reduce(into: [String: String]()) { $0[$1.key.lowercased()] = $1.value }
        #expect(tags["title"] == Fixtures.metadata.title)
        #expect(tags["album"] == Fixtures.metadata.album)
        switch format {
        case .aac: #expect(streamTags["language"] == "eng")
        case .mp3: #expect(tags["language"] == "eng")
        case .opus: #expect(tags["language"] == "en-US")
        }

        switch format {
        case .aac:
            let boxes = try Fixtures.topLevelBoxes(url)
            let moov = try #require(boxes.firstIndex(of: "moov"))
            let mdat = try #require(boxes.firstIndex(of: "mdat"))
            #expect(moov < mdat, "top-level boxes \(boxes)")
            #expect(boxes.first == "ftyp")
        case .mp3:
            let check = try Tool.run("mp3val", [url.path])
            let problems = check.stdout.split(separator: "\n").filter { $0.hasPrefix("WARNING") || $0.hasPrefix("ERROR") }
            #expect(check.status == 0 && problems.isEmpty, "mp3val: \(check.stdout)")
            // The Xing/Info header sits in the first MPEG frame, after the ID3v2 tag.
            #expect(bytes.starts(with: Array("ID3".utf8)))
            let head = bytes.prefix(8192)
            #expect(head.range(of: Data("Info".utf8)) != nil || head.range(of: Data("Xing".utf8)) != nil)
            #expect(inspection.primingSamples >= figures.delay, "LAME tag delay \(inspection.primingSamples)")
        case .opus:
            let check = try Tool.run("opusinfo", [url.path])
            let output = check.stdout + check.stderr
            #expect(check.status == 0 && !output.contains("WARNING") && !output.contains("ERROR"), "opusinfo: \(output)")
            let preSkip = output.split(separator: "\n").first { $0.contains("Pre-skip") }
                .flatMap { Int($0.split(separator: ":").last!.trimmingCharacters(in: .whitespaces)) }
            // Pre-skip counts 48 kHz samples, whatever rate the encoder ran at.
            #expect(preSkip == figures.delay * 48_000 / rate, "opusinfo pre-skip \(preSkip.map(String.init) ?? "missing")")
            // The end granule: opusinfo's playback length is granule minus pre-skip.
            let length = output.split(separator: "\n").first { $0.contains("Playback length") }.map(String.init) ?? ""
            let seconds = length.split(separator: ":").dropFirst().joined(separator: ":")
                .trimmingCharacters(in: .whitespaces).dropLast()  // "0m:18.732s"
            let parts = seconds.split(separator: "m:")
            let playback = parts.count == 2 ? (Double(parts[0]) ?? 0) * 60 + (Double(parts[1]) ?? 0) : -1
            #expect(abs(playback - joined.durationSeconds) <= 0.002, "opusinfo playback \(playback) s")
        }
    }

    @Test("a single very short chunk encodes in every format", arguments: AudioFormat.allCases)
    func shortChunk(format: AudioFormat) throws {
        let directory = try TemporaryFolder.make("tourpack-audio")
        defer { TemporaryFolder.remove(directory) }
        let speech = try Fixtures.speech("Hi.", in: directory).resampled(to: 24_000)
        let loud = try #require(speech.samples.firstIndex(where: { abs(Int($0)) > 2_000 }))
        let short = try PCMJoiner().joinInMemory([PCMAudio(samples: Array(speech.samples[loud..<(loud + 240)]), sampleRate: 24_000)])
        let url = directory.appendingPathComponent("short.\(format.fileExtension)")
        let encoded = try FFmpegAudioEncoder().encodeInMemory(short, as: format, metadata: Fixtures.metadata, to: url)
        let inspection = try AudioFileInspector().inspect(url)
        #expect(inspection.isClean, "\(inspection.errors)")
        #expect(encoded.durationSeconds > 0)
        let rate = format.defaultSampleRate(endpointRate: 24_000)
        let figures = try encoderFigures(format, rate: rate)
        #expect(abs(encoded.durationSeconds - 0.010) <= Double(figures.frameSize + figures.delay) / Double(rate))
        let decode = try Tool.run("ffmpeg", ["-nostdin", "-v", "error", "-i", url.path, "-f", "null", "-"])
        #expect(decode.status == 0 && decode.stderr.isEmpty, "ffmpeg decode: \(decode.stderr)")
    }

    @Test("empty PCM is refused and leaves no file")
    func emptyPCM() throws {
        let directory = try TemporaryFolder.make("tourpack-audio")
        defer { TemporaryFolder.remove(directory) }
        let url = directory.appendingPathComponent("empty.m4a")
        #expect(throws: PCMJoiner.JoinError.empty) {
            try FFmpegAudioEncoder().encodeInMemory(
                PCMAudio(samples: [], sampleRate: 24_000), as: .aac, metadata: Fixtures.metadata, to: url)
        }
        #expect(!FileManager.default.fileExists(atPath: url.path))
    }

    /// A full disk cannot be made portably in a test; a folder that is a file
    /// fails the same way, through `OutputContainer`'s checks on the file's
    /// open, writes and close, and the message must say which file.
    @Test("an error writing the file names the file", arguments: AudioFormat.allCases)
    func writeErrorNamesTheFile(format: AudioFormat) throws {
        let directory = try TemporaryFolder.make("tourpack-audio")
        defer { TemporaryFolder.remove(directory) }
        let notAFolder = directory.appendingPathComponent("AudioCache")
        try Data("a file, not a folder".utf8).write(to: notAFolder)
        let url = notAFolder.appendingPathComponent("poi_Detailed.\(format.fileExtension)")
        let pcm = PCMAudio(samples: [Int16](repeating: 0, count: 2_400), sampleRate: 24_000)
        do {
            _ = try FFmpegAudioEncoder().encodeInMemory(pcm, as: format, metadata: Fixtures.metadata, to: url)
            Issue.record("encoding into a path under a file succeeded")
        } catch {
            #expect("\(error)".contains(url.path), "\(error)")
            #expect("\(error)".contains("Not a directory"), "\(error)")
        }
    }

    @Test("one stream into several formats at once")
    func severalFormats() throws {
        let directory = try TemporaryFolder.make("tourpack-audio")
        defer { TemporaryFolder.remove(directory) }
        let pcm = try Fixtures.speech(Fixtures.sentences[1], in: directory).resampled(to: 24_000)
        let targets = AudioFormat.allCases.map {
            EncodeTarget(
                format: $0, sampleRateHz: $0.defaultSampleRate(endpointRate: 24_000),
                url: directory.appendingPathComponent("x.\($0.fileExtension)"))
        }
        let session = try FFmpegAudioEncoder().open(targets, inputRate: 24_000, metadata: Fixtures.metadata)
        // Blocks of odd sizes, as the join hands them out.
        try pcm.samples.withUnsafeBufferPointer { samples in
            var start = 0
            var size = 1
            while start < samples.count {
                let end = min(samples.count, start + size)
                try session.write(UnsafeBufferPointer(rebasing: samples[start..<end]))
                start = end
                size = size * 3 % 5_003 + 1
            }
        }
        #expect(session.samplesWritten == pcm.samples.count)
        let results = try session.finish()
        #expect(Set(results.keys) == Set(AudioFormat.allCases))
        for (format, encoded) in results {
            #expect(encoded.codec == format.codecName)
            #expect(abs(encoded.durationSeconds - pcm.durationSeconds) < 0.01)
        }
        #expect(Set(results.values.map(\.sha256)).count == 3)
    }
}

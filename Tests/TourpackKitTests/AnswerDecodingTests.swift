import Foundation
import Testing
import TourpackCore
import TourpackTesting

@testable import TourpackAudio
@testable import TourpackKit
@testable import TourpackSpeech

/// The endpoint's answer is decoded as it is read. Whatever sizes the body
/// arrives in, the samples are those of a whole-body decode, and a body cut
/// short or garbled anywhere is `UndecodableBody` (a retryable fault).
@Suite struct AnswerDecodingTests {
    static let pcm = PCMAudio(samples: (0..<5_001).map { Int16(truncatingIfNeeded: ($0 * 7_919) % 65_536 - 32_768) }, sampleRate: 24_000)

    static func googleBody(_ wav: [UInt8], before: String = "", after: String = "", escapeSlashes: Bool = false) -> [UInt8] {
        var base64 = Data(wav).base64EncodedString()
        if escapeSlashes { base64 = base64.replacingOccurrences(of: "/", with: "\\/") }
        return Array("{\(before)\"audioContent\": \"\(base64)\"\(after)}".utf8)
    }

    /// Feeds `body` in pieces of the given sizes (cycled) and collects the samples.
    static func decode(_ body: [UInt8], with decoder: any AnswerDecoder, pieces: [Int]) throws -> PCMAudio {
        try decodeTimed(body, with: decoder, pieces: pieces).0
    }

    static let splits: [[Int]] = [[1], [3, 1, 4, 1, 5], [4_096], [1 << 20], [43, 2, 7]]

    @Test("Google: the same samples as a whole decode, whatever the pieces", arguments: splits)
    func google(pieces: [Int]) throws {
        let body = Self.googleBody(
            WAV.encode(Self.pcm), before: "\"timepoints\": [], ",
            after: ", \"audioConfig\": {\"audioEncoding\": \"LINEAR16\", \"x\": [1, 2.5e3, true, null, \"}\\\"]\"]}")
        #expect(try Self.decode(body, with: GoogleAnswerDecoder(), pieces: pieces) == Self.pcm)
        let escaped = Self.googleBody(WAV.encode(Self.pcm), escapeSlashes: true)
        #expect(try Self.decode(escaped, with: GoogleAnswerDecoder(), pieces: pieces) == Self.pcm)
    }

    /// Decodes `body` fed in `pieces` (cycled), and returns the samples with the decoder's sentence times.
    static func decodeTimed<Decoder: AnswerDecoder>(_ body: [UInt8], with decoder: Decoder, pieces: [Int]) throws -> (PCMAudio, [Double]?) {
        var decoder = decoder
        var samples: [Int16] = []
        var rate = 0
        var start = 0
        var turn = 0
        while start < body.count {
            let end = min(body.count, start + pieces[turn % pieces.count])
            try body[start..<end].withUnsafeBytes { bytes in
                try decoder.feed(bytes) { block, blockRate in
                    samples.append(contentsOf: block)
                    rate = blockRate
                }
            }
            start = end
            turn += 1
        }
        try decoder.finish()
        return (PCMAudio(samples: samples, sampleRate: rate), decoder.sentenceTimes)
    }

    /// Piece sizes of 1 to 32 bytes, from a fixed seed.
    static let smallPieces: [Int] = {
        var generator = SeededGenerator(seed: 0x9E37_79B9_7F4A_7C15)
        return (0..<97).map { _ in 1 + Int(generator.next() >> 59) }
    }()

    @Test("Google timepoints, before or after the audio, fed whole or in 1–32-byte pieces: the same samples and times")
    func googleTimepoints() throws {
        let wav = WAV.encode(Self.pcm)
        let timepoints =
            #""timepoints": [{"markName": "s1", "timeSeconds": 1.25}, {"markName": "s0"}, {"markName": "s2", "timeSeconds": 2.5e0}]"#
        for body in [Self.googleBody(wav, before: timepoints + ", "), Self.googleBody(wav, after: ", " + timepoints, escapeSlashes: true)] {
            for pieces in [[body.count], Self.smallPieces] {
                let (audio, times) = try Self.decodeTimed(body, with: GoogleAnswerDecoder(marks: 3), pieces: pieces)
                #expect(audio == Self.pcm)
                #expect(times == [0, 1.25, 2.5])
            }
            // No marks asked: no times read.
            #expect(try Self.decodeTimed(body, with: GoogleAnswerDecoder(), pieces: [7]).1 == nil)
            // A mark the request did not carry is missing: none at all.
            #expect(try Self.decodeTimed(body, with: GoogleAnswerDecoder(marks: 4), pieces: [7]).1 == nil)
        }
        // Timepoints past the capture limit are dropped, the audio kept.
        let huge =
            "\"timepoints\": [" + Array(repeating: #"{"markName": "x", "timeSeconds": 1}"#, count: 40_000).joined(separator: ",") + "]"
        let (audio, times) = try Self.decodeTimed(
            Self.googleBody(wav, after: ", " + huge), with: GoogleAnswerDecoder(marks: 1), pieces: [4_096])
        #expect(audio == Self.pcm && times == nil)
    }

    @Test("ElevenLabs with-timestamps: base64 PCM streamed, alignment read, fed whole or in 1–32-byte pieces")
    func elevenLabsTimestamps() throws {
        let sent = "Hi. Où? 日本."
        let characters = sent.unicodeScalars.map { "\"\(String($0))\"" }.joined(separator: ",")
        let times = (0..<sent.unicodeScalars.count).map { String(Double($0) / 10) }.joined(separator: ",")
        let audio = Data(Self.pcm.samples.flatMap { withUnsafeBytes(of: $0.littleEndian, Array.init) }).base64EncodedString()
        let alignment =
            #"{"characters": [\#(characters)], "character_start_times_seconds": [\#(times)], "character_end_times_seconds": [\#(times)]}"#
        let body = Array(#"{"audio_base64": "\#(audio)", "alignment": \#(alignment), "normalized_alignment": \#(alignment)}"#.utf8)
        for pieces in [[body.count], Self.smallPieces] {
            let (decoded, sentenceTimes) = try Self.decodeTimed(
                body, with: ElevenLabsTimestampsDecoder(rate: 24_000, sent: sent, starts: [0, 4, 8]), pieces: pieces)
            #expect(decoded == Self.pcm)
            #expect(sentenceTimes == [0, 0.4, 0.8])
        }
        // Starts that could not be placed, or an alignment of other text: audio only.
        #expect(try Self.decodeTimed(body, with: ElevenLabsTimestampsDecoder(rate: 24_000, sent: sent, starts: nil), pieces: [5]).1 == nil)
        #expect(try Self.decodeTimed(body, with: ElevenLabsTimestampsDecoder(rate: 24_000, sent: "Hi.", starts: [0]), pieces: [5]).1 == nil)
        #expect(throws: UndecodableBody.self) {
            try Self.decodeTimed(
                Array(body.prefix(body.count - 2)), with: ElevenLabsTimestampsDecoder(rate: 24_000, sent: sent, starts: [0]), pieces: [5])
        }
    }

    @Test("OpenAI WAV: mono and stereo, unknown chunks skipped, as WAV.decode does", arguments: splits)
    func wav(pieces: [Int]) throws {
        let mono = WAV.encode(Self.pcm)
        #expect(try Self.decode(mono, with: WAVStreamDecoder(), pieces: pieces) == Self.pcm)
        // A LIST chunk of odd length (padded) before fmt, and a stereo body.
        var stereo: [UInt8] = Array("RIFF".utf8) + [0, 0, 0, 0] + Array("WAVE".utf8)
        stereo += Array("LIST".utf8) + [3, 0, 0, 0, 1, 2, 3, 0]
        stereo += Array("fmt ".utf8) + [16, 0, 0, 0, 1, 0, 2, 0, 0xC0, 0x5D, 0, 0, 0, 0x77, 1, 0, 4, 0, 16, 0]
        let frames: [(Int16, Int16)] = (0..<999).map { (Int16($0), Int16(-3 * $0)) }
        stereo += Array("data".utf8) + withUnsafeBytes(of: UInt32(frames.count * 4).littleEndian, Array.init)
        for (left, right) in frames {
            stereo += withUnsafeBytes(of: left.littleEndian, Array.init) + withUnsafeBytes(of: right.littleEndian, Array.init)
        }
        #expect(try Self.decode(stereo, with: WAVStreamDecoder(), pieces: pieces) == WAV.decode(stereo))
        // A streaming writer's open-ended data chunk: whatever is there.
        var open = mono
        open.replaceSubrange(40..<44, with: [0xFF, 0xFF, 0xFF, 0xFF])
        #expect(try Self.decode(open, with: WAVStreamDecoder(), pieces: pieces) == Self.pcm)
    }

    /// Found by the `answer-wav` fuzz target (issue 27): a WAV declaring
    /// 3,137,494,464 Hz trapped converting the rate for the resampler, and
    /// one at 1 Hz would be resampled into 24,000 samples per sample.
    @Test("a WAV at a sample rate no endpoint speaks is undecodable", arguments: [1, 7_999, 384_001, 3_137_494_464, 0xFFFF_FFFF])
    func absurdRates(rate: Int) throws {
        var wav = WAV.encode(Self.pcm)
        for index in 0..<4 { wav[24 + index] = UInt8(truncatingIfNeeded: rate >> (8 * index)) }
        #expect(throws: UndecodableBody.self) { try Self.decode(wav, with: WAVStreamDecoder(), pieces: [4_096]) }
        #expect(throws: UndecodableBody.self) {
            try Self.decode(Self.googleBody(wav), with: GoogleAnswerDecoder(), pieces: [4_096])
        }
    }

    @Test("a body cut short anywhere, or garbled, is undecodable, never shorter audio")
    func damage() throws {
        let body = Self.googleBody(WAV.encode(Self.pcm))
        for cut in [1, 20, 40, 100, body.count / 2, body.count - 3, body.count - 1] {
            #expect(throws: UndecodableBody.self, "cut at \(cut)") {
                try Self.decode(Array(body.prefix(cut)), with: GoogleAnswerDecoder(), pieces: [777])
            }
        }
        let wav = WAV.encode(Self.pcm)
        for cut in [0, 11, 30, 44, wav.count - 1] {
            #expect(throws: UndecodableBody.self, "WAV cut at \(cut)") {
                try Self.decode(Array(wav.prefix(cut)), with: WAVStreamDecoder(), pieces: [5])
            }
        }
        let garbled: [String] = [
            "<html>502 Bad Gateway</html>",
            "{\"audioContent\": \"UklGR!!\"}",
            "{\"audioContent\": \"UklG\"}",
            "{\"audio\": \"UklGRg==\"}",
            "{\"audioContent\": \"\(Data(WAV.encode(Self.pcm)).base64EncodedString())\"} trailing",
            "[\"audioContent\"]",
        ]
        for text in garbled {
            #expect(throws: UndecodableBody.self, "\(text.prefix(40))") {
                try Self.decode(Array(text.utf8), with: GoogleAnswerDecoder(), pieces: [9])
            }
        }
    }

    /// Base64 fed in pieces of `size`: by runs where `addRun` takes them,
    /// else a byte at a time, as `Base64JSONDecoder` feeds it; or only a
    /// byte at a time (`add`, the reference).
    static func base64(_ text: [UInt8], pieces size: Int, runs: Bool) throws -> [UInt8] {
        var decoder = Base64StreamDecoder()
        var output: [UInt8] = []
        for start in stride(from: 0, to: text.count, by: size) {
            try text[start..<min(text.count, start + size)].withUnsafeBytes { piece in
                var index = 0
                while index < piece.count {
                    let taken = runs ? try decoder.addRun(UnsafeRawBufferPointer(rebasing: piece[index...]), into: &output) : 0
                    if taken > 0 {
                        index += taken
                    } else {
                        try decoder.add(piece[index], into: &output)
                        index += 1
                    }
                }
            }
        }
        try decoder.finish(into: &output)
        return output
    }

    @Test("base64 decoded by runs is Foundation's decode, and refuses what a byte at a time refuses, wherever the pieces end")
    func base64Runs() throws {
        var generator = SeededGenerator(seed: 39)
        for length in 0..<70 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let text = Array(Data(bytes).base64EncodedString().utf8)
            for size in [1, 2, 3, 5, 8, 13, 4_096] {
                #expect(try Self.base64(text, pieces: size, runs: true) == bytes, "\(length) bytes in pieces of \(size)")
            }
            // One byte changed anywhere: the same outcome as a byte at a time.
            guard !text.isEmpty else { continue }
            for damage in [UInt8(ascii: "!"), UInt8(ascii: "="), UInt8(ascii: "\""), 0, 0xC3] {
                var damaged = text
                damaged[Int.random(in: 0..<text.count, using: &generator)] = damage
                let reference = Result { try Self.base64(damaged, pieces: 1, runs: false) }
                for size in [1, 3, 7, 4_096] {
                    let runs = Result { try Self.base64(damaged, pieces: size, runs: true) }
                    switch (reference, runs) {
                    case (.success(let expected), .success(let got)): #expect(got == expected)
                    case (.failure, .failure): break
                    default: Issue.record("\(String(decoding: damaged, as: UTF8.self)) in pieces of \(size): \(runs), not \(reference)")
                    }
                }
            }
        }
    }

    @Test("an answer at another rate is kept at the rate asked for, in a FLAC file with its shape")
    func recorderResamples() throws {
        let folder = try TemporaryFolder.make("recorder")
        defer { TemporaryFolder.remove(folder) }
        let tone = PCMAudio(samples: (0..<22_050).map { Int16(8_000 * sin(2 * .pi * 440 * Double($0) / 22_050)) }, sampleRate: 22_050)
        let quiet = [Int16](repeating: 0, count: 2_205)
        let body = Self.googleBody(WAV.encode(PCMAudio(samples: quiet + tone.samples + quiet, sampleRate: 22_050)))
        let spool = folder.appendingPathComponent("answer")
        try Data(body).write(to: spool)
        let recorder = ChunkRecorder(destination: folder.appendingPathComponent("chunk.flac"), rate: 24_000)
        var decoder: any AnswerDecoder = GoogleAnswerDecoder()
        let shape = try recorder.decode(spool: spool, with: &decoder)
        let kept = try FLACFile.read(folder.appendingPathComponent("chunk.flac"))
        #expect(kept.sampleRate == 24_000)
        #expect(abs(kept.samples.count - 28_800) <= 2, "\(kept.samples.count) samples for 1.2 s")
        var withoutLoudness = shape
        withoutLoudness.loudness = nil
        #expect(withoutLoudness == ShapeMeter.shape(of: kept.samples))
        // Measured on the same pass: the tone's level, and a limiter survey.
        let loudness = try #require(shape.loudness)
        #expect(loudness.integratedLUFS != nil && loudness.limiting.count == LimiterSurvey.thresholdsDBFS.count)
        let audible = try #require(shape.audible)
        #expect(abs(audible.lowerBound - 2_400) <= 40 && abs(audible.upperBound - 26_400) <= 40, "\(audible)")
    }
}

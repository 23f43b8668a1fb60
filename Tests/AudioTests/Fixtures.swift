import Foundation
import Testing
import TourpackAudio
import TourpackCore
import TourpackKit
import TourpackTesting

/// Real speech and real tools for the audio tests: espeak-ng's CLI makes the
/// speech, ffprobe/ffmpeg/mp3val/opusinfo check what the encoder wrote.
enum Fixtures {
    static let sentences = [
        "The Grossglockner High Alpine Road climbs to two thousand five hundred and four meters.",
        "Built between 1930 and 1935, it connects Salzburg with Carinthia.",
        "On a clear day you can see more than thirty peaks above three thousand meters.",
    ]

    /// espeak-ng's speech for `text`, at its native 22050 Hz.
    static func speech(_ text: String, in directory: URL) throws -> PCMAudio {
        let wav = directory.appendingPathComponent("espeak-\(UUID().uuidString).wav")
        let result = try Tool.run("espeak-ng", ["-w", wav.path, text])
        #expect(result.status == 0, "espeak-ng failed: \(result.stderr)")
        return try WAV.decode(Array(try Data(contentsOf: wav)))
    }

    /// The three sentences as chunks, at `rate` (22050 is espeak's own, 24000 the TTS endpoint's).
    static func chunks(rate: Int, in directory: URL) throws -> [PCMAudio] {
        try sentences.map { try speech($0, in: directory).resampled(to: rate) }
    }

    /// ffprobe's JSON for the file's streams and format.
    static func probe(_ url: URL) throws -> [String: Any] {
        let result = try Tool.run("ffprobe", ["-v", "error", "-of", "json", "-show_streams", "-show_format", url.path])
        #expect(result.status == 0, "ffprobe failed: \(result.stderr)")
        return try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any] ?? [:]
    }

    /// The top-level box types of an ISO BMFF (mp4) file, in file order.
    static func topLevelBoxes(_ url: URL) throws -> [String] {
        let bytes = [UInt8](try Data(contentsOf: url))
        var boxes: [String] = []
        var offset = 0
        while offset + 8 <= bytes.count {
            var size = bytes[offset..<offset + 4].reduce(0) { $0 << 8 | Int($1) }
            let type = String(decoding: bytes[offset + 4..<offset + 8], as: UTF8.self)
            if size == 1, offset + 16 <= bytes.count {
                size = bytes[offset + 8..<offset + 16].reduce(0) { $0 << 8 | Int($1) }
            } else if size == 0 {
                size = bytes.count - offset
            }
            guard size >= 8 else { break }
            boxes.append(type)
            offset += size
        }
        return boxes
    }

    static let metadata = AudioMetadata(
        title: "Kaiser-Franz-Josefs-Höhe – Detailed", album: "Grossglockner High Alpine Road", language: "en-US")
}

extension Fixtures {
    /// Integrated loudness (LUFS) and true peak (dBTP) by ffmpeg's own
    /// `ebur128` filter: a meter that shares no code with the project's.
    static func ffmpegLoudness(_ url: URL) throws -> (integrated: Double, truePeak: Double) {
        let result = try Tool.run("ffmpeg", ["-hide_banner", "-nostats", "-i", url.path, "-af", "ebur128=peak=true", "-f", "null", "-"])
        #expect(result.status == 0, "ffmpeg ebur128 failed: \(result.stderr)")
        let summary = result.stderr.components(separatedBy: "Summary:").last ?? ""
        func value(after label: String) -> Double? {
            guard let range = summary.range(of: label) else { return nil }
            return Double(summary[range.upperBound...].split(whereSeparator: \.isWhitespace).first.map(String.init) ?? "")
        }
        return (value(after: "I:") ?? .nan, value(after: "Peak:") ?? .nan)
    }
}

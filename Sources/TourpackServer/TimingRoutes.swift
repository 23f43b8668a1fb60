import Foundation
import HTTPTypes
import Hummingbird

/// The answers that say when things are spoken, each in its provider's
/// shape, from the `SpeechTimeline` of espeak-ng's own events:
///
/// - Google v1beta1: `timepoints`, one per `<mark>` of the SSML, with
///   `markName` and `timeSeconds`, beside `audioContent` and `audioConfig`.
/// - ElevenLabs `with-timestamps`: `audio_base64` and an `alignment` (and
///   the same `normalized_alignment`) giving every character of `text` a
///   start and end in seconds.
/// - Polly `OutputFormat: json`: newline-delimited speech marks
///   (`sentence`, `word`, `ssml`), `time` in whole milliseconds and
///   `start`/`end` as UTF-8 byte offsets into `Text`, tags included.
///
/// Each bills as the plain request does: Google every input character,
/// `<mark>` tags included; ElevenLabs the same credits; Polly the same
/// billed characters (SSML tags free) for marks as for audio.
extension SynthesisRoutes {
    // MARK: Google v1beta1

    /// What Google's v1beta1 answer echoes in `audioConfig`, and whether it lists marks.
    struct GoogleAnswerConfig: Sendable {
        var encodingName: String
        var speakingRate: Double
        var pitch: Double
        var sampleRateHertz: Int
        var marks: Bool
    }

    /// Google's refusal of `enableTimePointing`: any value on v1 (the field
    /// is v1beta1's), or a value that is not a `TimepointType` on v1beta1.
    static func timePointingRefusal(_ values: [String]?, beta: Bool) -> Response? {
        guard let values else { return nil }
        guard beta else {
            return ErrorBody.google(400, "Invalid JSON payload received. Unknown name \"enableTimePointing\": Cannot find field.")
        }
        for (index, value) in values.enumerated() where value != "SSML_MARK" && value != "TIMEPOINT_TYPE_UNSPECIFIED" {
            return ErrorBody.google(
                400,
                "Invalid value at 'enable_time_pointing[\(index)]' (type.googleapis.com/google.cloud.texttospeech.v1beta1.SynthesizeSpeechRequest.TimepointType), \"\(value)\""
            )
        }
        return nil
    }

    static func googleBetaEnvelope(_ config: GoogleAnswerConfig) -> Envelope<SpeechTimeline> {
        Envelope(contentType: "application/json; charset=utf-8") { audio, timeline in
            var audioConfig: [String: Any] = [
                "audioEncoding": config.encodingName, "speakingRate": config.speakingRate, "sampleRateHertz": config.sampleRateHertz,
            ]
            // proto3 JSON leaves out a field at its default.
            if config.pitch != 0 { audioConfig["pitch"] = config.pitch }
            var object: [String: Any] = ["audioConfig": audioConfig]
            let timepoints = config.marks ? timeline.marks : []
            if !timepoints.isEmpty {
                object["timepoints"] = timepoints.map { ["markName": $0.name, "timeSeconds": milliseconds($0.seconds)] as [String: Any] }
            }
            return json(object, base64: "audioContent", of: audio)
        }
    }

    /// `object` as JSON with `key` holding `audio` in base64, written as
    /// bytes into the place a marker took: Foundation's JSONSerialization
    /// writes a string a character at a time, and spent two thirds of
    /// serve-tts's CPU on answers of megabytes. Base64 needs no escape.
    static func json(_ object: [String: Any], base64 key: String, of audio: [UInt8]) -> [UInt8] {
        var object = object
        let marker = "tourpack-audio-\(UUID().uuidString)"
        object[key] = marker
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) else { return [] }
        let text = Array(data)
        guard let place = text.firstRange(of: Array(marker.utf8)) else { return [] }
        return Array(text[..<place.lowerBound]) + Array(Data(audio).base64EncodedData()) + Array(text[place.upperBound...])
    }

    // MARK: ElevenLabs with-timestamps

    /// `{"audio_base64", "alignment", "normalized_alignment"}`. The local
    /// voice does not rewrite the text, so both alignments are of `text` as
    /// sent. `streamed` (`/stream/with-timestamps`) sends it as the one line
    /// of a newline-delimited stream of such chunks.
    static func elevenLabsTimestampsEnvelope(streamed: Bool) -> Envelope<SpeechTimeline> {
        Envelope(contentType: "application/json") { audio, timeline in
            let alignment = timeline.alignment
            let shaped: [String: Any] = [
                "characters": alignment.characters,
                "character_start_times_seconds": alignment.startSeconds.map(milliseconds),
                "character_end_times_seconds": alignment.endSeconds.map(milliseconds),
            ]
            let body = json(["alignment": shaped, "normalized_alignment": shaped], base64: "audio_base64", of: audio)
            return streamed ? body + Array("\n".utf8) : body
        }
    }

    // MARK: Polly speech marks

    static let pollyMarkTypes = ["sentence", "ssml", "viseme", "word"]

    /// Polly's refusals of `SpeechMarkTypes`: a value outside its enum,
    /// marks without `json` or `json` without marks, `ssml` marks for
    /// plain text. Visemes are refused too: espeak-ng reports none.
    static func speechMarksRefusal(_ types: [String], format: String, textType: String) -> Response? {
        if types.contains(where: { !pollyMarkTypes.contains($0) }) || types.count > 4 {
            return ErrorBody.polly(
                400, "ValidationException",
                "1 validation error detected: Value '[\(types.joined(separator: ", "))]' at 'speechMarkTypes' failed to satisfy constraint: Member must satisfy constraint: [Member must satisfy enum value set: [sentence, ssml, viseme, word]]"
            )
        }
        if format == "json", types.isEmpty {
            return ErrorBody.polly(
                400, "MarksNotSupportedForFormatException", "SpeechMarkTypes must name at least one type for the json OutputFormat.")
        }
        if format != "json", !types.isEmpty {
            return ErrorBody.polly(
                400, "MarksNotSupportedForFormatException",
                "Speech marks are not supported for the OutputFormat selected. Speech marks are only available for content in json format.")
        }
        if types.contains("ssml"), textType != "ssml" {
            return ErrorBody.polly(
                400, "SsmlMarksNotSupportedForTextTypeException", "SSML speech marks are not supported for plain text-type input.")
        }
        if types.contains("viseme") {
            return ErrorBody.polly(
                400, "ValidationException",
                "serve-tts makes no viseme speech marks (espeak-ng reports none); ask for sentence, word or ssml.")
        }
        return nil
    }

    /// One JSON object a line, in time order (at one time: sentence, then
    /// ssml, then word, as Polly lists them).
    static func pollyMarksEnvelope(types: Set<String>) -> Envelope<SpeechTimeline> {
        Envelope(contentType: "application/x-json-stream") { _, timeline in
            PollySpeechMarks(timeline: timeline).lines(types: types)
        }
    }

    /// Seconds rounded to the millisecond, as the providers report them.
    static func milliseconds(_ seconds: Double) -> Double { (seconds * 1000).rounded() / 1000 }
}

/// Polly's speech marks for one timeline: offsets in UTF-8 bytes of the
/// input text (tags included, as Polly counts them), times in whole
/// milliseconds from the start of the audio.
struct PollySpeechMarks {
    let timeline: SpeechTimeline
    /// `byteOffsets[i]` is where scalar `i` begins; one more entry for the end.
    let byteOffsets: [Int]

    init(timeline: SpeechTimeline) {
        self.timeline = timeline
        var offsets = [0]
        offsets.reserveCapacity(timeline.scalars.count + 1)
        for scalar in timeline.scalars { offsets.append(offsets[offsets.count - 1] + UTF8.width(scalar)) }
        byteOffsets = offsets
    }

    func lines(types: Set<String>) -> [UInt8] {
        var marks: [(time: Int, order: Int, type: String, start: Int, end: Int, value: String)] = []
        let scalars = timeline.scalars
        func text(_ start: Int, _ end: Int) -> String { String(String.UnicodeScalarView(scalars[start..<end])) }
        if types.contains("sentence") {
            for span in timeline.sentences {
                marks.append((time(span.seconds), 0, "sentence", span.start, span.end, text(span.start, span.end)))
            }
        }
        if types.contains("ssml") {
            for mark in timeline.marks { marks.append((time(mark.seconds), 1, "ssml", mark.tagStart, mark.tagEnd, mark.name)) }
        }
        if types.contains("word") {
            for span in timeline.words { marks.append((time(span.seconds), 2, "word", span.start, span.end, text(span.start, span.end))) }
        }
        marks.sort { ($0.time, $0.order, $0.start) < ($1.time, $1.order, $1.start) }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        var out: [UInt8] = []
        for mark in marks {
            let value = (try? encoder.encode(mark.value)).map { String(decoding: $0, as: UTF8.self) } ?? "\"\""
            let line =
                "{\"time\":\(mark.time),\"type\":\"\(mark.type)\",\"start\":\(byteOffsets[mark.start]),\"end\":\(byteOffsets[mark.end]),\"value\":\(value)}\n"
            out += Array(line.utf8)
        }
        return out
    }

    /// Whole milliseconds, rounded down as Polly's are.
    private func time(_ seconds: Double) -> Int { Int((seconds * 1000).rounded(.down)) }
}

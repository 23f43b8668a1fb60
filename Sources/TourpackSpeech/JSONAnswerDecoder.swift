import Foundation
import TourpackCore

/// An answer that is one JSON object carrying the audio as a base64 string
/// member (Google's `audioContent`, ElevenLabs' `audio_base64`), streamed:
/// a small JSON tokenizer finds that top-level string and sends its
/// characters through a base64 decoder into the `Audio` decoder (a WAV for
/// Google, raw PCM for ElevenLabs); everything else is checked for shape
/// and skipped, except the top-level members named in `captures` whose
/// value is an object or an array (the timings): their JSON text is kept,
/// up to `captureLimit` bytes each, for the dialect to read after `finish`.
/// The body must be one complete JSON object, so one cut short anywhere is
/// caught; the audio is never held whole.
struct Base64JSONDecoder<Audio: AnswerDecoder> {
    private enum Container { case object, array }

    private let audioKey: [UInt8]
    private let captureKeys: [[UInt8]]
    private let captureLimit: Int
    private var stack: [Container] = []
    private var finished = false
    /// In an object at depth 1, whether the next string is a key.
    private var expectKey = false
    private var inString = false
    private var escape = false
    private var unicodeDigits = 0
    /// The string being read is a top-level key; its bytes, up to 32.
    private var readingKey = false
    private var key: [UInt8] = []
    private var lastKey: [UInt8] = []
    /// The string being read is the audio member's value.
    private var readingAudio = false
    private var sawAudio = false
    private var base64 = Base64StreamDecoder()
    private var audio: Audio
    private var decoded: [UInt8] = []
    /// The captured member whose value is being read, and its text so far.
    private var capturing: [UInt8]?
    private var capture: [UInt8] = []
    /// The JSON text of each captured member's value, by key; a value past
    /// `captureLimit` is left out (as if the member were absent).
    private(set) var captured: [String: [UInt8]] = [:]

    init(audioKey: String, audio: Audio, captures: [String] = [], captureLimit: Int = 1 << 20) {
        self.audioKey = Array(audioKey.utf8)
        self.audio = audio
        captureKeys = captures.map { Array($0.utf8) }
        self.captureLimit = captureLimit
    }

    mutating func feed(_ bytes: UnsafeRawBufferPointer, emit: (UnsafeBufferPointer<Int16>, Int) throws -> Void) throws {
        decoded.removeAll(keepingCapacity: true)
        var index = 0
        while index < bytes.count {
            // Inside the audio's string, its base64 goes by whole runs.
            if readingAudio, inString, !escape, unicodeDigits == 0, capturing == nil {
                let taken = try base64.addRun(UnsafeRawBufferPointer(rebasing: bytes[index...]), into: &decoded)
                index += taken
                if taken > 0 { continue }
            }
            let byte = bytes[index]
            index += 1
            if capturing != nil { keep(byte) }
            if inString {
                try string(byte)
            } else {
                try structure(byte)
            }
        }
        try flushDecoded(emit)
    }

    private mutating func keep(_ byte: UInt8) {
        guard capture.count < captureLimit else {
            // Too large to be timings of one chunk: read on, keep none of it.
            capture.removeAll()
            capturing = []
            return
        }
        if capturing?.isEmpty == false { capture.append(byte) }
    }

    private mutating func flushDecoded(_ emit: (UnsafeBufferPointer<Int16>, Int) throws -> Void) throws {
        guard !decoded.isEmpty else { return }
        try decoded.withUnsafeBytes { try audio.feed($0, emit: emit) }
        decoded.removeAll(keepingCapacity: true)
    }

    private mutating func string(_ byte: UInt8) throws {
        if unicodeDigits > 0 {
            guard byte.hexDigitValue != nil else { throw Self.malformed("a bad \\u escape") }
            unicodeDigits -= 1
            if readingAudio { throw Self.malformed("an escape inside the audio") }
            return
        }
        if escape {
            escape = false
            switch byte {
            case UInt8(ascii: "u"): unicodeDigits = 4
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
                UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                break
            default:
                throw Self.malformed("a bad escape")
            }
            // JSON may escape the solidus; base64 uses it.
            if readingAudio {
                guard byte == UInt8(ascii: "/") else { throw Self.malformed("an escape inside the audio") }
                try base64.add(byte, into: &decoded)
            } else if readingKey, key.count < 32 {
                key.append(byte)
            }
            return
        }
        switch byte {
        case UInt8(ascii: "\\"):
            escape = true
        case UInt8(ascii: "\""):
            inString = false
            if readingKey {
                readingKey = false
                lastKey = key
            } else if readingAudio {
                readingAudio = false
                try base64.finish(into: &decoded)
            }
        case 0..<0x20:
            throw Self.malformed("a control character in a string")
        default:
            if readingAudio {
                try base64.add(byte, into: &decoded)
            } else if readingKey, key.count < 32 {
                key.append(byte)
            }
        }
    }

    private mutating func structure(_ byte: UInt8) throws {
        switch byte {
        case UInt8(ascii: " "), UInt8(ascii: "\n"), UInt8(ascii: "\r"), UInt8(ascii: "\t"):
            return
        default:
            break
        }
        guard !finished else { throw Self.malformed("bytes after the JSON object") }
        switch byte {
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            if stack.isEmpty {
                guard byte == UInt8(ascii: "{") else { throw Self.malformed("not an object") }
                expectKey = true
            } else if stack.count == 1, !expectKey, captureKeys.contains(lastKey) {
                capturing = lastKey
                capture = [byte]
            }
            stack.append(byte == UInt8(ascii: "{") ? .object : .array)
        case UInt8(ascii: "}"), UInt8(ascii: "]"):
            guard let top = stack.popLast(), top == (byte == UInt8(ascii: "}") ? .object : .array) else {
                throw Self.malformed("unbalanced brackets")
            }
            if stack.isEmpty { finished = true }
            if stack.count == 1, let member = capturing {
                if !member.isEmpty { captured[String(decoding: member, as: UTF8.self)] = capture }
                capturing = nil
                capture = []
            }
        case UInt8(ascii: ","):
            if stack.count == 1 { expectKey = true }
        case UInt8(ascii: ":"):
            if stack.count == 1 { expectKey = false }
        case UInt8(ascii: "\""):
            guard !stack.isEmpty else { throw Self.malformed("not an object") }
            inString = true
            if stack.count == 1 && expectKey {
                readingKey = true
                key.removeAll(keepingCapacity: true)
            } else if stack.count == 1 && lastKey == audioKey {
                guard !sawAudio else { throw Self.malformed("two \(String(decoding: audioKey, as: UTF8.self)) members") }
                sawAudio = true
                readingAudio = true
            }
        default:
            // Numbers and literals: their characters only.
            guard !stack.isEmpty, Self.isLiteralByte(byte) else { throw Self.malformed("an unexpected character") }
        }
    }

    mutating func finish() throws {
        guard finished, !inString else {
            throw UndecodableBody(reason: "the response is not the expected JSON: it ends early")
        }
        guard sawAudio else { throw UndecodableBody(reason: "the response has no \(String(decoding: audioKey, as: UTF8.self))") }
        try audio.finish()
    }

    /// A captured member's value, parsed; nil when absent or not JSON.
    func member(_ key: String) -> Any? {
        guard let text = captured[key] else { return nil }
        return try? JSONSerialization.jsonObject(with: Data(text))
    }

    private static func malformed(_ what: String) -> UndecodableBody {
        UndecodableBody(reason: "the response is not the expected JSON: \(what)")
    }

    private static func isLiteralByte(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
            || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "+") || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "E")
    }
}

/// Google's answer, `{"audioContent": "<base64 of a WAV>", "timepoints": […]}`.
/// With `marks`, the request carried `<mark name="s0"/>` … `s(marks-1)` and
/// asked for their timepoints (v1beta1 `enableTimePointing: [SSML_MARK]`);
/// `sentenceTimes` is then their `timeSeconds` in mark order, or nil when
/// any is missing or garbled (the audio is kept either way).
package struct GoogleAnswerDecoder: AnswerDecoder {
    private var json: Base64JSONDecoder<WAVStreamDecoder>
    private let marks: Int?
    package private(set) var sentenceTimes: [Double]?

    package init(marks: Int? = nil) {
        self.marks = marks
        json = Base64JSONDecoder(audioKey: "audioContent", audio: WAVStreamDecoder(), captures: marks == nil ? [] : ["timepoints"])
    }

    package mutating func feed(_ bytes: UnsafeRawBufferPointer, emit: (UnsafeBufferPointer<Int16>, Int) throws -> Void) throws {
        try json.feed(bytes, emit: emit)
    }

    package mutating func finish() throws {
        try json.finish()
        if let marks { sentenceTimes = SentenceTimings.googleTimes(json.member("timepoints"), marks: marks) }
    }
}

/// ElevenLabs' `with-timestamps` answer: `{"audio_base64": "<base64 of raw
/// PCM>", "alignment": {"characters", "character_start_times_seconds",
/// "character_end_times_seconds"}, "normalized_alignment": …}`. Each
/// sentence starts at the start time of the character at its position in
/// the text sent (`starts`, in Unicode scalars of `sent`).
package struct ElevenLabsTimestampsDecoder: AnswerDecoder {
    private var json: Base64JSONDecoder<RawPCMDecoder>
    private let sent: String
    private let starts: [Int]?
    package private(set) var sentenceTimes: [Double]?

    /// - Parameter starts: nil when the sentences could not be placed in the
    ///   text sent; the audio is decoded all the same.
    package init(rate: Int, sent: String, starts: [Int]?) {
        self.sent = sent
        self.starts = starts
        json = Base64JSONDecoder(audioKey: "audio_base64", audio: RawPCMDecoder(rate: rate), captures: ["alignment"])
    }

    package mutating func feed(_ bytes: UnsafeRawBufferPointer, emit: (UnsafeBufferPointer<Int16>, Int) throws -> Void) throws {
        try json.feed(bytes, emit: emit)
    }

    package mutating func finish() throws {
        try json.finish()
        if let starts { sentenceTimes = SentenceTimings.elevenLabsTimes(json.member("alignment"), sent: sent, starts: starts) }
    }
}

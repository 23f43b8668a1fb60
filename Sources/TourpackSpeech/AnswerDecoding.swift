import Foundation
import TourpackAudio

/// Decodes an endpoint's answer as it is read, a block of bytes at a time,
/// into 16-bit mono samples: so a five-minute chunk is never held whole,
/// neither as its base64 text, its WAV bytes nor its samples.
///
/// `feed` hands each block's samples to `emit` with the WAV's sample rate.
/// A body that is cut short, garbled or not what the API promises throws
/// `UndecodableBody`, a retryable fault of that request; what `emit` throws
/// (a cache file that cannot be written) passes through unchanged.
package protocol AnswerDecoder {
    mutating func feed(_ bytes: UnsafeRawBufferPointer, emit: (UnsafeBufferPointer<Int16>, Int) throws -> Void) throws
    /// The body ended: throws when it ended early.
    mutating func finish() throws
    /// After `finish`: when each sentence of the request starts, in seconds
    /// from the answer's first sample (`ChunkShape.sentenceTimes`); nil
    /// when the answer carries no timings.
    var sentenceTimes: [Double]? { get }
}

extension AnswerDecoder {
    package var sentenceTimes: [Double]? { nil }
}

/// RIFF/WAVE with 16-bit PCM, streamed: the header chunks are parsed as they
/// arrive, unknown chunks skipped, and the data chunk turned into samples
/// (stereo averaged to mono, as `WAV.decode` does).
package struct WAVStreamDecoder: AnswerDecoder {
    private enum Stage {
        /// Collecting the 12-byte RIFF header, then each chunk's 8-byte header and, for `fmt `, its body.
        case header
        /// Skipping the rest of a chunk we do not read.
        case skipping(Int)
        /// Samples; `remaining` bytes of the data chunk are still due (nil: until the end of the body).
        case data(remaining: Int?)
        case done
    }

    /// The sample rates an answer may come at: telephony's 8 kHz to 384 kHz.
    static let rates = 8_000...384_000

    private var stage = Stage.header
    private var pending: [UInt8] = []
    private var sawRIFF = false
    private var format: (channels: Int, rate: Int)?
    private var declaredBytes = 0
    private var dataBytes = 0
    private var carry: [UInt8] = []
    private var block: [Int16] = []

    package init() {}

    package mutating func feed(_ bytes: UnsafeRawBufferPointer, emit: (UnsafeBufferPointer<Int16>, Int) throws -> Void) throws {
        var input = bytes[...]
        while !input.isEmpty {
            switch stage {
            case .done:
                return
            case .skipping(let count):
                let take = min(count, input.count)
                input = input.dropFirst(take)
                stage = count == take ? .header : .skipping(count - take)
            case .header:
                pending.append(contentsOf: input)
                input = input.suffix(0)
                if let rest = try parseHeader() {
                    try rest.withUnsafeBytes { try feed($0, emit: emit) }
                }
            case .data(let remaining):
                let take = remaining.map { min($0, input.count) } ?? input.count
                try decodeSamples(UnsafeRawBufferPointer(rebasing: input.prefix(take)), emit: emit)
                input = input.dropFirst(take)
                dataBytes += take
                if let remaining {
                    stage = remaining == take ? .done : .data(remaining: remaining - take)
                }
            }
        }
    }

    /// Parses what `pending` holds; returns the bytes after the data chunk's
    /// header once it is reached (and switches to `.data`), nil while more is needed.
    private mutating func parseHeader() throws -> [UInt8]? {
        func u32(_ at: Int) -> Int {
            Int(pending[at]) | Int(pending[at + 1]) << 8 | Int(pending[at + 2]) << 16 | Int(pending[at + 3]) << 24
        }
        func u16(_ at: Int) -> Int { Int(pending[at]) | Int(pending[at + 1]) << 8 }
        func tag(_ at: Int) -> String { String(decoding: pending[at..<at + 4], as: UTF8.self) }
        while true {
            if !sawRIFF {
                guard pending.count >= 12 else { return nil }
                guard tag(0) == "RIFF", tag(8) == "WAVE" else { throw UndecodableBody(reason: "\(WAV.DecodeError.notRIFF)") }
                sawRIFF = true
                pending.removeFirst(12)
            }
            guard pending.count >= 8 else { return nil }
            let id = tag(0)
            let size = u32(4)
            switch id {
            case "fmt ":
                guard pending.count >= 8 + 16 else { return nil }
                guard size >= 16 else { throw UndecodableBody(reason: "unsupported WAV: a fmt chunk of \(size) bytes") }
                let (code, channels, rate, bits) = (u16(8), u16(10), u32(12), u16(22))
                guard code == 1 || code == 0xFFFE else {
                    throw UndecodableBody(reason: "unsupported WAV: format code \(code), expected PCM")
                }
                guard bits == 16 else { throw UndecodableBody(reason: "unsupported WAV: \(bits)-bit samples, expected 16") }
                guard channels == 1 || channels == 2 else { throw UndecodableBody(reason: "unsupported WAV: \(channels) channels") }
                // A rate past Int32 trapped in the resampler, and one far off
                // the rate asked for would be resampled into a flood of samples.
                guard Self.rates.contains(rate) else {
                    throw UndecodableBody(
                        reason: "unsupported WAV: sample rate \(rate) Hz (expected \(Self.rates.lowerBound)–\(Self.rates.upperBound))")
                }
                format = (channels, rate)
                guard skipChunk(size: size) else { return nil }
            case "data":
                guard format != nil else { throw UndecodableBody(reason: "\(WAV.DecodeError.missingChunk("fmt "))") }
                // Streaming writers put 0 or 0xFFFFFFFF here: take what is present.
                let open = size == 0 || size == 0xFFFF_FFFF
                declaredBytes = open ? 0 : size
                stage = .data(remaining: open ? nil : size)
                let rest = Array(pending.dropFirst(8))
                pending = []
                return rest
            default:
                guard skipChunk(size: size) else { return nil }
            }
        }
    }

    /// Drops a chunk's header and its body (padded to an even length) from
    /// `pending`; when the body runs past what has arrived, the rest is
    /// skipped as it comes and false says to wait.
    private mutating func skipChunk(size: Int) -> Bool {
        let whole = 8 + size + (size & 1)
        if pending.count >= whole {
            pending.removeFirst(whole)
            return true
        }
        stage = .skipping(whole - pending.count)
        pending.removeAll()
        return false
    }

    private mutating func decodeSamples(_ bytes: UnsafeRawBufferPointer, emit: (UnsafeBufferPointer<Int16>, Int) throws -> Void) throws {
        guard let format else { return }
        let frameBytes = 2 * format.channels
        carry.append(contentsOf: bytes)
        let frames = carry.count / frameBytes
        guard frames > 0 else { return }
        block.removeAll(keepingCapacity: true)
        block.reserveCapacity(frames)
        carry.withUnsafeBytes { raw in
            for frame in 0..<frames {
                let at = frame * frameBytes
                let left = Int16(bitPattern: UInt16(raw[at]) | UInt16(raw[at + 1]) << 8)
                if format.channels == 1 {
                    block.append(left)
                } else {
                    let right = Int16(bitPattern: UInt16(raw[at + 2]) | UInt16(raw[at + 3]) << 8)
                    block.append(Int16((Int(left) + Int(right)) / 2))
                }
            }
        }
        carry.removeFirst(frames * frameBytes)
        try block.withUnsafeBufferPointer { try emit($0, format.rate) }
    }

    package mutating func finish() throws {
        switch stage {
        case .done, .data(remaining: nil):
            return
        case .data(let remaining?):
            throw UndecodableBody(
                reason: "\(WAV.DecodeError.truncated(expectedBytes: declaredBytes, actualBytes: declaredBytes - remaining))")
        case .header, .skipping:
            if !sawRIFF { throw UndecodableBody(reason: "\(WAV.DecodeError.notRIFF)") }
            throw UndecodableBody(reason: "\(WAV.DecodeError.missingChunk(format == nil ? "fmt " : "data"))")
        }
    }
}

/// Standard base64 (RFC 4648, section 4), strict as Foundation's decoder:
/// the alphabet only, `=` padding only at the end, length a multiple of four.
struct Base64StreamDecoder {
    private var quad: (UInt8, UInt8, UInt8, UInt8) = (0, 0, 0, 0)
    private var count = 0
    private var padding = 0
    private var ended = false

    mutating func add(_ character: UInt8, into output: inout [UInt8]) throws {
        guard !ended else { throw UndecodableBody(reason: "the audio is not base64: data after its padding") }
        let value: UInt8
        switch character {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): value = character - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): value = character - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): value = character - UInt8(ascii: "0") + 52
        case UInt8(ascii: "+"): value = 62
        case UInt8(ascii: "/"): value = 63
        case UInt8(ascii: "="):
            guard count >= 2 else { throw UndecodableBody(reason: "the audio is not base64: misplaced padding") }
            padding += 1
            value = 0
        default:
            throw UndecodableBody(reason: "the audio is not base64")
        }
        if padding > 0 && character != UInt8(ascii: "=") {
            throw UndecodableBody(reason: "the audio is not base64: data after its padding")
        }
        switch count {
        case 0: quad.0 = value
        case 1: quad.1 = value
        case 2: quad.2 = value
        default: quad.3 = value
        }
        count += 1
        guard count == 4 else { return }
        output.append(quad.0 << 2 | quad.1 >> 4)
        if padding < 2 { output.append(quad.1 << 4 | quad.2 >> 2) }
        if padding < 1 { output.append(quad.2 << 6 | quad.3) }
        count = 0
        if padding > 0 { ended = true }
    }

    mutating func finish(into output: inout [UInt8]) throws {
        guard count == 0 else { throw UndecodableBody(reason: "the audio is not base64: its length is not a multiple of 4") }
    }

    /// Each byte's value in the alphabet; 0xFF for any byte outside it
    /// (padding included).
    private static let values: [UInt8] = {
        var values = [UInt8](repeating: 0xFF, count: 256)
        for (value, byte) in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8.enumerated() {
            values[Int(byte)] = UInt8(value)
        }
        return values
    }()

    /// Decodes the longest run of alphabet characters at the start of
    /// `bytes`, as `add` would one at a time, but whole quads at once: the
    /// bulk of an answer's audio. Returns how many bytes it took; the byte
    /// after them (padding, a quote, an escape, anything else) is `add`'s.
    mutating func addRun(_ bytes: UnsafeRawBufferPointer, into output: inout [UInt8]) throws -> Int {
        guard !ended, padding == 0 else { return 0 }
        return try Self.values.withUnsafeBufferPointer { values in
            var run = 0
            while run < bytes.count, values[Int(bytes[run])] != 0xFF { run += 1 }
            var index = 0
            // The end of a quad begun in an earlier piece.
            while count != 0, index < run {
                try add(bytes[index], into: &output)
                index += 1
            }
            let quads = (run - index) / 4
            if quads > 0 {
                let start = output.count
                output.append(contentsOf: repeatElement(0, count: quads * 3))
                output.withUnsafeMutableBufferPointer { out in
                    var at = start
                    for _ in 0..<quads {
                        let a = values[Int(bytes[index])], b = values[Int(bytes[index + 1])]
                        let c = values[Int(bytes[index + 2])], d = values[Int(bytes[index + 3])]
                        out[at] = a << 2 | b >> 4
                        out[at + 1] = b << 4 | c >> 2
                        out[at + 2] = c << 6 | d
                        at += 3
                        index += 4
                    }
                }
            }
            // The start of a quad that ends in a later piece.
            while index < run {
                try add(bytes[index], into: &output)
                index += 1
            }
            return run
        }
    }
}

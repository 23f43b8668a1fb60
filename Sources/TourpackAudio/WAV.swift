/// RIFF/WAVE with 16-bit PCM: how LINEAR16 arrives from Google
/// (base64 in `audioContent`) and from OpenAI (`response_format: wav`).
package enum WAV {
    package enum DecodeError: Error, Sendable, Equatable, CustomStringConvertible {
        case notRIFF
        case truncated(expectedBytes: Int, actualBytes: Int)
        case missingChunk(String)
        case unsupported(String)

        package var description: String {
            switch self {
            case .notRIFF: return "not a RIFF/WAVE body"
            case .truncated(let expected, let actual): return "truncated WAV: data chunk declares \(expected) bytes, \(actual) present"
            case .missingChunk(let id): return "WAV has no '\(id)' chunk"
            case .unsupported(let what): return "unsupported WAV: \(what)"
            }
        }
    }

    /// A 44-byte canonical header followed by the samples, little-endian.
    package static func encode(_ pcm: PCMAudio) -> [UInt8] {
        let dataBytes = pcm.samples.count * 2
        var out: [UInt8] = []
        out.reserveCapacity(44 + dataBytes)
        func u32(_ v: Int) { withUnsafeBytes(of: UInt32(v).littleEndian) { out.append(contentsOf: $0) } }
        func u16(_ v: Int) { withUnsafeBytes(of: UInt16(v).littleEndian) { out.append(contentsOf: $0) } }
        out.append(contentsOf: Array("RIFF".utf8)); u32(36 + dataBytes)
        out.append(contentsOf: Array("WAVE".utf8))
        out.append(contentsOf: Array("fmt ".utf8)); u32(16)
        u16(1); u16(1); u32(pcm.sampleRate); u32(pcm.sampleRate * 2); u16(2); u16(16)
        out.append(contentsOf: Array("data".utf8)); u32(dataBytes)
        for sample in pcm.samples {
            withUnsafeBytes(of: sample.littleEndian) { out.append(contentsOf: $0) }
        }
        return out
    }

    /// Parses 16-bit PCM WAV, mono or stereo (stereo is averaged to mono).
    /// Unknown chunks are skipped. A body shorter than its data chunk claims
    /// is `truncated`, which the TTS client treats as retryable.
    package static func decode(_ bytes: [UInt8]) throws(DecodeError) -> PCMAudio {
        func u32(_ at: Int) -> Int {
            Int(bytes[at]) | Int(bytes[at + 1]) << 8 | Int(bytes[at + 2]) << 16 | Int(bytes[at + 3]) << 24
        }
        func u16(_ at: Int) -> Int { Int(bytes[at]) | Int(bytes[at + 1]) << 8 }
        func tag(_ at: Int) -> String { String(decoding: bytes[at..<at + 4], as: UTF8.self) }

        guard bytes.count >= 12, tag(0) == "RIFF", tag(8) == "WAVE" else { throw .notRIFF }
        var offset = 12
        var format: (channels: Int, rate: Int, bits: Int, code: Int)?
        while offset + 8 <= bytes.count {
            let id = tag(offset)
            let size = u32(offset + 4)
            let body = offset + 8
            if id == "fmt " {
                guard size >= 16, body + 16 <= bytes.count else { throw .truncated(expectedBytes: 16, actualBytes: bytes.count - body) }
                format = (u16(body + 2), u32(body + 4), u16(body + 14), u16(body))
            } else if id == "data" {
                guard let format else { throw .missingChunk("fmt ") }
                guard format.code == 1 || format.code == 0xFFFE else { throw .unsupported("format code \(format.code), expected PCM") }
                guard format.bits == 16 else { throw .unsupported("\(format.bits)-bit samples, expected 16") }
                guard format.channels == 1 || format.channels == 2 else { throw .unsupported("\(format.channels) channels") }
                guard format.rate > 0 else { throw .unsupported("sample rate 0") }
                // Streaming writers put 0 or 0xFFFFFFFF here: take what is present.
                let declared = (size == 0 || size == 0xFFFF_FFFF) ? bytes.count - body : size
                let available = bytes.count - body
                guard declared <= available else { throw .truncated(expectedBytes: declared, actualBytes: available) }
                let frameBytes = 2 * format.channels
                let frames = declared / frameBytes
                var samples = [Int16](repeating: 0, count: frames)
                for i in 0..<frames {
                    let at = body + i * frameBytes
                    if format.channels == 1 {
                        samples[i] = Int16(bitPattern: UInt16(u16(at)))
                    } else {
                        let left = Int(Int16(bitPattern: UInt16(u16(at))))
                        let right = Int(Int16(bitPattern: UInt16(u16(at + 2))))
                        samples[i] = Int16((left + right) / 2)
                    }
                }
                return PCMAudio(samples: samples, sampleRate: format.rate)
            }
            offset = body + size + (size & 1)
        }
        throw .missingChunk(format == nil ? "fmt " : "data")
    }
}

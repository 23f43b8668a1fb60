package import Foundation

/// The Ogg pages of an Ogg Opus file (RFC 3533, RFC 7845), read by hand.
///
/// FFmpeg decodes the audio, but it quietly forgives what a phone's player
/// may not: a bad page checksum, a missing end-of-stream page, a pre-skip of
/// zero, an end granule that does not match the audio. This reader walks
/// every page header, checks its CRC, and keeps the facts `validate` compares
/// with package.json: the pre-skip from `OpusHead` and the end granule, whose
/// difference is the playable length at 48 kHz.
package struct OggOpusPages: Sendable, Hashable {
    /// Opus always counts granules at 48 kHz, whatever the input rate was.
    package static let granuleRate = 48_000

    package var pageCount = 0
    /// `OpusHead`'s pre-skip: samples at 48 kHz the player drops at the start (the encoder's delay).
    package var preSkip: Int?
    /// `OpusHead`'s channel count.
    package var channels: Int?
    /// The granule position of the last page that has one: pre-skip plus the playable samples.
    package var endGranule: Int64?
    /// Whether the last page carries the end-of-stream flag.
    package var endsWithEOS = false
    /// Everything wrong with the page structure, in file order (the first few).
    package var problems: [String] = []

    /// The playable samples the granules promise: end granule less pre-skip, at 48 kHz.
    package var playableSamples: Int64? {
        guard let endGranule, let preSkip else { return nil }
        return endGranule - Int64(preSkip)
    }

    package var playableSeconds: Double? {
        playableSamples.map { Double($0) / Double(Self.granuleRate) }
    }

    /// Reads every page of the file at `url`.
    package init(contentsOf url: URL) throws {
        let bytes = [UInt8](try Data(contentsOf: url))
        self.init(bytes: bytes)
    }

    /// Reads every page of `bytes`.
    package init(bytes: [UInt8]) {
        var offset = 0
        var serial: UInt32?
        var lastGranule: Int64 = -1
        var lastFlags: UInt8 = 0
        func problem(_ text: String) {
            if problems.count < 8 { problems.append(text) }
        }
        while offset < bytes.count {
            guard bytes.count - offset >= 27 else {
                problem("\(bytes.count - offset) bytes at offset \(offset) are too few for an Ogg page header (file truncated?)")
                break
            }
            guard bytes[offset..<offset + 4].elementsEqual("OggS".utf8) else {
                problem("no Ogg page at offset \(offset) (capture pattern missing)")
                break
            }
            let segments = Int(bytes[offset + 26])
            let headerSize = 27 + segments
            guard bytes.count - offset >= headerSize else {
                problem("page \(pageCount) at offset \(offset) is cut off inside its segment table (file truncated?)")
                break
            }
            let bodySize = bytes[offset + 27..<offset + headerSize].reduce(0) { $0 + Int($1) }
            guard bytes.count - offset >= headerSize + bodySize else {
                problem(
                    "page \(pageCount) at offset \(offset) needs \(headerSize + bodySize) bytes but only \(bytes.count - offset) remain (file truncated?)"
                )
                break
            }
            let page = bytes[offset..<offset + headerSize + bodySize]
            let flags = bytes[offset + 5]
            let granule = Int64(bitPattern: Self.littleEndian(bytes, at: offset + 6, count: 8))
            let pageSerial = UInt32(Self.littleEndian(bytes, at: offset + 14, count: 4))
            let sequence = UInt32(Self.littleEndian(bytes, at: offset + 18, count: 4))
            let storedCRC = UInt32(Self.littleEndian(bytes, at: offset + 22, count: 4))

            if bytes[offset + 4] != 0 { problem("page \(pageCount) at offset \(offset): unknown Ogg version \(bytes[offset + 4])") }
            if OggCRC.checksum(of: page, crcOffset: 22) != storedCRC {
                problem("page \(pageCount) at offset \(offset): CRC mismatch (damaged page)")
            }
            if let serial, serial != pageSerial {
                problem("page \(pageCount) at offset \(offset): second logical stream (serial \(pageSerial)); expected one Opus stream")
            }
            if sequence != UInt32(truncatingIfNeeded: pageCount) {
                problem("page \(pageCount) at offset \(offset): sequence number \(sequence), expected \(pageCount) (page lost?)")
            }
            if pageCount == 0 {
                if flags & 0x02 == 0 { problem("first page lacks the beginning-of-stream flag") }
                switch Self.readHead(bytes[offset + headerSize..<offset + headerSize + bodySize]) {
                case .success(let head): (channels, preSkip) = (head.channels, head.preSkip)
                case .failure(let failure): problem(failure.message)
                }
            } else if flags & 0x02 != 0 {
                problem("page \(pageCount) at offset \(offset) has the beginning-of-stream flag again")
            }
            if granule != -1 {
                if granule < lastGranule {
                    problem("page \(pageCount) at offset \(offset): granule position \(granule) goes back from \(lastGranule)")
                }
                lastGranule = granule
            }
            serial = serial ?? pageSerial
            lastFlags = flags
            pageCount += 1
            offset += headerSize + bodySize
        }
        endsWithEOS = pageCount > 0 && lastFlags & 0x04 != 0
        endGranule = lastGranule >= 0 ? lastGranule : nil
        if pageCount > 0 && !endsWithEOS { problem("the last page lacks the end-of-stream flag (file truncated?)") }
        if pageCount < 3 { problem("\(pageCount) Ogg page(s); an Opus stream needs OpusHead, OpusTags and audio pages") }
    }

    private struct HeadProblem: Error {
        var message: String
    }

    /// RFC 7845 section 5.1: `OpusHead`, version, channels, pre-skip (LE16), input rate, gain, mapping.
    private static func readHead(_ packet: ArraySlice<UInt8>) -> Result<(channels: Int, preSkip: Int), HeadProblem> {
        let head = Array(packet)
        guard head.count >= 19, head[0..<8].elementsEqual("OpusHead".utf8) else {
            return .failure(HeadProblem(message: "the first page does not hold an OpusHead packet; not an Ogg Opus file"))
        }
        guard head[8] >> 4 == 0 else {
            return .failure(HeadProblem(message: "OpusHead version \(head[8]) is not one this app reads (major version 0)"))
        }
        return .success((Int(head[9]), Int(head[10]) | Int(head[11]) << 8))
    }

    private static func littleEndian(_ bytes: [UInt8], at offset: Int, count: Int) -> UInt64 {
        (0..<count).reduce(UInt64(0)) { $0 | UInt64(bytes[offset + $1]) << (8 * UInt64($1)) }
    }
}

/// Ogg's page checksum: CRC-32 with polynomial 0x04C11DB7, no reflection,
/// initial value 0, no final XOR, over the page with its CRC field zeroed.
enum OggCRC {
    static let table: [UInt32] = (0..<256).map { index in
        var value = UInt32(index) << 24
        for _ in 0..<8 { value = value & 0x8000_0000 != 0 ? (value << 1) ^ 0x04C1_1DB7 : value << 1 }
        return value
    }

    static func checksum(of page: ArraySlice<UInt8>, crcOffset: Int) -> UInt32 {
        // A plain loop over the bytes: this runs over every byte of every Opus file.
        page.withUnsafeBufferPointer { bytes in
            table.withUnsafeBufferPointer { table in
                var crc: UInt32 = 0
                for index in 0..<bytes.count {
                    let byte = index >= crcOffset && index < crcOffset + 4 ? 0 : bytes[index]
                    crc = (crc << 8) ^ table[Int((crc >> 24) ^ UInt32(byte))]
                }
                return crc
            }
        }
    }
}

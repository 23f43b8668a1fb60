package import Foundation

/// The first MPEG audio frame of an .mp3 file, after any ID3v2 tag.
///
/// The contract asks for "MPEG-1 Layer III with a Xing/Info header": the Info
/// frame is what lets a phone seek in the file and know its exact length
/// (LAME's tag in it carries the encoder delay and padding). FFmpeg decodes
/// a file without one happily, so `validate` looks for it here: the frame
/// header's version and layer bits, and the `Info` (CBR) or `Xing` (VBR)
/// tag right after the side information.
package struct MP3FirstFrame: Sendable, Hashable {
    /// Where the first frame starts (the ID3v2 tag's length, or 0).
    package var offset: Int
    /// `"MPEG-1"`, `"MPEG-2"` or `"MPEG-2.5"`.
    package var version: String
    /// 1, 2 or 3.
    package var layer: Int
    package var isMono: Bool
    /// `"Info"`, `"Xing"`, or nil when the first frame carries neither.
    package var tag: String?

    /// How much of the file is read: an ID3v2 tag with a cover image could be
    /// larger, but tourpack writes only text tags.
    static let headBytes = 256 * 1024

    /// Finds the first frame of the file at `url`; throws `Problem` when there is none.
    package init(contentsOf url: URL) throws {
        let handle = try FileHandle(forReadingFrom: url)
        defer { try? handle.close() }
        try self.init(bytes: [UInt8](try handle.read(upToCount: Self.headBytes) ?? Data()))
    }

    package init(bytes: [UInt8]) throws(Problem) {
        var start = 0
        if bytes.count >= 10, bytes[0..<3].elementsEqual("ID3".utf8) {
            // A syncsafe size: 7 bits a byte. A footer (flag 0x10) adds 10 more bytes.
            let size = bytes[6..<10].reduce(0) { $0 << 7 | Int($1 & 0x7F) }
            start = 10 + size + (bytes[5] & 0x10 != 0 ? 10 : 0)
        }
        guard bytes.count >= start + 4 else {
            throw Problem(message: "no MPEG audio frame after the \(start)-byte ID3v2 tag (file truncated?)")
        }
        let header = bytes[start..<start + 4].map(UInt32.init).reduce(0) { $0 << 8 | $1 }
        guard header & 0xFFE0_0000 == 0xFFE0_0000 else {
            throw Problem(message: "no MPEG frame sync at offset \(start); not an MP3 file")
        }
        let versionBits = (header >> 19) & 3
        let layerBits = (header >> 17) & 3
        guard versionBits != 1, layerBits != 0 else {
            throw Problem(message: "reserved version or layer bits in the frame header at offset \(start)")
        }
        offset = start
        version = [0: "MPEG-2.5", 2: "MPEG-2", 3: "MPEG-1"][versionBits]!
        layer = 4 - Int(layerBits)
        isMono = (header >> 6) & 3 == 3
        // The tag follows the header, the optional CRC and the side information.
        let crc = (header >> 16) & 1 == 0 ? 2 : 0
        let sideInfo = versionBits == 3 ? (isMono ? 17 : 32) : (isMono ? 9 : 17)
        let tagStart = start + 4 + crc + sideInfo
        if bytes.count >= tagStart + 4 {
            let text = String(decoding: bytes[tagStart..<tagStart + 4], as: UTF8.self)
            tag = text == "Info" || text == "Xing" ? text : nil
        }
    }

    /// What keeps this frame from being the contract's: MPEG-1 Layer III, mono, with an `Info` header.
    package func problems() -> [String] {
        var problems: [String] = []
        if version != "MPEG-1" || layer != 3 { problems.append("first frame is \(version) Layer \(layer), expected MPEG-1 Layer III") }
        if !isMono { problems.append("first frame is not mono") }
        switch tag {
        case "Info": break
        case "Xing": problems.append("Xing header marks a VBR file; the contract is 192 kbps CBR (Info header)")
        default: problems.append("no Xing/Info header in the first frame at offset \(offset); players cannot seek or trim priming")
        }
        return problems
    }

    package struct Problem: Error, Sendable, Hashable, CustomStringConvertible {
        package var message: String
        package var description: String { message }
    }
}

package import Foundation

/// The top-level boxes (atoms) of an ISO BMFF / MP4 file, read from their
/// headers alone.
///
/// `validate` needs one fact FFmpeg will not tell: whether `moov` comes
/// before `mdat` (faststart), so a phone can start playing before the whole
/// file is read. Each box starts with a 32-bit big-endian size and a
/// four-character type; size 1 means a 64-bit size follows, size 0 means
/// "to the end of the file". Only headers are read, a few bytes per box, so
/// this costs nothing next to a decode. A size that runs past the end of the
/// file or is smaller than its own header stops the walk and is reported:
/// that is what a truncated or damaged file looks like from here.
package struct MP4Boxes: Sendable, Hashable {
    package struct Box: Sendable, Hashable {
        package var type: String
        package var offset: Int64
        package var size: Int64
    }

    package var boxes: [Box]
    /// Why the walk stopped early, if it did.
    package var damage: String?

    /// Walks the top-level boxes of the file at `url`.
    package init(contentsOf url: URL) throws {
        let handle = try FileHandle(forReadingFrom: url)
        defer { try? handle.close() }
        let fileSize = Int64(try handle.seekToEnd())
        var boxes: [Box] = []
        var damage: String?
        var offset: Int64 = 0
        while offset < fileSize {
            guard fileSize - offset >= 8 else {
                damage = "\(fileSize - offset) stray bytes at offset \(offset), too few for a box header"
                break
            }
            try handle.seek(toOffset: UInt64(offset))
            let header = [UInt8](try handle.read(upToCount: 16) ?? Data())
            var size = Int64(Self.uint32(header, at: 0))
            let type = Self.typeName(header[4..<8])
            var headerSize: Int64 = 8
            if size == 1 {
                guard header.count >= 16 else {
                    damage = "box '\(type)' at offset \(offset) is cut off inside its 64-bit size"
                    break
                }
                size = Int64(bitPattern: UInt64(Self.uint32(header, at: 8)) << 32 | UInt64(Self.uint32(header, at: 12)))
                headerSize = 16
            } else if size == 0 {
                size = fileSize - offset
            }
            guard size >= headerSize else {
                damage = "box '\(type)' at offset \(offset) declares \(size) bytes, less than its own header"
                break
            }
            guard size <= fileSize - offset else {
                damage = "box '\(type)' at offset \(offset) declares \(size) bytes but only \(fileSize - offset) remain (file truncated?)"
                boxes.append(Box(type: type, offset: offset, size: size))
                break
            }
            boxes.append(Box(type: type, offset: offset, size: size))
            offset += size
        }
        self.boxes = boxes
        self.damage = damage
    }

    /// The box types in file order, e.g. `["ftyp", "moov", "free", "mdat"]`.
    package var types: [String] { boxes.map(\.type) }

    /// What is wrong with the layout for a phone that streams the file, or
    /// an empty list when `ftyp` comes first and `moov` precedes `mdat`.
    package func faststartProblems() -> [String] {
        // Anything but `ftyp` first is not an MP4 file at all; its "boxes" would be noise.
        guard let first = boxes.first, first.type == "ftyp" else {
            return ["does not start with an 'ftyp' box; not an MP4 file"]
        }
        var problems: [String] = []
        if let damage { problems.append(damage) }
        let moov = boxes.firstIndex { $0.type == "moov" }
        let mdat = boxes.firstIndex { $0.type == "mdat" }
        switch (moov, mdat) {
        case (nil, _): problems.append("no 'moov' box")
        case (_, nil): problems.append("no 'mdat' box")
        case (let moov?, let mdat?) where mdat < moov:
            problems.append(
                "'mdat' at offset \(boxes[mdat].offset) comes before 'moov' at offset \(boxes[moov].offset); the file is not faststart (top-level boxes: \(types.joined(separator: ", ")))"
            )
        default: break
        }
        return problems
    }

    private static func uint32(_ bytes: [UInt8], at offset: Int) -> UInt32 {
        guard bytes.count >= offset + 4 else { return 0 }
        return bytes[offset..<offset + 4].reduce(0) { $0 << 8 | UInt32($1) }
    }

    /// The four type bytes as text, with anything unprintable shown as `?` so damage cannot forge output.
    private static func typeName(_ bytes: ArraySlice<UInt8>) -> String {
        String(bytes.map { (0x20...0x7E).contains($0) ? Character(UnicodeScalar($0)) : "?" })
    }
}

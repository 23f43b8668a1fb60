import TourpackCore

/// Draws the picture of one tile: a light background whose colour follows
/// the zoom, a 1-px dark border so tile edges show when tiles sit side by
/// side, and the tile's "z/x/y" in a built-in 5×7 bitmap font, scaled up
/// and centred (on three lines when one would make it small).
///
/// Pure integer work with no clock, locale or font file, so the same tile
/// gives the same pixels forever; with a given FFmpeg the PNG bytes follow.
enum TileRenderer {
    static let size = 256

    /// 8-bit RGB, row after row, top row first (`size * size * 3` bytes).
    static func pixels(for tile: TileID) -> [UInt8] {
        var canvas = Canvas(size: size, fill: background(zoom: tile.z))
        canvas.drawBorder(ink)
        canvas.drawCentred(label(for: tile), colour: ink)
        return canvas.bytes
    }

    /// "z/x/y" on one line while that stays large (4× the font or more);
    /// deeper tiles, with long numbers, read "z/", "x/", "y" on three lines.
    static func label(for tile: TileID) -> [String] {
        let line = tile.description
        if line.count * (BitmapFont.width + 1) - 1 <= (size - 24) / 4 { return [line] }
        return ["\(tile.z)/", "\(tile.x)/", "\(tile.y)"]
    }

    /// Text and border: near-black.
    static let ink = RGB(r: 0x22, g: 0x22, b: 0x2A)

    /// Eight light pastels, one per zoom modulo 8, so neighbouring zooms
    /// differ at a glance.
    static let backgrounds: [RGB] = [
        RGB(r: 0xF4, g: 0xE8, b: 0xD0), RGB(r: 0xDD, g: 0xEE, b: 0xD5), RGB(r: 0xD6, g: 0xE6, b: 0xF2),
        RGB(r: 0xF2, g: 0xDA, b: 0xE4), RGB(r: 0xE8, g: 0xF0, b: 0xC8), RGB(r: 0xE2, g: 0xDC, b: 0xF2),
        RGB(r: 0xD4, g: 0xEE, b: 0xEC), RGB(r: 0xF0, g: 0xE0, b: 0xD4),
    ]

    static func background(zoom: Int) -> RGB { backgrounds[zoom % backgrounds.count] }

    struct RGB: Equatable {
        var r: UInt8, g: UInt8, b: UInt8
    }
}

/// A square RGB24 raster with the few drawing operations a tile needs.
struct Canvas {
    let size: Int
    private(set) var bytes: [UInt8]

    init(size: Int, fill: TileRenderer.RGB) {
        self.size = size
        bytes = [UInt8](repeating: 0, count: size * size * 3)
        fillRectangle(x: 0, y: 0, width: size, height: size, fill)
    }

    /// Fills a rectangle, clipped to the canvas.
    mutating func fillRectangle(x: Int, y: Int, width: Int, height: Int, _ colour: TileRenderer.RGB) {
        let left = max(0, x), right = min(size, x + width)
        let top = max(0, y), bottom = min(size, y + height)
        guard left < right, top < bottom else { return }
        // One row of the colour, then a memcpy per row: debug builds stay fast too.
        var run = [UInt8](repeating: 0, count: (right - left) * 3)
        for index in stride(from: 0, to: run.count, by: 3) {
            run[index] = colour.r
            run[index + 1] = colour.g
            run[index + 2] = colour.b
        }
        let size = size
        run.withUnsafeBytes { source in
            bytes.withUnsafeMutableBytes { pixels in
                for row in top..<bottom {
                    (pixels.baseAddress! + (row * size + left) * 3).copyMemory(from: source.baseAddress!, byteCount: source.count)
                }
            }
        }
    }

    /// A 1-px frame on the outermost pixels.
    mutating func drawBorder(_ colour: TileRenderer.RGB) {
        fillRectangle(x: 0, y: 0, width: size, height: 1, colour)
        fillRectangle(x: 0, y: size - 1, width: size, height: 1, colour)
        fillRectangle(x: 0, y: 0, width: 1, height: size, colour)
        fillRectangle(x: size - 1, y: 0, width: 1, height: size, colour)
    }

    /// Draws `lines` in the bitmap font, one above the other, each centred,
    /// all at the largest scale that fits within a margin (at most 8× the
    /// font). Characters the font lacks are blank.
    mutating func drawCentred(_ lines: [String], colour: TileRenderer.RGB) {
        let advance = BitmapFont.width + 1
        let widest = lines.map { $0.count * advance - 1 }.max() ?? 0
        guard widest > 0 else { return }
        let margin = 12
        let scale = max(1, min(8, (size - 2 * margin) / widest))
        let lineAdvance = (BitmapFont.height + 3) * scale
        let blockHeight = lines.count * lineAdvance - 3 * scale
        var top = (size - blockHeight) / 2
        for line in lines {
            let left = (size - (line.count * advance - 1) * scale) / 2
            for (index, character) in line.enumerated() {
                let glyphLeft = left + index * advance * scale
                for (row, bits) in BitmapFont.glyph(for: character).enumerated() {
                    for column in 0..<BitmapFont.width where bits & (1 << (BitmapFont.width - 1 - column)) != 0 {
                        fillRectangle(x: glyphLeft + column * scale, y: top + row * scale, width: scale, height: scale, colour)
                    }
                }
            }
            top += lineAdvance
        }
    }
}

/// A 5×7 font for the characters a tile label needs: digits and '/'.
/// Each glyph is seven rows, top first; bit 4 is the leftmost pixel.
enum BitmapFont {
    static let width = 5
    static let height = 7

    static func glyph(for character: Character) -> [UInt8] {
        if let digit = character.wholeNumberValue, (0...9).contains(digit), character.isASCII { return digits[digit] }
        if character == "/" { return slash }
        return [UInt8](repeating: 0, count: height)
    }

    static let slash: [UInt8] = [0b00001, 0b00001, 0b00010, 0b00100, 0b01000, 0b10000, 0b10000]

    static let digits: [[UInt8]] = [
        [0b01110, 0b10001, 0b10011, 0b10101, 0b11001, 0b10001, 0b01110],  // 0
        [0b00100, 0b01100, 0b00100, 0b00100, 0b00100, 0b00100, 0b01110],  // 1
        [0b01110, 0b10001, 0b00001, 0b00010, 0b00100, 0b01000, 0b11111],  // 2
        [0b11111, 0b00010, 0b00100, 0b00010, 0b00001, 0b10001, 0b01110],  // 3
        [0b00010, 0b00110, 0b01010, 0b10010, 0b11111, 0b00010, 0b00010],  // 4
        [0b11111, 0b10000, 0b11110, 0b00001, 0b00001, 0b10001, 0b01110],  // 5
        [0b00110, 0b01000, 0b10000, 0b11110, 0b10001, 0b10001, 0b01110],  // 6
        [0b11111, 0b00001, 0b00010, 0b00100, 0b01000, 0b01000, 0b01000],  // 7
        [0b01110, 0b10001, 0b10001, 0b01110, 0b10001, 0b10001, 0b01110],  // 8
        [0b01110, 0b10001, 0b10001, 0b01111, 0b00001, 0b00010, 0b01100],  // 9
    ]
}

import CFFmpeg

/// How each `AudioFormat` of the spec table is made with FFmpeg: the encoder,
/// the muxer, the options, and where each tag goes.
///
/// The same settings are what `tourpack-bench encode` hands the ffmpeg CLI,
/// so the benchmark compares like with like.
struct EncoderRecipe {
    var encoderName: String
    var muxerName: String
    /// The sample formats to ask for, best first; the first the encoder supports wins.
    var sampleFormats: [AVSampleFormat]
    var codecOptions: [String: String]
    var muxerOptions: [String: String]
    /// Whether title and album go on the container (ID3v2, iTunes atoms) or on the stream (OpusTags).
    var tagsOnStream: Bool

    init(format: AudioFormat, aacCoder: AACCoder) {
        switch format {
        case .aac:
            // The `ipod` muxer is the mp4 muxer in its .m4a mode: iTunes-style
            // `ilst` tags, and faststart moves the moov atom before mdat.
            encoderName = "aac"
            muxerName = "ipod"
            sampleFormats = [AV_SAMPLE_FMT_FLTP]
            codecOptions = ["aac_coder": aacCoder.rawValue]
            muxerOptions = ["movflags": "+faststart"]
            tagsOnStream = false
        case .mp3:
            // libmp3lame with a bit rate and no quality or `abr` setting is CBR.
            // The mp3 muxer writes the Xing/Info header (with the LAME encoder
            // delay and padding) because the output is seekable, and ID3v2.4 tags.
            encoderName = "libmp3lame"
            muxerName = "mp3"
            sampleFormats = [AV_SAMPLE_FMT_S16P, AV_SAMPLE_FMT_FLTP]
            codecOptions = [:]
            muxerOptions = ["id3v2_version": "4", "write_xing": "1"]
            tagsOnStream = false
        case .opus:
            // Constrained VBR keeps the file at the contract's 96 kbps: on
            // espeak speech, unconstrained VBR at a 96k target came out at
            // 161 kbps, constrained at 94 kbps. The Ogg muxer takes pre-skip
            // from the encoder's initial padding and sets the end granule from
            // the last packet's duration, which libopus trims to the real input.
            encoderName = "libopus"
            muxerName = "ogg"
            sampleFormats = [AV_SAMPLE_FMT_S16, AV_SAMPLE_FMT_FLT]
            codecOptions = ["vbr": "constrained"]
            muxerOptions = [:]
            tagsOnStream = true
        }
    }
}

/// The coder (quantization search) of FFmpeg's native AAC encoder.
///
/// `fast` is the default here: see `AACCoder.chosen` for the measurement.
public enum AACCoder: String, Sendable, CaseIterable {
    /// FFmpeg's default: a two-loop search with perceptual noise shaping.
    case twoloop
    /// A faster, simpler heuristic search.
    case fast

    /// The coder tourpack uses.
    ///
    /// MEASURED_NUMBERS
    public static let chosen: AACCoder = .fast
}

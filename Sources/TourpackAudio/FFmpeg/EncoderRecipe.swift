import CFFmpeg
import Crypto
import Foundation
import TourpackCore

/// How each `AudioFormat` of the contract's table is made with FFmpeg: the encoder,
/// the muxer, the options, and where each tag goes.
///
/// The same settings are what `tourpack-bench encode` hands the ffmpeg CLI,
/// so the benchmark compares like with like.
struct EncoderRecipe {
    var encoderName: String
    var muxerName: String
    /// The sample formats to ask for, best first; the first the encoder supports wins.
    var sampleFormats: [AVSampleFormat]
    /// The bit rate asked of the encoder, in bits per second.
    var requestedBitRate: Int
    var codecOptions: [String: String]
    var muxerOptions: [String: String]
    /// Whether title and album go on the container (ID3v2, iTunes atoms) or on the stream (OpusTags).
    var tagsOnStream: Bool

    init(format: AudioFormat, bitrateKbps: Int? = nil, aacCoder: AACCoder) {
        let bitRate = (bitrateKbps ?? format.bitrateKbps) * 1000
        switch format {
        case .aac:
            // The `ipod` muxer is the mp4 muxer in its .m4a mode: iTunes-style
            // `ilst` tags, and faststart moves the moov atom before mdat.
            encoderName = "aac"
            muxerName = "ipod"
            sampleFormats = [AV_SAMPLE_FMT_FLTP]
            codecOptions = ["aac_coder": aacCoder.rawValue]
            // The nominal rate (the contract's, or a ladder rung's). The native encoder
            // spends fewer bits on simple audio and a little more on dense
            // speech; `validate` judges the average against this nominal
            // rate, which the muxer also records in the esds box.
            requestedBitRate = bitRate
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
            requestedBitRate = bitRate
            muxerOptions = ["id3v2_version": "4", "write_xing": "1"]
            tagsOnStream = false
        case .opus:
            // Constrained VBR keeps the file at the contract's 96 kbps: on
            // espeak speech, unconstrained VBR at a 96k target came out at
            // 161 kbps, constrained at 94 kbps. The Ogg muxer takes pre-skip
            // from the encoder's initial padding and sets the end granule from
            // the last packet's duration, which libopus trims to the real input.
            //
            // `bitexact`: without it the Ogg muxer draws the stream's serial
            // number at random, so the same PCM gave different bytes (and a
            // new SHA-256) on every encode; with it the serial is
            // `serial_offset`, which `muxerOptions(for:)` derives from the
            // tags, and the OpusTags vendor string is "ffmpeg" rather than the
            // libavformat version. AAC and MP3 are the same bytes every time
            // without it, so their files are left as they were.
            encoderName = "libopus"
            muxerName = "ogg"
            sampleFormats = [AV_SAMPLE_FMT_S16, AV_SAMPLE_FMT_FLT]
            codecOptions = ["vbr": "constrained"]
            requestedBitRate = bitRate
            muxerOptions = ["fflags": "+bitexact"]
            tagsOnStream = true
        }
    }
}

extension EncoderRecipe {
    /// The muxer's options for a file with these tags: `muxerOptions`, plus,
    /// for Ogg, the stream's serial number as `serial_offset` (which the muxer
    /// uses as the serial in bitexact mode). The serial comes from the tags
    /// (title, album, language), so it is the same on every encode of a file
    /// and differs between the files of a tour.
    func muxerOptions(for metadata: AudioMetadata) -> [String: String] {
        guard muxerName == "ogg" else { return muxerOptions }
        var options = muxerOptions
        options["serial_offset"] = String(Self.oggSerial(for: metadata))
        return options
    }

    /// The first four bytes of the SHA-256 of the tags, as a non-negative
    /// `Int32` (the option's range is 0…INT32_MAX).
    static func oggSerial(for metadata: AudioMetadata) -> UInt32 {
        let digest = SHA256.hash(data: Data([metadata.title, metadata.album, metadata.language].joined(separator: "\n").utf8))
        return digest.prefix(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) } & 0x7FFF_FFFF
    }
}

/// The coder (quantization search) of FFmpeg's native AAC encoder.
///
/// `fast` is the default here: see `AACCoder.chosen` for the measurement.
package enum AACCoder: String, Sendable, CaseIterable {
    /// FFmpeg's default: a two-loop search with perceptual noise shaping.
    case twoloop
    /// A faster, simpler heuristic search.
    case fast

    /// The coder tourpack uses: `fast`, because on speech it is both faster
    /// and closer to the source than the default `twoloop`.
    ///
    /// Measured with `tourpack-bench encode` (60 s of espeak-ng speech at
    /// 24 kHz in, the .m4a settings: 24 kHz mono out, 128k asked, median of
    /// 5; decoded audio against the source, aligned by cross-correlation):
    ///
    ///     coder    CPU      bitrate   SNR       segSNR    log-spectral distance
    ///     twoloop  1.074 s  114 kbps  35.5 dB   32.4 dB   0.47 dB
    ///     fast     0.429 s  115 kbps  42.7 dB   33.8 dB   0.26 dB
    ///
    /// At the same bit rate `fast` takes 40% of the CPU and halves the
    /// spectral error, as it did at 44.1 kHz (0.75 against 1.48 s, SNR 45.1
    /// against 31.0 dB). SNR alone would be unfair to twoloop, whose noise
    /// shaping and noise substitution trade waveform error for perceived
    /// quality, but its log-spectral distance, which does not reward waveform
    /// matching, is worse too. (No listening test was made; a perceptual
    /// metric such as ViSQOL would be the next check if quality complaints
    /// ever come in.)
    package static let chosen: AACCoder = .fast
}

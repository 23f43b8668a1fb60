import Foundation
import TourpackAudio
import TourpackCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The checks of one audio file against its package.json entry: present,
/// the right bytes, decodes cleanly, the format's codec facts, the right
/// length, and the container details a phone depends on.
///
/// All of it is blocking work (reading, hashing, FFmpeg decoding), so
/// `BundleValidator` runs each file's check on its thread pool. Every
/// problem becomes a finding; nothing here throws, so one bad file never
/// hides another's problems.
struct AudioFileCheck: Sendable {
    var package: String
    var entry: PackageManifest.AudioEntry
    /// The entry's path resolved inside the root (already checked by `Layout.resolve`).
    var url: URL
    /// The package's loudness target; nil when it was built with `loudness: off`.
    var target: PackageManifest.Loudness?

    func run() -> [CheckOutcome] {
        var record = OutcomeRecorder(package: package, subject: entry.path)
        checkFile(&record)
        return record.outcomes
    }

    private func checkFile(_ record: inout OutcomeRecorder) {
        guard record.regularFile(url, missing: "package.json lists this file") != nil else { return }

        record.ran(.size)
        record.ran(.sha256)
        do {
            let (size, digest) = try FileDigest.sha256(of: url)
            if size != entry.sizeBytes {
                record.error(.size, "\(size) bytes, package.json says \(entry.sizeBytes)\(size < entry.sizeBytes ? " (truncated?)" : "")")
            }
            if digest != entry.sha256 {
                record.error(.sha256, "sha256 is \(digest), package.json says \(entry.sha256)")
            }
        } catch {
            record.error(.sha256, "cannot be read: \(error)")
            return
        }

        checkAudio(&record)
        checkContainer(&record)
    }

    /// A full in-process decode, then the format table and the duration.
    private func checkAudio(_ record: inout OutcomeRecorder) {
        let format = entry.format
        record.ran(.decode)
        let inspection: AudioInspection
        do {
            inspection = try AudioFileInspector().inspect(url)
        } catch {
            record.error(.decode, "FFmpeg cannot open it as audio: \(error)")
            return
        }
        if !inspection.isClean {
            let shown = inspection.errors.prefix(3).joined(separator: "; ")
            record.error(.decode, "\(inspection.errorCount) decode error\(inspection.errorCount == 1 ? "" : "s"): \(shown)")
        }

        record.ran(.format)
        let container = ValidationTolerance.containerName(for: format)
        if inspection.containerName != container {
            record.error(.format, "container is \(inspection.containerName), expected \(container) for .\(format.fileExtension)")
        }
        if inspection.codecName != format.codecName {
            record.error(.format, "codec is \(inspection.codecName), expected \(format.codecName)")
        }
        if inspection.encodedSampleRateHz != entry.sampleRateHz {
            record.error(.format, "sample rate is \(inspection.encodedSampleRateHz) Hz, package.json says \(entry.sampleRateHz) Hz")
        }
        if inspection.channels != format.channels {
            record.error(.format, "\(inspection.channels) channels, expected \(format.channels) (mono)")
        }
        checkBitRate(inspection, &record)

        record.ran(.duration)
        let tolerance = ValidationTolerance.durationSeconds(for: format, sampleRateHz: entry.sampleRateHz)
        if abs(inspection.durationSeconds - entry.durationSeconds) > tolerance {
            record.error(
                .duration,
                "decodes to \(Self.seconds(inspection.durationSeconds)) s, package.json says \(Self.seconds(entry.durationSeconds)) s (tolerance \(Self.seconds(tolerance)) s)"
            )
        }
        checkLoudness(inspection, &record)
    }

    /// The loudness the decode measured against what package.json says of
    /// the file, and against the package's target.
    private func checkLoudness(_ inspection: AudioInspection, _ record: inout OutcomeRecorder) {
        record.ran(.loudness)
        let tolerance = ValidationTolerance.loudnessLU
        guard let declared = entry.loudness else {
            if let target {
                record.error(
                    .loudness,
                    "package.json records no loudness for this file, but says the package is normalized to \(Self.level(target.targetLUFS)) LUFS"
                )
            }
            return
        }
        switch (inspection.integratedLUFS, declared.integratedLUFS) {
        case (let measured?, let said?) where abs(measured - said) > tolerance:
            record.error(
                .loudness,
                "measures \(Self.level(measured)) LUFS, package.json says \(Self.level(said)) LUFS (tolerance \(Self.level(tolerance)) LU)")
        case (let measured?, nil):
            record.error(.loudness, "measures \(Self.level(measured)) LUFS, package.json records no integrated loudness")
        case (nil, let said?):
            record.error(.loudness, "has no gated loudness (silence, or under 0.4 s), package.json says \(Self.level(said)) LUFS")
        default:
            break
        }
        switch (inspection.truePeakDBTP, declared.truePeakDBTP) {
        case (let measured?, let said?) where abs(measured - said) > tolerance:
            record.error(
                .loudness,
                "true peak is \(Self.level(measured)) dBTP, package.json says \(Self.level(said)) dBTP (tolerance \(Self.level(tolerance)) dB)"
            )
        case (let measured?, nil):
            record.error(.loudness, "true peak is \(Self.level(measured)) dBTP, package.json records none")
        default:
            break
        }
        guard let target, inspection.durationSeconds >= ValidationTolerance.minimumSecondsForLoudness else { return }
        if let measured = inspection.integratedLUFS, abs(measured - target.targetLUFS) > tolerance {
            record.error(
                .loudness,
                "measures \(Self.level(measured)) LUFS; the package's target is \(Self.level(target.targetLUFS)) LUFS (tolerance \(Self.level(tolerance)) LU)"
            )
        }
        if let peak = inspection.truePeakDBTP, peak > target.truePeakDBTP + ValidationTolerance.truePeakOverDB {
            record.error(
                .loudness, "true peak is \(Self.level(peak)) dBTP, above the package's ceiling of \(Self.level(target.truePeakDBTP)) dBTP")
        }
    }

    /// A level to 0.1 dB, as meters show it.
    static func level(_ value: Double) -> String {
        String(format: "%.1f", value)
    }

    /// The bit rate as each format means it. package.json states the
    /// nominal rate the encoder was asked for. AAC and Opus are variable: they
    /// rightly spend fewer bits on simple or quiet audio, so any average below
    /// the nominal rate is fine, and only one well above it (a wrong setting)
    /// is an error. MP3 is constant: it must be what it says.
    private func checkBitRate(_ inspection: AudioInspection, _ record: inout OutcomeRecorder) {
        guard inspection.durationSeconds >= ValidationTolerance.minimumSecondsForBitRate else { return }
        let format = entry.format
        let nominal = Double(entry.bitrateKbps)
        let measured = Double(inspection.bitRate) / 1000
        let fraction = ValidationTolerance.bitRateFraction
        let percent = Int(fraction * 100)
        switch format {
        case .mp3:
            if abs(measured - nominal) > nominal * fraction {
                record.error(
                    .format,
                    "bit rate is \(inspection.bitRateKbps) kbps; a constant-rate MP3 must be its nominal \(entry.bitrateKbps) kbps ±\(percent)%"
                )
            }
        case .aac, .opus:
            if measured > nominal * (1 + fraction) {
                record.error(
                    .format,
                    "average bit rate is \(inspection.bitRateKbps) kbps, more than \(percent)% above the nominal \(entry.bitrateKbps) kbps: a wrong encoder setting"
                )
            }
        }
    }

    /// The container facts FFmpeg forgives but a phone may not.
    private func checkContainer(_ record: inout OutcomeRecorder) {
        switch entry.format {
        case .aac:
            record.ran(.faststart)
            do {
                for problem in try MP4Boxes(contentsOf: url).faststartProblems() { record.error(.faststart, problem) }
            } catch {
                record.error(.faststart, "cannot read the boxes: \(error)")
            }
        case .mp3:
            record.ran(.mp3Header)
            do {
                for problem in try MP3FirstFrame(contentsOf: url).problems() { record.error(.mp3Header, problem) }
            } catch {
                record.error(.mp3Header, "\(error)")
            }
        case .opus:
            record.ran(.oggOpus)
            do {
                checkOpus(try OggOpusPages(contentsOf: url), &record)
            } catch {
                record.error(.oggOpus, "cannot read the Ogg pages: \(error)")
            }
        }
    }

    private func checkOpus(_ pages: OggOpusPages, _ record: inout OutcomeRecorder) {
        for problem in pages.problems { record.error(.oggOpus, problem) }
        if let preSkip = pages.preSkip {
            if preSkip == 0 {
                record.error(.oggOpus, "pre-skip is 0: the encoder's priming would be played as a click at the start")
            } else if preSkip > ValidationTolerance.maximumOpusPreSkip {
                record.error(
                    .oggOpus,
                    "pre-skip is \(preSkip) samples, more than \(ValidationTolerance.maximumOpusPreSkip) (80 ms); audio would be cut at the start"
                )
            }
        }
        // Without the end-of-stream page the last granule is not the end; that is reported above.
        guard pages.endsWithEOS, let granule = pages.endGranule, let preSkip = pages.preSkip, let playable = pages.playableSeconds else {
            return
        }
        let tolerance = ValidationTolerance.durationSeconds(for: .opus, sampleRateHz: entry.sampleRateHz)
        if playable < 0 {
            record.error(.oggOpus, "end granule \(granule) is less than the pre-skip \(preSkip)")
        } else if abs(playable - entry.durationSeconds) > tolerance {
            record.error(
                .oggOpus,
                "end granule \(granule) less pre-skip \(preSkip) plays \(Self.seconds(playable)) s, package.json says \(Self.seconds(entry.durationSeconds)) s"
            )
        }
    }

    static func seconds(_ value: Double) -> String {
        String(format: "%.3f", value)
    }
}

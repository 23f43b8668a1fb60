import Crypto
import Foundation
import TourpackCore
import TourpackPlan

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The checks of one caption file against its audio entry's `captions`:
/// present, the right bytes, valid WebVTT, the stated number of cues, cues
/// in order, apart and inside the audio, each with text; and with the
/// pipeline's tours, each cue's text the narration's sentence.
///
/// Reading and hashing block, so `BundleValidator` runs it on its thread
/// pool like the audio checks. A file over `WebVTTParser.maxBytes` is
/// refused unread. Every finding names the caption file, and a cue's
/// finding its number and line.
struct CaptionFileCheck: Sendable {
    var package: String
    /// `audio[index]` of package.json, for messages.
    var index: Int
    var entry: PackageManifest.AudioEntry
    var captions: PackageManifest.CaptionsEntry
    /// The caption path resolved inside the root (already checked by `Layout.resolve`).
    var url: URL
    /// The narration's sentences, when the pipeline's tour of the package was given.
    var expectedTexts: [String]?
    /// Where `expectedTexts` came from, for messages (`tour <id> version 3 in the pipeline`).
    var source: String = ""

    /// The most cue findings of one kind reported per file; the rest are counted.
    static let shownCues = 10

    func run() -> [CheckOutcome] {
        var record = OutcomeRecorder(package: package, subject: captions.path)
        check(&record)
        return record.outcomes
    }

    private func check(_ record: inout OutcomeRecorder) {
        guard let status = record.regularFile(url, missing: "audio[\(index)].captions lists this caption file") else { return }
        record.ran(.size)
        record.ran(.sha256)
        let size = Int64(status.st_size)
        if size != captions.sizeBytes {
            record.error(
                .size,
                "\(size) bytes, audio[\(index)].captions.sizeBytes says \(captions.sizeBytes)\(size < captions.sizeBytes ? " (truncated?)" : "")"
            )
        }
        guard size <= WebVTTParser.maxBytes else {
            record.error(.captions, "\(size) bytes, more than the \(WebVTTParser.maxBytes) a caption file may have; not read")
            return
        }
        let bytes: [UInt8]
        do {
            bytes = try FileReading.bytes(of: url, limit: WebVTTParser.maxBytes)
        } catch {
            record.error(.sha256, "cannot be read: \(error)")
            return
        }
        let digest = SHA256.hash(data: bytes).lowercaseHex
        if digest != captions.sha256 {
            record.error(.sha256, "sha256 is \(digest), audio[\(index)].captions.sha256 says \(captions.sha256)")
        }

        record.ran(.captions)
        let cues: [WebVTTCue]
        do {
            cues = try WebVTTParser.parse(bytes)
        } catch {
            for problem in error.problems { record.error(.captions, "not valid WebVTT: \(problem)") }
            if error.count > error.problems.count {
                record.error(.captions, "not valid WebVTT: and \(error.count - error.problems.count) more problems")
            }
            return
        }
        checkCues(cues, &record)
        if let expectedTexts {
            record.ran(.captionText)
            checkTexts(cues, expected: expectedTexts, &record)
        }
    }

    /// The count, then per cue: apart from the previous one, inside the audio, with text.
    private func checkCues(_ cues: [WebVTTCue], _ record: inout OutcomeRecorder) {
        if cues.count != captions.cues {
            record.error(.captions, "\(cues.count) cue\(cues.count == 1 ? "" : "s"), audio[\(index)].captions.cues says \(captions.cues)")
        }
        let limit = entry.durationSeconds + ValidationTolerance.captionEndSeconds
        var overlaps = 0
        var late = 0
        var empty = 0
        for (number, cue) in cues.enumerated() {
            let name = "cue \(number + 1) (line \(cue.line))"
            // Start before end and starts in order are the parser's: a file breaking them does not parse.
            if number > 0, cue.startMilliseconds < cues[number - 1].endMilliseconds {
                overlaps += 1
                if overlaps <= Self.shownCues {
                    record.error(
                        .captions,
                        "\(name) starts at \(time(cue.startMilliseconds)), before cue \(number) ends at \(time(cues[number - 1].endMilliseconds)); captions must not overlap"
                    )
                }
            }
            if cue.end > limit {
                late += 1
                if late <= Self.shownCues {
                    record.error(
                        .captions,
                        "\(name) ends at \(time(cue.endMilliseconds)), after the audio's \(entry.durationSeconds.compactText) s (\(ValidationTolerance.captionEndSeconds.compactText) s allowed)"
                    )
                }
            }
            if Self.normalized(cue.text).isEmpty {
                empty += 1
                if empty <= Self.shownCues { record.error(.captions, "\(name) has no text") }
            }
        }
        for (count, what) in [(overlaps, "overlapping"), (late, "late"), (empty, "empty")] where count > Self.shownCues {
            record.error(.captions, "and \(count - Self.shownCues) more \(what) cues")
        }
    }

    /// Each cue's text against the narration's sentence at its place.
    private func checkTexts(_ cues: [WebVTTCue], expected: [String], _ record: inout OutcomeRecorder) {
        if cues.count != expected.count {
            record.error(
                .captionText,
                "\(cues.count) cue\(cues.count == 1 ? "" : "s"), but the narration (\(source)) has \(expected.count) sentence\(expected.count == 1 ? "" : "s")"
            )
        }
        var mismatches = 0
        for (number, (cue, sentence)) in zip(cues, expected).enumerated() {
            let found = Self.normalized(cue.text)
            let wanted = Self.normalized(sentence)
            guard found != wanted else { continue }
            mismatches += 1
            if mismatches <= Self.shownCues {
                record.error(
                    .captionText,
                    "cue \(number + 1) (line \(cue.line)): expected \(Self.quoted(wanted)) (\(source)), found \(Self.quoted(found))")
            }
        }
        if mismatches > Self.shownCues {
            record.error(.captionText, "and \(mismatches - Self.shownCues) more cues whose text is not the narration's")
        }
    }

    private func time(_ milliseconds: Int64) -> String {
        WebVTT.timestamp(Double(milliseconds) / 1000)
    }

    /// Whitespace runs as one space, none at either end: what two texts are compared as.
    static func normalized(_ text: String) -> String {
        text.split(whereSeparator: \.isWhitespace).joined(separator: " ")
    }

    /// Quoted and cut after 120 characters; `ValidationFinding` escapes control characters when printing.
    static func quoted(_ text: String) -> String {
        text.count > 120 ? "\"\(text.prefix(120))…\"" : "\"\(text)\""
    }
}

extension PackageCheck {
    /// Each caption file's path check, and its file check for the pool. A
    /// caption file lives at exactly `Layout.captionsRelativePath` in this
    /// package's folder; any other path is refused and never opened. With
    /// the pipeline's tours, the narration's sentences go with the check.
    func captionChecks(_ manifest: PackageManifest) -> (outcomes: [CheckOutcome], checks: [CaptionFileCheck]) {
        var outcomes: [CheckOutcome] = []
        var checks: [CaptionFileCheck] = []
        var seen = Set<String>()
        let tour = options.tours.first { $0.id.value == manifest.tourId }
        for (index, entry) in manifest.audio.enumerated() {
            guard let captions = entry.captions, seen.insert(captions.path).inserted else { continue }
            var record = OutcomeRecorder(package: name, subject: captions.path)
            record.ran(.path)
            defer { outcomes += record.outcomes }
            guard let folder = SafeID(validating: name), folder.value == name, let poiID = SafeID(validating: entry.poiId),
                poiID.value == entry.poiId
            else {
                record.error(
                    .path,
                    "audio[\(index)].captions.path cannot be checked: the package folder and POI must be lowercase UUIDs; a refused caption file is never opened"
                )
                continue
            }
            let expected = Layout.captionsRelativePath(packageID: folder, poiID: poiID, phase: entry.phase)
            guard captions.path == expected else {
                record.error(
                    .path,
                    "audio[\(index)].captions.path is refused: expected \(expected) for POI \(entry.poiId) \(entry.phase.rawValue); a refused caption file is never opened"
                )
                continue
            }
            do {
                let url = try layout.resolve(relativePath: captions.path)
                if let target = Self.symlinkTarget(url) {
                    record.error(
                        .symlink,
                        "audio[\(index)].captions.path is a symlink to \(target); a caption file must be a real file in its package folder")
                    continue
                }
                var check = CaptionFileCheck(package: name, index: index, entry: entry, captions: captions, url: url)
                if let tour {
                    let version = tour.version == manifest.tourVersion ? "" : "; the package was built from version \(manifest.tourVersion)"
                    check.source = "tour \(tour.id) version \(tour.version) in the pipeline\(version)"
                    if let narration = tour.pois.first(where: { $0.id == poiID })?.narrations[entry.phase] {
                        check.expectedTexts = CaptionScript.sentenceTexts(of: narration)
                    } else {
                        record.warning(
                            .captionText,
                            "the pipeline's tour \(tour.id) has no \(entry.phase.rawValue) narration of POI \(entry.poiId); the cue texts are not compared"
                        )
                    }
                }
                checks.append(check)
            } catch {
                record.error(
                    .path,
                    "audio[\(index)].captions.path is refused: \(Self.reason(error, path: captions.path)); a path must stay inside the root"
                )
            }
        }
        return (outcomes, checks)
    }
}

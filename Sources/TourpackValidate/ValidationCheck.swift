/// What `tourpack validate` checks, one name per concern.
///
/// The raw values are part of the output contract: they appear in the text
/// report, as `check` in the JSON report and in JUnit test-case names, so CI
/// rules can match on them. Add cases; never rename one.
package enum ValidationCheck: String, Sendable, Hashable, CaseIterable, Codable, Comparable {
    // The package.json itself.
    /// package.json can be read and is well-formed JSON (no duplicate keys).
    case json
    /// package.json matches `schemas/package.schema.json`.
    case schema
    /// package.json is in the canonical form the store writes (sorted keys, fixed number form).
    case canonical
    /// The folder name equals `packageId`, which is the UUIDv5 of tour, voice and format.
    case packageId
    /// The audio list matches the POIs: no duplicates, no unknown POI, every POI heard, one format.
    case audioList
    /// `expiresAt` is in the future and a whole number of days after `createdAt`.
    case expiry
    /// `mapTiles` is the coverage `TileMath` computes for the route and POIs.
    case mapTiles
    /// `contentHash` recomputes to the same value.
    case contentHash
    /// `sizeBytes` is the sum of the audio entries' sizes.
    case sizeBytes

    // One audio entry.
    /// The path is safe (inside the root, no `..`, no symlink out) and is the layout's path for its POI, phase and format.
    case path
    /// The file exists and is a regular file.
    case exists
    /// The file's size equals the entry's `sizeBytes`.
    case size
    /// The file's SHA-256 equals the entry's `sha256`.
    case sha256
    /// FFmpeg demuxes and decodes the whole file with no error.
    case decode
    /// Container, codec, sample rate, channels and measured bit rate match the format table.
    case format
    /// The decoded duration matches the entry's `durationSeconds`.
    case duration
    /// An .m4a file's top-level boxes start with `ftyp` and put `moov` before `mdat`.
    case faststart
    /// An .opus file's Ogg pages are intact, its pre-skip is sane and its end granule matches the duration.
    case oggOpus
    /// An .mp3 file is MPEG-1 Layer III whose first frame carries a Xing/Info header.
    case mp3Header
    /// The decoded file's integrated loudness and true peak match its entry's `loudness` within
    /// 1 LU; a file of 3 s or more is within 1 LU of the package's target, its true peak under the ceiling.
    case loudness

    // One audio entry's caption file (`captions`); its path, presence, size and
    // sha256 are checked under `path`, `exists`, `size` and `sha256`, with the caption file as the path.
    /// The file parses as WebVTT, holds package.json's `cues` cues, and each cue
    /// ends after it starts, starts no earlier than the previous one ends, ends within the audio
    /// (`ValidationTolerance.captionEndSeconds`) and has text.
    case captions
    /// With `--pipeline`, when its tours load: the cue texts are the sentences of the narration
    /// (`CaptionScript.sentenceTexts(of:)`), tags left out, references resolved, whitespace collapsed.
    case captionText

    // The tile pack a package.json names.
    /// `OfflineTours/<folder>/tiles.mbtiles` is there with package.json's size and sha256, opens as
    /// MBTiles with intact SQLite pages, its metadata agrees, and every tile is in range and of the format.
    case tilePack

    // The bundle as a whole.
    /// OfflineTours holds at least one package.
    case packages
    /// Every file under AudioCache and OfflineTours belongs to a package (a tile pack and caption files to their folder's package.json).
    case stray
    /// No temp file of an interrupted write is left behind.
    case temporary
    /// Nothing under AudioCache or OfflineTours, nor either folder itself, is a symlink: a link can
    /// take the app's reads, and a build's writes, out of the root (a package folder elsewhere).
    case symlink
    /// AudioCache fits the pipeline's `budgets.cacheMaxMB`.
    case cacheBudget

    package static func < (lhs: ValidationCheck, rhs: ValidationCheck) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }
}

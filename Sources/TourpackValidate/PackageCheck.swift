import Foundation
package import TourpackCore
import TourpackMaps
import TourpackPlan

/// The checks of one `OfflineTours/<name>/package.json` that need no audio
/// decoding: readable JSON, the schema, the package ID, the audio list, the
/// dates, the map tiles and the two derived fields. It also turns each audio
/// entry into an `AudioFileCheck`, each entry's captions into a
/// `CaptionFileCheck`, and a named tile pack into a `TilePackCheck`, for the
/// thread pool, after making sure the path cannot leave the root (a pack's
/// is exactly `OfflineTours/<folder>/tiles.mbtiles`, a caption file's
/// `OfflineTours/<folder>/captions/<poiId>_<Phase>.vtt`).
///
/// A package.json that is not JSON, or that cannot be read as a package,
/// stops here; anything less keeps going, so one run reports every problem.
package struct PackageCheck {
    /// The largest package.json read, as for tour files: a hostile file is refused unread.
    static let maxManifestBytes = 8 * 1024 * 1024

    let layout: Layout
    /// The package folder's name under OfflineTours.
    let name: String
    let options: ValidationOptions

    package init(layout: Layout, name: String, options: ValidationOptions) {
        self.layout = layout
        self.name = name
        self.options = options
    }

    package struct Result: Sendable {
        var summary: ValidationReport.PackageSummary
        package var outcomes: [CheckOutcome]
        var audioChecks: [AudioFileCheck]
        /// The caption files' checks, in audio list order.
        var captionChecks: [CaptionFileCheck] = []
        /// The pack's checks, when package.json names this folder's pack.
        var tilePackCheck: TilePackCheck?
        /// Every audio and caption path the package.json names, as written, even when it
        /// could not be decoded as a package, and its folder's tile pack when it names that.
        var listedPaths: Set<String>
    }

    var manifestPath: String { "\(Layout.offlineToursFolder)/\(name)/\(Layout.manifestFileName)" }
    /// The only place this package's tile pack may be.
    var tilePackPath: String { "\(Layout.offlineToursFolder)/\(name)/\(Layout.tilePackFileName)" }

    package func run() -> Result {
        var record = OutcomeRecorder(package: name, subject: manifestPath)
        var result = Result(
            summary: .init(name: name, manifest: manifestPath), outcomes: [], audioChecks: [], tilePackCheck: nil, listedPaths: [])
        check(&record, &result)
        // The package.json's own checks come first, then its audio files in list order.
        result.outcomes = record.outcomes + result.outcomes
        return result
    }

    private func check(_ record: inout OutcomeRecorder, _ result: inout Result) {
        record.ran(.json)
        guard let bytes = read(&record) else { return }
        let document: JSONValue
        do {
            document = try StrictJSONReader().read(bytes)
        } catch {
            record.error(.json, "not valid JSON: \(error)")
            return
        }
        result.listedPaths = Self.listedPaths(in: document)
        if Self.tilePackFile(in: document) == tilePackPath { result.listedPaths.insert(tilePackPath) }

        record.ran(.schema)
        let schemaProblems = PackageSchema.problems(in: document)
        for problem in schemaProblems { record.error(.schema, problem) }
        let manifest: PackageManifest
        do {
            manifest = try PackageManifest.decode(bytes)
        } catch {
            if schemaProblems.isEmpty { record.error(.schema, "cannot be read as a package: \(error)") }
            return
        }
        result.summary.tourId = manifest.tourId
        result.summary.tourName = manifest.tourName
        result.summary.format = manifest.audio.first?.format.rawValue
        result.summary.audioFiles = Set(manifest.audio.map(\.path)).count
        if schemaProblems.isEmpty {
            record.ran(.canonical)
            if !manifest.isCanonical(bytes) {
                record.warning(.canonical, "not in the canonical form the store writes (sorted keys, two-space indent); edited by hand?")
            }
        }

        checkIdentity(manifest, &record)
        checkAudioList(manifest, &record)
        checkDates(manifest, &record)
        checkMapTiles(manifest, &record)
        record.ran(.contentHash)
        let hash = manifest.computeContentHash()
        if hash != manifest.contentHash {
            record.error(
                .contentHash,
                "contentHash is \(manifest.contentHash), but the content hashes to \(hash); the app would miss (or invent) an update")
        }
        record.ran(.sizeBytes)
        // Sizes come from the file: a sum that overflows is simply wrong, never a crash.
        let sum = manifest.audio.reduce(Int64?(0)) { total, entry in
            total.flatMap { total in
                let (sum, overflow) = total.addingReportingOverflow(entry.sizeBytes); return overflow ? nil : sum
            }
        }
        if let sum, sum != manifest.sizeBytes {
            record.error(.sizeBytes, "sizeBytes is \(manifest.sizeBytes), the audio entries add up to \(sum)")
        } else if sum == nil {
            record.error(.sizeBytes, "the audio entries' sizes add up to more than a 64-bit count")
        }

        (result.outcomes, result.audioChecks) = audioChecks(manifest)
        let captions = captionChecks(manifest)
        result.outcomes += captions.outcomes
        result.captionChecks = captions.checks
        if let pack = tilePackCheck(manifest) {
            result.outcomes += pack.outcomes
            result.tilePackCheck = pack.check
        }
    }

    private func read(_ record: inout OutcomeRecorder) -> [UInt8]? {
        do {
            let url = try layout.resolve(relativePath: manifestPath)
            guard let size = try FileReading.size(of: url) else {
                record.error(.json, "not a regular file")
                return nil
            }
            guard size <= Self.maxManifestBytes else {
                record.error(.json, "\(size) bytes, more than the \(Self.maxManifestBytes) a package.json may have")
                return nil
            }
            return try FileReading.bytes(of: url, limit: Self.maxManifestBytes)
        } catch {
            record.error(.json, "cannot be read: \(error)")
            return nil
        }
    }

    /// The folder is named by the package ID, and the ID is the one its tour, voice, format and bit rate give.
    private func checkIdentity(_ manifest: PackageManifest, _ record: inout OutcomeRecorder) {
        record.ran(.packageId)
        if name != manifest.packageId {
            record.error(.packageId, "folder is named \(name) but packageId is \(manifest.packageId)")
        }
        let formats = Set(manifest.audio.map(\.format))
        let rates = Set(manifest.audio.map(\.bitrateKbps))
        guard let tourID = SafeID(validating: manifest.tourId), tourID.value == manifest.tourId,
            formats.count == 1, let format = formats.first, rates.count == 1, let rate = rates.first
        else { return }
        let voice = VoicePreset(
            provider: manifest.voice.provider, languageCode: manifest.voice.languageCode, name: manifest.voice.name,
            tier: manifest.voice.tier, speakingRate: manifest.voice.speakingRate, pitch: manifest.voice.pitch)
        let expected = PackageID.make(tourID: tourID, voice: voice, format: format, bitrateKbps: rate)
        if expected.value != manifest.packageId {
            record.error(
                .packageId,
                "packageId \(manifest.packageId) is not the one tour \(manifest.tourId), this voice and \(format.rawValue) at \(rate) kbps give (\(expected))"
            )
        }
    }

    /// One format, each POI heard, no entry twice, no entry for a POI the package does not have.
    private func checkAudioList(_ manifest: PackageManifest, _ record: inout OutcomeRecorder) {
        record.ran(.audioList)
        let formats = Set(manifest.audio.map(\.format)).sorted()
        if formats.count > 1 {
            record.error(.audioList, "audio mixes formats \(formats.map(\.rawValue).joined(separator: ", ")); a package holds one format")
        }
        let rates = Set(manifest.audio.map(\.bitrateKbps)).sorted()
        if rates.count > 1 {
            record.error(.audioList, "audio mixes bit rates \(rates.map(String.init).joined(separator: ", ")) kbps; a package holds one")
        }
        var poiIndex: [String: Int] = [:]
        for (index, poi) in manifest.pois.enumerated() {
            if let first = poiIndex[poi.id] {
                record.error(.audioList, "pois[\(index)]: POI \(poi.id) appears twice (also pois[\(first)])")
            } else {
                poiIndex[poi.id] = index
            }
        }
        var byItem: [String: Int] = [:]
        var byPath: [String: Int] = [:]
        for (index, entry) in manifest.audio.enumerated() {
            if let first = byItem["\(entry.poiId) \(entry.phase.rawValue)"] {
                record.error(
                    .audioList,
                    "audio[\(index)]: duplicate entry for POI \(entry.poiId) \(entry.phase.rawValue) (also audio[\(first)]): \(entry.path)")
            } else {
                byItem["\(entry.poiId) \(entry.phase.rawValue)"] = index
            }
            if let first = byPath[entry.path] {
                if manifest.audio[first].poiId != entry.poiId || manifest.audio[first].phase != entry.phase {
                    record.error(.audioList, "audio[\(index)]: path \(entry.path) is also listed by audio[\(first)]")
                }
            } else {
                byPath[entry.path] = index
            }
            if poiIndex[entry.poiId] == nil {
                record.error(.audioList, "audio[\(index)]: POI \(entry.poiId) is not one of the package's pois")
            }
        }
        let heard = Set(manifest.audio.map(\.poiId))
        for (index, poi) in manifest.pois.enumerated() where !heard.contains(poi.id) {
            record.error(.audioList, "pois[\(index)]: POI \(poi.id) (\(poi.name)) has no audio; every POI has at least one narration")
        }
    }

    /// Not expired, and `expiresAt` a whole, sane number of days after `createdAt`.
    private func checkDates(_ manifest: PackageManifest, _ record: inout OutcomeRecorder) {
        record.ran(.expiry)
        let created = PackageManifest.timestamp(manifest.createdAt)
        let expires = PackageManifest.timestamp(manifest.expiresAt)
        if manifest.isExpired(at: options.now) {
            record.error(
                .expiry, "expired at \(expires) (now \(PackageManifest.timestamp(options.now))); rebuild it, e.g. build --refresh-expiring")
        }
        if manifest.createdAt.timeIntervalSince(options.now) > ValidationTolerance.clockSkewSeconds {
            record.warning(.expiry, "createdAt \(created) is in the future (now \(PackageManifest.timestamp(options.now)))")
        }
        let age = manifest.expiresAt.timeIntervalSince(manifest.createdAt)
        let days = Int((age / 86_400).rounded(.down))
        guard age > 0, age == Double(days) * 86_400, (1...3650).contains(days) else {
            record.error(.expiry, "expiresAt \(expires) is not a whole number of days (1 to 3650) after createdAt \(created)")
            return
        }
        if let limits = options.limits, days != limits.packageMaxAgeDays {
            record.warning(
                .expiry, "expires \(days) days after it was made; the pipeline's budgets.packageMaxAgeDays is \(limits.packageMaxAgeDays)")
        }
    }

    /// The map coverage recomputed from the route and POIs with the package's own settings.
    private func checkMapTiles(_ manifest: PackageManifest, _ record: inout OutcomeRecorder) {
        record.ran(.mapTiles)
        let tiles = manifest.mapTiles
        // Zooms outside 0...22 are the schema's to report; recomputing them could take forever.
        guard (0...22).contains(tiles.minZoom), (0...22).contains(tiles.maxZoom) else { return }
        // So is a bufferMiles below 0 (-1e19 grows a box inside out); nothing to recompute from it.
        guard tiles.bufferMiles.isFinite, tiles.bufferMiles >= 0 else { return }
        guard tiles.minZoom <= tiles.maxZoom else {
            record.error(.mapTiles, "minZoom \(tiles.minZoom) is above maxZoom \(tiles.maxZoom)")
            return
        }
        if let limits = options.limits, tiles.selection != limits.selection {
            record.warning(
                .mapTiles,
                "selection is \(tiles.selection.rawValue), the pipeline's maps.selection is \(limits.selection.rawValue); a rebuild changes the map"
            )
        }
        if let stored = tiles.storedTiles, let empty = tiles.emptyTiles, stored + empty != tiles.tileCount {
            record.error(.mapTiles, "storedTiles \(stored) + emptyTiles \(empty) is \(stored + empty), but tileCount is \(tiles.tileCount)")
        }
        let (route, pois) = Self.coordinates(manifest)
        let settings = MapSettings(
            minZoom: tiles.minZoom, maxZoom: tiles.maxZoom, bufferMiles: tiles.bufferMiles, tileKB: options.limits?.tileKB ?? 15,
            selection: tiles.selection)
        // The corridor goes tile by tile through the box: a hostile bufferMiles must not make that endless.
        if tiles.selection == .corridor, let box = TileMath.coverage(of: route + pois, settings: settings),
            box.tileCount > TilePackCheck.maxRecomputedTiles
        {
            record.error(
                .mapTiles,
                "the buffered box holds \(box.tileCount) tiles at zooms \(tiles.minZoom)...\(tiles.maxZoom), more than the \(TilePackCheck.maxRecomputedTiles) validate goes through to recompute a corridor"
            )
            return
        }
        guard let expected = TileMath.coverage(route: route, pois: pois, settings: settings) else { return }
        let (b, e) = (tiles.bounds, expected.bounds)
        let boundsMatch = [(b.south, e.south), (b.west, e.west), (b.north, e.north), (b.east, e.east)].allSatisfy { abs($0 - $1) <= 1e-9 }
        if !boundsMatch {
            record.error(
                .mapTiles,
                "bounds \(Self.box(b)) are not the route and POIs grown by \(tiles.bufferMiles.compactText) miles: \(Self.box(e))")
        }
        // One pass over the file's ranges, however many it lists: per zoom, the first range and how many.
        var listed: [Int: (first: TileRange, count: Int)] = [:]
        for range in tiles.ranges {
            listed[range.zoom, default: (range, 0)].count += 1
        }
        let listedRanges = Set(tiles.ranges)
        for range in expected.ranges where !listedRanges.contains(range) {
            let found = listed[range.zoom]?.first
            record.error(.mapTiles, "zoom \(range.zoom): tiles \(found.map(Self.range) ?? "missing"), expected \(Self.range(range))")
        }
        // Each zoom outside minZoom...maxZoom or listed twice, once, with a bounded list.
        let stray = listed.filter { !(tiles.minZoom...tiles.maxZoom).contains($0.key) || $0.value.count > 1 }.keys.sorted()
        if !stray.isEmpty {
            let shown = stray.prefix(TilePackCheck.shownTiles).map(String.init).joined(separator: ", ")
            let more = stray.count > TilePackCheck.shownTiles ? " and \(stray.count - TilePackCheck.shownTiles) more" : ""
            record.error(
                .mapTiles,
                "\(tiles.ranges.count) ranges listed: zoom\(stray.count == 1 ? "" : "s") \(shown)\(more) outside minZoom...maxZoom or listed more than once"
            )
        }
        if tiles.tileCount != expected.tileCount {
            record.error(
                .mapTiles, "tileCount is \(tiles.tileCount), the \(tiles.selection.rawValue) selection holds \(expected.tileCount) tiles")
        }
        // The expected tile count is small (it was just computed); the file's own figures are not trusted.
        let tileBytes = expected.tileCount * 1024
        if let limits = options.limits {
            if tiles.estimatedBytes != tileBytes * limits.tileKB {
                record.error(
                    .mapTiles,
                    "estimatedBytes is \(tiles.estimatedBytes), expected \(expected.tileCount) tiles × \(limits.tileKB) KiB = \(tileBytes * limits.tileKB)"
                )
            }
        } else if tileBytes > 0, tiles.estimatedBytes <= 0 || tiles.estimatedBytes % tileBytes != 0 {
            record.error(.mapTiles, "estimatedBytes \(tiles.estimatedBytes) is not \(expected.tileCount) tiles × a whole number of KiB")
        }
    }

    /// The route's waypoints and the POIs' locations, as the tile math takes them.
    private static func coordinates(_ manifest: PackageManifest) -> (route: [Coordinate], pois: [Coordinate]) {
        (manifest.route.waypoints.map { Coordinate(latitude: $0.latitude, longitude: $0.longitude) }, manifest.pois.map(\.location))
    }

    /// The pack's checks for the pool, when package.json names a pack and
    /// all its fields (the schema reports a partial set). A path other than
    /// this folder's `tiles.mbtiles`, or one a symlink takes out of the
    /// root, is refused and never opened.
    private func tilePackCheck(_ manifest: PackageManifest) -> (outcomes: [CheckOutcome], check: TilePackCheck?)? {
        let tiles = manifest.mapTiles
        guard let file = tiles.file, tiles.format != nil, tiles.storedTiles != nil, tiles.sizeBytes != nil, tiles.sha256 != nil else {
            return nil
        }
        var record = OutcomeRecorder(package: name, subject: file)
        record.ran(.tilePack)
        guard file == tilePackPath else {
            record.error(
                .tilePack,
                "mapTiles.file is refused: a package's tile pack is \(tilePackPath), in its own folder; a refused pack is never opened")
            return (record.outcomes, nil)
        }
        do {
            let url = try layout.resolve(relativePath: file)
            if let target = Self.symlinkTarget(url) {
                record.error(.symlink, "the tile pack is a symlink to \(target); it must be a real file in its package folder")
            }
            let (route, pois) = Self.coordinates(manifest)
            return (
                record.outcomes.filter { $0.check == .symlink },
                TilePackCheck(package: name, path: file, url: url, mapTiles: tiles, route: route, pois: pois)
            )
        } catch {
            record.error(.tilePack, "mapTiles.file is refused: \(Self.reason(error, path: file)); a path must stay inside the root")
            return (record.outcomes, nil)
        }
    }

    /// The path checks of each entry, and the file checks for the pool. Each path is checked once.
    private func audioChecks(_ manifest: PackageManifest) -> ([CheckOutcome], [AudioFileCheck]) {
        var outcomes: [CheckOutcome] = []
        var checks: [AudioFileCheck] = []
        var seen = Set<String>()
        let tour = options.tours.first { $0.id.value == manifest.tourId }
        for (index, entry) in manifest.audio.enumerated() where seen.insert(entry.path).inserted {
            var record = OutcomeRecorder(package: name, subject: entry.path)
            record.ran(.path)
            if let tour { checkSpeechLength(entry, index: index, tour: tour, speakingRate: manifest.voice.speakingRate, &record) }
            do {
                let url = try layout.resolve(relativePath: entry.path)
                if let target = Self.symlinkTarget(url) {
                    record.error(
                        .symlink, "audio[\(index)].path is a symlink to \(target); an audio file must be a real file in its tour folder")
                }
                if let tourID = SafeID(validating: manifest.tourId), let poiID = SafeID(validating: entry.poiId) {
                    let expected = Layout.audioRelativePath(tourID: tourID, poiID: poiID, phase: entry.phase, format: entry.format)
                    if entry.path != expected {
                        record.error(
                            .path,
                            "audio[\(index)]: expected \(expected) for POI \(entry.poiId) \(entry.phase.rawValue) in \(entry.format.rawValue)"
                        )
                    }
                }
                checks.append(AudioFileCheck(package: name, entry: entry, url: url, target: manifest.loudness))
            } catch {
                record.error(
                    .path, "audio[\(index)].path is refused: \(Self.reason(error, path: entry.path)); a path must stay inside the root")
            }
            outcomes += record.outcomes
        }
        return (outcomes, checks)
    }

    /// With the pipeline's tour: the file lasts at least what `SpeechLength`
    /// allows for its narration's text at the voice's speaking rate (the
    /// bound each chunk's answer is held to, over the whole narration), so a
    /// narration an older version shortened (an empty answer joined in) is
    /// an error naming its POI and phase. `durationSeconds` is held to the
    /// decoded file by the `duration` check of the file itself.
    private func checkSpeechLength(
        _ entry: PackageManifest.AudioEntry, index: Int, tour: Tour, speakingRate: Double, _ record: inout OutcomeRecorder
    ) {
        guard let narration = tour.pois.first(where: { $0.id.value == entry.poiId })?.narrations[entry.phase] else { return }
        record.ran(.duration)
        let spoken = SpeechLength.spokenCharacters(narration.text, isSSML: narration.isSSML)
        if let shortfall = SpeechLength.shortfall(seconds: entry.durationSeconds, spokenCharacters: spoken, speakingRate: speakingRate) {
            record.error(
                .duration,
                "audio[\(index)]: POI \(entry.poiId) \(entry.phase.rawValue) lasts \(entry.durationSeconds) s, implausible for its narration "
                    + "in tour \(tour.id): \(shortfall); rebuild it")
        }
    }

    /// The `path` strings of the audio entries and their `captions` of a document that may be no package at all.
    static func listedPaths(in document: JSONValue) -> Set<String> {
        guard case .object(let members) = document, case .array(let audio)? = members.first(where: { $0.key == "audio" })?.value else {
            return []
        }
        var paths = Set<String>()
        for case .object(let entry) in audio {
            if case .string(let path)? = entry.first(where: { $0.key == "path" })?.value { paths.insert(path) }
            if case .object(let captions)? = entry.first(where: { $0.key == "captions" })?.value,
                case .string(let path)? = captions.first(where: { $0.key == "path" })?.value
            {
                paths.insert(path)
            }
        }
        return paths
    }

    /// `mapTiles.file` of a document that may be no package at all.
    static func tilePackFile(in document: JSONValue) -> String? {
        guard case .object(let members) = document, case .object(let tiles)? = members.first(where: { $0.key == "mapTiles" })?.value,
            case .string(let file)? = tiles.first(where: { $0.key == "file" })?.value
        else { return nil }
        return file
    }

    /// What `url` links to when it is itself a symlink (`lstat`); nil for anything else.
    /// A listed file that is a link is its package's `symlink` finding, not the bundle's.
    static func symlinkTarget(_ url: URL) -> String? {
        guard OutputTree.kind(url) == .symlink else { return nil }
        return (try? FileManager.default.destinationOfSymbolicLink(atPath: url.path)) ?? "?"
    }

    static func reason(_ error: any Error, path: String) -> String {
        let text = "\(error)"
        return text.hasPrefix("\(path): ") ? String(text.dropFirst(path.count + 2)) : text
    }

    private static func box(_ b: MapBounds) -> String {
        "(S \(b.south), W \(b.west), N \(b.north), E \(b.east))"
    }

    private static func range(_ r: TileRange) -> String {
        "x \(r.minX)...\(r.maxX), y \(r.minY)...\(r.maxY)"
    }
}
